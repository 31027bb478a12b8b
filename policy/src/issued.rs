//! `oajail.issuedTokens`: credentials a token endpoint issues into the
//! jail at run time, masked as they arrive.
//!
//! A masked variable (`credentials.envVars`) covers a secret known when
//! the run starts. A program that obtains its credential while it runs
//! (an OAuth client exchanging a token, RFC 8693 or any grant) would
//! otherwise hold the real token in the jail. With
//! `{"tokenUrl": "https://auth.example/token", "injectHosts": ["api.example"]}`
//! the proxy reads each successful JSON response to a `POST` to exactly
//! that URL (inside the terminated tunnel), replaces its `access_token`
//! with a fresh sentinel that it swaps back only in the headers of
//! requests to `injectHosts` (as a masked variable's), its `refresh_token`
//! with one that goes back to the token endpoint's host only, and its
//! `id_token` with one that goes nowhere; a response it cannot read is not
//! passed into the jail. Sentinels live as long as the token's
//! `expires_in` (one hour when absent, at most one day).
//!
//! Checked here, each refused with the JSON path of the field: the URL is
//! `https` with a host and an absolute path (no query, fragment or dot
//! segment); masking needs `network.tlsTerminate`; the endpoint's host and
//! every inject host are allowed, not denied and not excluded from
//! termination (the rules of `credentials`).

use crate::NetworkPolicy;
use crate::error::At;
use crate::error::{JsonPath, Problem, quote};
use crate::host;

// The entry's type lives with the policy it is part of (`crate::model`),
// so that the model does not name this module, which validates entries
// against the model's network policy.
pub use crate::model::IssuedTokens;

/// An entry before validation.
#[derive(Debug, Clone)]
pub(crate) struct IssuedDraft {
    /// `oajail.issuedTokens[i]`.
    pub path: JsonPath,
    /// `tokenUrl`.
    pub token_url: String,
    /// `injectHosts`, each with its path.
    pub inject_hosts: Vec<At<String>>,
}

/// Validates the entries against the network policy.
pub(crate) fn build(
    drafts: &[IssuedDraft],
    network: &NetworkPolicy,
) -> Result<Vec<IssuedTokens>, Problem> {
    let mut out: Vec<IssuedTokens> = Vec::new();
    for draft in drafts {
        let at = draft.path.key("tokenUrl");
        let token_url = canonical_url(&draft.token_url)
            .map_err(|why| Problem::new(&at, format!("{} {why}", quote(&draft.token_url))))?;
        let tls = crate::credentials::needs_tls(&draft.path, network)?;
        let endpoint_host = authority_of(&token_url);
        crate::credentials::inject_hosts(&[(at.clone(), endpoint_host)], network, tls)?;
        let hosts = crate::credentials::inject_hosts(&draft.inject_hosts, network, tls)?;
        match out.iter_mut().find(|e| e.token_url == token_url) {
            Some(same) => same.inject_hosts.extend(hosts),
            None => out.push(IssuedTokens {
                token_url,
                inject_hosts: hosts,
            }),
        }
    }
    for e in &mut out {
        e.inject_hosts.sort();
        e.inject_hosts.dedup();
    }
    out.sort();
    Ok(out)
}

/// `host[:port]` of a canonical token URL, as an inject-host entry.
fn authority_of(url: &str) -> String {
    let rest = url.strip_prefix("https://").unwrap_or(url);
    rest.split('/').next().unwrap_or_default().to_owned()
}

/// The canonical form of a token URL, or why it is refused.
fn canonical_url(raw: &str) -> Result<String, &'static str> {
    let rest = (raw.strip_prefix("https://"))
        .ok_or("must be an https:// URL (the proxy can only read a terminated response)")?;
    if raw.contains(['?', '#']) {
        return Err("must have no query or fragment");
    }
    let slash = rest
        .find('/')
        .ok_or("needs a path (the token endpoint's)")?;
    let (authority, path) = rest.split_at(slash);
    if path.split('/').any(|s| s == "." || s == "..") || path.contains("//") {
        return Err("must not have dot segments or empty segments");
    }
    let (name, port) = match host::split_authority(authority) {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let h = host::canonicalize(name).map_err(|_| "has no valid host")?;
    Ok(match port.filter(|p| *p != 443) {
        Some(p) => format!("https://{h}:{p}{path}"),
        None => format!("https://{h}{path}"),
    })
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    fn load(issued: &str, tls: bool) -> Result<Policy, String> {
        let tls = if tls { r#", "tlsTerminate": {}"# } else { "" };
        let text = format!(
            r#"{{"network": {{"allowedDomains": ["api.test", "auth.test"], "deniedDomains": [] {tls}}},
               "filesystem": {{"denyRead": [], "allowWrite": [], "denyWrite": []}},
               "oajail": {{"issuedTokens": {issued}}}}}"#
        );
        Policy::from_settings_json(&text, "t.json")
            .map(|l| l.policy)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn an_entry_is_canonical_and_in_the_hash() {
        let p = load(
            r#"[{"tokenUrl": "https://AUTH.test:443/oauth/token", "injectHosts": ["api.test"]}]"#,
            true,
        )
        .unwrap();
        let e = &p.oajail.issued_tokens[0];
        assert_eq!(e.token_url, "https://auth.test/oauth/token");
        let (h, port, path) = e.endpoint().unwrap();
        assert!(e.is_endpoint(&h, port, path));
        assert_eq!((port, path), (443, "/oauth/token"));
        let again = Policy::from_settings_json(&p.to_srt_json().to_string(), "again").unwrap();
        assert_eq!(again.policy, p);
        let canonical = Policy::from_settings_json(&p.canonical_json(), "c").unwrap();
        assert_eq!(canonical.policy.sha256(), p.sha256());
        let without = load("[]", true).unwrap();
        assert_ne!(without.sha256(), p.sha256());
        assert!(
            !without.canonical_json().contains("issuedTokens"),
            "old hashes stay"
        );
    }

    #[test]
    fn bad_entries_name_the_field() {
        let cases = [
            (
                r#"[{"tokenUrl": "http://auth.test/t", "injectHosts": []}]"#,
                true,
                "oajail.issuedTokens[0].tokenUrl: \"http://auth.test/t\" must be an https",
            ),
            (
                r#"[{"tokenUrl": "https://auth.test/t?x=1", "injectHosts": []}]"#,
                true,
                "no query",
            ),
            (
                r#"[{"tokenUrl": "https://auth.test/a/../t", "injectHosts": []}]"#,
                true,
                "dot segments",
            ),
            (
                r#"[{"tokenUrl": "https://other.test/t", "injectHosts": []}]"#,
                true,
                "\"other.test\" is not in allowedDomains",
            ),
            (
                r#"[{"tokenUrl": "https://auth.test/t", "injectHosts": ["x.test"]}]"#,
                true,
                "oajail.issuedTokens[0].injectHosts[0]: \"x.test\" is not in allowedDomains",
            ),
            (
                r#"[{"tokenUrl": "https://auth.test/t", "injectHosts": []}]"#,
                false,
                "needs network.tlsTerminate",
            ),
        ];
        for (issued, tls, want) in cases {
            let err = load(issued, tls).unwrap_err();
            assert!(err.contains(want), "{issued}: got {err}, want {want}");
        }
    }
}
