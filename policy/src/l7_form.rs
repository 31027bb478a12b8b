//! `_method` in a form body: the method override Rails and other Rack
//! apps (Rack::MethodOverride), Laravel and Symfony read from a POST.
//!
//! Rack's rule, which this module follows: only a `POST` is overridden; its
//! body is parsed as a form when it has no content type, or a media type of
//! `application/x-www-form-urlencoded`, `multipart/form-data`,
//! `multipart/related` or `multipart/mixed` (a multipart type without a
//! `boundary` parameter is read as url-encoded, as Rack falls back to). A
//! `_method` field of that form names the method the app routes the
//! request as, ahead of the `X-HTTP-Method-Override` header.
//!
//! The proxy reads such a body (at most [`FORM_BODY_LIMIT`] bytes) only
//! when the override could change the verdict, that is when the rules
//! refuse some method here ([`crate::l7::HttpRules::refused_override`]).
//! A body over the limit is refused then: what it asks for is unknown.
//!
//! Pure parsing of bytes the caller buffered; no I/O.

use super::path::{Override, form_pairs};

/// The most body bytes the proxy buffers to find a `_method` field. Forms
/// that override a method are small (a hidden field and a few inputs);
/// uploads that need more go to a route the rules allow as POST.
pub const FORM_BODY_LIMIT: usize = 64 * 1024;

/// The methods Rack turns a POST into (`Rack::MethodOverride::HTTP_METHODS`).
pub const RACK_METHODS: &[&str] = &[
    "GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "LINK", "UNLINK",
];

/// Where a `_method` was found in a body, as shown to the user.
const SOURCE: &str = "the form body's _method";

/// How a POST body is read as a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormKind {
    /// `a=1&_method=delete` (also a body without a content type).
    UrlEncoded,
    /// Parts separated by `--boundary` lines.
    Multipart(String),
}

/// Whether a request with this method and `Content-Type` value has a body
/// a framework reads `_method` from, and how it is read.
pub fn form_kind(method: &str, content_type: Option<&[u8]>) -> Option<FormKind> {
    if method != "POST" {
        return None;
    }
    let value = content_type
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let media = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "application/x-www-form-urlencoded" => Some(FormKind::UrlEncoded),
        "multipart/form-data" | "multipart/related" | "multipart/mixed" => {
            Some(boundary(&value).map_or(FormKind::UrlEncoded, FormKind::Multipart))
        }
        _ => None,
    }
}

/// The `boundary` parameter of a multipart content type (quoted or not).
fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let v = v.trim().trim_matches('"');
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// Every `_method` field of a form body, read as `kind` says.
pub fn body_overrides(kind: &FormKind, body: &[u8]) -> Vec<Override> {
    let fields: Vec<String> = match kind {
        FormKind::UrlEncoded => {
            let text = String::from_utf8_lossy(body);
            form_pairs(&text, &['&', ';'])
                .into_iter()
                .filter(|(k, _)| is_method_key(k))
                .map(|(_, v)| v)
                .collect()
        }
        FormKind::Multipart(boundary) => multipart_fields(body, boundary),
    };
    fields
        .into_iter()
        .map(|v| Override {
            source: SOURCE.to_owned(),
            method: v
                .trim_matches(|c: char| c.is_whitespace() || c == '\0')
                .to_ascii_uppercase(),
        })
        .collect()
}

fn is_method_key(key: &str) -> bool {
    key.eq_ignore_ascii_case(super::path::METHOD_OVERRIDE_PARAM)
}

/// The values of the multipart parts named `_method` that are not files.
///
/// Written here rather than with a multipart crate: the proxy has the
/// whole (bounded) body in memory and needs only the part names, read as
/// leniently as a framework would (LF or CRLF line ends, quoted or bare
/// names), while the crates parse streams and stop at the first fault.
fn multipart_fields(body: &[u8], boundary: &str) -> Vec<String> {
    let delimiter = format!("--{boundary}");
    let mut out = Vec::new();
    // The first piece is the preamble; a piece starting `--` is the end.
    for part in split_on(body, delimiter.as_bytes()).into_iter().skip(1) {
        if part.starts_with(b"--") {
            break;
        }
        let Some((head, content)) = part_head(part) else {
            continue;
        };
        if part_name(head).is_some_and(|n| is_method_key(&n)) && !has_param(head, "filename") {
            let content = content.strip_suffix(b"\n").unwrap_or(content);
            let content = content.strip_suffix(b"\r").unwrap_or(content);
            out.push(String::from_utf8_lossy(content).into_owned());
        }
    }
    out
}

fn split_on<'a>(body: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(&rest[..at]);
        rest = &rest[at + sep.len()..];
    }
    out.push(rest);
    out
}

/// A part's header block (after the rest of the delimiter line) and its
/// content.
fn part_head(part: &[u8]) -> Option<(&str, &[u8])> {
    let line_end = part.iter().position(|b| *b == b'\n')?;
    let part = &part[line_end + 1..];
    let (end, skip) = [(&b"\r\n\r\n"[..], 4), (&b"\n\n"[..], 2)]
        .into_iter()
        .filter_map(|(sep, n)| Some((part.windows(sep.len()).position(|w| w == sep)?, n)))
        .min()?;
    let head = std::str::from_utf8(&part[..end]).ok()?;
    Some((head, &part[end + skip..]))
}

