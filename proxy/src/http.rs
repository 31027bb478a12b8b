//! HTTP/1.1 from the jailed client: the request loop, refusals and
//! `CONNECT` (heads are parsed by [`crate::head`]).
use crate::conn::{BufConn, ReadError};
use crate::head::{Reject, Request, bad, error_response, parse_request, phrase, refusal_response};
use crate::route::{self, Ctx};
use crate::shared::Shared;
use oajail_policy::host::{self, Host};
use tokio::io::AsyncWriteExt;

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
