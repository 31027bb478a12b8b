//! The other half of masking: a real value that comes back in a response
//! body (an API that echoes the `Authorization` it got, an error page that
//! quotes it) reaches the jail as its sentinel, as it already does in
//! response headers (`Credentials::unswap`).
//!
//! The body streams through: each chunk is scanned together with the
//! end of the one before (the longest real value less one byte), so a value
//! split across chunks is found; what cannot hold the start of a value is
//! passed on at once. Values shorter than 8 bytes are left alone (as in
//! headers). Requests to a host that gets a real value are sent with
//! `Accept-Encoding: identity`, so its answers can be read; a compressed
//! answer would hide an echo, and is refused rather than passed on.
use crate::masked::Credentials;
use bytes::{Bytes, BytesMut};
use http::{Response, header};
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};
use memchr::memmem;
use std::pin::Pin;
use std::task::{Context, Poll};

type Boxed = BoxBody<Bytes, hyper::Error>;

/// `resp` with every real value in its body replaced by its sentinel.
/// Unchanged when no value could be in it.
pub(crate) fn response(creds: &Credentials, resp: Response<Boxed>) -> Response<Boxed> {
    let pairs = creds.unswap_pairs();
    if pairs.is_empty() || resp.body().is_end_stream() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // Values and sentinels differ in length: the length is not known now.
    parts.headers.remove(header::CONTENT_LENGTH);
    let keep = pairs.iter().map(|(real, _)| real.len()).max().unwrap_or(1) - 1;
    let body = Unswapped {
        inner: body,
        pairs,
        keep,
        held: BytesMut::new(),
        done: false,
    };
    Response::from_parts(parts, BoxBody::new(body))
}

/// A response body with real values replaced as it streams.
struct Unswapped {
    inner: Boxed,
    /// (real value, sentinel).
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes held back: a value may start in them.
    keep: usize,
    held: BytesMut,
    done: bool,
}

impl Unswapped {
    /// Replaces every value in `held`; returns what can go now.
    fn take(&mut self, all: bool) -> Bytes {
        let mut text = std::mem::take(&mut self.held).to_vec();
        for (real, sentinel) in &self.pairs {
            if memmem::find(&text, real).is_some() {
                text = replace(&text, real, sentinel);
            }
        }
        let cut = if all {
            text.len()
        } else {
            text.len().saturating_sub(self.keep)
        };
        self.held = BytesMut::from(&text[cut..]);
        text.truncate(cut);
        Bytes::from(text)
    }
}

fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(at) = memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

impl Body for Unswapped {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.take(true);
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        let ready = this.take(false);
                        if !ready.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(ready))));
                        }
                    }
                    // Trailers: what was held goes first, then them.
                    Err(trailers) => {
                        let rest = this.take(true);
                        this.done = true;
                        if !rest.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(rest))));
                        }
                        return Poll::Ready(Some(Ok(trailers)));
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// Whether a response to a request that got a real value comes back
/// compressed (then it cannot be read for echoes).
pub(crate) fn encoded(resp: &Response<Boxed>) -> bool {
    (resp.headers().get(header::CONTENT_ENCODING))
        .is_some_and(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
        }
    }

    fn body_of(chunks: Vec<&'static str>) -> Boxed {
        let chunks = Chunks(chunks.into_iter().map(Bytes::from).collect());
        chunks.map_err(|never| match never {}).boxed()
    }

    #[tokio::test]
    async fn a_split_echo_comes_back_as_the_sentinel() {
        let pairs = vec![(b"real-value-123".to_vec(), b"oajail_masked_00".to_vec())];
        let keep = 13;
        for chunks in [
            vec!["got real-value-123 ok"],
            vec!["got real-va", "lue-123 ok"],
            vec!["got r", "eal-value-12", "3", " ok"],
        ] {
            let b = Unswapped {
                inner: body_of(chunks.clone()),
                pairs: pairs.clone(),
                keep,
                held: BytesMut::new(),
                done: false,
            };
            let out = b.collect().await.unwrap().to_bytes();
            assert_eq!(&out[..], b"got oajail_masked_00 ok", "{chunks:?}");
        }
    }
}
