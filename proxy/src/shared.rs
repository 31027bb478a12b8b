//! The state every connection of one started proxy shares: the egress
//! plan, limits, resolver, log, local addresses, masked credentials and the
//! run's TLS termination state.
use crate::addr::LocalAddrs;
use crate::log::Log;
use crate::{Limits, ProxyConfig, ProxyError, Resolver, StartOptions};
use oajail_policy::egress::EgressPlan;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// State shared by every connection.
pub(crate) struct Shared {
    pub plan: EgressPlan,
    pub limits: Limits,
    pub resolver: Arc<dyn Resolver>,
    pub log: Log,
    pub local: LocalAddrs,
    lab_public: Vec<IpAddr>,
    next_id: AtomicU64,
    /// The run's CA and TLS configurations, when some tunnel may be
    /// terminated (`tlsTerminate` or `httpRules`).
    mitm: Option<Arc<crate::mitm::Mitm>>,
    /// The run's masked credentials (empty when none).
    pub creds: crate::masked::Credentials,
    /// Asked before a refusal an allow entry would lift (`--ask`).
    pub asker: Option<crate::Asker>,
    /// This value's own `Arc` (hyper's services must own what they use).
    me: std::sync::Weak<Shared>,
}

impl Shared {
    /// The state of one started proxy, in the `Arc` its connections share.
    pub(crate) fn start(
        config: ProxyConfig,
        options: &StartOptions,
    ) -> Result<Arc<Self>, ProxyError> {
        let parts = Shared::new(config, options)?;
        Ok(Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            ..parts
        }))
    }

    fn new(config: ProxyConfig, options: &StartOptions) -> Result<Self, ProxyError> {
        let max = config.limits.log_max_bytes;
        let log = Log::open(config.log_json.as_deref(), max, options.observer.clone()).map_err(
            |source| ProxyError::Log {
                path: config.log_json.clone().unwrap_or_default(),
                source,
            },
        )?;
        #[cfg(feature = "test-lab")]
        let lab_public = options.lab_public.clone();
        #[cfg(not(feature = "test-lab"))]
        let lab_public = Vec::new();
        let mitm = match &options.authority {
            Some(ca) => Some(ca.mitm()),
            None => crate::Authority::for_plan(&config.egress)?.map(|ca| ca.mitm()),
        };
        Ok(Self {
            plan: config.egress,
            limits: config.limits,
            resolver: options.resolver.clone(),
            log,
            local: LocalAddrs::default(),
            lab_public,
            next_id: AtomicU64::new(1),
            mitm,
            creds: options.credentials.clone(),
            asker: options.asker.clone(),
            me: std::sync::Weak::new(),
        })
    }

    /// Test-lab stand-ins for public hosts (always empty without the
    /// `test-lab` feature).
    /// The termination state, when the run has a CA.
    pub(crate) fn mitm(&self) -> Option<&crate::mitm::Mitm> {
        self.mitm.as_deref()
    }

    /// The CA certificate the jail must trust, when there is one.
    pub(crate) fn ca_pem(&self) -> Option<&str> {
        self.mitm.as_deref().map(crate::mitm::Mitm::ca_pem)
    }

    /// The next connection's id (ids start at 1).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether no connection was ever accepted.
    pub(crate) fn untouched(&self) -> bool {
        self.next_id.load(Ordering::Relaxed) == 1
    }

    /// The `Arc` this value lives in (always there while it is used).
    pub(crate) fn arc(&self) -> Option<Arc<Shared>> {
        self.me.upgrade()
    }

    pub(crate) fn is_lab_public(&self, ip: IpAddr) -> bool {
        !self.lab_public.is_empty()
            && self
                .lab_public
                .contains(&oajail_policy::host::fold_mapped(ip))
    }
}
