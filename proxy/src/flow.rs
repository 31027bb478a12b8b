//! Moving tunnel bytes both ways: `splice(2)` through a pipe (default) or a
//! copy loop, half-close passed on, and an idle watchdog.
//!
//! Both directions run in one task on shared `&TcpStream`s (tokio's
//! readiness API takes `&self`), so a tunnel is one task. Memory is spent
//! only while data flows: the pipe is made on the first byte, a copy buffer
//! is freed after a second of silence.
use crate::conn::BufConn;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, splice};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Keep a copy buffer this long after the last read.
const BUFFER_LINGER: Duration = Duration::from_secs(1);
/// Pipe size for `splice(2)`: large pipes move more per system call.
const PIPE_SIZE: usize = 1 << 20;

/// Byte counters of a tunnel and the time of its last activity.
pub(crate) struct Meter<'a> {
    pub up: &'a AtomicU64,
    pub down: &'a AtomicU64,
    last_ms: AtomicU64,
    started: Instant,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(up: &'a AtomicU64, down: &'a AtomicU64) -> Self {
        Self {
            up,
            down,
            last_ms: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    fn moved(&self, counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Resolves when nothing has moved for `idle`.
    async fn idle(&self, idle: Duration) {
        loop {
            let due =
                self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due.into()).await;
        }
    }
}

/// How one direction moves bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// `splice(2)` through a pipe (copy if no pipe can be made).
    Splice,
    /// A copy loop with a buffer of this size.
    Copy(usize),
}

/// Relay until both directions are done; `TimedOut` after `idle` without
/// traffic. Read-ahead bytes in either buffer go first.
pub(crate) async fn both_ways(
    client: &mut BufConn,
    upstream: &mut BufConn,
    mode: Mode,
    idle: Duration,
    meter: &Meter<'_>,
) -> io::Result<()> {
    flush_read_ahead(client, upstream, meter, meter.up).await?;
    flush_read_ahead(upstream, client, meter, meter.down).await?;
    let (c, u) = (&client.stream, &upstream.stream);
    let both = async {
        tokio::try_join!(
            one_way(c, u, mode, meter, meter.up),
            one_way(u, c, mode, meter, meter.down)
        )
    };
    tokio::select! {
        r = both => r.map(|_| ()),
        () = meter.idle(idle) => Err(io::ErrorKind::TimedOut.into()),
    }
}

async fn flush_read_ahead(
    from: &mut BufConn,
    to: &mut BufConn,
    meter: &Meter<'_>,
    counter: &AtomicU64,
) -> io::Result<()> {
    if !from.buf.is_empty() {
        to.stream.write_all(&from.buf).await?;
        meter.moved(counter, from.buf.len());
        from.buf.clear();
    }
    Ok(())
}

async fn one_way(
    src: &TcpStream,
    dst: &TcpStream,
    mode: Mode,
    meter: &Meter<'_>,
    counter: &AtomicU64,
) -> io::Result<()> {
    match mode {
        Mode::Copy(size) => copy(src, dst, size, meter, counter).await,
        Mode::Splice => {
            src.readable().await?;
            match nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) {
                Ok(pipe) => splice_through(src, dst, pipe, meter, counter).await,
                Err(_) => copy(src, dst, 64 * 1024, meter, counter).await,
            }
        }
    }
}

/// Cap the kernel send buffer of `stream` (best effort: a failure leaves
/// autotuning on, which is slower but correct).
pub(crate) fn limit_send_buffer(stream: &TcpStream, bytes: usize) {
    let _ = nix::sys::socket::setsockopt(stream, nix::sys::socket::sockopt::SndBuf, &bytes);
}

/// Pass the end of stream on: the peer sees FIN and may still answer.
fn half_close(dst: &TcpStream) {
    let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

/// Reading into the pipe and writing out of it overlap: whichever side is
/// ready moves, so the sender keeps sending while the receiver drains.
async fn splice_through(
    src: &TcpStream,
    dst: &TcpStream,
    (pipe_r, pipe_w): (OwnedFd, OwnedFd),
    meter: &Meter<'_>,
    counter: &AtomicU64,
) -> io::Result<()> {
    // Best effort: an unprivileged process may be capped below 1 MiB.
    let pipe_size = nix::fcntl::fcntl(&pipe_w, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE as i32))
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(65536);
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    let (mut in_pipe, mut eof) = (0usize, false);
    while !eof || in_pipe > 0 {
        tokio::select! {
            r = src.readable(), if !eof && in_pipe < pipe_size => {
                r?;
                let room = pipe_size - in_pipe;
                match src.try_io(Interest::READABLE, || Ok(splice(src, None, &pipe_w, None, room, flags)?)) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        in_pipe += n;
                        meter.moved(counter, n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            w = dst.writable(), if in_pipe > 0 => {
                w?;
                match dst.try_io(Interest::WRITABLE, || Ok(splice(&pipe_r, None, dst, None, in_pipe, flags)?)) {
                    Ok(k) => in_pipe -= k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    half_close(dst);
    Ok(())
}

/// Read what is there, write it all, repeat. The buffer is allocated when
/// data arrives and freed after [`BUFFER_LINGER`] of silence.
async fn copy(
    src: &TcpStream,
    dst: &TcpStream,
    size: usize,
    meter: &Meter<'_>,
    counter: &AtomicU64,
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
                half_close(dst);
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        write_all(dst, &buf[..n]).await?;
        meter.moved(counter, n);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use nix::sys::socket::{getsockopt, sockopt::SndBuf};

    #[tokio::test]
    async fn send_buffer_is_capped_not_autotuned() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        limit_send_buffer(&stream, 128 * 1024);
        // Linux doubles the value for its bookkeeping and turns off send
        // buffer autotuning for this socket.
        assert_eq!(getsockopt(&stream, SndBuf).unwrap(), 256 * 1024);
    }
}
