//! Access-token verification: a JWS from our issuer, for our resource,
//! in its validity window, naming a subject.
//!
//! Order: size and shape, header (`alg` one of RS256, ES256, EdDSA:
//! never `none` or an HMAC, whose "key" would be public), the key for its
//! `kid` ([`super::jwks`]), then the signature, then the claims: `iss`
//! equal to the configured issuer, `aud` containing the configured
//! resource, `exp` in the future and `nbf` (when present) in the past,
//! both with [`LEEWAY_SECS`] of clock skew, `sub` non-empty, and the
//! configured scopes present. Any failure is `invalid_token` with a
//! reason for the log; the reason names the claim, never the token.
//!
//! A token that passed is remembered ([`super::verified`]): its later
//! requests check the time window and that its key is still published,
//! not the signature again.

use super::jwks::{KeyCache, KeyError, alg_name};
use super::verified::{self, Verified};
use super::{Caller, Settings};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;
/// Longest token accepted.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
const ACCEPTED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// Why a request was not let in.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token (RFC 6750: no error code).
    Missing,
    /// `401 invalid_token`: the reason (no token content).
    Invalid(String),
    /// `403 insufficient_scope`: the scopes needed.
    Scope(String),
    /// `503`: the issuer could not be reached for keys.
    Unavailable(String),
}

#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    exp: u64,
    nbf: Option<u64>,
    client_id: Option<String>,
    azp: Option<String>,
    scope: Option<String>,
    scp: Option<Scp>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    List(Vec<String>),
    Text(String),
}

/// The verifier: settings, keys, and the validation they imply.
pub struct Verifier {
    settings: Settings,
    keys: KeyCache,
    issuer_id: String,
    audience: String,
    verified: Verified,
}

impl Verifier {
    /// A verifier for `settings` fetching keys with `keys`.
    pub fn new(settings: Settings, keys: KeyCache) -> Self {
        let issuer_id = settings.issuer_id();
        let audience = settings.audience();
        Self {
            settings,
            keys,
            issuer_id,
            audience,
            verified: Verified::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Verifies one bearer token.
    pub async fn verify(&self, token: &str) -> Result<Caller, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "token longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let digest = verified::digest(token);
        let now = now_secs();
        if let Some(hit) = self.verified.get(&digest, now, LEEWAY_SECS) {
            match self.keys.key_for(hit.kid.as_deref(), hit.alg).await {
                Ok(key) if Arc::ptr_eq(&key, &hit.key) => return Ok(hit.caller),
                // The key set changed since: verify again, in full.
                _ => self.verified.remove(&digest),
            }
        }
        let entry = self.verify_in_full(token).await?;
        let caller = entry.caller.clone();
        self.verified.insert(digest, entry, now);
        Ok(caller)
    }

    /// Every check of the module's order, on a token not remembered.
    async fn verify_in_full(&self, token: &str) -> Result<verified::Entry, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("not a JWS access token: {e}")))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "algorithm {:?} is not accepted (RS256, ES256, EdDSA)",
                header.alg
            )));
        }
        let key = match self.keys.key_for(header.kid.as_deref(), header.alg).await {
            Ok(k) => k,
            Err(KeyError::Unknown(why)) => return Err(Refusal::Invalid(why)),
            Err(KeyError::Unavailable(why)) => return Err(Refusal::Unavailable(why)),
        };
        let data = jsonwebtoken::decode::<Claims>(token, &key.decoding, &self.validation(key.alg))
            .map_err(|e| Refusal::Invalid(reason(&e, key.alg)))?;
        let not_before = data.claims.nbf;
        let caller = self.caller(data.claims, token)?;
        Ok(verified::Entry {
            caller,
            not_before,
            kid: header.kid,
            alg: header.alg,
            key,
        })
    }

    /// The caller verified claims name, if it has the scopes required.
    fn caller(&self, claims: Claims, token: &str) -> Result<Caller, Refusal> {
        let sub = claims
            .sub
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Refusal::Invalid("the token has no sub".into()))?;
        let scopes = scopes(claims.scope, claims.scp);
        let missing: Vec<&str> = (self.settings.scopes.iter())
            .filter(|s| !scopes.contains(s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Scope(missing.join(" ")));
        }
        Ok(Caller::new(
            sub,
            claims.client_id.or(claims.azp),
            scopes,
            claims.exp,
            token,
        ))
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.set_issuer(&[&self.issuer_id]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.validate_nbf = true;
        v.leeway = LEEWAY_SECS;
        v
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn scopes(scope: Option<String>, scp: Option<Scp>) -> Vec<String> {
    let mut out: Vec<String> = scope
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    match scp {
        Some(Scp::List(list)) => out.extend(list),
        Some(Scp::Text(text)) => out.extend(text.split_whitespace().map(str::to_owned)),
        None => {}
    }
    out
}

/// The log's reason for a refused token: which check failed.
fn reason(e: &jsonwebtoken::errors::Error, alg: Algorithm) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => format!("bad {} signature", alg_name(alg)),
        K::ExpiredSignature => "the token has expired (exp)".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidIssuer => "wrong issuer (iss)".into(),
        K::InvalidAudience => "wrong audience (aud): not issued for this server".into(),
        K::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        K::InvalidClaimFormat(c) => format!("malformed {c} claim"),
        K::InvalidAlgorithm => "the key does not match the token's algorithm".into(),
        // Decoding errors may quote a claim's text: the kind is enough.
        K::Base64(_) | K::Json(_) | K::Utf8(_) | K::InvalidToken => "malformed token".into(),
        _ => "the token could not be verified".into(),
    }
}
