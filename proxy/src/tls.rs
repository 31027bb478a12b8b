//! The first bytes of a tunnel: a TLS ClientHello whose SNI must name the
//! CONNECT host, or (only for entries that name the port) anything else.
//!
//! rustls' `Acceptor` parses the ClientHello (no crypto provider needed);
//! it copes with a hello split over many segments or several records. The
//! bytes stay in the client's buffer and are forwarded only after the
//! check passes, so a refused hello never reaches the upstream.
use crate::conn::{BufConn, ReadError};
use crate::shared::Shared;
use oajail_policy::host::{self, Host};
use std::io::Cursor;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What the tunnel carries, once allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Peek {
    /// TLS with an SNI equal to the CONNECT host (or none, for an IP entry).
    Tls { sni: Option<String> },
    /// Not TLS, allowed because the entry names the port.
    Raw,
}

/// A refused tunnel.
#[derive(Debug, Clone)]
pub(crate) struct PeekDeny {
    pub reason: &'static str,
    pub message: String,
    pub sni: Option<String>,
    /// The client started TLS: answer with a TLS alert before closing.
    pub tls: bool,
}

/// TLS fatal alert `access_denied`, so clients show a clean error.
pub(crate) const ALERT_ACCESS_DENIED: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31];

fn deny(reason: &'static str, message: String, sni: Option<String>, tls: bool) -> PeekDeny {
    PeekDeny {
        reason,
        message,
        sni,
        tls,
    }
}

/// Wait for the tunnel's first bytes and judge them.
pub(crate) async fn peek(
    shared: &Shared,
    client: &mut BufConn,
    upstream: &TcpStream,
    host: &Host,
    port: u16,
    explicit_port: bool,
) -> Result<Peek, PeekDeny> {
    let deadline = Instant::now() + shared.limits.peek_timeout;
    let non_tls = |why: &str| {
        let msg = format!(
            "the tunnel to {auth} {why}; only TLS with SNI {host} is allowed unless \"{auth}\" (with the port) is in network.allowedDomains",
            auth = host.authority(port),
        );
        deny("not_tls", msg, None, false)
    };
    if client.buf.is_empty() {
        tokio::select! {
            r = client.fill(shared.limits.peek_timeout) => match r {
                Ok(0) | Err(ReadError::Closed) => return Err(deny("client_closed", "the client closed the tunnel before sending".into(), None, false)),
                Ok(_) => {}
                Err(ReadError::Timeout) => return Err(deny("peek_timeout", "no bytes from the client in time".into(), None, false)),
                Err(e) => return Err(deny("client_error", e.to_string(), None, false)),
            },
            _ = upstream.readable() => {
                return if explicit_port { Ok(Peek::Raw) } else { Err(non_tls("has a server that speaks first (not TLS)")) };
            }
        }
    }
    if client.buf[0] != 0x16 {
        return if explicit_port {
            Ok(Peek::Raw)
        } else {
            Err(non_tls("does not start with TLS"))
        };
    }
    let sni = read_client_hello(shared, client, deadline).await?;
    check_sni(host, sni)
}

fn bad_hello(message: String) -> PeekDeny {
    deny("bad_client_hello", message, None, true)
}

/// Feed the buffered bytes to rustls until it has the whole ClientHello.
async fn read_client_hello(
    shared: &Shared,
    client: &mut BufConn,
    deadline: Instant,
) -> Result<Option<String>, PeekDeny> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut fed = 0;
    loop {
        while fed < client.buf.len() {
            match acceptor.read_tls(&mut Cursor::new(&client.buf[fed..])) {
                Ok(0) => break,
                Ok(n) => fed += n,
                Err(e) => return Err(bad_hello(format!("malformed ClientHello: {e}"))),
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                return Ok(accepted.client_hello().server_name().map(str::to_owned));
            }
            Ok(None) => {}
            Err((e, _)) => return Err(bad_hello(format!("malformed ClientHello: {e}"))),
        }
        if client.buf.len() > shared.limits.max_client_hello {
            return Err(bad_hello("ClientHello too large".into()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match client.fill(left).await {
            Ok(n) if n > 0 => {}
            Err(ReadError::Timeout) => {
                return Err(deny(
                    "peek_timeout",
                    "incomplete ClientHello in time".into(),
                    None,
                    true,
                ));
            }
            _ => {
                return Err(deny(
                    "client_closed",
                    "the client closed during the ClientHello".into(),
                    None,
                    true,
                ));
            }
        }
    }
}

/// SNI must be present and equal the CONNECT host (after the same
/// canonicalisation). An IP-literal CONNECT (allowed by an IP entry) must
/// carry no SNI: a name there would front another site on that address.
fn check_sni(host: &Host, sni: Option<String>) -> Result<Peek, PeekDeny> {
    match (host, sni) {
        (Host::Name(_), None) => Err(deny(
            "sni_missing",
            format!("the ClientHello for {host} has no SNI"),
            None,
            true,
        )),
        (Host::Name(name), Some(sni)) => match host::canonicalize(&sni) {
            Ok(Host::Name(s)) if &s == name => Ok(Peek::Tls { sni: Some(sni) }),
            _ => Err(deny(
                "sni_mismatch",
                format!("TLS SNI {sni:?} does not match the CONNECT host {name}"),
                Some(sni),
                true,
            )),
        },
        (_, None) => Ok(Peek::Tls { sni: None }),
        (_, Some(sni)) => Err(deny(
            "sni_mismatch",
            format!("TLS SNI {sni:?} on a tunnel to the address {host}"),
            Some(sni),
            true,
        )),
    }
}
