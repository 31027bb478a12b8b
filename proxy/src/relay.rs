//! Tunnels: the ClientHello check, then bytes both ways until both sides
//! are done, with an idle timeout and one close record per tunnel.
//!
//! Buffers are allocated only while data flows and freed after a second of
//! silence, so an idle tunnel costs two sockets and a task, not 2 × 64 KiB.
use crate::conn::BufConn;
use crate::log::Record;
use crate::route::{Ctx, Route};
use crate::server::Shared;
use crate::tls::{self, ALERT_ACCESS_DENIED, Peek};
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, splice};
use oajail_policy::host::Host;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Keep the relay buffer this long after the last read.
const BUFFER_LINGER: Duration = Duration::from_secs(1);

/// Writes the tunnel's close record exactly once: at the end, or when the
/// task is dropped (proxy shutdown).
struct CloseGuard<'a> {
    shared: &'a Shared,
    rec: Option<Record>,
    started: Instant,
    up: AtomicU64,
    down: AtomicU64,
}

impl CloseGuard<'_> {
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
    match peeked {
        Ok(Peek::Tls { sni }) => rec.sni = sni,
        Ok(Peek::Raw) => rec.reason = "allowed_raw".into(),
        Err(d) => {
            rec.decision = Some("deny");
            rec.reason = d.reason.into();
            rec.message = Some(d.message);
            rec.sni = d.sni;
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
                let answer = crate::http::error_response(
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
    let mut guard = CloseGuard {
        shared,
        rec: Some(close),
        started: Instant::now(),
        up: AtomicU64::new(0),
        down: AtomicU64::new(0),
    };
    let reason = match relay_both(shared, client, upstream, &guard).await {
        Ok(()) => "closed",
        Err(e) if e.kind() == io::ErrorKind::TimedOut => "idle",
        Err(_) => "error",
    };
    guard.finish(reason);
}

async fn relay_both(
    shared: &Shared,
    client: &mut BufConn,
    upstream: &mut BufConn,
    guard: &CloseGuard<'_>,
) -> io::Result<()> {
    // Bytes read ahead (the ClientHello, or data after a response head).
    if !client.buf.is_empty() {
        upstream.stream.write_all(&client.buf).await?;
        guard
            .up
            .fetch_add(client.buf.len() as u64, Ordering::Relaxed);
        client.buf.clear();
    }
    if !upstream.buf.is_empty() {
        client.stream.write_all(&upstream.buf).await?;
        guard
            .down
            .fetch_add(upstream.buf.len() as u64, Ordering::Relaxed);
        upstream.buf.clear();
    }
    let last = AtomicU64::new(0);
    let started = Instant::now();
    let size = shared.limits.relay_buffer;
    let (c, u) = (&client.stream, &upstream.stream);
    let (up, down) = (&guard.up, &guard.down);
    let both = async {
        if shared.limits.splice {
            tokio::try_join!(
                splice_or_copy(c, u, size, up, &last, started),
                splice_or_copy(u, c, size, down, &last, started)
            )
        } else {
            tokio::try_join!(
                pump(c, u, size, up, &last, started),
                pump(u, c, size, down, &last, started)
            )
        }
    };
    tokio::select! {
        r = both => r.map(|_| ()),
        () = watchdog(shared.limits.idle_timeout, &last, started) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// Resolves when nothing has moved for `idle`.
async fn watchdog(idle: Duration, last: &AtomicU64, started: Instant) {
    loop {
        let last_ms = Duration::from_millis(last.load(Ordering::Relaxed));
        let due = started + last_ms + idle;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due.into()).await;
    }
}

/// Pipe size for `splice(2)`: large pipes move more per system call.
const PIPE_SIZE: usize = 1 << 20;

/// One direction, moved inside the kernel with `splice(2)` through a pipe
/// (no copy to user space; about 1.5× the throughput of a 64 KiB copy loop
/// on loopback, see docs/benchmarks.md). The pipe is made when the first
/// byte is ready; if it cannot be made (fd limit), fall back to copying.
async fn splice_or_copy(
    src: &TcpStream,
    dst: &TcpStream,
    size: usize,
    count: &AtomicU64,
    last: &AtomicU64,
    started: Instant,
) -> io::Result<()> {
    src.readable().await?;
    let Ok((pipe_r, pipe_w)) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) else {
        return pump(src, dst, size, count, last, started).await;
    };
    // Best effort: an unprivileged process may be capped below 1 MiB.
    let pipe_size = match nix::fcntl::fcntl(&pipe_w, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE as i32)) {
        Ok(n) => usize::try_from(n).unwrap_or(65536),
        Err(_) => 65536,
    };
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    // Reading into the pipe and writing out of it overlap: whichever side
    // is ready moves, so the upstream keeps sending while the client drains.
    let (mut in_pipe, mut eof) = (0usize, false);
    loop {
        if eof && in_pipe == 0 {
            let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
            return Ok(());
        }
        tokio::select! {
            r = src.readable(), if !eof && in_pipe < pipe_size => {
                r?;
                let room = pipe_size - in_pipe;
                match src.try_io(Interest::READABLE, || splice(src, None, &pipe_w, None, room, flags).map_err(io::Error::from)) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        in_pipe += n;
                        count.fetch_add(n as u64, Ordering::Relaxed);
                        last.store(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            w = dst.writable(), if in_pipe > 0 => {
                w?;
                match dst.try_io(Interest::WRITABLE, || splice(&pipe_r, None, dst, None, in_pipe, flags).map_err(io::Error::from)) {
                    Ok(k) => in_pipe -= k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            else => return Ok(()),
        }
    }
}

/// One direction: read what is there, write it all, repeat; at end of
/// stream pass the FIN on (half-close) and finish.
async fn pump(
    src: &TcpStream,
    dst: &TcpStream,
    size: usize,
    count: &AtomicU64,
    last: &AtomicU64,
    started: Instant,
) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if buf.is_empty() {
            src.readable().await?;
            buf = vec![0; size];
        } else if tokio::time::timeout(BUFFER_LINGER, src.readable())
            .await
            .is_err()
        {
            buf = Vec::new();
            continue;
        }
        let n = match src.try_read(&mut buf) {
            Ok(0) => {
                let _ =
                    nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        write_all(dst, &buf[..n]).await?;
        count.fetch_add(n as u64, Ordering::Relaxed);
        last.store(
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
}

async fn write_all(dst: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        dst.writable().await?;
        match dst.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
