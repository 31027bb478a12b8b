//! TLS termination (srt `network.tlsTerminate`) and oajail's request rules
//! (`oajail.httpRules`): the model, their validation, and the per-request
//! match the proxy asks for.
//!
//! A rule is one string, `METHOD scheme://host[:port]/path-pattern`
//! (`GET https://api.openagenda.com/v3/**`). A host that any rule names is
//! *governed*: each request to it must match an allow rule and no deny rule
//! (deny first). Requests to hosts no rule names are decided by the domain
//! lists alone. Path patterns match the request path without its query:
//! `*` is any run of characters inside one segment, `**` (a whole segment)
//! any number of segments, including none. Rules match the request path
//! decoded once (`l7_path.rs`); a path two servers could read as different
//! paths (an encoded `/`, `;` parameters, dot segments after decoding,
//! double encoding…) is refused instead of guessed at. Deny rules match
//! ASCII case-insensitively, allow rules exactly. A request that asks to be
//! treated as another method (`X-HTTP-Method-Override`, `X-HTTP-Method`,
//! `X-Method-Override`, a `_method` query parameter, a `_method` field of a
//! POST's form body: `l7_form.rs`) must be allowed under each method it
//! names too.
use crate::domain::{DomainPattern, ListKind};
use crate::error::{JsonPath, Problem, quote};
use crate::host::Host;
use serde::{Deserialize, Serialize};

#[path = "l7_form.rs"]
pub mod form;
#[path = "l7_path.rs"]
pub mod path;
use path::{DecodedPath, Override};

/// srt's default `tlsTerminate.maxTunnels`.
pub const DEFAULT_MAX_TUNNELS: u32 = 256;
/// srt's default `tlsTerminate.handshakeTimeoutMs`.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u32 = 10_000;

/// srt `network.tlsTerminate`: the proxy terminates TLS for every allowed
/// host except `exclude_domains`, with this CA (or one made per run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsTerminate {
    /// PEM CA certificate; with `ca_key_path`, or neither (ephemeral CA).
    pub ca_cert_path: Option<String>,
    /// PEM CA private key (read by the supervisor only, never the jail).
    pub ca_key_path: Option<String>,
    /// Hosts kept on the opaque tunnel (mTLS, pinned clients).
    pub exclude_domains: Vec<DomainPattern>,
    /// Extra PEM roots: trusted for upstreams and added to the jail's bundle.
    pub extra_ca_cert_paths: Vec<String>,
    /// Terminated tunnels open at once.
    pub max_tunnels: u32,
    /// Deadline for the client's and the upstream's TLS handshakes.
    pub handshake_timeout_ms: u32,
}

/// `oajail.httpRules`: request rules, deny first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRules {
    /// A governed request must match one of these.
    pub allow: Vec<HttpRule>,
    /// A request matching one of these is refused, whatever `allow` says.
    pub deny: Vec<HttpRule>,
}

impl HttpRules {
    /// No rules at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// One rule, stored as its canonical text and re-parsed on demand.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HttpRule {
    text: String,
    method: Option<String>,
    https: bool,
    host: DomainPattern,
    port: u16,
    path: Vec<String>,
}

impl From<HttpRule> for String {
    fn from(rule: HttpRule) -> String {
        rule.text
    }
}

impl TryFrom<String> for HttpRule {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        HttpRule::parse(&text)
    }
}

