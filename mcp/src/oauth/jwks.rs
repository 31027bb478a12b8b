//! The issuer's signing keys, cached.
//!
//! Keys are fetched at the first verification (the server starts, and
//! `/health` answers, without the issuer), then kept for the key set's
//! `Cache-Control: max-age` (1 hour when absent; between 1 minute and
//! 1 day). A token naming a `kid` the cache does not hold triggers one
//! refresh, so a rotated key is picked up at once, but refreshes are at
//! least [`MIN_REFRESH`] apart (`OA_OAUTH_JWKS_REFRESH_SECS`): a stream of tokens with made-up `kid`s
//! costs the issuer one request per interval, not one per token. One
//! refresh runs at a time; the others wait for its result. When a refresh
//! fails, the keys already held keep serving (logged), and with none the
//! request gets `503`, never an accepted token.
//!
//! Only signature keys this server accepts are kept: RSA (2048 bits or
//! more) for RS256, EC P-256 for ES256, OKP Ed25519 for EdDSA; a key's own
//! `alg`, when it has one, must be the token's, and a key marked for
//! another `use` than `sig` is skipped.

use super::client::Client;
use super::discovery;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Shortest interval between two key set fetches, by default.
pub const MIN_REFRESH: Duration = Duration::from_secs(30);
const DEFAULT_TTL: Duration = Duration::from_secs(3600);
const TTL_RANGE: (Duration, Duration) = (Duration::from_secs(60), Duration::from_secs(86_400));
/// Most keys kept from one key set.
const MAX_KEYS: usize = 64;

/// One usable key.
pub struct Key {
    /// `kid`, when the key set gives one.
    pub kid: Option<String>,
    /// The one algorithm this key verifies.
    pub alg: Algorithm,
    /// The key itself.
    pub decoding: DecodingKey,
}

/// Why no key could be had.
#[derive(Debug)]
pub enum KeyError {
    /// The token names a key the issuer does not publish (or none fits).
    Unknown(String),
    /// The issuer's metadata or keys could not be fetched.
    Unavailable(String),
}

#[derive(Default)]
struct KeySet {
    keys: Vec<Arc<Key>>,
    fetched: Option<Instant>,
    ttl: Duration,
}

impl KeySet {
    fn stale(&self) -> bool {
        self.fetched.is_none_or(|t| t.elapsed() >= self.ttl)
    }

    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<Key>, String> {
        let fits = |k: &&Arc<Key>| k.alg == alg;
        match kid {
            Some(kid) => (self.keys.iter())
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid))
                .cloned()
                .ok_or_else(|| format!("no {alg:?} key with kid {kid:?} in the issuer's key set")),
            None => {
                let found: Vec<&Arc<Key>> = self.keys.iter().filter(fits).collect();
                match found.as_slice() {
                    [one] => Ok((*one).clone()),
                    _ => Err(format!(
                        "the token names no kid and the key set has {} {alg:?} keys",
                        found.len()
                    )),
                }
            }
        }
    }
}

#[derive(Default)]
struct Refresh {
    last: Option<Instant>,
    jwks_uri: Option<url::Url>,
}

/// The cache.
pub struct KeyCache {
    client: Client,
    issuer: url::Url,
    issuer_id: String,
    set: RwLock<Arc<KeySet>>,
    refresh: tokio::sync::Mutex<Refresh>,
    min_refresh: Duration,
}

impl KeyCache {
    /// An empty cache for `settings`' issuer; its `jwks_url` skips
    /// discovery when given.
    pub fn new(client: Client, settings: &super::Settings) -> Self {
        let (issuer, issuer_id) = (settings.issuer.clone(), settings.issuer_id());
        let jwks_uri = settings.jwks_url.clone();
        Self {
            min_refresh: settings.jwks_min_refresh,
            client,
            issuer,
            issuer_id,
            set: RwLock::new(Arc::new(KeySet::default())),
            refresh: tokio::sync::Mutex::new(Refresh {
                last: None,
                jwks_uri,
            }),
        }
    }

