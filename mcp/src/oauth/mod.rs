//! The OAuth 2.1 resource server of the HTTP transport, and the RFC 8693
//! token exchange that gives each caller's executes its own authority.
//!
//! - [`Settings`]: `OA_OAUTH_ISSUER`, `OA_OAUTH_RESOURCE` (the audience),
//!   optional `OA_OAUTH_JWKS_URL` and `OA_OAUTH_SCOPES`, checked at start
//!   (an `http://` issuer or key URL only on loopback);
//! - [`discovery`]: the issuer's metadata (RFC 8414, then OpenID Connect
//!   discovery), whose `issuer` must be ours, gives the `jwks_uri`;
//! - [`jwks`]: the key cache, refreshed when a token names an unknown
//!   `kid`, at most once per [`jwks::MIN_REFRESH`];
//! - [`verify`]: RS256, ES256 and EdDSA access tokens (JWS), `iss`, `aud`,
//!   `exp`, `nbf` and `sub` checked, into a [`Caller`];
//! - [`verified`]: tokens that passed, remembered by digest until they
//!   expire, so a session's later requests skip the signature check;
//! - [`exchange`]: the caller's token traded for an API token (RFC 8693),
//!   cached per caller token until shortly before it expires;
//! - [`client`]: the one HTTP client these use (no redirects, capped
//!   bodies, the API client's trust roots).
//!
//! Invariants: no request is served on a token that was not verified
//! against a key from the configured issuer; a failure to reach the
//! issuer is a `503`, never an accepted token; tokens (the caller's and
//! the exchanged one) are never logged, never put in an error text, and
//! never reach a worker: [`Caller`] and [`exchange::ApiToken`] print
//! fingerprints only.

pub mod client;
pub mod discovery;
pub mod exchange;
pub mod jwks;
pub mod verified;
pub mod verify;

use crate::McpError;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The resource server's configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The authorization server's issuer identifier (exact string).
    pub issuer: url::Url,
    /// This server's resource identifier: the required audience, and the
    /// `resource` of its protected-resource metadata.
    pub resource: url::Url,
    /// The key set's URL, when given instead of discovered.
    pub jwks_url: Option<url::Url>,
    /// Scopes every token must carry (none by default).
    pub scopes: Vec<String>,
    /// Shortest interval between two key set fetches
    /// (`OA_OAUTH_JWKS_REFRESH_SECS`, default [`jwks::MIN_REFRESH`]).
    pub jwks_min_refresh: std::time::Duration,
}

impl Settings {
    /// From the raw values; `None` when neither issuer nor resource is set.
    pub fn parse(
        issuer: Option<&str>,
        resource: Option<&str>,
        jwks_url: Option<&str>,
        scopes: Option<&str>,
    ) -> Result<Option<Self>, McpError> {
        let (issuer, resource) = match (non_empty(issuer), non_empty(resource)) {
            (None, None) => return Ok(None),
            (Some(i), Some(r)) => (i, r),
            (None, Some(_)) => return Err(missing("OA_OAUTH_ISSUER")),
            (Some(_), None) => return Err(missing("OA_OAUTH_RESOURCE")),
        };
        let issuer = secure_url("OA_OAUTH_ISSUER", issuer)?;
        let resource = secure_url("OA_OAUTH_RESOURCE", resource)?;
        let jwks_url = non_empty(jwks_url)
            .map(|u| secure_url("OA_OAUTH_JWKS_URL", u))
            .transpose()?;
        let scopes = non_empty(scopes)
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(Some(Self {
            issuer,
            resource,
            jwks_url,
            scopes,
            jwks_min_refresh: jwks::MIN_REFRESH,
        }))
    }

    /// The issuer exactly as tokens and metadata must name it (a trailing
    /// slash of a bare origin is the `Url` type's, not the user's).
    pub fn issuer_id(&self) -> String {
        exact(&self.issuer)
    }

    /// The audience tokens must carry.
    pub fn audience(&self) -> String {
        exact(&self.resource)
    }

    /// Hosts this configuration talks to (for the egress policy).
    pub fn hosts(&self) -> Vec<String> {
        [Some(&self.issuer), self.jwks_url.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|u| u.host_str().map(str::to_owned))
            .collect()
    }

    /// Where this server publishes its RFC 9728 metadata: the well-known
    /// path inserted before the resource's own path.
    pub fn metadata_url(&self) -> String {
        let mut url = self.resource.clone();
        let path = self.resource.path().trim_end_matches('/');
        url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        url.set_query(None);
        url.set_fragment(None);
        url.to_string()
    }
}

