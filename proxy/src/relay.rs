//! Tunnels: the ClientHello check, then bytes both ways until both sides
//! are done, with an idle timeout and one close record per tunnel.
//!
//! Buffers are allocated only while data flows and freed after a second of
//! silence, so an idle tunnel costs two sockets and a task, not 2 × 64 KiB.
use crate::conn::BufConn;
use crate::flow::{self, Meter, Mode};
use crate::log::Record;
use crate::route::{Ctx, Route};
use crate::shared::Shared;
use crate::tls::{self, ALERT_ACCESS_DENIED, Peek};
use oajail_policy::host::Host;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Writes the tunnel's close record exactly once: at the end, or when the
/// task is dropped (proxy shutdown).
struct CloseGuard<'a> {
    shared: &'a Shared,
    rec: Option<Record>,
    started: Instant,
    up: AtomicU64,
    down: AtomicU64,
}

impl<'a> CloseGuard<'a> {
    fn new(shared: &'a Shared, close: Record) -> Self {
        Self {
            shared,
            rec: Some(close),
            started: Instant::now(),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
        }
    }

    fn finish(&mut self, reason: &str) {
        if let Some(mut rec) = self.rec.take() {
            rec.reason = reason.to_owned();
            rec.bytes_up = Some(self.up.load(Ordering::Relaxed));
            rec.bytes_down = Some(self.down.load(Ordering::Relaxed));
            rec.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.shared.log.write(rec);
        }
    }
}

impl Drop for CloseGuard<'_> {
    fn drop(&mut self) {
        self.finish("shutdown");
    }
}

/// After the success answer: judge the first bytes, log the decision, relay.
pub(crate) async fn tunnel(
    shared: &Shared,
    ctx: &Ctx,
    mut client: BufConn,
    route: Route,
    method: &str,
    host: Host,
    port: u16,
) {
    let peeked = tls::peek(
        shared,
        &mut client,
        &route.stream,
        &host,
        port,
        route.allowed.explicit_port,
    )
    .await;
    let mut rec = route.record(ctx, method, &host, port);
    let peeked = peeked.and_then(|p| governed_raw(shared, &host, port, p));
    match peeked {
        Ok(Peek::Tls { sni }) if shared.plan.terminates(&host, port) => {
            rec.sni = sni.clone();
            rec.reason = "terminated".into();
            let close = close_record(&rec);
            shared.log.write(rec);
            return terminated(shared, ctx, client, route, (host, port, sni), close).await;
        }
        Ok(Peek::Tls { sni }) => rec.sni = sni,
        Ok(Peek::Raw) => rec.reason = "allowed_raw".into(),
        Err(d) => {
            rec.decision = Some("deny");
            rec.reason = d.reason.into();
            // The SNI is the client's: a sentinel in it is never logged.
            rec.message = Some(shared.creds.redact(&d.message));
            rec.sni = d.sni.map(|s| shared.creds.redact(&s));
            shared.log.write(rec);
            if d.tls {
                let _ = client.stream.write_all(&ALERT_ACCESS_DENIED).await;
            }
            return;
        }
    }
    let close = close_record(&rec);
    shared.log.write(rec);
    let mut upstream = BufConn::new(route.stream);
    run(shared, close, &mut client, &mut upstream).await;
}

/// A host governed by `oajail.httpRules` has every request checked, which
/// needs TLS to terminate: a non-TLS tunnel to it is refused even when the
/// allow entry names the port.
fn governed_raw(shared: &Shared, host: &Host, port: u16, p: Peek) -> Result<Peek, tls::PeekDeny> {
    if p == Peek::Raw && shared.plan.http_rules.governs(host) {
        return Err(tls::PeekDeny {
            reason: "not_tls",
            message: format!(
                "the tunnel to {} is not TLS, and oajail.httpRules govern {host}: only TLS, whose requests can be checked, is allowed",
                host.authority(port)
            ),
            sni: None,
            tls: false,
        });
    }
    Ok(p)
}

