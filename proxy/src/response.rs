//! Relaying an upstream response back to the jailed client.
//!
//! The response head is parsed and rebuilt (hop-by-hop headers dropped, our
//! own framing and `Connection` added); the body is relayed with the
//! framing the upstream declared. A malformed head from upstream becomes a
//! `502`; a failure halfway through a body closes the client connection.
use crate::conn::BufConn;
use crate::head::{connection_tokens, error_response, is_hop_by_hop, parse_length, push_header};
use crate::route::Ctx;
use crate::shared::Shared;
use tokio::io::AsyncWriteExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    ToClose,
}

struct Head {
    status: u16,
    reason: String,
    headers: Vec<(String, Vec<u8>)>,
}

fn parse_response(head: &[u8], max_headers: usize) -> Option<Head> {
    let mut slots = vec![httparse::EMPTY_HEADER; max_headers];
    let mut resp = httparse::Response::new(&mut slots);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    Some(Head {
        status: resp.code?,
        reason: resp.reason.unwrap_or("").to_owned(),
        headers: resp
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
    })
}

fn framing(head: &Head, method: &str) -> Option<Framing> {
    if method == "HEAD" || head.status == 204 || head.status == 304 || head.status < 200 {
        return Some(Framing::None);
    }
    let te: Vec<String> = head
        .headers
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .map(|(_, v)| String::from_utf8_lossy(v).to_ascii_lowercase())
        .collect();
    if !te.is_empty() {
        let last = te.join(",").rsplit(',').next().map(|t| t.trim().to_owned());
        return Some(
            if last.as_deref() == Some("chunked") && te.len() == 1 && te[0].trim() == "chunked" {
                Framing::Chunked
            } else {
                Framing::ToClose
            },
        );
    }
    let cl: Vec<&[u8]> = head
        .headers
        .iter()
        .filter(|(n, _)| n == "content-length")
        .map(|(_, v)| v.as_slice())
        .collect();
    match cl.as_slice() {
        [] => Some(Framing::ToClose),
        [v] => parse_length(v).map(Framing::Length),
        _ => None,
    }
}

fn client_head(head: &Head, framing: Framing, keep: bool) -> Vec<u8> {
    let listed = connection_tokens(&head.headers);
    let mut out = format!("HTTP/1.1 {} {}\r\n", head.status, head.reason).into_bytes();
    for (name, value) in &head.headers {
        let upgrade_kept = head.status == 101 && name == "upgrade";
        if upgrade_kept || !is_hop_by_hop(name, &listed) {
            push_header(&mut out, name, value);
        }
    }
    match framing {
        Framing::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Framing::None | Framing::ToClose => {}
    }
    let conn: &[u8] = match (head.status, keep) {
        (101, _) => b"Connection: Upgrade\r\n\r\n",
        (s, _) if s < 200 => b"\r\n",
        (_, true) => b"Connection: keep-alive\r\n\r\n",
        (_, false) => b"Connection: close\r\n\r\n",
    };
    out.extend_from_slice(conn);
    out
}

/// Read response heads, passing interim 1xx answers (100 Continue) on,
/// until the final one (or a 101). `None` when the exchange is over (a 502
/// was sent, or the client went away).
async fn final_head(shared: &Shared, client: &mut BufConn, upstream: &mut BufConn) -> Option<Head> {
    let limits = &shared.limits;
    loop {
        let raw = upstream
            .read_head(limits.max_head_bytes * 4, limits.idle_timeout)
            .await;
        let Some(head) = raw
            .ok()
            .and_then(|r| parse_response(&r, limits.max_headers * 2))
        else {
            bad_gateway(client, "the upstream sent no valid response head").await;
            return None;
        };
        if head.status >= 200 || head.status == 101 {
            return Some(head);
        }
        client
            .stream
            .write_all(&client_head(&head, Framing::None, true))
            .await
            .ok()?;
    }
}

async fn bad_gateway(client: &mut BufConn, message: &str) -> bool {
    let _ = client
        .stream
        .write_all(&error_response(502, "Bad Gateway", message, None))
        .await;
    false
}

/// How the request that is being answered shapes the answer.
pub(crate) struct Asked<'a> {
    pub method: &'a str,
    /// The client may send another request afterwards.
    pub keep_alive: bool,
    /// The request asked for `Upgrade: websocket`.
    pub websocket: bool,
}

/// Relay the response(s) to one request. `true`: the client connection may
/// carry another request.
pub(crate) async fn relay(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    mut upstream: BufConn,
    asked: Asked<'_>,
) -> bool {
    let limits = &shared.limits;
    let Some(head) = final_head(shared, client, &mut upstream).await else {
        return false;
    };
    if head.status == 101 {
        if !asked.websocket {
            return bad_gateway(client, "unexpected 101 from upstream").await;
        }
        if client
            .stream
            .write_all(&client_head(&head, Framing::None, false))
            .await
            .is_ok()
        {
            crate::relay::websocket(shared, ctx, client, upstream).await;
        }
        return false;
    }
    let Some(framing) = framing(&head, asked.method) else {
        return bad_gateway(client, "ambiguous response framing from upstream").await;
    };
    let keep = asked.keep_alive && framing != Framing::ToClose;
    if client
        .stream
        .write_all(&client_head(&head, framing, keep))
        .await
        .is_err()
    {
        return false;
    }
    let idle = limits.idle_timeout;
    let done = match framing {
        Framing::None => Ok(()),
        Framing::Length(n) => upstream.relay_exact(n, &mut client.stream, idle).await,
        Framing::Chunked => upstream.relay_chunked(&mut client.stream, idle).await,
        Framing::ToClose => upstream.relay_to_eof(&mut client.stream, idle).await,
    };
    keep && done.is_ok()
}
