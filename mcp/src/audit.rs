//! One audit record per tool call, a JSON line on stderr:
//!
//! ```json
//! {"audit": {"ts": 1767225600123, "tool": "execute", "transport": "http",
//!   "caller": {"sub": "alice", "clientId": "inspector", "token": "sha256:…"},
//!   "session": "…", "outcome": "ok", "isError": false, "durationMs": 3.1,
//!   "bytesOut": 412, "apiCalls": 2,
//!   "credential": {"kind": "exchanged", "fingerprint": "sha256:…"},
//!   "codeSha256": "…", "codeBytes": 120, "codeTruncated": false, "code": "…"}}
//! ```
//!
//! `code` is capped at [`CODE_BYTES`] (on a character boundary) and
//! `codeSha256` is the hash of the whole script, so a record names any
//! script exactly without growing with it. Secrets never appear: tokens
//! and keys are given as fingerprints ([`crate::oauth::fingerprint`]),
//! the result and the logs are not recorded. stderr is the sink because
//! it is what every host of the server keeps (an MCP client's log, a
//! container's log, a unit's journal) and the jail lets the server write
//! nothing else.

use crate::oauth::{Caller, fingerprint};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Audit records carry at most this much of the code.
pub const CODE_BYTES: usize = 8 * 1024;

/// Who made a call, and how.
#[derive(Clone, Debug, Default)]
pub struct Who {
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The verified caller (HTTP).
    pub caller: Option<Caller>,
    /// The MCP session, when the call came in one (legacy HTTP).
    pub session: Option<String>,
}

impl Who {
    /// The local caller of a stdio server.
    pub fn stdio() -> Self {
        Self {
            transport: "stdio",
            caller: None,
            session: None,
        }
    }

    /// The key of per-caller limits: `sub`, or `local` on stdio.
    pub fn key(&self) -> &str {
        self.caller.as_ref().map_or("local", |c| c.sub.as_str())
    }
}

/// The credential an execute's API calls carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// No call was made with one.
    None,
    /// The server's `OA_API_KEY` (stdio only).
    Key(String),
    /// A token exchanged for the caller (RFC 8693).
    Exchanged(String),
}

impl Credential {
    /// The record's `credential` field.
    pub fn json(&self) -> Value {
        match self {
            Self::None => json!({"kind": "none"}),
            Self::Key(fp) => json!({"kind": "key", "fingerprint": fp}),
            Self::Exchanged(fp) => json!({"kind": "exchanged", "fingerprint": fp}),
        }
    }

    /// The server's key, by fingerprint.
    pub fn key(secret: Option<&str>) -> Self {
        secret.map_or(Self::None, |k| Self::Key(fingerprint(k)))
    }
}

/// The code fields of a record: hash, size, and at most [`CODE_BYTES`].
pub fn code_fields(code: &str) -> Value {
    let mut end = code.len().min(CODE_BYTES);
    while !code.is_char_boundary(end) {
        end -= 1;
    }
    json!({
        "codeSha256": crate::log::hex(&Sha256::digest(code.as_bytes())),
        "codeBytes": code.len(),
        "codeTruncated": end < code.len(),
        "code": &code[..end],
    })
}

/// What the call did, for [`emit`].
pub struct Done<'a> {
    /// Tool name.
    pub tool: &'a str,
    /// The tool's own fields (outcome, apiCalls, code…).
    pub fields: Value,
    /// Time from arrival to answer.
    pub duration: std::time::Duration,
    /// Size of the text answered.
    pub bytes_out: usize,
    /// `isError`.
    pub is_error: bool,
}

/// The record of one call.
pub fn record(who: &Who, done: &Done<'_>) -> Value {
    let mut r = json!({
        "ts": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        "tool": done.tool,
        "transport": who.transport,
    });
    if let Some(c) = &who.caller {
        r["caller"] =
            json!({"sub": c.sub, "clientId": c.client_id, "token": c.token_fingerprint()});
    }
    if let Some(s) = &who.session {
        r["session"] = json!(s);
    }
    if let Value::Object(fields) = &done.fields {
        for (k, v) in fields {
            r[k] = v.clone();
        }
    }
    r["durationMs"] = json!(done.duration.as_secs_f64() * 1000.0);
    r["bytesOut"] = json!(done.bytes_out);
    r["isError"] = json!(done.is_error);
    r
}

/// Writes the record of one call.
pub fn emit(who: &Who, done: &Done<'_>) {
    crate::log::json(&json!({"audit": record(who, done)}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_capped_on_a_char_boundary_and_hashed_whole() {
        let code = format!("{}é{}", "a".repeat(CODE_BYTES - 1), "b".repeat(100));
        let f = code_fields(&code);
        assert_eq!(f["code"].as_str().unwrap().len(), CODE_BYTES - 1);
        assert_eq!(f["codeTruncated"], json!(true));
        assert_eq!(f["codeBytes"], json!(code.len()));
        assert_eq!(
            f["codeSha256"],
            json!(crate::log::hex(&Sha256::digest(code.as_bytes())))
        );
    }

    #[test]
    fn records_name_the_caller_and_no_secret() {
        let who = Who {
            transport: "http",
            caller: Some(Caller::new(
                "alice".into(),
                Some("cli".into()),
                vec![],
                0,
                "tok-secret",
            )),
            session: None,
        };
        let cred = Credential::Exchanged(fingerprint("api-secret"));
        let done = Done {
            tool: "execute",
            fields: json!({"outcome": "ok", "credential": cred.json()}),
            duration: std::time::Duration::from_millis(3),
            bytes_out: 10,
            is_error: false,
        };
        let text = record(&who, &done).to_string();
        assert!(text.contains("\"sub\":\"alice\"") && text.contains("\"transport\":\"http\""));
        assert!(
            !text.contains("tok-secret") && !text.contains("api-secret"),
            "{text}"
        );
        assert!(text.contains("\"kind\":\"exchanged\""), "{text}");
    }
}
