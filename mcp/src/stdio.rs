//! The stdio framing in front of rmcp: every line the client sends is
//! checked before rmcp sees it, so that no input goes unanswered.
//!
//! rmcp drops a line that is not JSON (or not a JSON-RPC message) without a
//! reply, and stops at one over its own limit, leaving the client to wait
//! for its timeout. Here, per line:
//!
//! - over [`MAX_MESSAGE_BYTES`]: the bytes are discarded up to the next
//!   newline (the stream resynchronises there) and the client gets
//!   `-32600` with the id read from the line's first bytes
//!   ([`crate::early_id`]), else `"id": null`;
//! - not JSON: `-32700`, with the id when its first bytes give one, else
//!   `"id": null`;
//! - JSON but not one JSON-RPC object (a batch, a bad `jsonrpc`, a method
//!   that is not a string, an id that is not a string or number): `-32600`,
//!   with the id when it is a valid one, else `null`;
//! - `tools/call` without a string `params.name`: `-32602` with its id;
//! - anything else goes to rmcp unchanged.
//!
//! rmcp talks to two in-memory pipes; this module owns the real stdin and
//! stdout and writes rmcp's lines and its own whole, one at a time.
//! SIGTERM (and SIGINT) close rmcp's input as end of file would: requests in
//! flight finish and are answered, then the server exits; a second signal
//! exits at once (status 143).

use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Largest message accepted, in bytes (execute's `code` is capped at
/// 256 KiB, search_docs' `query` at 1 KiB; this leaves room for JSON
/// escaping and `_meta`).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// What to do with one input line.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Hand it to rmcp.
    Forward,
    /// Answer this error response instead.
    Reply(Value),
    /// Blank line: ignore.
    Skip,
}

fn error(id: Value, code: i64, message: &str) -> Verdict {
    Verdict::Reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

/// Judges one complete line (without its newline).
pub fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            let id = crate::early_id::find(line).unwrap_or(Value::Null);
            return error(id, -32700, &format!("parse error: {e}"));
        }
    };
    let Value::Object(msg) = &value else {
        return error(
            Value::Null,
            -32600,
            "invalid request: expected one JSON-RPC object (batches are not supported)",
        );
    };
    let id = match msg.get("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v.clone()),
        Some(_) => {
            return error(
                Value::Null,
                -32600,
                "invalid request: id must be a string or a number",
            );
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error(reply_id, -32600, "invalid request: jsonrpc must be \"2.0\"");
    }
    match msg.get("method") {
        None if msg.contains_key("result") || msg.contains_key("error") => Verdict::Forward,
        Some(Value::String(m)) if m == "tools/call" && id.is_some() => {
            let named = msg
                .get("params")
                .and_then(|p| p.get("name"))
                .is_some_and(Value::is_string);
            if named {
                Verdict::Forward
            } else {
                error(
                    reply_id,
                    -32602,
                    "invalid params: tools/call needs params.name (a string)",
                )
            }
        }
        Some(Value::String(_)) => Verdict::Forward,
        _ => error(reply_id, -32600, "invalid request: method must be a string"),
    }
}

/// The shared stdout: whole lines, one writer at a time.
type Out<W> = Arc<Mutex<W>>;

async fn write_line<W: AsyncWrite + Unpin>(out: &Out<W>, line: &[u8]) -> std::io::Result<()> {
    let mut w = out.lock().await;
    w.write_all(line).await?;
    if !line.ends_with(b"\n") {
        w.write_all(b"\n").await?;
    }
    w.flush().await
}

