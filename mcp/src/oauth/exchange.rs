//! RFC 8693 token exchange: each caller's executes call the API with a
//! token issued for that caller, not with a key of the server's.
//!
//! Before an execute, the caller's verified access token is sent as the
//! `subject_token` to `OA_TOKEN_EXCHANGE_URL`, with this server's client
//! credentials (`OA_TOKEN_EXCHANGE_CLIENT_ID` and
//! `OA_TOKEN_EXCHANGE_CLIENT_SECRET`, HTTP Basic as RFC 6749 2.3.1 asks of
//! every server) and, when set, `audience` (`OA_TOKEN_EXCHANGE_AUDIENCE`)
//! and `scope` (`OA_TOKEN_EXCHANGE_SCOPE`). The issued `access_token`
//! (`token_type` Bearer) is what the API sees. It is kept per caller token
//! (by its SHA-256) until 30 s before the earlier of its own expiry and
//! the caller token's, so a caller's burst of executes costs one exchange.
//!
//! The issued token is handled as the API key is: it lives in the
//! server's memory only, goes out only as the `Authorization` of API
//! requests (the API client's host check), is redacted from every text a
//! script could see, and prints as a fingerprint. Under `--jail` the
//! wrapper's proxy swaps it for a stand-in in the exchange's response, so
//! the jailed server only ever holds that stand-in (docs/mcp.md).

use super::Caller;
use super::client::Client;
use crate::McpError;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Issued tokens are dropped this long before they expire.
const MARGIN: Duration = Duration::from_secs(30);
/// Lifetime assumed when the response gives no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Most issued tokens kept.
const MAX_CACHED: usize = 4096;

/// The exchange's configuration.
#[derive(Clone)]
pub struct Settings {
    /// The token endpoint.
    pub url: url::Url,
    /// This server's client id at the authorization server.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// `audience` to ask for, when set.
    pub audience: Option<String>,
    /// `scope` to ask for, when set.
    pub scope: Option<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("url", &self.url.as_str())
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// From the raw values; `None` when no exchange URL is set.
    pub fn parse(
        url: Option<&str>,
        client_id: Option<&str>,
        client_secret: Option<&str>,
        audience: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Option<Self>, McpError> {
        let get = |v: Option<&str>| {
            v.map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let Some(raw) = get(url) else {
            return Ok(None);
        };
        let url = super::secure_url("OA_TOKEN_EXCHANGE_URL", &raw)?;
        let need = |field: &'static str, v: Option<String>| {
            v.ok_or(McpError::Config {
                field,
                message: "is required with OA_TOKEN_EXCHANGE_URL (the server's client credentials at the authorization server)".into(),
            })
        };
        Ok(Some(Self {
            url,
            client_id: need("OA_TOKEN_EXCHANGE_CLIENT_ID", get(client_id))?,
            client_secret: need("OA_TOKEN_EXCHANGE_CLIENT_SECRET", get(client_secret))?,
            audience: get(audience),
            scope: get(scope),
        }))
    }
}

/// A token issued for one caller.
pub struct ApiToken {
    value: String,
    until: Instant,
}

impl ApiToken {
    /// The token (never log it).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Its fingerprint ([`super::fingerprint`]).
    pub fn fingerprint(&self) -> String {
        super::fingerprint(&self.value)
    }
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiToken({})", self.fingerprint())
    }
}

/// A failed exchange, as the execute's error.
#[derive(Debug)]
pub struct Failed {
    /// What happened (the authorization server's error code and text).
    pub message: String,
    /// A network or server failure (5xx) may pass; a refusal will not.
    pub retryable: bool,
}

/// The exchanger.
pub struct Exchanger {
    settings: Settings,
    client: Client,
    cache: Mutex<HashMap<[u8; 32], Arc<ApiToken>>>,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Exchanger({:?})", self.settings)
    }
}

