//! HTTP/1.1 from the jailed client: head parsing, answers, `CONNECT`.
//!
//! The parser is strict on purpose (one parser, no second opinion
//! downstream): upper-case methods only, CRLF line endings only, no
//! obs-fold, no NUL or other control bytes, at most `max_headers` fields
//! and `max_head_bytes` bytes. Anything else is answered with 400 (431 for
//! size) and the connection is closed.
use crate::conn::{BufConn, ReadError};
use crate::route::{self, Ctx, Refusal};
use crate::server::Shared;
use oajail_policy::host::{self, Host};
use tokio::io::AsyncWriteExt;

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

/// Parse one complete head (as returned by [`BufConn::read_head`]).
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

/// Answer `reject`, log it as a refused decision, and close.
pub(crate) async fn reject(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    method: Option<&str>,
    r: Reject,
) {
    let mut rec = ctx.record("decision", r.reason);
    rec.decision = Some("deny");
    rec.method = method.map(str::to_owned);
    rec.message = Some(r.message.clone());
    shared.log.write(rec);
    let _ = client
        .stream
        .write_all(&error_response(
            r.status,
            phrase(r.status),
            &r.message,
            (r.status == 403).then_some("X-Proxy-Error: blocked-by-allowlist"),
        ))
        .await;
    let _ = client.stream.shutdown().await;
}

/// Serve HTTP requests on one client connection until it closes, is
/// refused, or becomes a tunnel.
pub(crate) async fn serve(shared: &Shared, ctx: &mut Ctx, mut client: BufConn) {
    if !client.buf.first().is_some_and(u8::is_ascii_uppercase) {
        return reject(shared, ctx, &mut client, None, bad("not an HTTP request")).await;
    }
    loop {
        let req = match next_request(shared, &mut client).await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(r) => return reject(shared, ctx, &mut client, None, r).await,
        };
        if req.method == "CONNECT" {
            ctx.proto = "connect";
            return connect(shared, ctx, client, req).await;
        }
        ctx.proto = "http";
        match crate::forward::forward(shared, ctx, &mut client, req).await {
            Ok(true) => continue,
            Ok(false) => return,
            Err((method, r)) => return reject(shared, ctx, &mut client, Some(&method), r).await,
        }
    }
}

/// Read and parse the next request head. `Ok(None)`: the client closed or
/// went quiet between requests (nothing to answer).
async fn next_request(shared: &Shared, client: &mut BufConn) -> Result<Option<Request>, Reject> {
    let limits = &shared.limits;
    let head = match client
        .read_head(limits.max_head_bytes, limits.header_timeout)
        .await
    {
        Ok(h) => h,
        Err(ReadError::TooLarge) => {
            let message = format!("request head over {} bytes", limits.max_head_bytes);
            return Err(Reject {
                status: 431,
                reason: "head_too_large",
                message,
            });
        }
        Err(ReadError::Bad(why)) => return Err(bad(why)),
        Err(ReadError::Timeout) if !client.buf.is_empty() => {
            let message = "request head not complete in time".into();
            return Err(Reject {
                status: 400,
                reason: "header_timeout",
                message,
            });
        }
        Err(_) => return Ok(None),
    };
    parse_request(&head, limits.max_headers).map(Some)
}

/// `CONNECT host:port`: decide, dial, then 200, then the tunnel.
async fn connect(shared: &Shared, ctx: &Ctx, mut client: BufConn, req: Request) {
    let target = match connect_target(&req) {
        Ok(t) => t,
        Err(r) => return reject(shared, ctx, &mut client, Some("CONNECT"), r).await,
    };
    let (host, port) = target;
    let route = match route::open(shared, ctx, "CONNECT", &host, port).await {
        Ok(r) => r,
        Err(refusal) => {
            let _ = client.stream.write_all(&refusal_response(&refusal)).await;
            let _ = client.stream.shutdown().await;
            return;
        }
    };
    if client
        .stream
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    crate::relay::tunnel(shared, ctx, client, route, "CONNECT", host, port).await;
}

fn connect_target(req: &Request) -> Result<(Host, u16), Reject> {
    if req.has("content-length") || req.has("transfer-encoding") {
        return Err(bad("CONNECT must not have a body"));
    }
    let t = req.target.as_str();
    if t.contains('@') {
        return Err(bad("userinfo in the CONNECT target is not accepted"));
    }
    let (h, port) = host::split_authority(t)
        .ok_or_else(|| bad("CONNECT needs host:port with a port of 1-65535"))?;
    let host = host::canonicalize(h).map_err(|e| bad(format!("CONNECT target: {e}")))?;
    Ok((host, port))
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
