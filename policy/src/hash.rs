//! Canonical JSON and the policy hash.
//!
//! The canonical text is the RFC 8785 (JSON Canonicalization Scheme)
//! serialisation of the policy's serde form (`model.rs` field names, in
//! camelCase): no white space, object members sorted by key, strings
//! escaped minimally (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
//! control characters as lower-case `\u00xx`, everything else as UTF-8).
//! The policy holds no floating-point numbers, so JCS's number rules reduce
//! to plain decimal integers. The hash is the lower-case hex SHA-256 of that
//! text's UTF-8 bytes. Lists are already sorted and deduplicated by
//! normalisation, so neither key order nor list order of the input reaches
//! the hash. `docs/policy-format.md` specifies it with a worked example.
//!
//! Keys are sorted here explicitly rather than by relying on serde_json's
//! map type, because another crate in the build enabling serde_json's
//! `preserve_order` feature would silently change that map's order.

use crate::Policy;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

impl Policy {
    /// Canonical JSON text of the policy (the input of [`Policy::sha256`]).
    pub fn canonical_json(&self) -> String {
        // The policy is made of strings, booleans, integers, lists and
        // string-keyed maps, which serde_json always serialises; the error
        // arm cannot be reached and still yields text no policy produces.
        let value = match serde_json::to_value(self) {
            Ok(value) => value,
            Err(err) => Value::String(format!("unserialisable policy: {err}")),
        };
        let mut out = Vec::new();
        write_canonical(&value, &mut out);
        // serde_json writes UTF-8 only; the fallback cannot be reached.
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Lower-case hex sha256 of [`Policy::canonical_json`].
    pub fn sha256(&self) -> String {
        sha256_hex(self.canonical_json().as_bytes())
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Appends the JCS form of `value` to `out`. Scalars and keys are written
/// by serde_json straight into the buffer (a `to_string` per scalar was
/// most of the hash's cost on `oajail`'s start-up path).
pub(crate) fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            // JCS sorts by UTF-16 code units; for the ASCII keys a policy
            // has this is byte order, and `str` ordering is byte order.
            let mut sorted: Vec<_> = members.iter().collect();
            sorted.sort_by(|a, b| utf16_cmp(a.0, b.0));
            out.push(b'{');
            for (i, (key, member)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(key, out);
                out.push(b':');
                write_canonical(member, out);
            }
            out.push(b'}');
        }
        // serde_json escapes strings exactly as JCS (ECMAScript) does and
        // prints integers in plain decimal.
        scalar => write_json(scalar, out),
    }
}

/// serde_json's text of a string or scalar; writing a `Value` or a `str`
/// into a `Vec` cannot fail.
fn write_json<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Orders strings by UTF-16 code units, as RFC 8785 requires.
fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_writer_sorts_and_compacts() {
        let value = json!({"b": [3, "x\ny", {"z": null, "a": true}], "a": "\u{1f}é/"});
        let mut out = Vec::new();
        write_canonical(&value, &mut out);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            r#"{"a":"\u001fé/","b":[3,"x\ny",{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F600 (surrogates D83D DE00) sorts before U+FF61 in UTF-16,
        // after it in UTF-8 byte order.
        let value = json!({"\u{FF61}": 2, "\u{1F600}": 1});
        let mut out = Vec::new();
        write_canonical(&value, &mut out);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "{\"\u{1F600}\":1,\"\u{FF61}\":2}");
    }

    #[test]
    fn sha256_of_empty_input_is_the_known_value() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