impl HttpRule {
    /// Parse `METHOD scheme://host[:port]/path-pattern`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (method, url) = text
            .split_once(' ')
            .ok_or("expected \"METHOD https://host/path\"")?;
        let method = parse_method(method)?;
        let (https, rest) = split_scheme(url)?;
        let slash = rest.find('/').ok_or("the url needs a path (at least /)")?;
        let (authority, path) = rest.split_at(slash);
        let parse = |a: &str| DomainPattern::parse(a, ListKind::Allow).map_err(|e| e.to_string());
        let mut host = parse(authority)?;
        let default_port = if https { 443 } else { 80 };
        // `https://a.test:443/` and `https://a.test/` are one rule.
        if host.port() == Some(default_port) {
            let bare = host.as_str().trim_end_matches(&format!(":{default_port}"));
            host = parse(bare)?;
        }
        let port = host.port().unwrap_or(default_port);
        let path = parse_path_pattern(path)?;
        let method_text = method.as_deref().unwrap_or("*");
        let scheme = if https { "https" } else { "http" };
        let text = format!(
            "{method_text} {scheme}://{}/{}",
            host.as_str(),
            path.join("/")
        );
        Ok(Self {
            text,
            method,
            https,
            host,
            port,
            path,
        })
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this rule names `host` (any scheme, any port).
    pub fn names_host(&self, host: &Host) -> bool {
        self.host.matches(host, self.port)
    }

    /// Whether the request matches (its path decoded, without the query;
    /// a path [`path::decode`] refuses matches nothing).
    pub fn matches(&self, req: &RequestFacts<'_>) -> bool {
        path::decode(req.path).is_ok_and(|d| self.matches_decoded(req, &d, req.method, false))
    }

    /// Whether the request, as `method`, matches on its decoded path
    /// (`fold_case`: ASCII case-insensitively, for deny rules).
    fn matches_decoded(
        &self,
        req: &RequestFacts<'_>,
        path: &DecodedPath,
        method: &str,
        fold_case: bool,
    ) -> bool {
        let segments: Vec<&str> = path.segments.iter().map(String::as_str).collect();
        self.https == req.https
            && self.port == req.port
            && self.host.matches(req.host, req.port)
            && self.method.as_deref().is_none_or(|m| m == method)
            && glob_segments(&self.path, &segments, fold_case)
    }
}

fn parse_method(method: &str) -> Result<Option<String>, String> {
    match method {
        "*" => Ok(None),
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => Ok(Some(m.to_owned())),
        m => Err(format!(
            "method {} must be upper-case letters or *",
            quote(m)
        )),
    }
}

/// `(https?, the rest after "scheme://")`.
fn split_scheme(url: &str) -> Result<(bool, &str), String> {
    if let Some(rest) = url.strip_prefix("https://") {
        Ok((true, rest))
    } else if let Some(rest) = url.strip_prefix("http://") {
        Ok((false, rest))
    } else {
        Err("the url must start with https:// or http://".into())
    }
}

fn parse_path_pattern(path: &str) -> Result<Vec<String>, String> {
    if path.contains(['?', '#', '\\', '%']) {
        return Err("the path pattern must not contain ?, #, \\ or %".into());
    }
    let segments: Vec<String> = path[1..].split('/').map(str::to_owned).collect();
    for s in &segments {
        if s == "." || s == ".." {
            return Err("the path pattern must not contain . or .. segments".into());
        }
        if s.contains("**") && s != "**" {
            return Err("** must be a whole path segment".into());
        }
        if s.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err("the path pattern must not contain spaces or control characters".into());
        }
    }
    Ok(segments)
}

/// What the proxy knows about one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// Inside a terminated TLS tunnel (else plain HTTP).
    pub https: bool,
    /// Canonical destination host.
    pub host: &'a Host,
    /// Destination port.
    pub port: u16,
    /// Request method as sent.
    pub method: &'a str,
    /// Request path as sent, query included (it is cut off here).
    pub path: &'a str,
}

/// `**` matches zero or more segments; other segments match one segment
/// with `*` as a wildcard inside it.
fn glob_segments(pattern: &[String], path: &[&str], fold: bool) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| glob_segments(rest, &path[skip..], fold))
        }
        Some((first, rest)) => match path.split_first() {
            Some((seg, tail)) => {
                glob_one(first.as_bytes(), seg.as_bytes(), fold) && glob_segments(rest, tail, fold)
            }
            None => false,
        },
    }
}

fn glob_one(pattern: &[u8], text: &[u8], fold: bool) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|k| glob_one(rest, &text[k..], fold)),
        Some((c, rest)) => {
            let same = text
                .first()
                .is_some_and(|t| t == c || (fold && t.eq_ignore_ascii_case(c)));
            same && glob_one(rest, &text[1..], fold)
        }
    }
}

