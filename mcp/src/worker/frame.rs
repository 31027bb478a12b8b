//! Length-prefixed JSON framing over the worker's stdin/stdout pipes.
//!
//! A frame is a big-endian u32 length and that many bytes of JSON. Readers
//! take a maximum length so a hostile worker cannot make the server allocate
//! without bound; an oversized frame is an error before any allocation.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{Read, Write};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use crate::error::FrameError;

/// One frame's bytes (length prefix and JSON), for messages sent many times.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let body = serde_json::to_vec(msg)?;
    let len = u32::try_from(body.len()).map_err(|_| FrameError::TooLarge(body.len()))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The frame of `ToWorker::ApiResult { id, json }` for `json`, JSON text the
/// server produced itself: written around it rather than re-serialised, so
/// a large API answer is copied once and never parsed again here.
pub fn api_result(id: u64, json: &str) -> Result<Vec<u8>, FrameError> {
    let head = format!(r#"{{"api_result":{{"id":{id},"json":"#);
    let body_len = head.len() + json.len() + 2;
    let len = u32::try_from(body_len).map_err(|_| FrameError::TooLarge(body_len))?;
    let mut out = Vec::with_capacity(body_len + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"}}");
    Ok(out)
}

/// Writes one frame (blocking; worker side).
pub fn write_sync<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    w.write_all(&encode(msg)?)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame (blocking; worker side).
pub fn read_sync<T: DeserializeOwned>(r: &mut impl Read, max: usize) -> Result<T, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Writes one frame (server side).
pub async fn write_async<T: Serialize>(
    w: &mut (impl tokio::io::AsyncWrite + Unpin),
    msg: &T,
) -> Result<(), FrameError> {
    w.write_all(&encode(msg)?).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame (server side).
pub async fn read_async<T: DeserializeOwned>(
    r: &mut (impl tokio::io::AsyncRead + Unpin),
    max: usize,
) -> Result<T, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(serde_json::from_slice(&body)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::ToWorker;

    #[test]
    fn an_api_result_written_around_its_json_reads_back() {
        let bytes = api_result(7, r#"{"data":[1,"x"],"error":null}"#).unwrap();
        let msg: ToWorker = read_sync(&mut &bytes[..], 1024).unwrap();
        match msg {
            ToWorker::ApiResult { id, json } => {
                assert_eq!(id, 7);
                assert_eq!(json.get(), r#"{"data":[1,"x"],"error":null}"#);
            }
            other => panic!("{other:?}"),
        }
    }
}
