//! The egress holders' own attacks: TCP that names another address at the
//! proxy's port (E9). A rule that holds "TCP only through the proxy" by
//! the port alone (Landlock's TCP rule names a port, not an address) lets
//! this through; a holder that sees the address (the jail's own network
//! namespace, or the supervisor taking every connect) does not.

use crate::net::after_connect;
use crate::report::{Outcome, io_errno};
use nix::errno::Errno;
use oajail_audit::labspec::{LISTEN_REPLY, LISTEN_REQUEST};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Errnos with which a direct connection may be refused.
const CONNECT_DENIED: &[Errno] = &[
    Errno::ECONNREFUSED,
    Errno::ENETUNREACH,
    Errno::EHOSTUNREACH,
    Errno::EACCES,
    Errno::EPERM,
    Errno::EADDRNOTAVAIL,
];

/// The proxy's port, from the `http_proxy` the jail sets.
fn proxy_port() -> Option<u16> {
    let url = ["http_proxy", "HTTP_PROXY"]
        .iter()
        .find_map(|k| std::env::var(k).ok())?;
    let hostport = url.split("://").nth(1)?.trim_end_matches('/');
    hostport.rsplit(':').next()?.parse().ok()
}

/// Ask the lab for a listener at `ip`:`port` and wait for its answer.
fn ask_lab(ip: IpAddr, port: u16) -> Result<(), String> {
    let part = format!("{LISTEN_REQUEST}.part");
    std::fs::write(&part, format!("{ip} {port}\n"))
        .and_then(|()| std::fs::rename(&part, LISTEN_REQUEST))
        .map_err(|e| format!("cannot ask the lab for a listener: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(answer) = std::fs::read_to_string(LISTEN_REPLY) {
            let answer = answer.trim();
            return if answer == "ok" {
                Ok(())
            } else {
                Err(format!("the lab could not listen: {answer}"))
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err("the lab did not answer the listener request".into())
}

/// `tcp-proxy-port-elsewhere IP`: with a lab listener at IP on the proxy's
/// port, connect there directly (E9).
pub fn proxy_port_elsewhere(attack: &str, ip: &str) -> Outcome {
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return Outcome::unexpected(attack, None, format!("bad ip {ip}"));
    };
    let Some(port) = proxy_port() else {
        return Outcome::unexpected(attack, None, "no http_proxy in the environment");
    };
    if let Err(why) = ask_lab(ip, port) {
        return Outcome::unexpected(attack, None, why);
    }
    let sa = SocketAddr::new(ip, port);
    match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
        Ok(s) => after_connect(attack, sa, s),
        Err(e) => Outcome::failed(attack, "connect", io_errno(&e), CONNECT_DENIED),
    }
}
