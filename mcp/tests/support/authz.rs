//! A local OAuth authorization server for the HTTP transport's tests:
//! metadata (RFC 8414, or OpenID discovery only), a JWKS of three keys
//! (RSA, EC P-256, Ed25519; a fourth RSA key is never published), and a
//! token endpoint serving `client_credentials` (for clients that discover
//! it, such as the Python SDK) and RFC 8693 `token-exchange` (for the
//! server). It counts what it serves, so tests can see the server's
//! caching and refresh bounds. Plain HTTP on loopback, or TLS with a CA of
//! its own (for the jail, where the server reaches it through the proxy).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const RSA_A: &str = include_str!("../fixtures/oauth/rsa-a.pem");
const RSA_B: &str = include_str!("../fixtures/oauth/rsa-b.pem");
const EC: &str = include_str!("../fixtures/oauth/ec.pem");
const ED: &str = include_str!("../fixtures/oauth/ed.pem");

/// The server's client credentials for the token exchange.
pub const EXCHANGE_CLIENT: (&str, &str) = ("openagenda-mcp", "exchange-secret-0123456789");

/// A signing key of the test issuer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// RS256, kid `rsa-a` (published).
    Rsa,
    /// ES256, kid `ec` (published).
    Ec,
    /// EdDSA, kid `ed` (published).
    Ed,
    /// RS256, kid `rsa-b`: never in the key set.
    Rogue,
}

impl Key {
    pub fn kid(self) -> &'static str {
        match self {
            Key::Rsa => "rsa-a",
            Key::Ec => "ec",
            Key::Ed => "ed",
            Key::Rogue => "rsa-b",
        }
    }

    pub fn alg(self) -> Algorithm {
        match self {
            Key::Rsa | Key::Rogue => Algorithm::RS256,
            Key::Ec => Algorithm::ES256,
            Key::Ed => Algorithm::EdDSA,
        }
    }

    fn encoding(self) -> EncodingKey {
        match self {
            Key::Rsa => EncodingKey::from_rsa_pem(RSA_A.as_bytes()),
            Key::Rogue => EncodingKey::from_rsa_pem(RSA_B.as_bytes()),
            Key::Ec => EncodingKey::from_ec_pem(EC.as_bytes()),
            Key::Ed => EncodingKey::from_ed_pem(ED.as_bytes()),
        }
        .unwrap()
    }

    /// The public key as a JWK (with `kid` and `use`).
    pub fn jwk(self) -> Value {
        let jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&self.encoding(), self.alg()).unwrap();
        let mut v = serde_json::to_value(jwk).unwrap();
        v["kid"] = json!(self.kid());
        v["use"] = json!("sig");
        v
    }
}

/// Which metadata document the issuer serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// RFC 8414 `oauth-authorization-server`.
    OAuth,
    /// OpenID Connect discovery only (RFC 8414 answers 404).
    Oidc,
}

/// What the issuer serves and saw.
pub struct State {
    pub issuer: String,
    pub discovery: Discovery,
    /// Keys in the JWKS.
    pub published: Mutex<Vec<Key>>,
    pub metadata_fetches: AtomicUsize,
    pub jwks_fetches: AtomicUsize,
    /// `(subject's sub, issued token)` per exchange served.
    pub exchanges: Mutex<Vec<(String, String)>>,
    /// Client credentials grants served.
    pub cc_tokens: AtomicUsize,
}

/// The running issuer.
pub struct Authz {
    pub state: Arc<State>,
    pub port: u16,
    /// PEM of the CA of a TLS issuer.
    pub ca_pem: Option<String>,
}

impl Authz {
    /// Plain HTTP on 127.0.0.1 (an `http` issuer is accepted on loopback).
    pub fn start(discovery: Discovery) -> Self {
        Self::start_with(discovery, None)
    }

    /// TLS on `ip` with a CA of its own (`ca_pem`).
    pub fn start_tls(discovery: Discovery, ip: std::net::Ipv4Addr) -> Self {
        Self::start_with(discovery, Some(ip))
    }

    fn start_with(discovery: Discovery, tls_ip: Option<std::net::Ipv4Addr>) -> Self {
        let ip = tls_ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST);
        let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let scheme = if tls_ip.is_some() { "https" } else { "http" };
        let state = Arc::new(State {
            issuer: format!("{scheme}://{ip}:{port}"),
            discovery,
            published: Mutex::new(vec![Key::Rsa, Key::Ec, Key::Ed]),
            metadata_fetches: AtomicUsize::new(0),
            jwks_fetches: AtomicUsize::new(0),
            exchanges: Mutex::new(Vec::new()),
            cc_tokens: AtomicUsize::new(0),
        });
        let (acceptor, ca_pem) = match tls_ip {
            Some(ip) => {
                let (ca, cert, key) = super::mock::certificates(ip);
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(vec![cert], key)
                    .unwrap();
                (
                    Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
                    Some(ca),
                )
            }
            None => (None, None),
        };
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve(listener, acceptor, shared));
        });
        Self {
            state,
            port,
            ca_pem,
        }
    }

    /// The issuer identifier.
    pub fn issuer(&self) -> String {
        self.state.issuer.clone()
    }

    /// A token signed with `key`: `claims` over the defaults (iss, sub
    /// alice, aud `aud`, iat, exp in 10 minutes).
    pub fn token(&self, key: Key, aud: &str, claims: Value) -> String {
        let now = now();
        let mut c = json!({"iss": self.issuer(), "sub": "alice", "aud": aud,
                           "iat": now, "exp": now + 600, "client_id": "test-client"});
        if let Value::Object(over) = claims {
            for (k, v) in over {
                if v.is_null() {
                    c.as_object_mut().unwrap().remove(&k);
                } else {
                    c[k] = v;
                }
            }
        }
        let mut header = Header::new(key.alg());
        header.kid = Some(key.kid().to_owned());
        jsonwebtoken::encode(&header, &c, &key.encoding()).unwrap()
    }

    /// A default RS256 token for `sub`.
    pub fn token_for(&self, sub: &str, aud: &str) -> String {
        self.token(Key::Rsa, aud, json!({"sub": sub}))
    }

    /// Replaces the published keys (rotation).
    pub fn publish(&self, keys: &[Key]) {
        *self.state.published.lock().unwrap() = keys.to_vec();
    }

    pub fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    pub fn exchanges(&self) -> Vec<(String, String)> {
        self.state.exchanges.lock().unwrap().clone()
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<State>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(req, &state).await) }
            });
            let builder = hyper::server::conn::http1::Builder::new();
            match acceptor {
                Some(a) => {
                    if let Ok(tls) = a.accept(tcp).await {
                        let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                    }
                }
                None => {
                    let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                }
            }
        });
    }
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