    fn current(&self) -> Arc<KeySet> {
        match self.set.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The key for a token's `kid` and `alg`.
    pub async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<Key>, KeyError> {
        let set = self.current();
        if !set.stale()
            && let Ok(key) = set.find(kid, alg)
        {
            return Ok(key);
        }
        let mut refresh = self.refresh.lock().await;
        // Another request may have refreshed while this one waited.
        let set = self.current();
        if !set.stale()
            && let Ok(key) = set.find(kid, alg)
        {
            return Ok(key);
        }
        if refresh.last.is_some_and(|t| t.elapsed() < self.min_refresh) {
            return match set.find(kid, alg) {
                Ok(k) => Ok(k),
                Err(_) if set.fetched.is_none() => Err(KeyError::Unavailable(
                    "the issuer's keys could not be fetched (retrying shortly)".into(),
                )),
                Err(e) => Err(KeyError::Unknown(e)),
            };
        }
        refresh.last = Some(Instant::now());
        match self.fetch(&mut refresh).await {
            Ok(fresh) => {
                let found = fresh.find(kid, alg);
                self.store(fresh);
                found.map_err(KeyError::Unknown)
            }
            Err(e) => {
                crate::log::line("warning", &format!("oauth: {e}"));
                match set.find(kid, alg) {
                    Ok(k) if set.fetched.is_some() => Ok(k),
                    _ => Err(KeyError::Unavailable(e)),
                }
            }
        }
    }

    fn store(&self, fresh: KeySet) {
        let fresh = Arc::new(fresh);
        match self.set.write() {
            Ok(mut s) => *s = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
    }

    async fn fetch(&self, refresh: &mut Refresh) -> Result<KeySet, String> {
        let uri = match &refresh.jwks_uri {
            Some(u) => u.clone(),
            None => {
                let meta = discovery::discover(&self.client, &self.issuer, &self.issuer_id).await?;
                refresh.jwks_uri = Some(meta.jwks_uri.clone());
                meta.jwks_uri
            }
        };
        let reply = self.client.get(uri.as_str()).await?;
        if reply.status != 200 {
            return Err(format!("key set {uri}: HTTP {}", reply.status));
        }
        let keys = parse_set(&reply.json).map_err(|e| format!("key set {uri}: {e}"))?;
        let ttl = reply
            .max_age
            .unwrap_or(DEFAULT_TTL)
            .clamp(TTL_RANGE.0, TTL_RANGE.1);
        Ok(KeySet {
            keys,
            fetched: Some(Instant::now()),
            ttl,
        })
    }
}

/// The usable keys of a JWK Set document.
pub fn parse_set(doc: &Value) -> Result<Vec<Arc<Key>>, String> {
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("not a JWK Set (no keys array)")?;
    Ok(list
        .iter()
        .filter_map(parse_key)
        .take(MAX_KEYS)
        .map(Arc::new)
        .collect())
}

/// One JWK, when it is a signature key of a kind this server accepts.
fn parse_key(v: &Value) -> Option<Key> {
    let text = |name: &str| v.get(name).and_then(Value::as_str);
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let alg = match (text("kty")?, text("crv")) {
        ("RSA", _) => {
            let n = base64url_len(text("n")?)?;
            (n >= 256).then_some(Algorithm::RS256)?
        }
        ("EC", Some("P-256")) => Algorithm::ES256,
        ("OKP", Some("Ed25519")) => Algorithm::EdDSA,
        _ => return None,
    };
    if text("alg").is_some_and(|a| a != alg_name(alg)) {
        return None;
    }
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(v.clone()).ok()?;
    let decoding = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key {
        kid: text("kid").map(str::to_owned),
        alg,
        decoding,
    })
}

/// The JOSE name of an accepted algorithm.
pub fn alg_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "",
    }
}

/// Decoded length of unpadded base64url text (the RSA modulus size).
fn base64url_len(text: &str) -> Option<usize> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .ok()?;
    // A leading zero byte is padding of the big-endian integer.
    Some(bytes.iter().skip_while(|b| **b == 0).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_accepted_signature_keys_are_kept() {
        // A 2048-bit modulus of zeros and ones is enough for the filter
        // (the key is not used to verify here).
        use base64::Engine;
        let n = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xc3u8; 256]);
        let small = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xc3u8; 128]);
        let ed_x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([7u8; 32]);
        let doc = json!({"keys": [
            {"kty": "RSA", "kid": "r", "n": n, "e": "AQAB"},
            {"kty": "RSA", "kid": "small", "n": small, "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": n, "e": "AQAB"},
            {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": n, "e": "AQAB"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": ed_x},
            {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
        ]});
        let keys = parse_set(&doc).unwrap();
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, vec!["r", "ed"]);
        let set = KeySet {
            keys,
            fetched: Some(Instant::now()),
            ttl: DEFAULT_TTL,
        };
        assert!(set.find(Some("r"), Algorithm::RS256).is_ok());
        assert!(set.find(Some("r"), Algorithm::EdDSA).is_err());
        assert!(set.find(None, Algorithm::EdDSA).is_ok());
        assert!(set.find(Some("nope"), Algorithm::RS256).is_err());
    }
}
