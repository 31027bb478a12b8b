//! The one decision path every protocol uses: decide → resolve once →
//! check every address → dial exactly a checked address.
use crate::addr::{classify, never_dialable};
use crate::log::{Record, client_text};
use crate::shared::Shared;
use oajail_policy::egress::{Allowed, Decision, Denied, DenyKind};
use oajail_policy::host::Host;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Per-connection facts for the log.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub id: u64,
    pub client: SocketAddr,
    pub proto: &'static str,
    pub started: Instant,
}

impl Ctx {
    /// A log record pre-filled with the connection's facts.
    pub(crate) fn record(&self, event: &'static str, reason: &str) -> Record {
        Record {
            event,
            conn: self.id,
            client: client_text(self.client),
            proto: self.proto,
            reason: reason.to_owned(),
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            ..Record::default()
        }
    }
}

/// Why no upstream connection was made.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// Policy said no (answer 403 / SOCKS 2).
    Denied {
        reason: &'static str,
        message: String,
    },
    /// Allowed, but resolution or the dial failed (answer 502 / SOCKS 4).
    Unreachable { message: String },
}

impl Refusal {
    pub(crate) fn message(&self) -> &str {
        match self {
            Refusal::Denied { message, .. } | Refusal::Unreachable { message } => message,
        }
    }
}

/// A dialed upstream and why it was allowed.
#[derive(Debug)]
pub(crate) struct Route {
    pub stream: TcpStream,
    pub addr: SocketAddr,
    pub allowed: Allowed,
}

impl Route {
    /// A decision record for this route (allowed so far).
    pub(crate) fn record(&self, ctx: &Ctx, method: &str, host: &Host, port: u16) -> Record {
        let mut rec = ctx.record("decision", "allowed");
        rec.decision = Some("allow");
        rec.method = Some(method.to_owned());
        rec.host = Some(host.to_string());
        rec.port = Some(port);
        rec.resolved = Some(self.addr.to_string());
        rec.entry = Some(self.allowed.entry.clone());
        rec
    }
}

pub(crate) fn deny_code(kind: DenyKind) -> &'static str {
    match kind {
        DenyKind::NoNetwork => "no_network",
        DenyKind::DenyList => "deny_list",
        DenyKind::IpLiteral => "ip_literal",
        DenyKind::PortNotAllowed => "port_not_allowed",
        DenyKind::NotAllowed => "not_allowed",
    }
}

/// Decide, resolve, check and dial. Failures are logged here (one decision
/// line); on success the caller logs the decision once it is final (a
/// tunnel still has its ClientHello check to pass).
pub(crate) async fn open(
    shared: &Shared,
    ctx: &Ctx,
    method: &str,
    host: &Host,
    port: u16,
) -> Result<Route, Refusal> {
    let result = open_inner(shared, host, port).await;
    if let Err(refusal) = &result {
        let (decision, reason) = match refusal {
            Refusal::Denied { reason, .. } => ("deny", *reason),
            Refusal::Unreachable { .. } => ("error", "upstream_unreachable"),
        };
        let mut rec = ctx.record("decision", reason);
        rec.method = Some(method.to_owned());
        rec.host = Some(shared.creds.redact(&host.to_string()));
        rec.port = Some(port);
        rec.decision = Some(decision);
        rec.message = Some(refusal.message().to_owned());
        shared.log.write(rec);
    }
    result
}

async fn open_inner(shared: &Shared, host: &Host, port: u16) -> Result<Route, Refusal> {
    // A sentinel in a DNS label would leave through the resolver: refused
    // before the name is decided or resolved.
    if let Some(name) = shared.creds.find(host.to_string().as_bytes()) {
        let message = format!(
            "the masked credential {name} in the destination host name: a sentinel may only go in \
             the headers of https requests to its injectHosts"
        );
        crate::log::say(format_args!("oajail: proxy refused {message}"));
        return Err(Refusal::Denied {
            reason: "masked_credential",
            message,
        });
    }
    let allowed = match shared.plan.decide(host, port) {
        Decision::Deny(d) => match ask(shared, host, port, &d).await {
            Some(allowed) => allowed,
            None => {
                return Err(Refusal::Denied {
                    reason: deny_code(d.kind),
                    message: d.message,
                });
            }
        },
        Decision::Allow(a) => a,
    };
    let addrs = match host {
        Host::Name(name) => resolve(shared, name).await?,
        other => other.ip().into_iter().collect(),
    };
    for ip in &addrs {
        // An address named by its admitting entry (an IP entry, or a
        // literal the user allowed when asked) needs no public check.
        let named = allowed.private_admitted && host.ip() == Some(*ip);
        if check_one(shared, host, *ip, port, named)? {
            not_this_host(host, *ip, port)?;
        }
    }
    let mut last_err = String::from("no address");
    for ip in addrs {
        let addr = SocketAddr::new(ip, port);
        match timeout(shared.limits.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(Route {
                    stream,
                    addr,
                    allowed,
                });
            }
            Ok(Err(e)) => last_err = format!("{addr}: {e}"),
            Err(_) => last_err = format!("{addr}: connect timed out"),
        }
    }
    Err(Refusal::Unreachable {
        message: format!("cannot connect to {}: {last_err}", host.authority(port)),
    })
}