async fn handle(req: Request<Incoming>, s: &State) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let meta = json!({
        "issuer": s.issuer,
        "jwks_uri": format!("{}/jwks", s.issuer),
        "token_endpoint": format!("{}/token", s.issuer),
        "authorization_endpoint": format!("{}/authorize", s.issuer),
        "code_challenge_methods_supported": ["S256"],
        "grant_types_supported": ["client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "response_types_supported": ["code"],
    });
    match (req.method().as_str(), path.as_str()) {
        ("GET", "/.well-known/oauth-authorization-server") if s.discovery == Discovery::OAuth => {
            s.metadata_fetches.fetch_add(1, Ordering::SeqCst);
            reply(200, meta)
        }
        ("GET", "/.well-known/openid-configuration") if s.discovery == Discovery::Oidc => {
            s.metadata_fetches.fetch_add(1, Ordering::SeqCst);
            reply(200, meta)
        }
        ("GET", "/jwks") => {
            s.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            let keys: Vec<Value> = s
                .published
                .lock()
                .unwrap()
                .iter()
                .map(|k| k.jwk())
                .collect();
            reply(200, json!({"keys": keys}))
        }
        ("POST", "/token") => token(req, s).await,
        _ => reply(404, json!({"error": "not_found"})),
    }
}

/// The client of a token request: Basic, else the form's fields.
fn client(req_auth: Option<&str>, form: &[(String, String)]) -> Option<(String, String)> {
    use base64::Engine;
    if let Some(b) = req_auth.and_then(|a| a.strip_prefix("Basic ")) {
        let raw = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
        let text = String::from_utf8(raw).ok()?;
        let (id, secret) = text.split_once(':')?;
        let dec = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        return Some((dec(id), dec(secret)));
    }
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    Some((get("client_id")?, get("client_secret")?))
}

async fn token(req: Request<Incoming>, s: &State) -> Response<Full<Bytes>> {
    let auth = (req.headers().get("authorization"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let who = client(auth.as_deref(), &form);
    match get("grant_type").as_deref() {
        Some("client_credentials") => {
            let Some((id, secret)) = who.filter(|(_, sec)| sec == "cc-secret") else {
                return reply(401, json!({"error": "invalid_client"}));
            };
            let _ = secret;
            let Some(resource) = get("resource") else {
                return reply(
                    400,
                    json!({"error": "invalid_target", "error_description": "resource is required"}),
                );
            };
            s.cc_tokens.fetch_add(1, Ordering::SeqCst);
            let now = now();
            let claims = json!({"iss": s.issuer, "sub": id, "aud": resource, "iat": now,
                                "exp": now + 600, "client_id": id});
            let mut header = Header::new(Algorithm::RS256);
            header.kid = Some(Key::Rsa.kid().to_owned());
            let t = jsonwebtoken::encode(&header, &claims, &Key::Rsa.encoding()).unwrap();
            reply(
                200,
                json!({"access_token": t, "token_type": "Bearer", "expires_in": 600}),
            )
        }
        Some("urn:ietf:params:oauth:grant-type:token-exchange") => exchange(who, &get, s),
        _ => reply(400, json!({"error": "unsupported_grant_type"})),
    }
}

fn exchange(
    who: Option<(String, String)>,
    get: &dyn Fn(&str) -> Option<String>,
    s: &State,
) -> Response<Full<Bytes>> {
    if who != Some((EXCHANGE_CLIENT.0.to_owned(), EXCHANGE_CLIENT.1.to_owned())) {
        return reply(401, json!({"error": "invalid_client"}));
    }
    let Some(subject) = get("subject_token") else {
        return reply(400, json!({"error": "invalid_request"}));
    };
    let mut v = jsonwebtoken::Validation::new(Algorithm::RS256);
    v.validate_aud = false;
    v.set_issuer(&[&s.issuer]);
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(Key::Rsa.jwk()).unwrap();
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
    let sub = match jsonwebtoken::decode::<Value>(&subject, &key, &v) {
        Ok(d) => d.claims["sub"].as_str().unwrap_or("").to_owned(),
        Err(_) => {
            return reply(
                400,
                json!({"error": "invalid_grant", "error_description": "subject_token refused"}),
            );
        }
    };
    if sub == "revoked" {
        return reply(
            400,
            json!({"error": "invalid_grant", "error_description": "subject is revoked"}),
        );
    }
    let mut list = s.exchanges.lock().unwrap();
    let issued = format!("oa_exchanged_{sub}_{}", list.len() + 1);
    list.push((sub, issued.clone()));
    reply(
        200,
        json!({
            "access_token": issued,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer",
            "expires_in": 600
        }),
    )
}
