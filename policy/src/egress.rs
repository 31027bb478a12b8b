//! The egress allowlist compiled for the proxy.
//!
//! [`EgressPlan`] is plain data built from a validated [`Policy`]; the proxy
//! asks it two questions, in this order, and nothing else decides:
//! 1. [`EgressPlan::decide`] on the canonical host and port, before any DNS:
//!    deny list (wins) → allow list → refused;
//! 2. [`EgressPlan::check_address`] on every address the name resolved to
//!    (the proxy classifies the address; this module applies the opt-ins).
//!
//! Invariant: a name that `decide` refuses is never resolved, so DNS cannot
//! be used as an oracle or an exfiltration channel.
use crate::Policy;
use crate::domain::{DomainError, DomainPattern, IpNet};
use crate::host::Host;
use crate::l7::{HttpRules, TlsTerminate};
use serde::Serialize;
use std::net::IpAddr;

/// A deny-list entry with its optional reason text
/// (`network.deniedDomainReasons`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DenyRule {
    /// The canonical pattern.
    pub pattern: DomainPattern,
    /// Text shown to the client instead of the generic reason.
    pub reason: Option<String>,
}

/// The compiled egress allowlist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EgressPlan {
    /// `network.allowedDomains`; empty means no network at all.
    pub allow: Vec<DomainPattern>,
    /// `network.deniedDomains`, checked first.
    pub deny: Vec<DenyRule>,
    /// `network.deniedResolvedAddresses`: an allowed name resolving into one
    /// of these is refused.
    pub denied_resolved: Vec<IpNet>,
    /// `oajail.allowPrivateDestinations`: non-public addresses an allowed
    /// name may resolve to.
    pub allow_private: Vec<IpNet>,
    /// srt `httpProxyPort`: HTTP clients are handed to the user's proxy on
    /// this host loopback port, which then does all filtering.
    pub http_proxy_port: Option<u16>,
    /// srt `socksProxyPort`: the same for SOCKS5 clients.
    pub socks_proxy_port: Option<u16>,
    /// srt `network.tlsTerminate`: terminate every allowed TLS tunnel
    /// except `excludeDomains`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_terminate: Option<TlsTerminate>,
    /// `oajail.httpRules`: checked on every request to a governed host;
    /// a governed host's TLS tunnels are always terminated.
    #[serde(skip_serializing_if = "HttpRules::is_empty")]
    pub http_rules: HttpRules,
}

/// Why a destination was refused; the snake_case name is the log's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyKind {
    /// `allowedDomains` is empty.
    NoNetwork,
    /// A `deniedDomains` entry matched.
    DenyList,
    /// An IP literal that no allow entry names.
    IpLiteral,
    /// The host is allowed on other ports only.
    PortNotAllowed,
    /// No allow entry matched.
    NotAllowed,
}

/// A refusal: the kind and a one-line message for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denied {
    /// Machine-readable kind.
    pub kind: DenyKind,
    /// Human message, saying how to allow the destination where possible.
    pub message: String,
}

/// An admission by an allow entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allowed {
    /// The allow entry that matched (canonical text).
    pub entry: String,
    /// The entry names the port explicitly: only then may a tunnel that does
    /// not start with TLS pass.
    pub explicit_port: bool,
    /// The entry is an IP or CIDR: it deliberately admits a non-public
    /// address.
    pub private_admitted: bool,
}

/// The answer of [`EgressPlan::decide`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Go on to resolution and the address check.
    Allow(Allowed),
    /// Refuse now; no DNS query is made.
    Deny(Denied),
}

impl EgressPlan {
    /// Compile the plan from a validated policy.
    pub fn from_policy(policy: &Policy) -> Result<Self, DomainError> {
        let net = &policy.network;
        let deny = net
            .denied_domains
            .iter()
            .map(|p| DenyRule {
                pattern: p.clone(),
                reason: net.denied_domain_reasons.get(p.as_str()).cloned(),
            })
            .collect();
        let parse_all = |list: &[String]| -> Result<Vec<IpNet>, DomainError> {
            list.iter().map(|t| IpNet::parse(t)).collect()
        };
        Ok(Self {
            allow: net.allowed_domains.clone(),
            deny,
            denied_resolved: parse_all(&net.denied_resolved_addresses)?,
            allow_private: parse_all(&policy.oajail.allow_private_destinations)?,
            http_proxy_port: net.http_proxy_port,
            socks_proxy_port: net.socks_proxy_port,
            tls_terminate: net.tls_terminate.clone(),
            http_rules: policy.oajail.http_rules.clone(),
        })
    }

