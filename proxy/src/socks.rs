//! SOCKS5 (RFC 1928), `CONNECT` only, no authentication.
//!
//! BIND and UDP ASSOCIATE get reply 7 (there is no UDP path out of the
//! jail at all); a refused destination gets reply 2, an allowed but
//! unreachable one reply 4. Targets may be names (`socks5h://`) or IP
//! literals; both take the same decision path as `CONNECT`. Malformed
//! greetings and requests are closed without a reply.
use crate::conn::{BufConn, ReadError};
use crate::route::{self, Ctx, Refusal};
use crate::shared::Shared;
use oajail_policy::host::{self, Host};
use std::net::{Ipv4Addr, Ipv6Addr};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

const REPLY_OK: u8 = 0;
const REPLY_FAILURE: u8 = 1;
const REPLY_NOT_ALLOWED: u8 = 2;
const REPLY_HOST_UNREACHABLE: u8 = 4;
const REPLY_COMMAND_NOT_SUPPORTED: u8 = 7;

/// Make sure `n` bytes are buffered, before `deadline`.
async fn need(client: &mut BufConn, n: usize, deadline: Instant) -> Result<(), ReadError> {
    while client.buf.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if client.fill(left).await? == 0 {
            return Err(ReadError::Closed);
        }
    }
    Ok(())
}

async fn reply(client: &mut BufConn, code: u8) {
    // BND.ADDR 0.0.0.0:0: the proxy's outbound address is none of the
    // client's business.
    let _ = client
        .stream
        .write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0])
        .await;
}

fn log_refusal(shared: &Shared, ctx: &Ctx, reason: &str, message: String) {
    let mut rec = ctx.record("decision", reason);
    rec.decision = Some("deny");
    rec.message = Some(message);
    shared.log.write(rec);
}

/// Serve one SOCKS5 client.
pub(crate) async fn serve(shared: &Shared, ctx: &Ctx, mut client: BufConn) {
    let deadline = Instant::now() + shared.limits.header_timeout;
    let target = match handshake(&mut client, deadline).await {
        Ok(Ok(t)) => t,
        Ok(Err((code, reason, message))) => {
            log_refusal(shared, ctx, reason, message);
            return reply(&mut client, code).await;
        }
        Err(why) => {
            return log_refusal(
                shared,
                ctx,
                "bad_request",
                format!("malformed SOCKS5: {why}"),
            );
        }
    };
    let (host, port) = target;
    match route::open(shared, ctx, "SOCKS5 CONNECT", &host, port).await {
        Ok(mut route) => {
            reply(&mut client, REPLY_OK).await;
            if !route.allowed.explicit_port {
                match plain_http(shared, &mut client, &route.stream, &host, port).await {
                    // The HTTP proxy forwards this request for this entry:
                    // so does the SOCKS port (a raw relay from here on).
                    Ok(true) => route.allowed.explicit_port = true,
                    Ok(false) => {}
                    Err(message) => {
                        return log_refusal(shared, ctx, "plain_http_host_mismatch", message);
                    }
                }
            }
            crate::relay::tunnel(shared, ctx, client, route, "SOCKS5 CONNECT", host, port).await;
        }
        Err(Refusal::Denied { .. }) => reply(&mut client, REPLY_NOT_ALLOWED).await,
        Err(Refusal::Unreachable { .. }) => reply(&mut client, REPLY_HOST_UNREACHABLE).await,
    }
}

/// Plain HTTP through the SOCKS port gets the answer the HTTP proxy gives
/// `GET http://host:port/` for the same entry: allowed, port named or not,
/// when the first request's single `Host` header names the destination
/// (the HTTP proxy rebuilds `Host` from the URL; a raw relay cannot, so a
/// different one is refused, as a mismatched SNI is). `Ok(false)`: not an
/// HTTP request (or the server spoke first): the tunnel's TLS check
/// decides. The head is put back for the relay.
async fn plain_http(
    shared: &Shared,
    client: &mut BufConn,
    upstream: &tokio::net::TcpStream,
    host: &Host,
    port: u16,
) -> Result<bool, String> {
    let limits = &shared.limits;
    if client.buf.is_empty() {
        tokio::select! {
            r = client.fill(limits.peek_timeout) => if !matches!(r, Ok(n) if n > 0) {
                return Ok(false);
            },
            _ = upstream.readable() => return Ok(false),
        }
    }
    if !client.buf[0].is_ascii_uppercase() {
        return Ok(false);
    }
    let head = client
        .read_head(limits.max_head_bytes, limits.header_timeout)
        .await
        .map_err(|e| {
            format!(
                "plain HTTP through SOCKS to {}: {e:?}",
                host.authority(port)
            )
        })?;
    let req = crate::head::parse_request(&head, limits.max_headers)
        .map_err(|r| format!("plain HTTP through SOCKS: {}", r.message))?;
    let hosts: Vec<&[u8]> = req.values("host").collect();
    let named = |h: &[u8]| {
        let h = String::from_utf8_lossy(h);
        h.eq_ignore_ascii_case(&host.authority(port))
            || (port == 80 && h.eq_ignore_ascii_case(&host.to_string()))
    };
    if req.method == "CONNECT" || hosts.len() != 1 || !named(hosts[0]) {
        return Err(format!(
            "plain HTTP through SOCKS to {}: the Host header must name that destination",
            host.authority(port)
        ));
    }
    client.buf.splice(0..0, head);
    Ok(true)
}

