//! Why an API request failed when the jail's proxy was in the way.
//!
//! Under oajail every API request is a `CONNECT` to the proxy. When the
//! proxy refuses the tunnel (a host it may not reach, a name it cannot
//! resolve, an address it will not dial) it answers with a status, an
//! `X-Proxy-Error` and a one-line reason; the HTTP client only reports
//! "tunnel error: unsuccessful". So after a failed connection through a
//! proxy, this module asks the proxy the same question itself (one
//! `CONNECT` to the same host and port, a few seconds at most) and reads
//! its answer, so the script, the model and the user's log get the
//! proxy's own words. A failure inside a tunnel the proxy terminates
//! (upstream TLS, request rules) already comes back as a response with
//! `X-Proxy-Error` ([`from_response`]).
//!
//! Written by hand because reqwest hides the proxy's answer to its
//! `CONNECT` (it keeps only the status line), and the question is one
//! request line.

use reqwest::Url;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest answer read from the proxy.
const MAX_ANSWER: usize = 4096;
/// Time allowed for the whole question.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The proxy's reason for refusing a tunnel to `url`'s host, when a proxy
/// is configured for it and answers anything but `200`.
pub async fn ask_proxy(url: &Url) -> Option<String> {
    let proxy = proxy_for(url, &|k| std::env::var(k).ok())?;
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    let answer = tokio::time::timeout(TIMEOUT, connect(&proxy, host, port))
        .await
        .ok()??;
    describe(&answer)
}

async fn connect(proxy: &str, host: &str, port: u16) -> Option<Vec<u8>> {
    let mut s = tokio::net::TcpStream::connect(proxy).await.ok()?;
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    s.write_all(head.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while out.len() < MAX_ANSWER {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        if complete(&out) {
            break;
        }
    }
    Some(out)
}

/// A head with its `Content-Length` body (or a `200`, which has none).
fn complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    if head.starts_with("http/1.1 200") || head.starts_with("http/1.0 200") {
        return true;
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    raw.len() >= end + 4 + length
}

/// `the jail's proxy answered 502 (x-proxy-error): reason`, or `None` for
/// a `200` (the tunnel works: the failure was elsewhere).
fn describe(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.lines().next()?.split(' ').nth(1)?;
    if status == "200" {
        return None;
    }
    let code = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("x-proxy-error")
            .then(|| v.trim().to_owned())
    });
    Some(sentence(status, code.as_deref(), body))
}

fn sentence(status: &str, code: Option<&str>, body: &str) -> String {
    let reason: String = body
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(500)
        .collect();
    let code = code.map(|c| format!(" ({c})")).unwrap_or_default();
    format!("the jail's proxy answered {status}{code}: {reason}")
}

/// The sentence for a response the proxy made itself (it carries
/// `X-Proxy-Error`), from its status, code and body text.
pub fn from_response(status: u16, code: &str, body: &str) -> String {
    sentence(&status.to_string(), Some(code), body)
}

/// `host:port` of the HTTP proxy the client uses for `url`, honouring
/// `NO_PROXY` as reqwest does for the common forms (exact host, domain
/// suffix, `*`).
fn proxy_for(url: &Url, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |names: &[&str]| names.iter().find_map(|n| env(n).filter(|v| !v.is_empty()));
    let host = url.host_str()?;
    // Under oajail the server always uses the proxy (egress::wrapper_proxy).
    let jailed = env("OAJAIL").is_some();
    if let Some(no) = get(&["NO_PROXY", "no_proxy"]).filter(|_| !jailed) {
        let skip = no.split(',').map(str::trim).any(|p| {
            p == "*"
                || p == host
                || (!p.is_empty() && host.ends_with(&format!(".{}", p.trim_start_matches('.'))))
        });
        if skip {
            return None;
        }
    }
    let raw = match url.scheme() {
        "https" => get(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]),
        _ => get(&["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]),
    }?;
    let proxy = Url::parse(&raw).ok().filter(|p| p.scheme() == "http")?;
    Some(format!(
        "{}:{}",
        proxy.host_str()?,
        proxy.port_or_known_default()?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxys_answer_becomes_a_sentence() {
        let raw = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 38\r\nConnection: close\r\n\r\ncannot resolve api.example.invalid: x\n";
        assert!(complete(raw));
        assert_eq!(
            describe(raw).as_deref(),
            Some("the jail's proxy answered 502: cannot resolve api.example.invalid: x")
        );
        let refused = b"HTTP/1.1 403 Forbidden\r\nX-Proxy-Error: blocked-by-allowlist\r\nContent-Length: 3\r\n\r\nno\n";
        assert_eq!(
            describe(refused).as_deref(),
            Some("the jail's proxy answered 403 (blocked-by-allowlist): no")
        );
        assert_eq!(
            describe(b"HTTP/1.1 200 Connection Established\r\n\r\n"),
            None
        );
        assert!(!complete(
            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nabc"
        ));
    }

    #[test]
    fn the_proxy_is_the_clients() {
        let env = |k: &str| match k {
            "HTTPS_PROXY" => Some("http://127.0.0.1:3128".to_owned()),
            "NO_PROXY" => Some("localhost,.internal".to_owned()),
            _ => None,
        };
        let url = |u: &str| Url::parse(u).unwrap();
        assert_eq!(
            proxy_for(&url("https://api.example/v3"), &env).as_deref(),
            Some("127.0.0.1:3128")
        );
        assert_eq!(proxy_for(&url("https://localhost/v3"), &env), None);
        assert_eq!(proxy_for(&url("https://a.internal/v3"), &env), None);
        assert_eq!(proxy_for(&url("http://api.example/v3"), &env), None);
    }
}