/// The `name` parameter of the part's `Content-Disposition`.
fn part_name(head: &str) -> Option<String> {
    disposition(head)?.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("name")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn has_param(head: &str, name: &str) -> bool {
    disposition(head).is_some_and(|d| {
        d.split(';').skip(1).any(|p| {
            let key = p.split('=').next().unwrap_or("").trim();
            key.eq_ignore_ascii_case(name) || key.eq_ignore_ascii_case(&format!("{name}*"))
        })
    })
}

fn disposition(head: &str) -> Option<&str> {
    head.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l7::{HttpRule, HttpRules, RequestFacts, RuleVerdict};

    fn facts<'a>(host: &'a crate::host::Host, method: &'a str, path: &'a str) -> RequestFacts<'a> {
        RequestFacts {
            https: true,
            host,
            port: 443,
            method,
            path,
        }
    }

    fn methods(kind: &FormKind, body: &str) -> Vec<String> {
        body_overrides(kind, body.as_bytes())
            .into_iter()
            .map(|o| o.method)
            .collect()
    }

    #[test]
    fn only_a_post_with_a_form_type_is_read() {
        let form = Some(&b"application/x-www-form-urlencoded; charset=utf-8"[..]);
        assert_eq!(form_kind("POST", form), Some(FormKind::UrlEncoded));
        assert_eq!(form_kind("POST", None), Some(FormKind::UrlEncoded));
        assert_eq!(form_kind("PUT", form), None);
        assert_eq!(form_kind("post", form), None);
        assert_eq!(form_kind("POST", Some(b"application/json")), None);
        assert_eq!(
            form_kind("POST", Some(b"Multipart/Form-Data; boundary=\"xYz\"")),
            Some(FormKind::Multipart("xYz".into()))
        );
        assert_eq!(
            form_kind("POST", Some(b"multipart/mixed; charset=x; boundary=b1")),
            Some(FormKind::Multipart("b1".into()))
        );
        // No boundary: Rack reads the body as url-encoded.
        assert_eq!(
            form_kind("POST", Some(b"multipart/form-data")),
            Some(FormKind::UrlEncoded)
        );
    }

    #[test]
    fn url_encoded_fields() {
        let k = FormKind::UrlEncoded;
        assert_eq!(methods(&k, "title=x&_method=delete"), ["DELETE"]);
        assert_eq!(methods(&k, "%5Fmethod=patch&a=1"), ["PATCH"]);
        assert_eq!(methods(&k, "_method=put\0"), ["PUT"]);
        assert_eq!(
            methods(&k, "_method=d%65lete&_method=put"),
            ["DELETE", "PUT"]
        );
        assert!(methods(&k, "method=delete&x_method=put").is_empty());
    }

    #[test]
    fn multipart_fields_by_name() {
        let k = FormKind::Multipart("B".into());
        let body = "preamble\r\n--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhi\r\n\
                    --B\r\ncontent-disposition: form-data; name=\"_method\"\r\n\r\ndelete\r\n\
                    --B\r\nContent-Disposition: form-data; name=\"_method\"; filename=\"m.txt\"\r\n\r\nput\r\n\
                    --B--\r\n--B\r\nContent-Disposition: form-data; name=_method\r\n\r\npatch\r\n";
        // The file part is not a field, and nothing after the close counts.
        assert_eq!(methods(&k, body), ["DELETE"]);
        let lf = "--B\nContent-Disposition: form-data; name=_method\n\npatch\n--B--";
        assert_eq!(methods(&k, lf), ["PATCH"]);
        assert!(methods(&k, "--B\r\nno head end").is_empty());
    }

    #[test]
    fn a_form_bodys_method_is_judged_where_the_rules_name_methods() {
        let rules = HttpRules {
            allow: vec![
                HttpRule::parse("GET https://api.test/v3/**").unwrap(),
                HttpRule::parse("POST https://api.test/v3/events").unwrap(),
                HttpRule::parse("* https://api.test/open/**").unwrap(),
            ],
            deny: vec![],
        };
        let api = crate::host::canonicalize("api.test").unwrap();
        let other = crate::host::canonicalize("other.test").unwrap();
        let post = facts(&api, "POST", "/v3/events");
        assert_eq!(
            rules.refused_override(&post).as_deref(),
            Some("HEAD, PUT, DELETE, OPTIONS, PATCH, LINK, UNLINK")
        );
        // Any method is allowed under /open: no override can be refused.
        assert_eq!(
            rules.refused_override(&facts(&api, "POST", "/open/x")),
            None
        );
        assert_eq!(rules.refused_override(&facts(&other, "POST", "/")), None);
        let kind = form_kind("POST", Some(b"application/x-www-form-urlencoded")).unwrap();
        let body = body_overrides(&kind, b"title=x&_method=delete");
        let RuleVerdict::Refused(why) = rules.judge_with(&post, &body) else {
            panic!("allowed")
        };
        assert!(
            why.contains("the form body's _method asks for DELETE"),
            "{why}"
        );
        let body = body_overrides(&kind, b"_method=post&title=x");
        assert!(matches!(
            rules.judge_with(&post, &body),
            RuleVerdict::Allowed(_)
        ));
        // Only Rack's methods named one by one: any other name is refused.
        let all = HttpRules {
            allow: (RACK_METHODS.iter())
                .map(|m| HttpRule::parse(&format!("{m} https://api.test/**")).unwrap())
                .collect(),
            deny: vec![],
        };
        assert_eq!(
            all.refused_override(&post).as_deref(),
            Some("a method the rules do not name")
        );
    }
}