type Refused = (u8, &'static str, String);

/// Greeting and request. The outer error means "close without a reply";
/// the inner one is a refusal answered with its reply code.
async fn handshake(
    client: &mut BufConn,
    deadline: Instant,
) -> Result<Result<(Host, u16), Refused>, String> {
    greeting(client, deadline).await?;
    let (cmd, atyp, addr, port) = request(client, deadline).await?;
    if cmd != 1 {
        let what = match cmd {
            2 => "BIND",
            3 => "UDP ASSOCIATE",
            _ => "unknown command",
        };
        let message = format!("SOCKS5 {what} is not supported");
        return Ok(Err((
            REPLY_COMMAND_NOT_SUPPORTED,
            "socks_command_refused",
            message,
        )));
    }
    if port == 0 {
        return Ok(Err((REPLY_FAILURE, "bad_request", "port 0".into())));
    }
    Ok(target(atyp, &addr).map(|host| (host, port)))
}

/// Method negotiation: only "no authentication" is accepted.
async fn greeting(client: &mut BufConn, deadline: Instant) -> Result<(), String> {
    need(client, 2, deadline).await.map_err(|e| e.to_string())?;
    let methods = usize::from(client.buf[1]);
    if methods == 0 {
        return Err("no authentication methods offered".into());
    }
    need(client, 2 + methods, deadline)
        .await
        .map_err(|e| e.to_string())?;
    let offered: Vec<u8> = client.buf.drain(..2 + methods).skip(2).collect();
    if !offered.contains(&0) {
        let _ = client.stream.write_all(&[5, 0xff]).await;
        return Err("the client did not offer no-authentication".into());
    }
    client
        .stream
        .write_all(&[5, 0])
        .await
        .map_err(|e| e.to_string())
}

/// The request: (command, address type, address bytes, port).
async fn request(
    client: &mut BufConn,
    deadline: Instant,
) -> Result<(u8, u8, Vec<u8>, u16), String> {
    need(client, 5, deadline).await.map_err(|e| e.to_string())?;
    let (ver, cmd, rsv, atyp) = (client.buf[0], client.buf[1], client.buf[2], client.buf[3]);
    if ver != 5 || rsv != 0 {
        return Err("bad request header".into());
    }
    let addr_len = match atyp {
        1 => 4,
        4 => 16,
        3 if client.buf[4] == 0 => return Err("empty domain name".into()),
        3 => 1 + usize::from(client.buf[4]),
        _ => return Err(format!("unknown address type {atyp}")),
    };
    need(client, 4 + addr_len + 2, deadline)
        .await
        .map_err(|e| e.to_string())?;
    let req: Vec<u8> = client.buf.drain(..4 + addr_len + 2).collect();
    let port = u16::from_be_bytes([req[4 + addr_len], req[5 + addr_len]]);
    Ok((cmd, atyp, req[4..4 + addr_len].to_vec(), port))
}

/// The destination: IPv4, IPv6, or a name canonicalised like any other.
fn target(atyp: u8, addr: &[u8]) -> Result<Host, Refused> {
    match atyp {
        1 => Ok(Host::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]))),
        4 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(addr);
            Ok(Host::V6(Ipv6Addr::from(b)))
        }
        _ => {
            let name = String::from_utf8_lossy(&addr[1..]);
            host::canonicalize(&name).map_err(|e| {
                (
                    REPLY_FAILURE,
                    "bad_request",
                    format!("SOCKS5 target {name:?}: {e}"),
                )
            })
        }
    }
}