impl Exchanger {
    /// An exchanger for `settings`.
    pub fn new(settings: Settings, client: Client) -> Self {
        Self {
            settings,
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The token endpoint's host (for the egress policy).
    pub fn host(&self) -> Option<String> {
        self.settings.url.host_str().map(str::to_owned)
    }

    /// The API token for `caller`: cached, or exchanged now.
    pub async fn token_for(&self, caller: &Caller) -> Result<Arc<ApiToken>, Failed> {
        let key: [u8; 32] = Sha256::digest(caller.token().as_bytes()).into();
        if let Some(t) = self.cached(&key) {
            return Ok(t);
        }
        let token = Arc::new(self.exchange(caller).await?);
        self.keep(key, token.clone());
        Ok(token)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Arc<ApiToken>> {
        let cache = self.cache.lock().ok()?;
        cache.get(key).filter(|t| Instant::now() < t.until).cloned()
    }

    fn keep(&self, key: [u8; 32], token: Arc<ApiToken>) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        let now = Instant::now();
        cache.retain(|_, t| now < t.until);
        if cache.len() >= MAX_CACHED
            && let Some(soonest) = cache.iter().min_by_key(|(_, t)| t.until).map(|(k, _)| *k)
        {
            cache.remove(&soonest);
        }
        cache.insert(key, token);
    }

    async fn exchange(&self, caller: &Caller) -> Result<ApiToken, Failed> {
        let s = &self.settings;
        let mut form = vec![
            ("grant_type", GRANT),
            ("subject_token", caller.token()),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
        ];
        if let Some(a) = &s.audience {
            form.push(("audience", a));
        }
        if let Some(scope) = &s.scope {
            form.push(("scope", scope));
        }
        let basic = Some((s.client_id.as_str(), s.client_secret.as_str()));
        let reply =
            (self.client.post_form(s.url.as_str(), &form, basic).await).map_err(|e| Failed {
                message: format!("token exchange: {e}"),
                retryable: true,
            })?;
        if reply.status != 200 {
            return Err(refused(reply.status, &reply.json));
        }
        issued(&reply.json, caller.expires_at)
    }
}

fn refused(status: u16, body: &Value) -> Failed {
    let text = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("");
    let detail: String = format!("{} {}", text("error"), text("error_description"))
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(300)
        .collect();
    Failed {
        message: format!(
            "token exchange refused (HTTP {status}){}{detail}",
            if detail.is_empty() { "" } else { ": " }
        ),
        retryable: status >= 500 || status == 429,
    }
}

/// The issued token from a 200 response, checked.
fn issued(body: &Value, caller_expires_at: u64) -> Result<ApiToken, Failed> {
    let bad = |why: &str| Failed {
        message: format!("token exchange: {why}"),
        retryable: false,
    };
    let value = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("the response has no access_token"))?;
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("the issued token has characters a header cannot carry"));
    }
    let kind = body.get("token_type").and_then(Value::as_str).unwrap_or("");
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(bad(&format!(
            "the issued token_type is {kind:?}, not Bearer"
        )));
    }
    if let Some(t) = body.get("issued_token_type").and_then(Value::as_str)
        && t != ACCESS_TOKEN
    {
        return Err(bad(&format!(
            "issued_token_type {t:?} is not an access token"
        )));
    }
    let lifetime = body
        .get("expires_in")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LIFETIME, Duration::from_secs);
    let now_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let caller_left = Duration::from_secs(caller_expires_at.saturating_sub(now_epoch));
    let until = Instant::now() + lifetime.min(caller_left).saturating_sub(MARGIN);
    Ok(ApiToken {
        value: value.to_owned(),
        until,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_response_is_checked() {
        let far = u64::MAX / 2;
        assert!(issued(&json!({"access_token": "t", "token_type": "Bearer"}), far).is_ok());
        assert!(issued(&json!({"access_token": "t", "token_type": "DPoP"}), far).is_err());
        assert!(issued(&json!({"token_type": "Bearer"}), far).is_err());
        assert!(issued(&json!({"access_token": "a b", "token_type": "bearer"}), far).is_err());
        let r = refused(
            400,
            &json!({"error": "invalid_grant", "error_description": "subject\ntoken revoked"}),
        );
        assert_eq!(
            r.message,
            "token exchange refused (HTTP 400): invalid_grant subjecttoken revoked"
        );
        assert!(!r.retryable);
        assert!(refused(503, &json!(null)).retryable);
    }

    #[test]
    fn settings_need_client_credentials() {
        assert!(
            Settings::parse(None, None, None, None, None)
                .unwrap()
                .is_none()
        );
        let e = Settings::parse(
            Some("https://as.example/token"),
            Some("c"),
            None,
            None,
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("config OA_TOKEN_EXCHANGE_CLIENT_SECRET"),
            "{e}"
        );
        let s = Settings::parse(
            Some("https://as.example/token"),
            Some("c"),
            Some("s3cret"),
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert!(!format!("{s:?}").contains("s3cret"));
    }
}