    /// Whether the proxy needs a CA (some tunnel may be terminated).
    pub fn needs_ca(&self) -> bool {
        self.tls_terminate.is_some() || !self.http_rules.is_empty()
    }

    /// Whether a TLS tunnel to `host:port` is terminated: always when
    /// `httpRules` govern the host (its requests must be seen), else when
    /// `tlsTerminate` is on and `excludeDomains` does not name it.
    pub fn terminates(&self, host: &Host, port: u16) -> bool {
        if self.http_rules.governs(host) {
            return true;
        }
        self.tls_terminate
            .as_ref()
            .is_some_and(|t| !t.exclude_domains.iter().any(|d| d.matches(host, port)))
    }

    /// Decide on a canonical host and port: deny list (wins) → allow list →
    /// refused. Never resolves anything.
    pub fn decide(&self, host: &Host, port: u16) -> Decision {
        if let Some(rule) = self.deny.iter().find(|r| r.pattern.matches(host, port)) {
            let message = match &rule.reason {
                Some(reason) => reason.clone(),
                None => format!(
                    "{} is on the deny list (network.deniedDomains entry {:?})",
                    host.authority(port),
                    rule.pattern.as_str()
                ),
            };
            return deny(DenyKind::DenyList, message);
        }
        if self.allow.is_empty() {
            return deny(
                DenyKind::NoNetwork,
                "network access is off (network.allowedDomains is empty)".into(),
            );
        }
        // Prefer an entry naming the port: it also admits non-TLS tunnels.
        let mut hits = self.allow.iter().filter(|p| p.matches(host, port));
        let first = hits.next();
        let best = first
            .into_iter()
            .chain(hits)
            .find(|p| p.port().is_some())
            .or(first);
        match best {
            Some(p) => Decision::Allow(Allowed {
                entry: p.as_str().to_owned(),
                explicit_port: p.port().is_some(),
                private_admitted: p.is_ip_entry(),
            }),
            None => self.refusal(host, port),
        }
    }

    fn refusal(&self, host: &Host, port: u16) -> Decision {
        let other_port = self
            .allow
            .iter()
            .any(|p| p.port().is_some_and(|q| q != port && p.matches(host, q)));
        let auth = host.authority(port);
        if other_port {
            return deny(
                DenyKind::PortNotAllowed,
                format!(
                    "port {port} is not allowed for {host}; add \"{auth}\" to network.allowedDomains to allow it"
                ),
            );
        }
        let kind = if host.is_ip() {
            DenyKind::IpLiteral
        } else {
            DenyKind::NotAllowed
        };
        deny(
            kind,
            format!(
                "{auth} is not on the allow list; add \"{host}\" or \"{auth}\" to network.allowedDomains to allow it"
            ),
        )
    }

    /// Check one resolved (or literal) address of an allowed destination.
    /// `class` is the proxy's classification: `None` for a public address,
    /// `Some(range)` for a non-public one (e.g. `"rfc1918"`).
    ///
    /// Order: deny-list IP/CIDR entries and `deniedResolvedAddresses` (win)
    /// → public → an allow-list IP/CIDR entry naming the address →
    /// `oajail.allowPrivateDestinations` → refused.
    pub fn check_address(&self, ip: IpAddr, port: u16, class: Option<&str>) -> Result<(), Denied> {
        if self.deny.iter().any(|r| r.pattern.matches_ip(ip, port))
            || self.denied_resolved.iter().any(|n| n.contains(ip))
        {
            return Err(Denied {
                kind: DenyKind::DenyList,
                message: format!("address {ip} is on the deny list"),
            });
        }
        let Some(class) = class else { return Ok(()) };
        if self
            .allow
            .iter()
            .any(|p| p.is_ip_entry() && p.matches_ip(ip, port))
            || self.allow_private.iter().any(|n| n.contains(ip))
        {
            return Ok(());
        }
        let message = if class == "loopback" {
            // srt lets an allowed `localhost` reach every port of the
            // host's loopback; oajail keeps it closed and says how to open
            // one port (docs/srt-compatibility.md).
            let one = match ip {
                IpAddr::V4(v4) => format!("{v4}:{port}"),
                IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            };
            format!(
                "address {ip} is the host's loopback, closed even when \"localhost\" is allowed; \
                 add \"{one}\" to network.allowedDomains to allow this one port (or \"{ip}\" to \
                 oajail.allowPrivateDestinations for all of them)"
            )
        } else {
            format!(
                "address {ip} is not public ({class}); add \"{ip}\" to oajail.allowPrivateDestinations \
                 (or the address itself to network.allowedDomains) to allow it"
            )
        };
        Err(Denied {
            kind: DenyKind::NotAllowed,
            message,
        })
    }
}

