//! The client side of a terminated tunnel as one async stream: first the
//! bytes already read while peeking at the ClientHello, then the socket;
//! bytes are counted both ways for the tunnel's close line. (tokio's
//! `chain` reads but cannot write, hence this small wrapper.)
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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
