//! The HTTP client of the OAuth parts: issuer metadata, the key set and
//! the token exchange.
//!
//! Same trust as the API client ([`crate::api`]): the compiled-in roots
//! plus `OA_EXTRA_CA_CERTS`, or under an oajail wrapper the bundle it
//! names (its proxy terminates every allowed host's TLS). Redirects are
//! never followed (metadata and keys must come from the URL configured or
//! discovered, and a redirected token request would carry the client
//! secret elsewhere); bodies are capped; proxies come from the
//! environment, so inside oajail every request goes through its proxy.

use crate::McpError;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Largest metadata, key set or token response read.
const MAX_BODY: usize = 256 * 1024;

/// The client.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
}

/// A response: status and JSON body (`Value::Null` when not JSON).
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The parsed body.
    pub json: Value,
    /// `Cache-Control: max-age`, when given.
    pub max_age: Option<Duration>,
}

impl Client {
    /// Builds the client with the API client's trust roots.
    pub fn new(
        roots: Option<&Path>,
        extra_ca: Option<&Path>,
        timeout: Duration,
    ) -> Result<Self, McpError> {
        let http = crate::api::http_client(roots, extra_ca, timeout)?;
        Ok(Self { http })
    }

    /// `GET url`, expecting JSON.
    pub async fn get(&self, url: &str) -> Result<Reply, String> {
        let req = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json");
        self.send(req, url).await
    }

    /// `POST url` with a form body and HTTP Basic client authentication
    /// (RFC 6749 2.3.1: both parts form-urlencoded first).
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<Reply, String> {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut req = self
            .http
            .post(url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        if let Some((id, secret)) = basic {
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            req = req.basic_auth(enc(id), Some(enc(secret)));
        }
        self.send(req, url).await
    }

    async fn send(&self, req: reqwest::RequestBuilder, url: &str) -> Result<Reply, String> {
        let mut resp = req
            .send()
            .await
            .map_err(|e| format!("{url}: {}", crate::api::without_url(&e)))?;
        let status = resp.status().as_u16();
        let max_age = max_age(resp.headers());
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| {
            format!(
                "{url}: reading the response: {}",
                crate::api::without_url(&e)
            )
        })? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY {
                return Err(format!("{url}: response larger than {MAX_BODY} bytes"));
            }
        }
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            json,
            max_age,
        })
    }
}

fn max_age(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::CACHE_CONTROL)?.to_str().ok()?;
    value.split(',').find_map(|d| {
        let (k, v) = d.trim().split_once('=')?;
        k.eq_ignore_ascii_case("max-age")
            .then(|| v.trim().parse().ok().map(Duration::from_secs))
            .flatten()
    })
}