/// A refusal an allow entry would lift, put to the run's asker
/// (`StartOptions::asker`: the user at the terminal, or a decider): a yes
/// admits the destination as an entry `host:port` would (the address
/// checks still apply to a name). Asked on a blocking thread: the answer
/// may take a person's time.
async fn ask(shared: &Shared, host: &Host, port: u16, d: &Denied) -> Option<Allowed> {
    let asker = shared.asker.clone()?;
    let liftable = matches!(
        d.kind,
        DenyKind::NoNetwork | DenyKind::NotAllowed | DenyKind::PortNotAllowed | DenyKind::IpLiteral
    );
    if !liftable {
        return None;
    }
    let question = crate::Question {
        host: host.to_string(),
        port,
        message: d.message.clone(),
    };
    let yes = tokio::task::spawn_blocking(move || asker(&question))
        .await
        .unwrap_or(false);
    yes.then(|| Allowed {
        entry: format!("{} (asked)", host.authority(port)),
        explicit_port: true,
        private_admitted: host.is_ip(),
    })
}

async fn resolve(shared: &Shared, name: &str) -> Result<Vec<IpAddr>, Refusal> {
    let unreachable = |why: String| Refusal::Unreachable {
        message: format!("cannot resolve {name}: {why}"),
    };
    match timeout(shared.limits.dns_timeout, shared.resolver.resolve(name)).await {
        Err(_) => Err(unreachable("timed out".into())),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Ok(Ok(list)) if list.is_empty() => Err(unreachable("no addresses".into())),
        Ok(Ok(list)) => Ok(list),
    }
}

/// An address judged public must not be the host itself. A `local` route
/// (`ip route add local 203.0.113.0/24 dev lo`, AnyIP) makes the host
/// accept addresses that are on no interface, so the interface list cannot
/// see them. The kernel's route lookup says it: for a local route with no
/// preferred source it picks the destination itself as the source address.
/// A UDP `connect` performs that lookup and sends nothing, so the check
/// happens before any packet, the TCP handshake included.
fn not_this_host(host: &Host, ip: IpAddr, port: u16) -> Result<(), Refusal> {
    let fold = oajail_policy::host::fold_mapped;
    let unspecified: IpAddr = match ip {
        IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    let source = std::net::UdpSocket::bind((unspecified, 0))
        .and_then(|s| s.connect((ip, port)).and_then(|()| s.local_addr()));
    if source.is_ok_and(|a| fold(a.ip()) == fold(ip)) {
        return Err(Refusal::Denied {
            reason: "private_address",
            message: format!(
                "{host} resolved to {ip}, which is this host (a local route); add \"{ip}\" to \
                 oajail.allowPrivateDestinations to allow it"
            ),
        });
    }
    Ok(())
}

/// One address: never-dialable → class (with the host's own interfaces)
/// → the plan's deny entries and opt-ins. `Ok(true)`: judged public by its
/// class (then [`not_this_host`] asks the route).
fn check_one(
    shared: &Shared,
    host: &Host,
    ip: IpAddr,
    port: u16,
    named: bool,
) -> Result<bool, Refusal> {
    let deny = |message: String| Refusal::Denied {
        reason: "private_address",
        message,
    };
    let class = if shared.is_lab_public(ip) {
        None
    } else if never_dialable(ip) {
        return Err(deny(format!("{ip} can never be a destination")));
    } else if let Some(c) = classify(ip) {
        Some(c)
    } else if shared.local.contains(ip) {
        Some("an address of this host")
    } else {
        None
    };
    let public = class.is_none() && !shared.is_lab_public(ip);
    shared
        .plan
        .check_address(ip, port, class.filter(|_| !named))
        .map(|()| public)
        .map_err(|d| {
            let reason = if d.kind == DenyKind::DenyList {
                "deny_list"
            } else {
                "private_address"
            };
            let message = match host {
                // "address 10.0.0.7 is not public …" → "db.test resolved to
                // 10.0.0.7, which is not public …"
                Host::Name(n) => format!(
                    "{n} resolved to {}",
                    d.message
                        .trim_start_matches("address ")
                        .replacen(" is ", ", which is ", 1)
                ),
                _ => d.message,
            };
            Refusal::Denied { reason, message }
        })
}