/// Hand the tunnel to `terminate.rs`; one close line when it ends (also
/// when the proxy shuts down mid-tunnel). A failure before serving is one
/// refused decision line.
async fn terminated(
    shared: &Shared,
    ctx: &Ctx,
    client: BufConn,
    route: Route,
    (host, port, sni): (Host, u16, Option<String>),
    close: Record,
) {
    let mut guard = CloseGuard::new(shared, close);
    let Some(arc) = shared.arc() else {
        return guard.finish("shutdown");
    };
    let counters = std::sync::Arc::new(crate::sniff::Counters::default());
    let tunnel = crate::terminate::Tunnel {
        host,
        port,
        sni,
        counters: counters.clone(),
    };
    let reason = match crate::terminate::run(&arc, ctx, client, route, tunnel).await {
        Ok(reason) => reason,
        Err(f) => {
            let mut rec = ctx.record("decision", f.reason);
            rec.decision = Some("deny");
            rec.message = Some(f.message);
            shared.log.write(rec);
            "error"
        }
    };
    guard
        .up
        .store(counters.up.load(Ordering::Relaxed), Ordering::Relaxed);
    guard
        .down
        .store(counters.down.load(Ordering::Relaxed), Ordering::Relaxed);
    guard.finish(reason);
}

/// After a `101 Switching Protocols` to a websocket upgrade.
pub(crate) async fn websocket(
    shared: &Shared,
    ctx: &Ctx,
    client: &mut BufConn,
    mut upstream: BufConn,
) {
    let close = ctx.record("close", "");
    run(shared, close, client, &mut upstream).await;
}

/// srt `httpProxyPort` / `socksProxyPort`: hand the whole connection, as
/// received, to the user's own proxy on the host's loopback; that proxy
/// does all filtering (srt semantics). Logged as one decision and one close.
pub(crate) async fn to_user_proxy(shared: &Shared, ctx: &Ctx, mut client: BufConn, port: u16) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut rec = ctx.record("decision", "user_proxy");
    rec.resolved = Some(addr.to_string());
    let dialed =
        tokio::time::timeout(shared.limits.connect_timeout, TcpStream::connect(addr)).await;
    let stream = match dialed {
        Ok(Ok(s)) => s,
        Ok(Err(_)) | Err(_) => {
            rec.decision = Some("error");
            rec.reason = "user_proxy_unreachable".into();
            rec.message = Some(format!(
                "the user's proxy at {addr} (httpProxyPort/socksProxyPort) is unreachable"
            ));
            shared.log.write(rec);
            if ctx.proto == "http" {
                let answer = crate::head::error_response(
                    502,
                    "Bad Gateway",
                    "the configured proxy is unreachable",
                    None,
                );
                let _ = client.stream.write_all(&answer).await;
            }
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    rec.decision = Some("allow");
    rec.message = Some(format!("forwarded to the user's proxy at {addr}"));
    let close = close_record(&rec);
    shared.log.write(rec);
    run(shared, close, &mut client, &mut BufConn::new(stream)).await;
}

/// The close line of a tunnel: the decision's identity fields, no verdict.
fn close_record(r: &Record) -> Record {
    Record {
        event: "close",
        conn: r.conn,
        client: r.client.clone(),
        proto: r.proto,
        method: r.method.clone(),
        host: r.host.clone(),
        port: r.port,
        resolved: r.resolved.clone(),
        entry: r.entry.clone(),
        sni: r.sni.clone(),
        ..Record::default()
    }
}

async fn run(shared: &Shared, close: Record, client: &mut BufConn, upstream: &mut BufConn) {
    let mut guard = CloseGuard::new(shared, close);
    let mode = if shared.limits.splice {
        Mode::Splice
    } else {
        Mode::Copy(shared.limits.relay_buffer)
    };
    if let Some(bytes) = shared.limits.client_send_buffer {
        flow::limit_send_buffer(&client.stream, bytes);
    }
    let meter = Meter::new(&guard.up, &guard.down);
    let reason =
        match flow::both_ways(client, upstream, mode, shared.limits.idle_timeout, &meter).await {
            Ok(()) => "closed",
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => "idle",
            Err(_) => "error",
        };
    guard.finish(reason);
}
