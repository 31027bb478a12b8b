//! A TCP stream with a read-ahead buffer, and the HTTP/1.1 framing relays
//! built on it (head, `Content-Length` body, chunked body, read-to-close).
//!
//! Every read has a deadline, and every buffer has a cap, so a client or an
//! upstream that sends slowly or endlessly costs a bounded amount of memory
//! and time.
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Why reading a head (or a chunk line) failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The deadline passed (slowloris, or a silent peer).
    Timeout,
    /// The peer closed before a complete head.
    Closed,
    /// Over the size limit.
    TooLarge,
    /// Bytes that cannot be HTTP.
    Bad(&'static str),
    /// A masked credential's sentinel in a scanned body (its name).
    Masked(String),
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Timeout => f.write_str("timed out"),
            ReadError::Closed => f.write_str("connection closed"),
            ReadError::TooLarge => f.write_str("too large"),
            ReadError::Bad(why) => f.write_str(why),
            ReadError::Masked(name) => write!(f, "the masked credential {name} in the body"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

const READ_CHUNK: usize = 16 * 1024;
const MAX_CHUNK_LINE: usize = 4096;

/// A stream plus the bytes read from it but not consumed yet.
#[derive(Debug)]
pub(crate) struct BufConn {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
    /// Set while a request body is relayed and the run masks credentials:
    /// every relayed byte is scanned before it is written.
    pub scan: Option<crate::masked::BodyScan>,
}

impl BufConn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::new(),
            scan: None,
        }
    }

    /// Read more bytes; `Ok(0)` at end of stream.
    pub(crate) async fn fill(&mut self, limit: Duration) -> Result<usize, ReadError> {
        self.buf.reserve(READ_CHUNK);
        match timeout(limit, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => Err(ReadError::Timeout),
            Ok(r) => Ok(r?),
        }
    }

    /// Read one head (through the empty line), at most `max` bytes, all of
    /// it within `limit`. Control bytes other than CR, LF and HT fail at
    /// once, so binary garbage is answered without waiting for the timeout.
    pub(crate) async fn read_head(
        &mut self,
        max: usize,
        limit: Duration,
    ) -> Result<Vec<u8>, ReadError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Bytes after the head (early tunnel data) are not checked here.
            let end = head_end(&self.buf);
            let head = &self.buf[..end.unwrap_or(self.buf.len())];
            if head.iter().any(|b| is_forbidden(*b)) {
                return Err(ReadError::Bad("control character in the request head"));
            }
            if let Some(end) = end {
                if end > max {
                    return Err(ReadError::TooLarge);
                }
                return Ok(self.buf.drain(..end).collect());
            }
            if self.buf.len() > max {
                return Err(ReadError::TooLarge);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if self.fill(left).await? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    async fn read_line(&mut self, limit: Duration) -> Result<Vec<u8>, ReadError> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf.drain(..pos + 2).take(pos).collect();
                return Ok(line);
            }
            if self.buf.len() > MAX_CHUNK_LINE {
                return Err(ReadError::TooLarge);
            }
            if self.fill(limit).await? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    /// Copy exactly `n` body bytes to `dst`.
    pub(crate) async fn relay_exact(
        &mut self,
        mut n: u64,
        dst: &mut TcpStream,
        idle: Duration,
    ) -> Result<(), ReadError> {
        while n > 0 {
            if self.buf.is_empty() && self.fill(idle).await? == 0 {
                return Err(ReadError::Closed);
            }
            let take = usize::try_from(n).unwrap_or(usize::MAX).min(self.buf.len());
            if let Some(name) = self.scan.as_mut().and_then(|s| s.feed(&self.buf[..take])) {
                return Err(ReadError::Masked(name));
            }
            dst.write_all(&self.buf[..take]).await?;
            self.buf.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Copy everything until the peer closes.
    pub(crate) async fn relay_to_eof(
        &mut self,
        dst: &mut TcpStream,
        idle: Duration,
    ) -> Result<(), ReadError> {
        loop {
            if !self.buf.is_empty() {
                dst.write_all(&self.buf).await?;
                self.buf.clear();
            }
            if self.fill(idle).await? == 0 {
                return Ok(());
            }
        }
    }

    /// Copy a chunked body, re-framing each chunk after checking its size
    /// line; trailers are checked and dropped.
    pub(crate) async fn relay_chunked(
        &mut self,
        dst: &mut TcpStream,
        idle: Duration,
    ) -> Result<(), ReadError> {
        loop {
            let line = self.read_line(idle).await?;
            let size = parse_chunk_size(&line).ok_or(ReadError::Bad("bad chunk size line"))?;
            if size == 0 {
                break;
            }
            dst.write_all(format!("{size:x}\r\n").as_bytes()).await?;
            self.relay_exact(size, dst, idle).await?;
            if !self.read_line(idle).await?.is_empty() {
                return Err(ReadError::Bad("chunk data longer than its size"));
            }
            dst.write_all(b"\r\n").await?;
        }
        // Trailer section: header lines up to an empty line.
        let mut total = 0;
        loop {
            let line = self.read_line(idle).await?;
            if line.is_empty() {
                break;
            }
            total += line.len();
            if total > MAX_CHUNK_LINE || line.iter().any(|b| is_forbidden(*b)) {
                return Err(ReadError::Bad("bad chunked trailer"));
            }
        }
        dst.write_all(b"0\r\n\r\n").await?;
        Ok(())
    }
}

/// Reading ahead without consuming: a body is looked at (a form's
/// `_method`, `form.rs`) before it is relayed, and the relay then sends
/// the same bytes from the buffer.
impl BufConn {
    /// The first `n` body bytes, buffered and left in the buffer.
    pub(crate) async fn peek_exact(
        &mut self,
        n: usize,
        idle: Duration,
    ) -> Result<Vec<u8>, ReadError> {
        while self.buf.len() < n {
            if self.fill(idle).await? == 0 {
                return Err(ReadError::Closed);
            }
        }
        Ok(self.buf[..n].to_vec())
    }

    /// The content of the chunked body at the start of the buffer, left
    /// in the buffer; `None` when it is over `max` bytes (or its framing
    /// alone takes more than four times that).
    pub(crate) async fn peek_chunked(
        &mut self,
        max: usize,
        idle: Duration,
    ) -> Result<Option<Vec<u8>>, ReadError> {
        loop {
            match decode_chunked(&self.buf, max)? {
                Some(Chunked::Done(body)) => return Ok(Some(body)),
                Some(Chunked::TooLarge) => return Ok(None),
                None if self.buf.len() > 4 * max + MAX_CHUNK_LINE => return Ok(None),
                None => {
                    if self.fill(idle).await? == 0 {
                        return Err(ReadError::Closed);
                    }
                }
            }
        }
    }
}

/// A chunked body decoded from a buffer.
#[derive(Debug, PartialEq, Eq)]
enum Chunked {
    Done(Vec<u8>),
    TooLarge,
}

/// Decode the chunked body at the start of `buf` with the relay's rules
/// (size lines, CRLF after each chunk, trailers); `Ok(None)`: incomplete.
fn decode_chunked(buf: &[u8], max: usize) -> Result<Option<Chunked>, ReadError> {
    let line = |at: usize| -> Result<Option<(&[u8], usize)>, ReadError> {
        let rest = &buf[at.min(buf.len())..];
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(pos) if pos <= MAX_CHUNK_LINE => Ok(Some((&rest[..pos], at + pos + 2))),
            Some(_) => Err(ReadError::TooLarge),
            None if rest.len() > MAX_CHUNK_LINE => Err(ReadError::TooLarge),
            None => Ok(None),
        }
    };
    let (mut at, mut body) = (0, Vec::new());
    loop {
        let Some((size_line, next)) = line(at)? else {
            return Ok(None);
        };
        let size = parse_chunk_size(size_line).ok_or(ReadError::Bad("bad chunk size line"))?;
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size == 0 {
            at = next;
            break;
        }
        if size > max - body.len() {
            return Ok(Some(Chunked::TooLarge));
        }
        if buf.len() < next + size + 2 {
            return Ok(None);
        }
        if &buf[next + size..next + size + 2] != b"\r\n" {
            return Err(ReadError::Bad("chunk data longer than its size"));
        }
        body.extend_from_slice(&buf[next..next + size]);
        at = next + size + 2;
    }
    // Trailers up to the empty line (checked again by the relay).
    loop {
        match line(at)? {
            None => return Ok(None),
            Some((b"", _)) => return Ok(Some(Chunked::Done(body))),
            Some((_, next)) => at = next,
        }
    }
}

