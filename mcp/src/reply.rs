//! What an API response becomes for the script: the `{data, error}` JSON
//! text its `oa.*` promise resolves to, redacted ([`crate::redact`]).
//!
//! The body is never parsed into a tree here: a JSON body is checked and
//! redacted as text and put into the reply as it came (a tree of a 16 MiB
//! body can take 30 times that), a body that is not JSON becomes a JSON
//! string. Only the top-level `message` and `error.message` of a failed
//! call's body are read, for the error's `message`.

use crate::budget::Held;
use crate::redact::Redactor;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Failure bodies are cut to this many characters in excerpts.
const EXCERPT_CHARS: usize = 2000;

/// What one call gives back to the script, plus bookkeeping.
pub struct ApiReply {
    /// `{data, error}` as JSON text.
    pub json: String,
    /// HTTP status (0 for transport errors) when the call failed.
    pub failed_status: Option<u16>,
    /// Bounded, redacted excerpt of the failure.
    pub excerpt: String,
    /// Response bytes taken from the server's budget, given back once the
    /// reply has reached the worker.
    pub held: Held,
}

/// The reply for a response with `status` and `body`.
pub fn from_body(redactor: &Redactor, status: u16, body: &[u8], held: Held) -> ApiReply {
    let text = String::from_utf8_lossy(body);
    let ok = (200..300).contains(&status);
    let (json, is_json) = match redactor.json(&text) {
        Some(clean) => (clean.into_owned(), true),
        None => (json_string(&redactor.text(&text)), false),
    };
    if ok {
        return ApiReply {
            json: format!(r#"{{"data":{json},"error":null}}"#),
            failed_status: None,
            excerpt: String::new(),
            held,
        };
    }
    let message = is_json.then(|| error_message(&json)).flatten().map_or_else(
        || format!("HTTP {status}"),
        |m| format!("HTTP {status}: {m}"),
    );
    failure(redactor, status, &message, Some(&json), held)
}

/// A failed call: `{data: null, error: {status, message, body?}}`; `body`
/// is JSON text (already redacted).
pub fn failure(
    redactor: &Redactor,
    status: u16,
    message: &str,
    body: Option<&str>,
    held: Held,
) -> ApiReply {
    let message = redactor.text(message);
    let excerpt: String = body
        .unwrap_or(&message)
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    let mut json = format!(
        r#"{{"data":null,"error":{{"status":{status},"message":{}"#,
        json_string(&message)
    );
    if let Some(b) = body {
        json.push_str(r#","body":"#);
        json.push_str(b);
    }
    json.push_str("}}");
    ApiReply {
        json,
        failed_status: Some(status),
        excerpt,
        held,
    }
}

/// A refusal the script gets without any request (`status` 0).
pub fn refusal(message: &str) -> String {
    format!(
        r#"{{"data":null,"error":{{"status":0,"message":{}}}}}"#,
        json_string(message)
    )
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// `error.message`, else `message`, of a JSON object body, when a string.
fn error_message(json: &str) -> Option<String> {
    let top: BTreeMap<String, &RawValue> = serde_json::from_str(json).ok()?;
    let nested = top.get("error").and_then(|e| {
        let inner: BTreeMap<String, &RawValue> = serde_json::from_str(e.get()).ok()?;
        serde_json::from_str::<String>(inner.get("message")?.get()).ok()
    });
    nested.or_else(|| serde_json::from_str::<String>(top.get("message")?.get()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(r: &ApiReply) -> Value {
        serde_json::from_str(&r.json).unwrap()
    }

    #[test]
    fn bodies_become_data_or_error_without_a_tree() {
        let r = Redactor::new(Some("k3y-secret"));
        let ok = from_body(&r, 200, br#"{"a": [1, "k3y-secret"]}"#, Held::none());
        assert_eq!(
            parse(&ok),
            json!({"data": {"a": [1, "[redacted]"]}, "error": null})
        );
        let text = from_body(&r, 200, b"plain k3y-secret", Held::none());
        assert_eq!(parse(&text)["data"], json!("plain [redacted]"));
        let bad = from_body(
            &r,
            401,
            br#"{"error": {"message": "bad Bearer k3y-secret"}}"#,
            Held::none(),
        );
        let v = parse(&bad);
        assert_eq!(v["error"]["status"], json!(401));
        assert_eq!(
            v["error"]["message"],
            json!("HTTP 401: bad Bearer [redacted]")
        );
        assert_eq!(
            v["error"]["body"]["error"]["message"],
            json!("bad Bearer [redacted]")
        );
        assert!(!bad.excerpt.contains("k3y-secret") && bad.excerpt.contains("[redacted]"));
        let top = from_body(&r, 500, br#"{"message": "down"}"#, Held::none());
        assert_eq!(parse(&top)["error"]["message"], json!("HTTP 500: down"));
        assert_eq!(
            parse(&from_body(&r, 404, b"[1]", Held::none()))["error"]["message"],
            json!("HTTP 404")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&refusal("no \"way\"")).unwrap(),
            json!({"data": null, "error": {"status": 0, "message": "no \"way\""}})
        );
    }
}
