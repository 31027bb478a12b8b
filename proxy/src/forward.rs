//! Plain HTTP: absolute-form requests forwarded to the checked address.
//!
//! The decision is made on the URL's host (never on the `Host` header),
//! for every request of a keep-alive connection. The request line and
//! `Host` are rebuilt from the canonical URL; hop-by-hop and `Proxy-*`
//! headers are dropped; bodies are re-framed after their framing was
//! checked (`Content-Length` and `Transfer-Encoding` together are refused,
//! which closes request smuggling through the proxy). Each request gets its
//! own upstream connection (`Connection: close` upstream), so a reused
//! connection can never carry a request for another host.
use crate::conn::{BufConn, ReadError};
use crate::form;
use crate::head::{
    Body, Reject, Request, bad, connection_has, connection_tokens, error_response, is_hop_by_hop,
    push_header, refusal_response, request_body,
};
use crate::route::{self, Ctx};
use crate::shared::Shared;
use oajail_policy::host::{self, Host};
use oajail_policy::l7::path::Override;
use oajail_policy::l7::{RequestFacts, RuleVerdict};
use tokio::io::AsyncWriteExt;

struct Url {
    host: Host,
    port: u16,
    path: String,
}

/// What a request turned into after its checks.
struct Prepared {
    url: Url,
    body: Body,
    websocket: bool,
    /// `host[:port]` for the rebuilt `Host` header.
    authority: String,
    /// The client's own `Host` header, logged when it differs.
    client_host: Option<String>,
    /// `100 Continue` was already sent (the body was read ahead).
    continued: bool,
}

fn prepare(req: &Request) -> Result<Prepared, Reject> {
    let url = parse_absolute(&req.target)?;
    let body = request_body(req)?;
    let websocket = check_upgrade(req)?;
    let host_headers: Vec<&[u8]> = req.values("host").collect();
    if host_headers.len() > 1 {
        return Err(bad("more than one Host header"));
    }
    let authority = if url.port == 80 {
        url.host.to_string()
    } else {
        url.host.authority(url.port)
    };
    let client_host = host_headers
        .first()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .filter(|h| !h.eq_ignore_ascii_case(&authority));
    Ok(Prepared {
        url,
        body,
        websocket,
        authority,
        client_host,
        continued: false,
    })
}

/// Forward one request. `Ok(true)`: the client connection may carry
/// another request. `Err`: answer the rejection and close.
pub(crate) async fn forward(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    req: Request,
) -> Result<bool, (String, Reject)> {
    let mut p = prepare(&req).map_err(|r| (req.method.clone(), r))?;
    if let Some(name) = head_sentinel(shared, &req) {
        let leak = crate::masked::Leak {
            name: name.to_owned(),
            place: "a plain-http request",
        };
        refuse_masked(shared, ctx, client, &req, &p.url, &leak).await;
        return Ok(false);
    }
    let checked = match check_rules(shared, &req, &p.url) {
        Ok(()) => check_form(shared, client, &req, &mut p).await,
        Err(message) => Err(message),
    };
    match checked {
        Ok(()) => {}
        Err(Ok(message)) => {
            refuse_rule(shared, ctx, client, &req, &p.url, message).await;
            return Ok(false);
        }
        Err(Err(e)) => return Err((req.method.clone(), bad(format!("request body: {e}")))),
    }
    let mut route = match route::open(shared, ctx, &req.method, &p.url.host, p.url.port).await {
        Ok(r) => r,
        Err(refusal) => {
            let _ = client.stream.write_all(&refusal_response(&refusal)).await;
            return Ok(false);
        }
    };
    let mut rec = route.record(ctx, &req.method, &p.url.host, p.url.port);
    rec.client_host_header = p.client_host.clone();
    shared.log.write(rec);
    client.scan = (!shared.creds.is_empty()).then(|| shared.creds.scanner());
    let sent = send_request(shared, client, &mut route.stream, &req, &p).await;
    client.scan = None;
    match sent {
        Ok(()) => {}
        Err(ReadError::Masked(name)) => {
            let place = "a plain-http request body";
            let leak = crate::masked::Leak { name, place };
            refuse_masked(shared, ctx, client, &req, &p.url, &leak).await;
            return Ok(false);
        }
        // The upstream went away while taking the request.
        Err(ReadError::Io(e)) => {
            let msg = format!("the upstream failed while receiving the request: {e}");
            let _ = client
                .stream
                .write_all(&error_response(502, "Bad Gateway", &msg, None))
                .await;
            return Ok(false);
        }
        Err(e) => return Err((req.method.clone(), bad(format!("request body: {e}")))),
    }
    let asked = crate::response::Asked {
        method: &req.method,
        keep_alive: req.version == 1 && !connection_has(&req.headers, "close") && !p.websocket,
        websocket: p.websocket,
    };
    Ok(crate::response::relay(shared, ctx, client, BufConn::new(route.stream), asked).await)
}

