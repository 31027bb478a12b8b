//! The request rules (`oajail.httpRules`) that make read-only mode a fact
//! of the wrapper, not a promise of this process.
//!
//! The allow list is derived from the loaded catalogue, operation by
//! operation: the method and the path template of every read operation
//! (and, with `--allow-writes`, of every write operation), under the base
//! URL's scheme, host, port and path. A template parameter becomes `*`,
//! which matches inside one path segment only, so `/agendas/{agendaUid}`
//! admits `/v3/agendas/123` but neither `/v3/agendas/1/events` nor
//! `/v3/agendas` (the proxy also refuses encoded slashes and dot segments
//! on a governed host, so a parameter cannot smuggle extra segments). In
//! read-only mode every method a write operation uses is also denied on
//! the whole host: the proxy judges deny rules first, so the refusal names
//! the rule ("writes are off") instead of "no rule matches", and an allow
//! rule added by hand cannot re-open writes.
//!
//! Every rule is parsed by `oajail-policy` here, so a spec path the rule
//! syntax cannot express refuses to start (naming the operation) instead
//! of producing a policy oajail would reject later.

use crate::McpError;
use crate::spec::Catalogue;
use oajail_policy::l7::HttpRule;
use reqwest::Url;
use std::collections::BTreeSet;

/// The allow and deny rules for one API, sorted and without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiRules {
    /// `METHOD scheme://host[:port]/path` of every operation allowed.
    pub allow: Vec<String>,
    /// Write methods refused on the whole host (read-only mode).
    pub deny: Vec<String>,
}

impl ApiRules {
    /// The rules for `catalogue` served from `base_url`.
    pub fn derive(
        base_url: &str,
        catalogue: &Catalogue,
        allow_writes: bool,
    ) -> Result<Self, McpError> {
        let origin = origin(base_url)?;
        let base_path = base_path(base_url)?;
        let mut allow = BTreeSet::new();
        let mut write_methods = BTreeSet::new();
        for op in &catalogue.ops {
            if op.is_write {
                write_methods.insert(op.method.as_str());
                if !allow_writes {
                    continue;
                }
            }
            let path = format!("{base_path}{}", template_pattern(&op.path));
            let text = format!("{} {origin}{path}", op.method);
            allow.insert(canonical(&text, &op.id)?);
        }
        let deny = if allow_writes {
            BTreeSet::new()
        } else {
            write_methods
                .into_iter()
                .map(|m| canonical(&format!("{m} {origin}/**"), "read-only mode"))
                .collect::<Result<_, _>>()?
        };
        Ok(Self {
            allow: allow.into_iter().collect(),
            deny: deny.into_iter().collect(),
        })
    }
}

impl ApiRules {
    /// These rules plus `extra` allow rules (the HTTP transport's requests
    /// to its issuer and token exchange, `what` in errors), each parsed.
    pub fn with_extra(mut self, extra: &[String], what: &str) -> Result<Self, McpError> {
        for text in extra {
            self.allow.push(canonical(text, what)?);
        }
        self.allow.sort();
        self.allow.dedup();
        Ok(self)
    }
}

/// `scheme://host[:port]` of the base URL (the port only when it is not
/// the scheme's default, as the rule syntax stores it).
fn origin(base_url: &str) -> Result<String, McpError> {
    let url = parse(base_url)?;
    let host = url.host_str().ok_or_else(|| bad_base("no host".into()))?;
    Ok(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// The base URL's path without its trailing `/` (`/v3`, or empty).
fn base_path(base_url: &str) -> Result<String, McpError> {
    let url = parse(base_url)?;
    Ok(url.path().trim_end_matches('/').to_owned())
}

fn parse(base_url: &str) -> Result<Url, McpError> {
    Url::parse(base_url).map_err(|e| bad_base(e.to_string()))
}

fn bad_base(message: String) -> McpError {
    McpError::Config {
        field: "OA_BASE_URL",
        message,
    }
}

/// A path template as a rule pattern: each `{param}` becomes `*` (one run
/// of characters inside one segment); adjacent parameters collapse into
/// one `*`, since `**` would mean "any number of segments".
pub fn template_pattern(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut in_param = false;
    for c in template.chars() {
        match c {
            '{' => {
                in_param = true;
                if !out.ends_with('*') {
                    out.push('*');
                }
            }
            '}' if in_param => in_param = false,
            _ if in_param => {}
            c => out.push(c),
        }
    }
    if !out.starts_with('/') {
        out.insert(0, '/');
    }
    out
}

/// The policy crate's canonical text of one rule; `what` names the
/// operation in the error.
fn canonical(text: &str, what: &str) -> Result<String, McpError> {
    HttpRule::parse(text)
        .map(|r| r.as_str().to_owned())
        .map_err(|e| {
            McpError::Egress(format!(
                "operation {what}: {text:?} cannot be an oajail.httpRules entry: {e}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_match_one_segment() {
        assert_eq!(
            template_pattern("/agendas/{agendaUid}/events"),
            "/agendas/*/events"
        );
        assert_eq!(template_pattern("/events/{uid}.json"), "/events/*.json");
        assert_eq!(template_pattern("/a/{x}{y}/b"), "/a/*/b");
        assert_eq!(template_pattern("agendas"), "/agendas");
    }

    #[test]
    fn origin_keeps_only_a_non_default_port() {
        assert_eq!(
            origin("https://api.openagenda.com/v3").unwrap(),
            "https://api.openagenda.com"
        );
        assert_eq!(
            origin("https://10.0.0.5:8443/v3/").unwrap(),
            "https://10.0.0.5:8443"
        );
        assert_eq!(base_path("https://10.0.0.5:8443/v3/").unwrap(), "/v3");
        assert_eq!(base_path("https://a.test").unwrap(), "");
    }
}
