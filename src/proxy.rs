//! Glue to the egress proxy: serve the listeners the jail bound in its netns,
//! and the `ssh-proxy` helper that ssh runs inside the jail.

use crate::Fail;
use crate::plans::Plans;
use anyhow::anyhow;
use oajail_jail::net::PROXY_PORT;
use oajail_proxy::{Limits, ProxyConfig, ProxyHandle};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

/// The running proxy.
pub struct Running {
    handle: ProxyHandle,
}

/// What the proxy holds and the jail never sees: the run's CA (its key) and
/// the real values of masked credentials.
pub struct Secrets {
    /// The TLS-termination CA, when some tunnel may be terminated.
    pub authority: Option<oajail_proxy::Authority>,
    /// Masked credentials (sentinel → real value).
    pub credentials: oajail_proxy::Credentials,
}

/// Who is told of refusals, and who is asked first.
#[derive(Default)]
pub struct Hooks {
    /// Told of every refusal (the desk).
    pub observer: Option<oajail_proxy::Observer>,
    /// Asked before a refusal an allow entry would lift (`--ask`).
    pub asker: Option<oajail_proxy::Asker>,
}

/// Everything of the proxy that can fail on the caller's input (the
/// `--log-json` file, the CA), before the jail runs its command; no thread
/// yet ([`Ready::serve`] starts them).
pub fn prepare(
    plans: &Plans,
    secrets: Secrets,
    log_json: Option<PathBuf>,
    hooks: Hooks,
) -> anyhow::Result<Ready> {
    let config = ProxyConfig {
        egress: plans.egress.clone(),
        log_json,
        limits: Limits {
            log_max_bytes: log_max_bytes()?,
            ..Limits::default()
        },
    };
    let mut options = oajail_proxy::StartOptions::default().credentials(secrets.credentials);
    if let Some(ca) = secrets.authority {
        options = options.authority(ca);
    }
    if let Some(observer) = hooks.observer {
        options = options.observer(observer);
    }
    if let Some(asker) = hooks.asker {
        options = options.asker(asker);
    }
    let prepared = oajail_proxy::prepare(config, options).map_err(|e| anyhow!("{e}"))?;
    Ok(Ready(prepared))
}

/// A prepared proxy ([`prepare`]).
pub struct Ready(oajail_proxy::Prepared);

impl Ready {
    /// The decision log, for the jail's refusals (one log, one schema).
    pub fn events(&self) -> oajail_proxy::EventLog {
        self.0.events()
    }

    /// Start the runtime's threads and serve the listeners the jail bound
    /// in its netns.
    pub fn serve(self, listeners: Vec<TcpListener>) -> anyhow::Result<Running> {
        let handle = self.0.serve(listeners).map_err(|e| anyhow!("{e}"))?;
        Ok(Running { handle })
    }
}

/// Environment variable overriding the `--log-json` size cap (bytes).
pub const LOG_MAX_ENV: &str = "OAJAIL_LOG_JSON_MAX_BYTES";

/// The `--log-json` size cap: `OAJAIL_LOG_JSON_MAX_BYTES`, else 64 MiB.
fn log_max_bytes() -> anyhow::Result<u64> {
    match std::env::var(LOG_MAX_ENV) {
        Err(_) => Ok(oajail_proxy::LOG_MAX_BYTES),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(anyhow!(
                "{LOG_MAX_ENV}: expected a positive number of bytes, got {v:?}"
            )),
        },
    }
}

impl Running {
    /// Stop serving and print the denial summary on stderr (nothing when
    /// nothing was refused).
    pub fn finish(self) {
        // Nothing connected: dropping the handle stops the runtime without
        // waiting for its threads (the process exits right after).
        if self.handle.untouched() {
            return;
        }
        let summary = self.handle.shutdown().to_string();
        if !summary.is_empty() {
            eprint!("{summary}");
        }
    }
}

/// `oajail ssh-proxy HOST PORT`: ssh's ProxyCommand inside the jail; relays
/// stdin/stdout through a CONNECT on the jail's proxy listener.
pub fn ssh_helper(host: &str, port: u16) -> Result<i32, Fail> {
    let proxy = SocketAddr::from(([127, 0, 0, 1], PROXY_PORT));
    // Exit 1 (not a reserved code): to ssh this is just a failed connection.
    oajail_proxy::ssh_connect_helper(proxy, host, port).map_err(|e| Fail {
        code: 1,
        err: anyhow!("{e}"),
    })?;
    Ok(0)
}
