//! The request path as `oajail.httpRules` see it: percent-decoded once, and
//! refused when two servers could read it as different paths.
//!
//! A rule is written decoded (`/v3/me/**`); a request may spell the same
//! path many ways (`/v3/%6de/keys`, `/v3/me;x/keys`, `/v3/x/..;/me/keys`),
//! and the upstream decides which resource it names. So the proxy decodes
//! `%XX` once and matches the rules on the result, after refusing every
//! spelling that servers disagree on:
//! - an encoded `/`, `\`, `;`, `?`, `#` or control character: some servers
//!   decode it before routing (`%2F` is `/` to them), others after;
//! - `%25` (an encoded `%`): a server that decodes twice reads `%252e` as
//!   `.`; there is no single reading of a double encoding;
//! - a malformed escape (`%u002e`, a lone `%`): IIS reads `%u` escapes;
//! - a `;` anywhere in the path: Tomcat, Jetty and Spring drop path
//!   parameters (`/me;x/keys` is `/me/keys`, `/..;/` is `/../`), others keep
//!   them;
//! - a `\`: Windows servers and some proxies read it as `/`;
//! - after decoding, a `.` or `..` segment, an empty segment (`//`), a
//!   segment ending in `.` or white space (Windows servers drop them:
//!   `/me./keys` is `/me/keys`), bytes that are not UTF-8 (overlong forms
//!   such as `%C0%AE` are read as `.` by old decoders), and characters that
//!   Unicode compatibility normalisation folds into ASCII (fullwidth forms,
//!   dot and slash look-alikes), which some frameworks apply.
//!
//! Letter case is the remaining disagreement: Windows, macOS and some
//! routers fold it, most do not. Deny rules therefore match ASCII
//! case-insensitively (`/v3/ME/keys` is denied by `/v3/me/**`), allow
//! rules case-sensitively (what is allowed is exactly what was written).

/// The path of a request, decoded, and its raw query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedPath {
    /// The decoded segments (`/a/b/` is `["a", "b", ""]`).
    pub segments: Vec<String>,
    /// The query as sent (without the `?`), empty when there is none.
    pub query: String,
}

/// Decode `target` (a request's path and query, as sent) or say why it
/// is refused.
pub fn decode(target: &str) -> Result<DecodedPath, &'static str> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !path.starts_with('/') {
        return Err("the path does not start with /");
    }
    if path.contains('\\') {
        return Err("a back slash in the path (read as / by some servers)");
    }
    if path.contains(';') {
        return Err("a ; parameter in the path (Tomcat, Jetty and Spring drop it: /a;x/b is /a/b)");
    }
    let bytes = percent_decode(path)?;
    let text = String::from_utf8(bytes).map_err(
        |_| "bytes that are not UTF-8 in the decoded path (overlong forms such as %C0%AE)",
    )?;
    let segments: Vec<String> = text[1..].split('/').map(str::to_owned).collect();
    let last = segments.len() - 1;
    for (i, s) in segments.iter().enumerate() {
        segment_problem(s, i == last)?;
    }
    Ok(DecodedPath {
        segments,
        query: query.to_owned(),
    })
}

/// `%XX` decoded once; an escape of a byte servers read differently
/// refused.
fn percent_decode(path: &str) -> Result<Vec<u8>, &'static str> {
    let raw = path.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'%' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
        let (Some(hi), Some(lo)) = (hex(raw.get(i + 1)), hex(raw.get(i + 2))) else {
            return Err("a malformed percent-encoding in the path (a lone % or %u…)");
        };
        let b = (hi * 16 + lo) as u8;
        match b {
            b'/' | b'\\' => return Err("an encoded slash (%2F or %5C) in the path"),
            b';' => return Err("an encoded ; (%3B) in the path"),
            b'?' | b'#' => return Err("an encoded ? or # in the path"),
            b'%' => return Err("double encoding (%25) in the path"),
            0..=0x1f | 0x7f => return Err("an encoded control character in the path"),
            _ => out.push(b),
        }
        i += 3;
    }
    Ok(out)
}

/// Why one decoded segment is refused (`last`: an empty last segment is a
/// trailing `/`).
fn segment_problem(s: &str, last: bool) -> Result<(), &'static str> {
    if s == "." || s == ".." {
        return Err("a dot segment in the decoded path");
    }
    if s.is_empty() {
        return if last {
            Ok(())
        } else {
            Err("an empty segment (//) in the path")
        };
    }
    if s.ends_with('.') || s.ends_with(char::is_whitespace) || s.starts_with(char::is_whitespace) {
        return Err("a segment ending in a dot or white space (Windows servers drop them)");
    }
    if s.chars().any(folds_to_ascii) {
        return Err(
            "a character Unicode normalisation folds into ASCII (fullwidth forms, dot and slash look-alikes)",
        );
    }
    Ok(())
}

