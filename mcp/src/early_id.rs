//! The JSON-RPC `id` of a message that cannot be parsed whole: one over
//! the size limit (only its first bytes are kept) or one that is not
//! valid JSON further on.
//!
//! An answer with `"id": null` leaves a client waiting for the answer to
//! the id it sent, until its own timeout. So when the message's top-level
//! object has its `id` member in the bytes we hold, and that member is a
//! complete string or number (the only kinds of id JSON-RPC allows), the
//! error is answered with it. Nothing else of the message is trusted: the
//! scan stops at the first byte that is not what a JSON object head would
//! be, and an `id` that is not a plain string or number is no id.
//!
//! Written by hand because serde_json (and every streaming JSON crate we
//! looked at) stops with an error at a truncated document without handing
//! back the members it had read.

use serde_json::Value;

/// Bytes of an over-size message kept to look for its id.
pub const PREFIX_BYTES: usize = 16 * 1024;
/// Longest id (as JSON text) taken from a prefix.
const MAX_ID_TEXT: usize = 256;

/// The top-level `id` of `bytes` (the start of a JSON object), when it is
/// fully there and is a string or a number.
pub fn find(bytes: &[u8]) -> Option<Value> {
    let mut s = Scanner { b: bytes, i: 0 };
    s.skip_ws();
    s.eat(b'{')?;
    loop {
        s.skip_ws();
        let key_start = s.i;
        s.string()?;
        let key = &bytes[key_start..s.i];
        s.skip_ws();
        s.eat(b':')?;
        s.skip_ws();
        let value_start = s.i;
        s.value()?;
        if key == b"\"id\"" {
            return id_value(&bytes[value_start..s.i]);
        }
        s.skip_ws();
        match s.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

fn id_value(text: &[u8]) -> Option<Value> {
    if text.len() > MAX_ID_TEXT {
        return None;
    }
    match serde_json::from_slice(text).ok()? {
        v @ (Value::String(_) | Value::Number(_)) => Some(v),
        _ => None,
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    fn skip_ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A complete string (its escapes are checked later, by serde_json,
    /// for the id only).
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                c if c < 0x20 => return None,
                _ => {}
            }
        }
    }

    /// A complete value of any kind; nested containers are skipped by
    /// depth, strings inside them by [`Scanner::string`].
    fn value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string(),
            b'{' | b'[' => self.container(),
            _ => self.scalar(),
        }
    }

    fn container(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// A number, `true`, `false` or `null`: it must end before the bytes
    /// do, or a truncated `12` could be the start of `1234`.
    fn scalar(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                return (self.i > start).then_some(());
            }
            self.i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_id_is_read_before_the_cut() {
        let msg = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"execute","arguments":{"code":"xxxx"#;
        assert_eq!(find(msg), Some(json!(42)));
        let msg =
            br#" { "method" : "x", "params": {"a": [1, {"id": 9}], "s": "}\"{"}, "id": "abc" , "#;
        assert_eq!(find(msg), Some(json!("abc")));
    }

    #[test]
    fn no_id_when_it_is_cut_or_not_an_id() {
        assert_eq!(find(br#"{"jsonrpc":"2.0","id":12"#), None);
        assert_eq!(find(br#"{"jsonrpc":"2.0","id":"ab"#), None);
        assert_eq!(find(br#"{"params":{"code":"xxxx"#), None);
        assert_eq!(find(br#"{"id":{"a":1},"x":1}"#), None);
        assert_eq!(find(br#"{"id":null,"x":1}"#), None);
        assert_eq!(find(br#"[{"id":1}]"#), None);
        assert_eq!(find(b"not json"), None);
        let long = format!(r#"{{"id":"{}","x":1}}"#, "a".repeat(400));
        assert_eq!(find(long.as_bytes()), None);
    }

    #[test]
    fn malformed_after_the_id_still_gives_it() {
        assert_eq!(
            find(br#"{"id":7,"method":"x","params":{,,}"#),
            Some(json!(7))
        );
        assert_eq!(find(br#"{"id":"a\"b","#), Some(json!("a\"b")));
    }
}
