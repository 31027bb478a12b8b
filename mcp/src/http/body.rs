//! A POST body to `/mcp`, read with a cap and checked before rmcp sees it,
//! so that every refused message is answered as JSON-RPC, with its id
//! whenever its first bytes give one ([`crate::early_id`]).
//!
//! rmcp alone answers an over-size body with a plain-text `413` and a body
//! that is not JSON with a plain-text `415`: a client then has no JSON-RPC
//! error for the request it sent. Here:
//! - over [`MAX_BODY`]: `413`, `-32600`, the id from the first bytes;
//! - not JSON: `400`, `-32700`, the id from the first bytes;
//! - JSON but not one valid JSON-RPC message (the stdio checks,
//!   [`crate::stdio::judge`]): `400` with that error and id;
//! - anything else goes to rmcp unchanged.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

/// Largest body read (the stdio line limit).
pub const MAX_BODY: usize = crate::stdio::MAX_MESSAGE_BYTES;

/// What the body check decided.
#[derive(Debug)]
pub enum Checked {
    /// A body for rmcp, and the message's `method` (when a request).
    Pass(Bytes, Option<String>),
    /// Answer this status and JSON-RPC error instead.
    Refuse(u16, Value),
}

/// Reads and checks one body.
pub async fn read(mut body: Incoming) -> Checked {
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return refuse(
                400,
                Value::Null,
                -32600,
                "the request body could not be read",
            );
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total += data.len();
        if total > MAX_BODY {
            buf.extend_from_slice(&data[..data.len().min(crate::early_id::PREFIX_BYTES)]);
            let id = crate::early_id::find(&buf).unwrap_or(Value::Null);
            let message = format!("message over the {MAX_BODY}-byte limit");
            return refuse(413, id, -32600, &message);
        }
        buf.extend_from_slice(&data);
    }
    judge(Bytes::from(buf))
}

/// Checks a complete body.
pub fn judge(bytes: Bytes) -> Checked {
    match crate::stdio::judge(&bytes) {
        crate::stdio::Verdict::Forward => {
            let method = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_owned));
            Checked::Pass(bytes, method)
        }
        crate::stdio::Verdict::Reply(v) => Checked::Refuse(400, v),
        crate::stdio::Verdict::Skip => refuse(400, Value::Null, -32700, "empty request body"),
    }
}

fn refuse(status: u16, id: Value, code: i64, message: &str) -> Checked {
    Checked::Refuse(
        status,
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &[u8]) -> (u16, Value) {
        match judge(Bytes::copy_from_slice(body)) {
            Checked::Refuse(s, v) => (s, v),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_bodies_are_json_rpc_errors_with_their_id() {
        let (s, v) = refused(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{,}"#);
        assert_eq!(
            (s, v["id"].clone(), v["error"]["code"].clone()),
            (400, json!(5), json!(-32700))
        );
        let (_, v) = refused(br#"{"jsonrpc":"1.0","id":"x","method":"m"}"#);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!("x"), json!(-32600))
        );
        let (_, v) = refused(b"");
        assert_eq!(v["id"], Value::Null);
        match judge(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
        )) {
            Checked::Pass(_, m) => assert_eq!(m.as_deref(), Some("initialize")),
            other => panic!("{other:?}"),
        }
    }
}