fn is_forbidden(b: u8) -> bool {
    (b < 0x20 && !matches!(b, b'\r' | b'\n' | b'\t')) || b == 0x7f
}

/// Offset just past the end of the head: the first `\r\n\r\n`, or a bare
/// `\n\n` (which the parser then refuses, instead of waiting for more).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `1a;ext=1` → 26. Hex digits only, at most 15 of them.
pub(crate) fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.split(|b| *b == b';').next()?;
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a"), Some(26));
        assert_eq!(parse_chunk_size(b"0;x=y"), Some(0));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"0x10",
            b"ffffffffffffffff",
        ] {
            assert_eq!(parse_chunk_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn chunked_bodies_decode_in_place() {
        let body = b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\nT: 1\r\n\r\n";
        assert_eq!(
            decode_chunked(body, 10).unwrap(),
            Some(Chunked::Done(b"abcde".to_vec()))
        );
        assert_eq!(decode_chunked(body, 4).unwrap(), Some(Chunked::TooLarge));
        for cut in [0, 3, 8, 20, body.len() - 1] {
            assert_eq!(decode_chunked(&body[..cut], 10).unwrap(), None, "{cut}");
        }
        assert!(decode_chunked(b"3\r\nabcd\r\n", 10).is_err());
        assert!(decode_chunked(b"zz\r\n", 10).is_err());
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nX"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nX"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
