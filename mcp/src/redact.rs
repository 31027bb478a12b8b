//! Redaction of the API key from what a script will see.
//!
//! The API client hands the script JSON that the worker decodes
//! (`JSON.parse`), so redaction works on the decoded text, not on the bytes
//! on the wire: an API that echoes the key as `\u006f\u0061…` must not hand
//! it over in plain text once parsed. [`Redactor::json`] walks a JSON text
//! string by string (object keys included), decodes each one and checks the
//! decoded value; [`Redactor::text`] checks plain text (error messages,
//! bodies that are not JSON, and each decoded JSON string).
//!
//! Within a text the key is found and replaced by `[redacted]`:
//! - as itself;
//! - with any of its characters written as `%HH` (percent-encoding, any mix
//!   and hex case), `\uHHHH` or `\xHH` (escapes a second JSON or JavaScript
//!   decoding would turn back), or `&#N;` / `&#xH;` (HTML character
//!   references);
//! - in base64 or base64url, at any alignment (inside `base64("Bearer " +
//!   key)` for instance), and in hexadecimal: the whole run of encoded
//!   characters holding it is replaced.
//!
//! What it cannot promise: a key the script reassembles from pieces it got
//! separately, or that the API returns under a transformation not listed
//! here. The client returns no response headers to the script, so headers
//! need no redaction. Under `--jail` the server holds only the jail's
//! stand-in for the key (docs/mcp.md, "Redaction").

use std::borrow::Cow;

/// What replaces every occurrence.
pub const MARK: &str = "[redacted]";

/// The key and its encoded forms, prepared once.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    key: Option<Vec<u8>>,
    /// Stable cores of the key's base64/base64url/hex encodings.
    cores: Vec<String>,
}

impl Redactor {
    /// A redactor for `key` (none: everything passes unchanged).
    pub fn new(key: Option<&str>) -> Self {
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return Self::default();
        };
        Self {
            key: Some(key.as_bytes().to_vec()),
            cores: encoded_cores(key.as_bytes()),
        }
    }

    /// Whether there is a key to look for.
    pub fn active(&self) -> bool {
        self.key.is_some()
    }

    /// `text` with every form of the key replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(key) = &self.key else {
            return Cow::Borrowed(text);
        };
        let mut spans = find_mixed(text.as_bytes(), key);
        for core in &self.cores {
            spans.extend(find_encoded_runs(text, core));
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(replace_spans(text, spans))
    }

    /// The JSON `text` with every string (keys included) redacted as
    /// decoded; `None` when `text` is not JSON.
    pub fn json<'a>(&self, text: &'a str) -> Option<Cow<'a, str>> {
        serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
        if self.key.is_none() {
            return Some(Cow::Borrowed(text));
        }
        let bytes = text.as_bytes();
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut i = 0;
        while let Some(rel) = memchr_quote(&bytes[i..]) {
            let start = i + rel;
            let end = string_end(bytes, start);
            let token = &text[start..=end];
            if let Some(clean) = self.string_token(token) {
                let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                out.push_str(&text[copied..start]);
                out.push_str(&clean);
                copied = end + 1;
            }
            i = end + 1;
        }
        Some(match out {
            None => Cow::Borrowed(text),
            Some(mut out) => {
                out.push_str(&text[copied..]);
                Cow::Owned(out)
            }
        })
    }

    /// The re-encoded token when the decoded string held the key.
    fn string_token(&self, token: &str) -> Option<String> {
        let inner = &token[1..token.len() - 1];
        if !inner.contains('\\') {
            return match self.text(inner) {
                Cow::Borrowed(_) => None,
                Cow::Owned(clean) => serde_json::to_string(&clean).ok(),
            };
        }
        let decoded: String = serde_json::from_str(token).ok()?;
        match self.text(&decoded) {
            Cow::Borrowed(_) => None,
            Cow::Owned(clean) => serde_json::to_string(&clean).ok(),
        }
    }
}

fn memchr_quote(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'"')
}

/// Index of the closing quote of the JSON string opening at `start` (the
/// text is valid JSON, so there is one).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return j,
            _ => j += 1,
        }
    }
    bytes.len() - 1
}

/// Spans (byte ranges) where `key` appears, each character as itself or
/// under one of the character encodings listed in the module docs.
fn find_mixed(text: &[u8], key: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let first = key[0];
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if (b == first || b == b'%' || b == b'\\' || b == b'&')
            && let Some(end) = match_at(text, i, key)
        {
            spans.push((i, end));
            i = end;
            continue;
        }
        i += 1;
    }
    spans
}

/// End of a match of `key` starting at `at`, if there is one.
fn match_at(text: &[u8], mut at: usize, key: &[u8]) -> Option<usize> {
    for &want in key {
        at += char_at(text, at, want)?;
    }
    Some(at)
}

/// Length of one encoded or literal occurrence of `want` at `at`.
fn char_at(text: &[u8], at: usize, want: u8) -> Option<usize> {
    let rest = text.get(at..)?;
    if rest.first() == Some(&want) {
        return Some(1);
    }
    if !want.is_ascii() {
        return None;
    }
    let hex = |s: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(s).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    let is = |v: Option<u32>| v == Some(u32::from(want));
    match rest {
        [b'%', a, b, ..] if is(hex(&[*a, *b])) => Some(3),
        [b'\\', b'x', a, b, ..] if is(hex(&[*a, *b])) => Some(4),
        [b'\\', b'u', a, b, c, d, ..] if is(hex(&[*a, *b, *c, *d])) => Some(6),
        [b'&', b'#', tail @ ..] => char_reference(tail, want).map(|n| n + 2),
        _ => None,
    }
}

