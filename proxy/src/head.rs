//! HTTP/1.1 message heads, shared by every path that reads or writes one
//! (plain requests, `CONNECT`, SOCKS5's sniffed requests, responses, the
//! connection limit): strict request-head parsing, body framing, header
//! helpers and the proxy's own error answers. No I/O.
//!
//! The parser is strict on purpose (one parser, no second opinion
//! downstream): upper-case methods only, CRLF line endings only, no
//! obs-fold, no NUL or other control bytes, at most `max_headers` fields
//! and `max_head_bytes` bytes. Anything else is answered with 400 (431 for
//! size) and the connection is closed.
use crate::route::Refusal;

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Request {
    pub method: String,
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// Lower-case names, raw values.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Request {
    pub(crate) fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.values(name).next().is_some()
    }
}

/// An answer that ends the connection.
#[derive(Debug, Clone)]
pub(crate) struct Reject {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
}

pub(crate) fn bad(message: impl Into<String>) -> Reject {
    Reject {
        status: 400,
        reason: "bad_request",
        message: message.into(),
    }
}

/// Parse one complete head (as returned by [`crate::conn::BufConn::read_head`]).
pub(crate) fn parse_request(head: &[u8], max_headers: usize) -> Result<Request, Reject> {
    for (i, b) in head.iter().enumerate() {
        if *b == b'\n' && (i == 0 || head[i - 1] != b'\r') {
            return Err(bad("bare LF line ending"));
        }
        if *b == b'\n' && i + 1 < head.len() && matches!(head[i + 1], b' ' | b'\t') {
            return Err(bad("obsolete line folding"));
        }
    }
    let mut slots = vec![httparse::EMPTY_HEADER; max_headers];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(bad("incomplete request head")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Reject {
                status: 431,
                reason: "too_many_headers",
                message: format!("more than {max_headers} header fields"),
            });
        }
        Err(e) => return Err(bad(format!("malformed request: {e}"))),
    }
    let method = req.method.unwrap_or_default().to_owned();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad("the method must be an upper-case token"));
    }
    let headers = req
        .headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
        .collect();
    Ok(Request {
        method,
        target: req.path.unwrap_or_default().to_owned(),
        version: req.version.unwrap_or(1),
        headers,
    })
}

/// A complete error answer with `Connection: close`.
pub(crate) fn error_response(
    status: u16,
    phrase: &str,
    message: &str,
    extra: Option<&str>,
) -> Vec<u8> {
    let body = format!("{message}\n");
    let mut out = format!("HTTP/1.1 {status} {phrase}\r\n");
    if let Some(h) = extra {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str(&format!(
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    out.into_bytes()
}

pub(crate) fn phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The answer for a refused route: 403 for policy, 502 for the upstream.
pub(crate) fn refusal_response(refusal: &Refusal) -> Vec<u8> {
    match refusal {
        Refusal::Denied { message, .. } => error_response(
            403,
            "Forbidden",
            message,
            Some("X-Proxy-Error: blocked-by-allowlist"),
        ),
        Refusal::Unreachable { message } => error_response(502, "Bad Gateway", message, None),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    None,
    Length(u64),
    Chunked,
}

/// The request body's framing; every ambiguity is refused.
pub(crate) fn request_body(req: &Request) -> Result<Body, Reject> {
    let te: Vec<&[u8]> = req.values("transfer-encoding").collect();
    let cl: Vec<&[u8]> = req.values("content-length").collect();
    if !te.is_empty() {
        if !cl.is_empty() {
            return Err(bad("both Content-Length and Transfer-Encoding"));
        }
        if req.version == 0 {
            return Err(bad("Transfer-Encoding in an HTTP/1.0 request"));
        }
        if te.len() != 1 || !te[0].trim_ascii().eq_ignore_ascii_case(b"chunked") {
            return Err(bad("only Transfer-Encoding: chunked is accepted"));
        }
        return Ok(Body::Chunked);
    }
    match cl.as_slice() {
        [] => Ok(Body::None),
        [v] => parse_length(v)
            .map(Body::Length)
            .ok_or_else(|| bad("bad Content-Length")),
        _ => Err(bad("more than one Content-Length")),
    }
}

pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Does a `Connection` header list `token`?
pub(crate) fn connection_has(headers: &[(String, Vec<u8>)], token: &str) -> bool {
    connection_tokens(headers).iter().any(|t| t == token)
}

pub(crate) fn connection_tokens(headers: &[(String, Vec<u8>)]) -> Vec<String> {
    headers
        .iter()
        .filter(|(n, _)| n == "connection")
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Append one `name: value` header line to a head being rebuilt.
pub(crate) fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Headers never forwarded in either direction.
pub(crate) fn is_hop_by_hop(name: &str, listed: &[String]) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "host"
    ) || name.starts_with("proxy-")
        || listed.iter().any(|l| l == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_heads() {
        let ok = parse_request(b"GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n", 100).unwrap();
        assert_eq!(ok.method, "GET");
        for bad_head in [
            &b"get http://a.com/ HTTP/1.1\r\n\r\n"[..],
            b"GET http://a.com/ HTTP/1.1\nHost: a\n\n",
            b"GET http://a.com/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            b"CONNECT\r\n\r\n",
        ] {
            assert!(parse_request(bad_head, 100).is_err(), "{bad_head:?}");
        }
        let many: String = (0..101).map(|i| format!("X{i}: y\r\n")).collect();
        let head = format!("GET http://a.com/ HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse_request(head.as_bytes(), 100).unwrap_err().status, 431);
    }
}