async fn send_request(
    shared: &Shared,
    client: &mut BufConn,
    up: &mut tokio::net::TcpStream,
    req: &Request,
    p: &Prepared,
) -> Result<(), ReadError> {
    let head = upstream_head(req, &p.url.path, &p.authority, p.body, p.websocket);
    up.write_all(&head).await?;
    // `Expect` is answered here (the upstream never sees it): a client
    // waiting for `100 Continue` would otherwise wait while we wait for it.
    let expects = req
        .values("expect")
        .any(|v| v.eq_ignore_ascii_case(b"100-continue"));
    if expects && p.body != Body::None && !p.continued {
        client
            .stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await?;
    }
    let idle = shared.limits.idle_timeout;
    match p.body {
        Body::Length(n) => client.relay_exact(n, up, idle).await,
        Body::Chunked => client.relay_chunked(up, idle).await,
        Body::None => Ok(()),
    }
}

/// A sentinel anywhere in a plain-HTTP head (never swapped: plain HTTP
/// is never an inject path).
fn head_sentinel(shared: &Shared, req: &Request) -> Option<String> {
    let mut run = Vec::new();
    let mut names = Vec::new();
    for (name, value) in &req.headers {
        names.extend_from_slice(name.as_bytes());
        run.extend_from_slice(value);
    }
    let creds = &shared.creds;
    (creds.find(req.target.as_bytes()))
        .or_else(|| creds.find(&run))
        .or_else(|| creds.find(&names))
}

/// 403, one decision line and one live stderr line naming the credential.
async fn refuse_masked(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    req: &Request,
    url: &Url,
    leak: &crate::masked::Leak,
) {
    let message = leak.message(&format!("http://{}", url.host.authority(url.port)));
    crate::log::say(format_args!("oajail: proxy refused {message}"));
    let mut rec = ctx.record("decision", "masked_credential");
    rec.decision = Some("deny");
    rec.method = Some(req.method.clone());
    rec.host = Some(shared.creds.redact(&url.host.to_string()));
    rec.port = Some(url.port);
    rec.message = Some(message.clone());
    shared.log.write(rec);
    let header = Some("X-Proxy-Error: blocked-masked-credential");
    let answer = error_response(403, "Forbidden", &message, header);
    let _ = client.stream.write_all(&answer).await;
}

/// A request refused by `oajail.httpRules`: 403, a decision line and a
/// live stderr line.
async fn refuse_rule(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    req: &Request,
    url: &Url,
    message: String,
) {
    // A live line, as for requests inside terminated tunnels.
    crate::log::say(format_args!("oajail: proxy refused {message}"));
    let mut rec = ctx.record("decision", "http_rule");
    rec.decision = Some("deny");
    rec.method = Some(req.method.clone());
    rec.host = Some(url.host.to_string());
    rec.port = Some(url.port);
    rec.message = Some(message.clone());
    shared.log.write(rec);
    let answer = error_response(
        403,
        "Forbidden",
        &message,
        Some("X-Proxy-Error: blocked-by-http-rules"),
    );
    let _ = client.stream.write_all(&answer).await;
}

fn rule_facts<'a>(req: &'a Request, url: &'a Url) -> RequestFacts<'a> {
    RequestFacts {
        https: false,
        host: &url.host,
        port: url.port,
        method: &req.method,
        path: &url.path,
    }
}

fn overrides(req: &Request) -> Vec<Override> {
    let headers = req.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice()));
    oajail_policy::l7::path::header_overrides(headers)
}

fn refused_line(req: &Request, url: &Url, why: &str) -> String {
    format!(
        "{} http://{}{} is refused: {why}",
        req.method,
        url.host.authority(url.port),
        url.path
    )
}

/// `oajail.httpRules` for a plain-HTTP request, decided before any DNS.
fn check_rules(shared: &Shared, req: &Request, url: &Url) -> Result<(), Result<String, ReadError>> {
    let facts = rule_facts(req, url);
    match shared.plan.http_rules.judge_with(&facts, &overrides(req)) {
        RuleVerdict::Refused(why) => Err(Ok(refused_line(req, url, &why))),
        RuleVerdict::Ungoverned | RuleVerdict::Allowed(_) => Ok(()),
    }
}