/// Reads the client's lines, answers the bad ones and forwards the rest to
/// `to_rmcp`, until end of file or `stop` resolves.
pub async fn pump_input<R, W, F>(
    input: R,
    mut to_rmcp: tokio::io::DuplexStream,
    out: Out<W>,
    stop: F,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    F: std::future::Future<Output = ()>,
{
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    tokio::pin!(stop);
    loop {
        line.clear();
        let read = tokio::select! {
            r = read_capped(&mut reader, &mut line) => r,
            () = &mut stop => break,
        };
        let verdict = match read {
            Ok(Line::Eof) | Err(_) => break,
            Ok(Line::TooLong(n)) => error(
                crate::early_id::find(&line).unwrap_or(Value::Null),
                -32600,
                &format!(
                    "message of {n} bytes or more is over the {MAX_MESSAGE_BYTES}-byte limit; discarded up to the next newline"
                ),
            ),
            Ok(Line::Complete) => judge(&line),
        };
        let ok = match verdict {
            Verdict::Skip => Ok(()),
            Verdict::Reply(v) => {
                crate::log::line(
                    "warning",
                    &format!("refused input: {}", v["error"]["message"]),
                );
                write_line(&out, v.to_string().as_bytes()).await
            }
            Verdict::Forward => {
                line.push(b'\n');
                to_rmcp.write_all(&line).await
            }
        };
        if ok.is_err() {
            break;
        }
    }
    // Dropping `to_rmcp` is rmcp's end of file.
}

/// Copies rmcp's output lines to the real stdout.
pub async fn pump_output<W: AsyncWrite + Unpin>(from_rmcp: tokio::io::DuplexStream, out: Out<W>) {
    let mut reader = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if write_line(&out, &line).await.is_err() {
                    return;
                }
            }
        }
    }
}

enum Line {
    Complete,
    TooLong(usize),
    Eof,
}

/// Reads one line into `buf` (without the newline), never holding more
/// than [`MAX_MESSAGE_BYTES`]: a longer one is skipped to its newline.
async fn read_capped<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut skipped = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (skipped, buf.is_empty()) {
                (0, true) => Line::Eof,
                (0, false) => Line::Complete,
                (n, _) => Line::TooLong(n),
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if skipped > 0 || buf.len() + part.len() > MAX_MESSAGE_BYTES {
            // Only the first bytes are kept, for the id (`early_id`).
            skipped += if skipped == 0 { buf.len() } else { 0 } + part.len();
            buf.truncate(crate::early_id::PREFIX_BYTES);
        } else {
            buf.extend_from_slice(part);
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if skipped > 0 {
                Line::TooLong(skipped)
            } else {
                Line::Complete
            });
        }
    }
}

/// Resolves on SIGTERM or SIGINT (never, if the handlers cannot be set).
pub async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    crate::log::line(
        "info",
        "termination signal: finishing requests in flight, then exiting (a second one exits at once)",
    );
    // The handlers stay installed for the life of the process, so without
    // this a second signal would be ignored while executes drain (up to
    // their deadline, or a queued one's wait for a slot).
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        crate::log::line(
            "info",
            "second termination signal: exiting without waiting for requests in flight",
        );
        std::process::exit(128 + libc::SIGTERM);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(v: Verdict) -> (i64, Value) {
        match v {
            Verdict::Reply(r) => (r["error"]["code"].as_i64().unwrap(), r["id"].clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_bad_line_gets_an_answer() {
        assert_eq!(code(judge(b"not json")), (-32700, Value::Null));
        assert_eq!(code(judge(b"[1,2]")), (-32600, Value::Null));
        assert_eq!(
            code(judge(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)),
            (-32600, Value::Null)
        );
        assert_eq!(
            code(judge(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#)),
            (-32600, json!(3))
        );
        assert_eq!(
            code(judge(br#"{"jsonrpc":"2.0","id":4}"#)),
            (-32600, json!(4))
        );
        assert_eq!(
            code(judge(
                br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#
            )),
            (-32602, json!("a"))
        );
        assert_eq!(judge(b"  "), Verdict::Skip);
        assert_eq!(
            judge(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Verdict::Forward
        );
        assert_eq!(
            judge(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Verdict::Forward
        );
    }

    #[tokio::test]
    async fn an_oversize_line_is_skipped_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"a\":1}\n");
        let mut r = BufReader::with_capacity(4096, &input[..]);
        let mut buf = Vec::new();
        assert!(
            matches!(read_capped(&mut r, &mut buf).await.unwrap(), Line::TooLong(n) if n == MAX_MESSAGE_BYTES + 10)
        );
        buf.clear();
        assert!(matches!(
            read_capped(&mut r, &mut buf).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"{\"a\":1}");
        buf.clear();
        assert!(matches!(
            read_capped(&mut r, &mut buf).await.unwrap(),
            Line::Eof
        ));
    }
}