/// How a governed request was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleVerdict {
    /// No rule names the host: the domain lists decided.
    Ungoverned,
    /// Allowed by this rule.
    Allowed(String),
    /// Refused: the deny rule that matched, or why no allow rule did.
    Refused(String),
}

impl HttpRules {
    /// Whether any rule names `host`.
    pub fn governs(&self, host: &Host) -> bool {
        self.allow
            .iter()
            .chain(&self.deny)
            .any(|r| r.names_host(host))
    }

    /// [`HttpRules::judge_with`] without override headers.
    pub fn judge(&self, req: &RequestFacts<'_>) -> RuleVerdict {
        self.judge_with(req, &[])
    }

    /// Deny rules first, then allow rules, on the decoded path; a governed
    /// host's request that no allow rule matches is refused, and so is one
    /// whose method overrides (`headers`, from [`path::header_overrides`],
    /// and the query's `_method`) name a method the rules refuse here.
    pub fn judge_with(&self, req: &RequestFacts<'_>, headers: &[Override]) -> RuleVerdict {
        if !self.governs(req.host) {
            return RuleVerdict::Ungoverned;
        }
        let decoded = match path::decode(req.path) {
            Ok(d) => d,
            Err(why) => return RuleVerdict::Refused(format!("oajail.httpRules: {why}")),
        };
        let verdict = self.judge_as(req, &decoded, req.method);
        if !matches!(verdict, RuleVerdict::Allowed(_)) {
            return verdict;
        }
        let query = path::query_overrides(&decoded.query);
        for o in headers.iter().chain(&query) {
            if o.method == req.method {
                continue;
            }
            if let RuleVerdict::Refused(why) = self.judge_as(req, &decoded, &o.method) {
                return RuleVerdict::Refused(format!(
                    "oajail.httpRules: {} asks for {} ({why})",
                    o.source, o.method
                ));
            }
        }
        verdict
    }

    /// When a form body's `_method` could change the verdict on this
    /// (otherwise allowed) request, the methods the rules refuse here
    /// (`"DELETE, PUT"`); `None` when no override could be refused, so the
    /// body need not be read.
    ///
    /// Rack's methods are tried, then one no rule names (Laravel and
    /// Symfony take any method name): refused only where the rules name
    /// methods one by one.
    pub fn refused_override(&self, req: &RequestFacts<'_>) -> Option<String> {
        if !self.governs(req.host) {
            return None;
        }
        let decoded = path::decode(req.path).ok()?;
        let refused = |m: &str| !matches!(self.judge_as(req, &decoded, m), RuleVerdict::Allowed(_));
        let named: Vec<&str> = (form::RACK_METHODS.iter().copied())
            .filter(|m| refused(m))
            .collect();
        match named.as_slice() {
            [] if refused("OAJAILUNNAMEDMETHOD") => Some("a method the rules do not name".into()),
            [] => None,
            _ => Some(named.join(", ")),
        }
    }

    /// The request judged as `method` (deny rules case-insensitively).
    fn judge_as(&self, req: &RequestFacts<'_>, path: &DecodedPath, method: &str) -> RuleVerdict {
        let deny = self
            .deny
            .iter()
            .find(|r| r.matches_decoded(req, path, method, true));
        if let Some(rule) = deny {
            return RuleVerdict::Refused(format!("oajail.httpRules.deny {}", quote(rule.as_str())));
        }
        match (self.allow.iter()).find(|r| r.matches_decoded(req, path, method, false)) {
            Some(rule) => RuleVerdict::Allowed(rule.as_str().to_owned()),
            None => RuleVerdict::Refused(
                "no oajail.httpRules.allow entry matches (the host is governed by oajail.httpRules)"
                    .into(),
            ),
        }
    }
}

