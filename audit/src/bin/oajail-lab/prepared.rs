//! What the lab does differently where it cannot make namespaces of its
//! own (inside a container): check that the caller prepared the network it
//! runs in, and serve the listeners a command asks for while it runs (E9).

use anyhow::{Context, Result, bail};
use oajail_audit::labspec::{LAB_ADDRESSES, LabConfig};
use oajail_audit::sinks::{self, EventLog};
use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::time::Duration;

/// A prepared lab (`LabNetwork::Prepared`): the namespaces it starts in
/// must already be the lab's (every lab address local, the lab resolver in
/// `/etc/resolv.conf`), and what needs namespaces of its own is refused
/// by name rather than left out.
pub fn check(config: &LabConfig) -> Result<()> {
    for (wanted, what) in [
        (!config.overlays.is_empty(), "overlays of absolute paths"),
        (config.alias_home, "a second mount of the fake home"),
        (config.no_userns, "a run without user namespaces"),
    ] {
        if wanted {
            bail!("prepared lab: {what} needs a mount or user namespace of the lab's own");
        }
    }
    for (addr, why) in LAB_ADDRESSES {
        let ip: std::net::IpAddr = addr.parse().context("lab address")?;
        UdpSocket::bind((ip, 0))
            .with_context(|| format!("prepared lab: {addr} ({why}) is not a local address"))?;
    }
    let resolv = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    if !resolv.contains(&format!("nameserver {}", oajail_audit::labspec::DNS_V4)) {
        bail!("prepared lab: /etc/resolv.conf does not name the lab resolver");
    }
    Ok(())
}

/// Serve one [`LISTEN_REQUEST`] of the command (E9): a TCP sink at the
/// address and port it names, answered in `LISTEN_REPLY`.
pub fn listen_on_request(cwd: &Path, log: &EventLog) {
    use oajail_audit::labspec::{LISTEN_REPLY, LISTEN_REQUEST};
    let request = cwd.join(LISTEN_REQUEST);
    let text = loop {
        match fs::read_to_string(&request) {
            Ok(t) if t.ends_with('\n') => break t,
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let answer = match text.trim().split_once(' ') {
        Some((addr, port)) => match (addr.parse::<std::net::IpAddr>(), port.parse::<u16>()) {
            (Ok(ip), Ok(port)) => match TcpListener::bind((ip, port)) {
                Ok(l) => {
                    let log = log.clone();
                    std::thread::spawn(move || sinks::tcp_sink(l, log));
                    "ok".to_owned()
                }
                Err(e) => format!("error: listen at {ip} port {port}: {e}"),
            },
            _ => format!("error: bad request {text:?}"),
        },
        None => format!("error: bad request {text:?}"),
    };
    let part = cwd.join(format!("{LISTEN_REPLY}.part"));
    if fs::write(&part, format!("{answer}\n")).is_ok() {
        let _ = fs::rename(&part, cwd.join(LISTEN_REPLY));
    }
}