/// A POST form's `_method` (`form.rs`), its body read ahead into the
/// client's buffer; `Err(Ok(line))` refused, `Err(Err(_))` unreadable.
async fn check_form(
    shared: &Shared,
    client: &mut BufConn,
    req: &Request,
    p: &mut Prepared,
) -> Result<(), Result<String, ReadError>> {
    let rules = &shared.plan.http_rules;
    let facts = rule_facts(req, &p.url);
    let length = match p.body {
        Body::None => return Ok(()),
        Body::Length(n) => Some(n),
        Body::Chunked => None,
    };
    let Some(need) = form::need(rules, &facts, req.values("content-type")) else {
        return Ok(());
    };
    // A client waiting for `100 Continue` sends the body only then.
    if req
        .values("expect")
        .any(|v| v.eq_ignore_ascii_case(b"100-continue"))
    {
        let sent = client
            .stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await;
        sent.map_err(|e| Err(ReadError::Io(e)))?;
        p.continued = true;
    }
    let idle = shared.limits.idle_timeout;
    match form::check_plain(&need, rules, &facts, overrides(req), client, length, idle).await {
        Ok(()) => Ok(()),
        Err(form::Stop::Rule(why)) => Err(Ok(refused_line(req, &p.url, &why))),
        Err(form::Stop::Read(e)) => Err(Err(e)),
    }
}

fn parse_absolute(target: &str) -> Result<Url, Reject> {
    if target.starts_with('/') || target == "*" {
        return Err(bad(
            "origin-form request: this is a proxy, send an absolute http:// URL",
        ));
    }
    let (scheme, rest) = target
        .split_once("://")
        .ok_or_else(|| bad("the request target must be an absolute http:// URL"))?;
    if scheme.eq_ignore_ascii_case("https") {
        return Err(bad("https:// URLs must go through CONNECT"));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad(format!(
            "the {scheme}:// scheme is not supported; only http://"
        )));
    }
    if target.contains('#') || target.contains('\\') {
        return Err(bad("'#' and '\\' are not accepted in the request target"));
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err(bad("userinfo in the URL is not accepted"));
    }
    let (h, port) = if authority.ends_with(']') || !authority.contains(':') {
        (authority, 80)
    } else {
        host::split_authority(authority).ok_or_else(|| bad("bad port in the URL"))?
    };
    let host = host::canonicalize(h).map_err(|e| bad(format!("URL host: {e}")))?;
    let path = match path.chars().next() {
        None => "/".to_owned(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_owned(),
    };
    Ok(Url { host, port, path })
}

/// `Upgrade: websocket` is forwarded (the tunnel then goes to the same,
/// checked host); `h2c` and anything else is refused.
fn check_upgrade(req: &Request) -> Result<bool, Reject> {
    let mut websocket = false;
    for v in req.values("upgrade") {
        let v = String::from_utf8_lossy(v).to_ascii_lowercase();
        for proto in v.split(',').map(str::trim) {
            if proto.starts_with("h2c") {
                return Err(Reject {
                    status: 403,
                    reason: "h2c_refused",
                    message: "Upgrade: h2c is refused".into(),
                });
            }
            if proto != "websocket" {
                return Err(bad(format!("Upgrade: {proto} is not supported")));
            }
            websocket = true;
        }
    }
    Ok(websocket)
}

/// The request as it goes upstream: rebuilt request line and `Host`, the
/// client's end-to-end headers byte for byte, our own framing.
fn upstream_head(
    req: &Request,
    path: &str,
    authority: &str,
    body: Body,
    websocket: bool,
) -> Vec<u8> {
    let listed = connection_tokens(&req.headers);
    let mut out = format!("{} {path} HTTP/1.1\r\nHost: {authority}\r\n", req.method).into_bytes();
    for (name, value) in &req.headers {
        if !is_hop_by_hop(name, &listed) && name != "expect" {
            push_header(&mut out, name, value);
        }
    }
    match body {
        Body::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Body::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Body::None => {}
    }
    let end: &[u8] = if websocket {
        b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    };
    out.extend_from_slice(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_absolute("http://API.allowed.com:8080?q=1").unwrap();
        assert_eq!(
            (u.host.to_string(), u.port, u.path.as_str()),
            ("api.allowed.com".into(), 8080, "/?q=1")
        );
        let u = parse_absolute("http://[::1]/x").unwrap();
        assert_eq!((u.host.to_string(), u.port), ("[::1]".into(), 80));
        for bad_url in [
            "/x",
            "*",
            "https://a.com/",
            "ftp://a.com/",
            "gopher://a.com/",
            "file:///etc/passwd",
            "http://a.com@evil.com/",
            "http://evil.com#@a.com/",
            "http://evil.com\\@a.com/",
            "http://a.com%2f@evil.com/",
            "http://evil.com%00.a.com/",
            "http://a.com:0/",
            "http://a.com:/",
            "http://a.com:99999/",
            "http:///x",
        ] {
            assert!(parse_absolute(bad_url).is_err(), "{bad_url}");
        }
    }
}
