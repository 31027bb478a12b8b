//! The client side of a terminated tunnel as streams: [`Rewind`] (the
//! bytes already read while peeking at the ClientHello, then the socket,
//! counted both ways; tokio's `chain` reads but cannot write) and
//! [`Guarded`] (the plaintext HTTP/1.1 byte stream, checked by the proxy's
//! own strict parser, `http.rs`, before hyper sees it).
//!
//! hyper resolves some ambiguous shapes on its own (it keeps
//! `Transfer-Encoding` and drops `Content-Length` when both are sent),
//! which is safe for hyper but is exactly the request-smuggling shape a
//! security proxy must refuse rather than repair. So every request head is
//! checked here with the same rules as plain HTTP through the proxy
//! (CRLF only, no obs-fold, no control bytes, no CL+TE, chunked only, one
//! `Content-Length`), and the body is followed by its framing to find the
//! next head. A bad head never reaches hyper: the read fails, hyper drops
//! the connection, nothing goes upstream, and the refusal is logged.
use crate::head::{Body, request_body};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

const MAX_LINE: usize = 4096;

#[derive(Debug)]
enum State {
    Head(Vec<u8>),
    Fixed(u64),
    ChunkLine(Vec<u8>),
    ChunkData(u64),
    ChunkEnd(u8),
    Trailer(Vec<u8>),
}

/// The framing state of one client connection.
#[derive(Debug)]
pub(crate) struct H1Guard {
    state: State,
    max_head: usize,
    max_headers: usize,
}

impl H1Guard {
    pub(crate) fn new(max_head: usize, max_headers: usize) -> Self {
        Self {
            state: State::Head(Vec::new()),
            max_head,
            max_headers,
        }
    }

    /// Follow `data`; `Err` names the first violation.
    pub(crate) fn feed(&mut self, mut data: &[u8]) -> Result<(), String> {
        while !data.is_empty() {
            data = self.step(data)?;
        }
        Ok(())
    }

    fn step<'a>(&mut self, data: &'a [u8]) -> Result<&'a [u8], String> {
        match &mut self.state {
            State::Head(buf) => {
                let (rest, done) = take_until(buf, data, b"\r\n\r\n", self.max_head)
                    .ok_or("request head too large or with a bare LF")?;
                if done {
                    let head = std::mem::take(buf);
                    self.state = self.after_head(&head)?;
                }
                Ok(rest)
            }
            State::Fixed(n) | State::ChunkData(n) => {
                let k = usize::try_from(*n).unwrap_or(usize::MAX).min(data.len());
                *n -= k as u64;
                if *n == 0 {
                    self.state = match self.state {
                        State::Fixed(_) => State::Head(Vec::new()),
                        _ => State::ChunkEnd(0),
                    };
                }
                Ok(&data[k..])
            }
            State::ChunkEnd(_) | State::ChunkLine(_) | State::Trailer(_) => self.step_chunked(data),
        }
    }

    /// The framing of a chunked body: CRLF after data, size lines, trailers.
    fn step_chunked<'a>(&mut self, data: &'a [u8]) -> Result<&'a [u8], String> {
        match &mut self.state {
            State::ChunkEnd(seen) => {
                if data[0] != b"\r\n"[usize::from(*seen)] {
                    return Err("chunk data longer than its size".into());
                }
                *seen += 1;
                if *seen == 2 {
                    self.state = State::ChunkLine(Vec::new());
                }
                Ok(&data[1..])
            }
            State::ChunkLine(buf) => {
                let (rest, done) =
                    take_until(buf, data, b"\r\n", MAX_LINE).ok_or("chunk size line too long")?;
                if done {
                    let line = &buf[..buf.len() - 2];
                    let size = crate::conn::parse_chunk_size(line).ok_or("bad chunk size line")?;
                    self.state = match size {
                        0 => State::Trailer(Vec::new()),
                        n => State::ChunkData(n),
                    };
                }
                Ok(rest)
            }
            State::Trailer(buf) => {
                let (rest, done) =
                    take_until(buf, data, b"\r\n", MAX_LINE).ok_or("chunked trailer too long")?;
                if done {
                    self.state = if buf.len() == 2 {
                        State::Head(Vec::new())
                    } else {
                        State::Trailer(Vec::new())
                    };
                }
                Ok(rest)
            }
            // `step` handles these; never reached.
            State::Head(_) | State::Fixed(_) | State::ChunkData(_) => {
                Err("framing state out of order".into())
            }
        }
    }

    fn after_head(&self, head: &[u8]) -> Result<State, String> {
        if head
            .iter()
            .any(|b| *b == 0 || (*b < 0x20 && !matches!(b, b'\r' | b'\n' | b'\t')))
        {
            return Err("control character in the request head".into());
        }
        let req = crate::head::parse_request(head, self.max_headers).map_err(|r| r.message)?;
        Ok(match request_body(&req).map_err(|r| r.message)? {
            Body::None => State::Head(Vec::new()),
            Body::Length(0) => State::Head(Vec::new()),
            Body::Length(n) => State::Fixed(n),
            Body::Chunked => State::ChunkLine(Vec::new()),
        })
    }
}

