//! The routes of the HTTP transport and the checks in front of rmcp.

use super::body::{self, Checked};
use super::sessions::{Bindings, Full};
use crate::mcp::HttpEndpoint;
use crate::oauth::verify::{Refusal, Verifier};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full as FullBody};
use hyper::body::Incoming;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

/// A response of this server.
pub type Resp = Response<BoxBody<Bytes, Infallible>>;

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
const SESSION_HEADER: &str = "mcp-session-id";

/// Everything the routes share.
pub struct Front {
    endpoint: HttpEndpoint,
    verifier: Arc<Verifier>,
    bindings: Bindings,
    max_sessions: usize,
    per_caller: usize,
    metadata: Bytes,
    metadata_paths: Vec<String>,
    challenge: String,
    /// `/mcp` requests being served (not event streams): what SIGTERM
    /// waits for.
    in_flight: tokio::sync::watch::Sender<usize>,
}

/// Counts one request in flight until dropped.
struct InFlight<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> InFlight<'a> {
    fn new(counter: &'a tokio::sync::watch::Sender<usize>) -> Self {
        counter.send_modify(|n| *n += 1);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The `Host` values rmcp accepts: loopback names, the resource's host,
/// the listen address when it is a specific one, and the configured
/// extras; `*` among them accepts any (an empty list, for rmcp).
pub fn allowed_hosts(settings: &super::Settings, oauth: &crate::oauth::Settings) -> Vec<String> {
    if settings.allowed_hosts.iter().any(|h| h == "*") {
        return Vec::new();
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    hosts.extend(oauth.resource.host_str().map(str::to_owned));
    if let crate::listen::Listen::Addr(a) = &settings.listen
        && !a.ip().is_unspecified()
    {
        hosts.push(a.ip().to_string());
    }
    hosts.extend(settings.allowed_hosts.iter().cloned());
    hosts
}

impl Front {
    /// The routes for `endpoint`, protected by `verifier`.
    pub fn new(
        endpoint: HttpEndpoint,
        verifier: Arc<Verifier>,
        settings: &super::Settings,
    ) -> Self {
        let oauth = verifier.settings();
        let mut metadata = json!({
            "resource": oauth.audience(),
            "authorization_servers": [oauth.issuer_id()],
            "bearer_methods_supported": ["header"],
            "resource_name": "openagenda-mcp",
        });
        if !oauth.scopes.is_empty() {
            metadata["scopes_supported"] = json!(oauth.scopes);
        }
        let own = oauth.resource.path().trim_end_matches('/');
        let mut metadata_paths = vec![
            METADATA_PATH.to_owned(),
            format!("{METADATA_PATH}{MCP_PATH}"),
        ];
        if !own.is_empty() && !metadata_paths.contains(&format!("{METADATA_PATH}{own}")) {
            metadata_paths.push(format!("{METADATA_PATH}{own}"));
        }
        Self {
            challenge: format!("Bearer resource_metadata=\"{}\"", oauth.metadata_url()),
            endpoint,
            bindings: Bindings::default(),
            max_sessions: settings.max_sessions,
            per_caller: settings.max_sessions_per_caller,
            metadata: Bytes::from(metadata.to_string()),
            metadata_paths,
            verifier,
            in_flight: tokio::sync::watch::channel(0).0,
        }
    }

    /// Resolves when no `/mcp` request is being served.
    pub async fn idle(&self) {
        let mut rx = self.in_flight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// The resource identifier served.
    pub fn resource(&self) -> String {
        self.verifier.settings().audience()
    }

    /// The issuer trusted.
    pub fn issuer(&self) -> String {
        self.verifier.settings().issuer_id()
    }

    /// Routes one request.
    pub async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Resp {
        let path = req.uri().path();
        match (req.method(), path) {
            (&Method::GET | &Method::HEAD, "/health") => {
                json_response(StatusCode::OK, &json!({"status": "ok"}))
            }
            (&Method::GET, p) if self.metadata_paths.iter().any(|m| m == p) => {
                let mut r = bytes_response(StatusCode::OK, self.metadata.clone());
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("max-age=3600"),
                );
                r
            }
            (_, MCP_PATH) => self.mcp(req, peer).await,
            _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
        }
    }

    async fn mcp(&self, req: Request<Incoming>, peer: SocketAddr) -> Resp {
        // An event stream (GET) lasts as long as its session: not counted.
        let _counted = (req.method() != Method::GET).then(|| InFlight::new(&self.in_flight));
        let caller = match bearer(req.headers()) {
            Ok(Some(token)) => match self.verifier.verify(token).await {
                Ok(c) => c,
                Err(r) => return self.refused(r, peer),
            },
            Ok(None) => return self.refused(Refusal::Missing, peer),
            Err(why) => return self.refused(Refusal::Invalid(why.into()), peer),
        };
        let session = (req.headers().get(SESSION_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(s) = &session
            && !self.bindings.owned_by(s, &caller.sub)
        {
            let text = Bytes::from_static(b"Not Found: Session not found");
            return bytes_response(StatusCode::NOT_FOUND, text);
        }
        let (mut parts, incoming) = req.into_parts();
        let mut opens = false;
        let bytes = if parts.method == Method::POST {
            match body::read(incoming).await {
                Checked::Pass(b, method) => {
                    opens = session.is_none() && method.as_deref() == Some("initialize");
                    if opens && let Err(full) = self.may_open(&caller.sub).await {
                        return full_response(full, &b);
                    }
                    b
                }
                Checked::Refuse(status, v) => {
                    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                    return json_response(code, &v);
                }
            }
        } else {
            Bytes::new()
        };
        let deleting = parts.method == Method::DELETE;
        let sub = caller.sub.clone();
        parts.extensions.insert(caller);
        let resp = (self.endpoint)
            .handle(Request::from_parts(parts, FullBody::new(bytes)))
            .await;
        let given = (resp.headers().get(SESSION_HEADER)).and_then(|v| v.to_str().ok());
        if let (true, Some(id)) = (opens, given) {
            self.bindings.bind(id, &sub);
        }
        if let (true, Some(id)) = (deleting && resp.status().is_success(), &session) {
            self.bindings.unbind(id);
        }
        resp
    }

    async fn may_open(&self, sub: &str) -> Result<(), Full> {
        let open = self.endpoint.session_ids().await;
        (self.bindings).may_open(sub, &open, self.per_caller, self.max_sessions)
    }

    /// `401`/`403`/`503` for a request without a usable token.
    fn refused(&self, r: Refusal, peer: SocketAddr) -> Resp {
        let (status, challenge, body) = match &r {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                self.challenge.clone(),
                json!({"error": "invalid_request", "error_description": "a bearer token is required"}),
            ),
            Refusal::Invalid(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "{}, error=\"invalid_token\", error_description=\"{}\"",
                    self.challenge,
                    quotable(why)
                ),
                json!({"error": "invalid_token", "error_description": why}),
            ),
            Refusal::Scope(need) => (
                StatusCode::FORBIDDEN,
                format!(
                    "{}, error=\"insufficient_scope\", scope=\"{}\"",
                    self.challenge,
                    quotable(need)
                ),
                json!({"error": "insufficient_scope", "scope": need}),
            ),
            Refusal::Unavailable(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                String::new(),
                json!({"error": "temporarily_unavailable", "error_description": why}),
            ),
        };
        if r != Refusal::Missing {
            crate::log::line(
                "warning",
                &format!("http {} for {peer}: {}", status.as_u16(), body),
            );
        }
        let mut resp = json_response(status, &body);
        let headers = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&challenge)
            && !challenge.is_empty()
        {
            headers.insert(header::WWW_AUTHENTICATE, v);
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        resp
    }
}

/// The bearer token of a request: `Ok(None)` without `Authorization`;
/// another scheme, an empty token or two `Authorization` headers are
/// errors.
fn bearer(headers: &http::HeaderMap) -> Result<Option<&str>, &'static str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("more than one Authorization header");
    }
    let text = value
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let (scheme, token) = text
        .split_once(' ')
        .ok_or("the Authorization header is not Bearer")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("the Authorization header is not Bearer");
    }
    let token = token.trim();
    if token.is_empty() {
        return Err("empty bearer token");
    }
    Ok(Some(token))
}