/// `url` as the user wrote it: `Url` adds `/` to a bare origin.
fn exact(url: &url::Url) -> String {
    let text = url.as_str();
    if url.path() == "/" && url.query().is_none() && url.fragment().is_none() {
        text.trim_end_matches('/').to_owned()
    } else {
        text.to_owned()
    }
}

fn non_empty(v: Option<&str>) -> Option<&str> {
    v.map(str::trim).filter(|v| !v.is_empty())
}

fn missing(field: &'static str) -> McpError {
    McpError::Config {
        field,
        message: "is required with the other OAuth setting (OA_OAUTH_ISSUER and OA_OAUTH_RESOURCE go together)".into(),
    }
}

/// An `https` URL, or `http` on a loopback host only.
pub fn secure_url(field: &'static str, raw: &str) -> Result<url::Url, McpError> {
    let bad = |message: String| McpError::Config { field, message };
    let url = url::Url::parse(raw).map_err(|e| bad(format!("{raw:?}: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => {
            return Err(bad(format!(
                "{raw:?}: plain http is accepted only on a loopback host (127.0.0.0/8, ::1, localhost); use https"
            )));
        }
        other => return Err(bad(format!("{raw:?}: unsupported scheme {other}"))),
    }
    if url.host_str().is_none() || url.username() != "" || url.password().is_some() {
        return Err(bad(format!(
            "{raw:?}: needs a host and no user information"
        )));
    }
    if url.fragment().is_some() {
        return Err(bad(format!("{raw:?}: a fragment is not allowed")));
    }
    Ok(url)
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A verified caller: who, through which client, with which token.
#[derive(Clone)]
pub struct Caller {
    /// `sub`: the key of per-caller limits and the audit's caller.
    pub sub: String,
    /// `client_id` (RFC 9068), else `azp`.
    pub client_id: Option<String>,
    /// The token's scopes.
    pub scopes: Vec<String>,
    /// `exp`, seconds since the epoch.
    pub expires_at: u64,
    /// The bearer token itself (for the token exchange only).
    token: Arc<str>,
}

impl Caller {
    /// A caller from verified claims and its token.
    pub fn new(
        sub: String,
        client_id: Option<String>,
        scopes: Vec<String>,
        expires_at: u64,
        token: &str,
    ) -> Self {
        Self {
            sub,
            client_id,
            scopes,
            expires_at,
            token: Arc::from(token),
        }
    }

    /// The bearer token (never log it).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A short fingerprint of the token, for logs and audit records.
    pub fn token_fingerprint(&self) -> String {
        fingerprint(&self.token)
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("sub", &self.sub)
            .field("client_id", &self.client_id)
            .field("token", &self.token_fingerprint())
            .finish()
    }
}

/// `sha256:` and the first 16 hex digits of the SHA-256 of a secret: it
/// tells two credentials apart in an audit trail without revealing either.
pub fn fingerprint(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    format!("sha256:{}", &crate::log::hex(&digest)[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_fail_closed() {
        assert!(Settings::parse(None, None, None, None).unwrap().is_none());
        let e = Settings::parse(Some("https://as.example"), None, None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("config OA_OAUTH_RESOURCE:"),
            "{e}"
        );
        let e = Settings::parse(
            Some("http://as.example"),
            Some("https://mcp.example/mcp"),
            None,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
        let ok = Settings::parse(
            Some("http://127.0.0.1:9000"),
            Some("https://mcp.example/mcp"),
            None,
            Some("mcp:use  extra"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(ok.issuer_id(), "http://127.0.0.1:9000");
        assert_eq!(ok.audience(), "https://mcp.example/mcp");
        assert_eq!(ok.scopes, vec!["mcp:use", "extra"]);
        assert_eq!(
            ok.metadata_url(),
            "https://mcp.example/.well-known/oauth-protected-resource/mcp"
        );
        assert!(
            Settings::parse(
                Some("https://u:p@as.example"),
                Some("https://m.example"),
                None,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn caller_debug_shows_no_token() {
        let c = Caller::new("alice".into(), None, vec![], 0, "secret-token-value");
        let text = format!("{c:?}");
        assert!(
            !text.contains("secret-token-value") && text.contains("sha256:"),
            "{text}"
        );
    }
}