/// Append bytes of `data` to `buf` until `buf` ends with `end`; returns the
/// unconsumed rest and whether `end` was reached. `None` above `max`.
fn take_until<'a>(
    buf: &mut Vec<u8>,
    data: &'a [u8],
    end: &[u8],
    max: usize,
) -> Option<(&'a [u8], bool)> {
    for (i, b) in data.iter().enumerate() {
        buf.push(*b);
        // A bare LF ends the wait with an unparsable line, refused below.
        if buf.len() > max || (*b == b'\n' && !buf.ends_with(b"\r\n")) {
            return None;
        }
        if buf.ends_with(end) {
            return Some((&data[i + 1..], true));
        }
    }
    Some((&[], false))
}

/// A stream whose reads pass through an [`H1Guard`]; the first violation
/// is handed to `on_refuse` once and every later read fails.
pub(crate) struct Guarded<S, F: FnMut(String)> {
    pub inner: S,
    guard: H1Guard,
    failed: bool,
    on_refuse: F,
}

impl<S, F: FnMut(String)> Guarded<S, F> {
    pub(crate) fn new(inner: S, guard: H1Guard, on_refuse: F) -> Self {
        Self {
            inner,
            guard,
            failed: false,
            on_refuse,
        }
    }
}

impl<S: AsyncRead + Unpin, F: FnMut(String) + Unpin> AsyncRead for Guarded<S, F> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(Err(io::ErrorKind::InvalidData.into()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &r
            && let Err(why) = this.guard.feed(&buf.filled()[before..])
        {
            // The offending bytes are taken back: hyper never sees them.
            buf.set_filled(before);
            this.failed = true;
            (this.on_refuse)(why);
            return Poll::Ready(Err(io::ErrorKind::InvalidData.into()));
        }
        r
    }
}

impl<S: AsyncWrite + Unpin, F: FnMut(String) + Unpin> AsyncWrite for Guarded<S, F> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Bytes moved each way (as seen on the wire, so TLS records included).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub up: AtomicU64,
    pub down: AtomicU64,
}

pub(crate) struct Rewind {
    prefix: Vec<u8>,
    at: usize,
    stream: TcpStream,
    counters: Arc<Counters>,
}

impl Rewind {
    pub(crate) fn new(prefix: Vec<u8>, stream: TcpStream, counters: Arc<Counters>) -> Self {
        Self {
            prefix,
            at: 0,
            stream,
            counters,
        }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.at);
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            this.counters.up.fetch_add(n as u64, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.stream).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        this.counters.up.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.stream).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &r {
            this.counters.down.fetch_add(*n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8], split: usize) -> Result<(), String> {
        let mut g = H1Guard::new(16 * 1024, 100);
        for chunk in input.chunks(split) {
            g.feed(chunk)?;
        }
        Ok(())
    }

    #[test]
    fn pipelined_requests_with_bodies_pass_any_split() {
        let ok = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\nT: 1\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n";
        for split in [1, 2, 7, 1000] {
            run(ok, split).unwrap();
        }
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        for bad in [
            &b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
            b"GET /a HTTP/1.1\r\nHost: h\r\nX: 1\r\n folded\r\n\r\n",
            b"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyzz\r\n",
            b"GET /a HTTP/1.1\nHost: h\n\n",
        ] {
            assert!(run(bad, 3).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