/// Validate rule strings (with their JSON paths) into a sorted set.
pub(crate) fn rules(items: &[(JsonPath, String)]) -> Result<Vec<HttpRule>, Problem> {
    let mut out = items
        .iter()
        .map(|(path, text)| HttpRule::parse(text).map_err(|e| Problem::new(path, e)))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// `tlsTerminate` as read, before validation.
#[derive(Debug, Default)]
pub(crate) struct TlsDraft {
    pub(crate) ca_cert_path: Option<(JsonPath, String)>,
    pub(crate) ca_key_path: Option<(JsonPath, String)>,
    pub(crate) exclude_domains: Vec<(JsonPath, String)>,
    pub(crate) extra_ca_cert_paths: Vec<(JsonPath, String)>,
    pub(crate) max_tunnels: Option<u32>,
    pub(crate) handshake_timeout_ms: Option<u32>,
}

impl TlsDraft {
    /// srt: the CA paths come together or not at all.
    pub(crate) fn build(self, rules: &HttpRules, path: &JsonPath) -> Result<TlsTerminate, Problem> {
        let out_of_range = |key: &str, n: Option<u32>, lo: u32, hi: u32| {
            n.filter(|n| !(lo..=hi).contains(n))
                .map(|_| Problem::new(&path.key(key), format!("must be between {lo} and {hi}")))
        };
        if let Some(p) = out_of_range("maxTunnels", self.max_tunnels, 1, 65_536).or_else(|| {
            out_of_range(
                "handshakeTimeoutMs",
                self.handshake_timeout_ms,
                100,
                600_000,
            )
        }) {
            return Err(p);
        }
        if self.ca_cert_path.is_some() != self.ca_key_path.is_some() {
            let (path, _) = self.ca_cert_path.or(self.ca_key_path).unwrap_or_default();
            return Err(Problem::new(
                &path,
                "caCertPath and caKeyPath must be given together (or neither, for a per-run ca)",
            ));
        }
        let exclude = excludes(&self.exclude_domains, rules)?;
        let mut extra: Vec<String> = self
            .extra_ca_cert_paths
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        extra.sort();
        extra.dedup();
        Ok(TlsTerminate {
            ca_cert_path: self.ca_cert_path.map(|(_, t)| t),
            ca_key_path: self.ca_key_path.map(|(_, t)| t),
            exclude_domains: exclude,
            extra_ca_cert_paths: extra,
            max_tunnels: self.max_tunnels.unwrap_or(DEFAULT_MAX_TUNNELS),
            handshake_timeout_ms: self
                .handshake_timeout_ms
                .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT_MS),
        })
    }
}

/// `excludeDomains`, none of which may cover a host the rules govern.
fn excludes(
    items: &[(JsonPath, String)],
    rules: &HttpRules,
) -> Result<Vec<DomainPattern>, Problem> {
    let mut exclude = Vec::new();
    for (path, text) in items {
        let p = DomainPattern::parse(text, ListKind::Allow)
            .map_err(|e| Problem::new(path, e.to_string()))?;
        if let Some(rule) = (rules.allow.iter().chain(&rules.deny)).find(|r| overlaps(&p, r)) {
            let message = format!(
                "excludes a host that oajail.httpRules governs ({}); its requests could not be checked",
                quote(rule.as_str())
            );
            return Err(Problem::new(path, message));
        }
        exclude.push(p);
    }
    exclude.sort();
    exclude.dedup();
    Ok(exclude)
}

