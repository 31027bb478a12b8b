//! `oajail.issuedTokens`: a token endpoint's successful response reaches
//! the jail with sentinels in place of the tokens it issues.
//!
//! The request is a `POST` to the rule's `tokenUrl` inside a terminated
//! tunnel (the request rules, masks and scans have passed). It goes up
//! with `Accept-Encoding: identity`; the 2xx JSON answer is read whole (at
//! most [`MAX_BODY`]) and `access_token`, `refresh_token` and `id_token`
//! are replaced by fresh sentinels ([`crate::masked::Credentials`]) that
//! are swapped back for, in order, the rule's `injectHosts`, the token
//! endpoint's own host, and nowhere. What cannot be read that way is not
//! passed on: the jail gets `502` with the reason, never the real token.
use crate::masked::Credentials;
use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use oajail_policy::domain::{DomainPattern, ListKind};
use oajail_policy::issued::IssuedTokens;
use serde_json::Value;
use std::time::{Duration, Instant};

type Body = BoxBody<Bytes, hyper::Error>;

/// Largest token response read.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Lifetime of a token without `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// Longest lifetime given to a sentinel (refresh tokens get this).
const MAX_LIFETIME: Duration = Duration::from_secs(86_400);

/// The response with its tokens masked, or why it cannot be passed on.
pub(crate) async fn mask(
    creds: &Credentials,
    rule: &IssuedTokens,
    resp: Response<Body>,
) -> Result<Response<Body>, String> {
    if !resp.status().is_success() {
        return Ok(resp);
    }
    let encoded = (resp.headers().get(header::CONTENT_ENCODING))
        .is_some_and(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"));
    if encoded {
        return Err("the token response is compressed; it is not passed into the jail".into());
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = (Limited::new(body, MAX_BODY).collect().await)
        .map_err(|e| {
            format!("the token response could not be read ({e}); it is not passed into the jail")
        })?
        .to_bytes();
    let mut json: Value = serde_json::from_slice(&bytes)
        .map_err(|_| "the token response is not JSON; it is not passed into the jail".to_owned())?;
    let obj = (json.as_object_mut())
        .ok_or("the token response is not a JSON object; it is not passed into the jail")?;
    let lifetime = (obj.get("expires_in").and_then(Value::as_u64))
        .map_or(DEFAULT_LIFETIME, Duration::from_secs)
        .min(MAX_LIFETIME);
    let now = Instant::now();
    let fields = [
        ("access_token", rule.inject_hosts.clone(), now + lifetime),
        ("refresh_token", own_host(rule), now + MAX_LIFETIME),
        ("id_token", Vec::new(), now + lifetime),
    ];
    for (field, hosts, until) in fields {
        let Some(Value::String(real)) = obj.get(field) else {
            continue;
        };
        let name = format!("{field} issued by {}", rule.token_url);
        let sentinel = (creds.keep_issued(name, real.clone(), hosts, until))
            .map_err(|e| format!("{field}: {e}"))?;
        obj.insert(field.to_owned(), Value::String(sentinel));
    }
    let out = serde_json::to_vec(&json).map_err(|e| e.to_string())?;
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
    let body = Full::new(Bytes::from(out))
        .map_err(|never| match never {})
        .boxed();
    Ok(Response::from_parts(parts, body))
}

/// The token endpoint's own host, as an inject host (refresh grants).
fn own_host(rule: &IssuedTokens) -> Vec<DomainPattern> {
    let Some((host, port, _)) = rule.endpoint() else {
        return Vec::new();
    };
    let text = if port == 443 {
        host.to_string()
    } else {
        host.authority(port)
    };
    DomainPattern::parse(&text, ListKind::Allow)
        .into_iter()
        .collect()
}