fn deny(kind: DenyKind, message: String) -> Decision {
    Decision::Deny(Denied { kind, message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ListKind;
    use crate::host::canonicalize;

    fn plan(allow: &[&str], deny: &[&str]) -> EgressPlan {
        let p = |k| move |t: &&str| DomainPattern::parse(t, k).unwrap();
        EgressPlan {
            allow: allow.iter().map(p(ListKind::Allow)).collect(),
            deny: deny
                .iter()
                .map(p(ListKind::Deny))
                .map(|pattern| DenyRule {
                    pattern,
                    reason: None,
                })
                .collect(),
            ..EgressPlan::default()
        }
    }

    fn kind(d: Decision) -> Option<DenyKind> {
        match d {
            Decision::Allow(_) => None,
            Decision::Deny(d) => Some(d.kind),
        }
    }

    #[test]
    fn decision_order() {
        let plan = plan(
            &[
                "api.allowed.com:443",
                "*.cdn.allowed.com",
                "allowed.com",
                "allowed.com:22",
                "10.0.0.0/8",
            ],
            &["bad.cdn.allowed.com", "*:25"],
        );
        let d = |h: &str, port| plan.decide(&canonicalize(h).unwrap(), port);
        assert_eq!(kind(d("api.allowed.com", 443)), None);
        assert_eq!(kind(d("a.cdn.allowed.com", 8443)), None);
        assert_eq!(
            kind(d("bad.cdn.allowed.com", 443)),
            Some(DenyKind::DenyList)
        );
        assert_eq!(kind(d("allowed.com", 25)), Some(DenyKind::DenyList));
        assert_eq!(
            kind(d("api.allowed.com", 22)),
            Some(DenyKind::PortNotAllowed)
        );
        assert_eq!(kind(d("notallowed.com", 443)), Some(DenyKind::NotAllowed));
        assert_eq!(kind(d("1.2.3.4", 443)), Some(DenyKind::IpLiteral));
        match d("allowed.com", 22) {
            Decision::Allow(a) => assert!(a.explicit_port && a.entry == "allowed.com:22"),
            other => panic!("{other:?}"),
        }
        match d("10.1.2.3", 80) {
            Decision::Allow(a) => assert!(a.private_admitted && !a.explicit_port),
            other => panic!("{other:?}"),
        }
        let empty = super::EgressPlan::default();
        assert_eq!(
            kind(empty.decide(&canonicalize("a.com").unwrap(), 443)),
            Some(DenyKind::NoNetwork)
        );
    }

    #[test]
    fn address_checks() {
        let mut plan = plan(&["a.com", "127.0.0.1:8765"], &["203.0.113.0/24"]);
        plan.allow_private
            .push(IpNet::parse("192.168.1.0/24").unwrap());
        plan.denied_resolved.push(IpNet::parse("8.8.8.8").unwrap());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(plan.check_address(ip("1.1.1.1"), 443, None).is_ok());
        assert!(plan.check_address(ip("8.8.8.8"), 443, None).is_err());
        assert!(
            plan.check_address(ip("203.0.113.9"), 443, Some("documentation"))
                .is_err()
        );
        assert!(
            plan.check_address(ip("10.0.0.1"), 443, Some("rfc1918"))
                .is_err()
        );
        assert!(
            plan.check_address(ip("192.168.1.7"), 443, Some("rfc1918"))
                .is_ok()
        );
        assert!(
            plan.check_address(ip("127.0.0.1"), 8765, Some("loopback"))
                .is_ok()
        );
        assert!(
            plan.check_address(ip("127.0.0.1"), 8766, Some("loopback"))
                .is_err()
        );
    }
}