/// Could an exclude pattern cover a host a rule names? Checked on the
/// rule's host text as a name (exact or a sample subdomain for `*.`).
fn overlaps(exclude: &DomainPattern, rule: &HttpRule) -> bool {
    let text = rule.host.as_str();
    let text = text.split(':').next().unwrap_or(text);
    let sample = text.strip_prefix("*.").map(|d| format!("x.{d}"));
    let name = sample.as_deref().unwrap_or(text);
    crate::host::canonicalize(name).is_ok_and(|h| exclude.matches(&h, rule.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(host: &'a Host, method: &'a str, path: &'a str) -> RequestFacts<'a> {
        RequestFacts {
            https: true,
            host,
            port: 443,
            method,
            path,
        }
    }

    #[test]
    fn rules_match_deny_first() {
        let rules = HttpRules {
            allow: vec![HttpRule::parse("GET https://api.test/v3/**").unwrap()],
            deny: vec![HttpRule::parse("* https://api.test/v3/me/*").unwrap()],
        };
        let api = crate::host::canonicalize("api.test").unwrap();
        let other = crate::host::canonicalize("other.test").unwrap();
        let ok = |m, p| matches!(rules.judge(&facts(&api, m, p)), RuleVerdict::Allowed(_));
        assert!(ok("GET", "/v3/events?x=1"));
        assert!(ok("GET", "/v3"));
        assert!(ok("GET", "/v3/a/b/c"));
        assert!(!ok("POST", "/v3/events"));
        assert!(!ok("GET", "/v3/me/keys"));
        assert!(!ok("GET", "/v2/events"));
        assert!(!ok("GET", "/v3/../admin"));
        assert!(!ok("GET", "/v3/%2e%2e/admin"));
        assert!(!ok("GET", "/v3//x"));
        assert!(!ok("GET", "/v3%2fme"));
        assert_eq!(
            rules.judge(&facts(&other, "POST", "/")),
            RuleVerdict::Ungoverned
        );
    }

    #[test]
    fn rules_decide_on_the_decoded_path_and_every_method_asked_for() {
        let rules = HttpRules {
            allow: vec![
                HttpRule::parse("GET https://api.test/v3/**").unwrap(),
                HttpRule::parse("POST https://api.test/v3/events").unwrap(),
            ],
            deny: vec![HttpRule::parse("* https://api.test/v3/me/**").unwrap()],
        };
        let api = crate::host::canonicalize("api.test").unwrap();
        let judge = |m, p, h: &[(&str, &[u8])]| {
            let o = path::header_overrides(h.iter().copied());
            rules.judge_with(&facts(&api, m, p), &o)
        };
        let ok = |m, p, h| matches!(judge(m, p, h), RuleVerdict::Allowed(_));
        assert!(ok("GET", "/v3/%65vents", &[]));
        for denied in [
            "/v3/%6de/keys",
            "/v3/ME/keys",
            "/v3/Me/keys",
            "/v3/me;x/keys",
            "/v3/..;/admin",
            "/v3/x/%2e%2e/me",
        ] {
            assert!(!ok("GET", denied, &[]), "{denied}");
        }
        // Allow rules are exact: `/V3/…` is not what was allowed.
        assert!(!ok("GET", "/V3/events", &[]));
        let over: &[(&str, &[u8])] = &[("X-HTTP-Method-Override", b"DELETE")];
        assert!(!ok("GET", "/v3/events", over));
        assert!(!ok("GET", "/v3/events?_method=delete", &[]));
        assert!(!ok("POST", "/v3/events", &[("X-Method-Override", b"PUT")]));
        // Naming an allowed method, or the request's own, is fine.
        assert!(ok("POST", "/v3/events", &[("X-HTTP-Method", b"GET")]));
        assert!(ok("GET", "/v3/events?_method=GET", &[]));
        let RuleVerdict::Refused(why) = judge("GET", "/v3/events", over) else {
            panic!("allowed")
        };
        assert!(
            why.contains("x-http-method-override asks for DELETE"),
            "{why}"
        );
    }

    #[test]
    fn bad_rules() {
        for bad in [
            "get https://a.test/",
            "GET ftp://a.test/",
            "GET https://a.test",
            "GET https://a.test/a**",
            "GET https://a.test/../x",
            "GET https://a.test/x?y",
            "GET https://*/x",
            "GET https://user@a.test/x",
            "GEThttps://a.test/",
        ] {
            assert!(HttpRule::parse(bad).is_err(), "{bad}");
        }
        let r = HttpRule::parse("GET https://API.Test.:443/v3/*").unwrap();
        assert_eq!(r.as_str(), "GET https://api.test/v3/*");
    }
}