/// Text fit for a quoted-string of a `WWW-Authenticate` parameter.
fn quotable(text: &str) -> String {
    (text.chars())
        .filter(|c| c.is_ascii() && !c.is_ascii_control() && *c != '"' && *c != '\\')
        .take(200)
        .collect()
}

fn full_response(full: Full, body: &[u8]) -> Resp {
    let id = crate::early_id::find(body).unwrap_or(Value::Null);
    let (status, message) = match full {
        Full::Caller(n) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "this caller already holds {n} sessions (OA_HTTP_MAX_SESSIONS_PER_CALLER); close one (DELETE) or let one expire"
            ),
        ),
        Full::Server(n) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server holds its maximum of {n} sessions (OA_HTTP_MAX_SESSIONS); retry later"
            ),
        ),
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message}});
    json_response(status, &body)
}

fn bytes_response(status: StatusCode, body: Bytes) -> Resp {
    let mut resp = Response::new(FullBody::new(body).map_err(|never| match never {}).boxed());
    *resp.status_mut() = status;
    resp
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: &Value) -> Resp {
    let mut resp = bytes_response(status, Bytes::from(body.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_strictly() {
        let mut h = http::HeaderMap::new();
        assert_eq!(bearer(&h), Ok(None));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer(&h), Ok(Some("abc")));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert!(bearer(&h).is_err());
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer  "));
        assert!(bearer(&h).is_err());
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer a"));
        h.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer b"));
        assert!(bearer(&h).is_err());
    }

    #[test]
    fn challenge_text_is_quotable() {
        assert_eq!(quotable("bad \"x\" \\ é\n"), "bad x  ");
    }
}