/// `N;` or `xH;` after `&#`, when it names `want`: its length.
fn char_reference(tail: &[u8], want: u8) -> Option<usize> {
    let (radix, digits, skip) = match tail.first() {
        Some(b'x' | b'X') => (16, &tail[1..], 1),
        _ => (10, tail, 0),
    };
    let end = digits.iter().take(8).position(|&b| b == b';')?;
    let text = std::str::from_utf8(&digits[..end]).ok()?;
    let value = u32::from_str_radix(text, radix).ok()?;
    (value == u32::from(want)).then_some(skip + end + 1)
}

/// Substrings present in every base64, base64url and hex encoding of any
/// byte string containing `key`: for base64, one per alignment of the key
/// within the 3-byte groups (the characters touched by its neighbours are
/// left out), in both alphabets; for hex, both cases.
fn encoded_cores(key: &[u8]) -> Vec<String> {
    use base64::Engine;
    let mut cores = Vec::new();
    for shift in 0..3usize {
        let mut bytes = vec![0u8; shift];
        bytes.extend_from_slice(key);
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
        // Characters fully determined by the key: skip those that mix in
        // the leading filler, and the last one, which mixes in what follows.
        let skip = (shift * 8).div_ceil(6);
        let keep = (bytes.len() * 8) / 6;
        if keep > skip + 4 {
            let core = &encoded[skip..keep];
            cores.push(core.to_owned());
            let url = core.replace('+', "-").replace('/', "_");
            if url != core {
                cores.push(url);
            }
        }
    }
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    cores.push(hex.clone());
    cores.push(hex.to_ascii_uppercase());
    cores.sort();
    cores.dedup();
    cores
}

/// Each occurrence of `core`, widened to the run of base64/hex characters
/// around it.
fn find_encoded_runs(text: &str, core: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let in_run = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=');
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(rel) = text[from..].find(core) {
        let mut start = from + rel;
        let mut end = start + core.len();
        while start > 0 && in_run(bytes[start - 1]) {
            start -= 1;
        }
        while end < bytes.len() && in_run(bytes[end]) {
            end += 1;
        }
        spans.push((start, end));
        from = end;
    }
    spans
}

/// `text` with the (possibly overlapping) byte spans replaced by [`MARK`].
fn replace_spans(text: &str, mut spans: Vec<(usize, usize)>) -> String {
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in spans {
        if end <= copied {
            continue;
        }
        let start = start.max(copied);
        out.push_str(&text[copied..floor_char(text, start)]);
        out.push_str(MARK);
        copied = ceil_char(text, end);
    }
    out.push_str(&text[copied.min(text.len())..]);
    out
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const KEY: &str = "oa_sk_Zx9+q/r7";

    fn r() -> Redactor {
        Redactor::new(Some(KEY))
    }

    fn holds_key(s: &str) -> bool {
        s.contains(KEY)
    }

    #[test]
    fn plain_and_character_encodings_are_found() {
        let pct: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
        let mixed: String = KEY
            .bytes()
            .enumerate()
            .map(|(i, b)| match i % 4 {
                0 => format!("%{b:02x}"),
                1 => format!("\\u{b:04X}"),
                2 => format!("&#{b};"),
                _ => char::from(b).to_string(),
            })
            .collect();
        for form in [KEY.to_owned(), pct, mixed] {
            let text = format!("before Bearer {form} after");
            let out = r().text(&text).into_owned();
            assert_eq!(out, format!("before Bearer {MARK} after"), "{text}");
        }
        assert!(matches!(r().text("nothing here %41"), Cow::Borrowed(_)));
    }

    #[test]
    fn base64_and_hex_at_every_alignment_are_found() {
        let e = base64::engine::general_purpose::STANDARD;
        let u = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for prefix in ["", "B", "Be", "Bearer "] {
            let raw = format!("{prefix}{KEY}!");
            for encoded in [e.encode(&raw), u.encode(&raw)] {
                let out = r().text(&format!("x {encoded} y")).into_owned();
                assert_eq!(out, format!("x {MARK} y"), "{prefix:?} {encoded}");
            }
        }
        let hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(r().text(&hex), MARK);
    }

    #[test]
    fn json_strings_are_checked_as_decoded() {
        let escaped: String = KEY.bytes().map(|b| format!("\\u{b:04x}")).collect();
        let body = format!(r#"{{"echo":"{escaped}","n":[1,2],"{KEY}":true,"ok":"é\"x"}}"#);
        let out = r().json(&body).unwrap().into_owned();
        let parsed: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed["echo"], MARK);
        assert_eq!(parsed[MARK], true);
        assert_eq!(parsed["ok"], "é\"x");
        assert!(!holds_key(&parsed.to_string()));
        let clean = r#"{"a":"b\n","c":[null,1.5]}"#;
        assert!(matches!(r().json(clean), Some(Cow::Borrowed(_))));
        assert!(r().json("not json").is_none());
        assert!(Redactor::new(None).json(&body).is_some_and(|c| c == body));
    }
}