/// Characters NFKC turns into ASCII punctuation or letters: the fullwidth
/// and halfwidth forms block, and the dot, slash and backslash look-alikes.
fn folds_to_ascii(c: char) -> bool {
    matches!(c, '\u{FF00}'..='\u{FFEF}')
        || matches!(
            c,
            '\u{2024}'
                | '\u{2025}'
                | '\u{2026}'
                | '\u{FE52}'
                | '\u{2215}'
                | '\u{2044}'
                | '\u{FE68}'
                | '\u{29F8}'
                | '\u{29F9}'
                | '\u{2216}'
        )
}

/// Headers that ask a server to treat a request as another method
/// (lower-case). Frameworks read them behind a proxy that only allows
/// `GET`/`POST` (Express `method-override`, Symfony, Laravel, Rack).
pub const METHOD_OVERRIDE_HEADERS: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// The query parameter frameworks read as a method override.
pub const METHOD_OVERRIDE_PARAM: &str = "_method";

/// One method a request asks to be treated as, and where it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// `X-HTTP-Method-Override` or `_method`, as shown to the user.
    pub source: String,
    /// The method named (upper-cased, as frameworks compare it).
    pub method: String,
}

/// The overrides in request headers (`(name, value)`, any case): one per
/// method named (a value may list several, comma-separated).
pub fn header_overrides<'a>(headers: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<Override> {
    let mut out = Vec::new();
    for (name, value) in headers {
        if !METHOD_OVERRIDE_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name))
        {
            continue;
        }
        let value = String::from_utf8_lossy(value);
        for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            out.push(Override {
                source: name.to_ascii_lowercase(),
                method: m.to_ascii_uppercase(),
            });
        }
    }
    out
}

/// The `_method` parameters of a query (`&` or `;` separated, keys and
/// values percent-decoded, `+` as a space).
pub fn query_overrides(query: &str) -> Vec<Override> {
    form_pairs(query, &['&', ';'])
        .into_iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(METHOD_OVERRIDE_PARAM))
        .map(|(_, v)| Override {
            source: METHOD_OVERRIDE_PARAM.to_owned(),
            method: v.trim().to_ascii_uppercase(),
        })
        .collect()
}

/// The `key=value` pairs of a form-encoded text split on `seps`, both
/// sides decoded (a pair without `=` has an empty value).
pub(crate) fn form_pairs(text: &str, seps: &[char]) -> Vec<(String, String)> {
    text.split(seps)
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` decoding, lossy.
fn form_decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let raw = s.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
        match (raw[i], hex(raw.get(i + 1)), hex(raw.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(t: &str) -> Vec<String> {
        decode(t).unwrap().segments
    }

    #[test]
    fn decodes_once() {
        assert_eq!(segs("/v3/%6de/keys?x=1"), ["v3", "me", "keys"]);
        assert_eq!(segs("/a%20b/"), ["a b", ""]);
        assert_eq!(segs("/"), [""]);
        assert_eq!(decode("/a?b=c").unwrap().query, "b=c");
    }

    #[test]
    fn refuses_what_servers_read_differently() {
        for bad in [
            "/v3/me;x/keys",
            "/v3/..;/admin",
            "/v3/%2e%2e/admin",
            "/v3/./me",
            "/v3/me%2fkeys",
            "/v3/me%5Ckeys",
            "/v3\\me",
            "/v3/%252e%252e/admin",
            "/v3/%u006de",
            "/v3/%",
            "/v3/%3b/x",
            "/v3//me",
            "/v3/me./keys",
            "/v3/me%20/keys",
            "/v3/%C0%AE%C0%AE/admin",
            "/v3/%EF%BD%8De/keys",
            "/v3/me%00/keys",
            "v3/me",
        ] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn finds_method_overrides() {
        let h = [
            ("X-HTTP-Method-Override", b"delete".as_slice()),
            ("Accept", b"*/*".as_slice()),
            ("x-method-override", b"PUT, PATCH".as_slice()),
        ];
        let got: Vec<String> = header_overrides(h.into_iter())
            .into_iter()
            .map(|o| o.method)
            .collect();
        assert_eq!(got, ["DELETE", "PUT", "PATCH"]);
        let q = query_overrides("a=1&%5Fmethod=delete;_method=put+");
        let got: Vec<&str> = q.iter().map(|o| o.method.as_str()).collect();
        assert_eq!(got, ["DELETE", "PUT"]);
        assert!(query_overrides("method=DELETE&x_method=PUT").is_empty());
    }
}
