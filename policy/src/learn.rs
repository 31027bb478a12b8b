//! `oajail learn`: a settings file plus the entries that would have
//! allowed what a run refused.
//!
//! The run itself is an ordinary jailed run (nothing is allowed that the
//! settings do not allow); the binary collects its refusals, and each
//! refusal's fix is decided where the live line's is
//! (`compile::explain` for files, the egress plan's refusal kind for
//! hosts). This module adds those entries to the settings as the user
//! wrote them (the JSON value, so their other keys stay as they are) and
//! says what it declined to add.
//!
//! A host is proposed as `host:port` (the port the command used, not every
//! port). Refusals that an entry cannot or must not lift are declined with
//! their reason: a `deniedDomains` entry, a private address behind an
//! allowed name, protocol errors.

use crate::domain::{DomainPattern, ListKind};
use serde::Serialize;
use serde_json::Value;

/// One entry to add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Addition {
    /// The settings list, as a dotted path (`filesystem.allowWrite`).
    pub field: String,
    /// The entry.
    pub value: String,
    /// Why: the refusals it lifts, in words.
    pub reasons: Vec<String>,
}

/// A refusal no entry is proposed for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Declined {
    /// What was refused (`read ~/.ssh/id_ed25519 (open)`).
    pub what: String,
    /// Why nothing is proposed.
    pub why: String,
}

/// The entry for a host the proxy refused with `reason` (its log's
/// machine-readable reason), or why there is none.
pub fn host_entry(host: &str, port: u16, reason: &str) -> Result<String, String> {
    match reason {
        "no_network" | "not_allowed" | "port_not_allowed" | "ip_literal" => {}
        "deny_list" => {
            return Err(
                "a network.deniedDomains entry refuses it; oajail does not undo a deny".into(),
            );
        }
        "private_address" => {
            return Err(
                "the name resolved to a private address; admit the address itself if that is meant (the refusal line names it)"
                    .into(),
            );
        }
        other => return Err(format!("refused for {other}, which no allow entry changes")),
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let entry = format!("{host}:{port}");
    DomainPattern::parse(&entry, ListKind::Allow)
        .map(|_| entry.clone())
        .map_err(|e| format!("{entry} is no valid allowedDomains entry ({e})"))
}

/// Merge `additions` into a settings value: each list gets the new entries
/// it does not hold yet (lists and objects are made when missing; nothing
/// else changes). Returns the value and the additions actually made.
pub fn merge(base: &Value, additions: &[Addition]) -> (Value, Vec<Addition>) {
    let mut settings = base.clone();
    if !settings.is_object() {
        settings = Value::Object(Default::default());
    }
    let mut made: Vec<Addition> = Vec::new();
    for add in additions {
        if let Some(done) = made
            .iter_mut()
            .find(|m| m.field == add.field && m.value == add.value)
        {
            done.reasons.extend(add.reasons.iter().cloned());
            continue;
        }
        let Some(list) = list_at(&mut settings, &add.field) else {
            continue;
        };
        let present = list
            .iter()
            .any(|v| entry_text(v) == Some(add.value.as_str()));
        if !present {
            list.push(Value::String(add.value.clone()));
            made.push(add.clone());
        }
    }
    (settings, made)
}

/// The array at a dotted path, made when missing; `None` when something
/// else is in the way.
fn list_at<'a>(settings: &'a mut Value, field: &str) -> Option<&'a mut Vec<Value>> {
    let mut at = settings;
    let mut parts = field.split('.').peekable();
    while let Some(key) = parts.next() {
        let object = at.as_object_mut()?;
        let last = parts.peek().is_none();
        let fresh = if last {
            Value::Array(Vec::new())
        } else {
            Value::Object(Default::default())
        };
        at = object.entry(key.to_owned()).or_insert(fresh);
    }
    at.as_array_mut()
}

/// A path or domain entry's text (`"p"` or `{"path": "p", …}`).
fn entry_text(v: &Value) -> Option<&str> {
    v.as_str().or_else(|| v.get("path").and_then(Value::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add(field: &str, value: &str, why: &str) -> Addition {
        Addition {
            field: field.into(),
            value: value.into(),
            reasons: vec![why.into()],
        }
    }

    #[test]
    fn entries_are_added_once_and_the_rest_of_the_file_stays() {
        let base = json!({
            "network": {"allowedDomains": ["example.com"], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": [{"path": "~/.npm"}], "denyWrite": []},
            "oajail": {"strict": true}
        });
        let (out, made) = merge(
            &base,
            &[
                add("filesystem.allowWrite", "~/.npm", "mkdir ~/.npm/_cacache"),
                add("filesystem.allowWrite", "~/.cache/pip", "write a"),
                add("filesystem.allowWrite", "~/.cache/pip", "write b"),
                add("network.allowedDomains", "127.0.0.1:8080", "GET"),
                add("filesystem.allowRead", "~/private/a", "open"),
            ],
        );
        assert_eq!(
            out,
            json!({
                "network": {"allowedDomains": ["example.com", "127.0.0.1:8080"], "deniedDomains": []},
                "filesystem": {
                    "denyRead": [],
                    "allowWrite": [{"path": "~/.npm"}, "~/.cache/pip"],
                    "denyWrite": [],
                    "allowRead": ["~/private/a"]
                },
                "oajail": {"strict": true}
            })
        );
        assert_eq!(made.len(), 3);
        assert_eq!(made[0].reasons, ["write a", "write b"]);
        // Merging the result again adds nothing: learning converges.
        let (again, none) = merge(&out, &made);
        assert_eq!(again, out);
        assert!(none.is_empty());
    }

    #[test]
    fn hosts_are_proposed_with_their_port_unless_a_deny_or_protocol_refused_them() {
        assert_eq!(
            host_entry("127.0.0.1", 8080, "ip_literal"),
            Ok("127.0.0.1:8080".into())
        );
        assert_eq!(host_entry("::1", 443, "ip_literal"), Ok("[::1]:443".into()));
        assert_eq!(
            host_entry("registry.npmjs.org", 443, "no_network"),
            Ok("registry.npmjs.org:443".into())
        );
        assert!(
            host_entry("evil.test", 443, "deny_list")
                .unwrap_err()
                .contains("deniedDomains")
        );
        assert!(host_entry("x.test", 443, "private_address").is_err());
        assert!(host_entry("x.test", 443, "masked_credential").is_err());
    }
}
