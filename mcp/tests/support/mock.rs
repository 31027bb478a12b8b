//! A local mock of the API over TLS (HTTP/1.1, keep-alive), with a CA of
//! its own written to a PEM file for `OA_EXTRA_CA_CERTS`.
//!
//! Routes (under `/v3`):
//! - `GET /agendas/{uid}/events` → two events and an echo of the query;
//! - `GET /agendas/{uid}` → an agenda; uid 401 → 401 whose body contains the
//!   presented Authorization header (to test redaction);
//! - `GET /agendas/302` → a redirect to another host;
//! - `GET /agendas/{uid}/overview` → answers after 300 ms;
//! - `GET /agendas/slow` → an agenda, after 2 s;
//! - `GET /agendas/echo-json`, `echo-text`, `echo-error` → the presented
//!   Authorization header echoed in many encodings ([`echo_forms`]), in a
//!   JSON body, a text body, and an error message;
//! - anything else → 404.
//!
//! Every request is recorded (method, target, whether the expected key was
//! presented).

use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub authorization: Option<String>,
    /// Every header line, lower-case name and trimmed value.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Vec<u8>,
}

/// The running mock.
pub struct Mock {
    pub port: u16,
    pub ca_path: std::path::PathBuf,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    _dir: TempDir,
}

/// A temporary directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        Self::new_in(&[std::env::temp_dir()], tag)
    }

    /// A temporary directory under the first of `bases` where one can be
    /// created (e.g. somewhere a jail with a private /tmp can read).
    pub fn new_in(bases: &[std::path::PathBuf], tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        for base in bases {
            let p = base.join(format!("oa-mcp-{tag}-{}-{nanos}", std::process::id()));
            if std::fs::create_dir_all(&p).is_ok() {
                return Self(p);
            }
        }
        panic!("no writable directory among {bases:?}");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Mock {
    /// The base URL to give the server.
    pub fn base_url(&self) -> String {
        format!("https://localhost:{}/v3", self.port)
    }

    /// Starts the mock on 127.0.0.1 in a background thread.
    pub fn start() -> Self {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST)
    }

    /// Starts the mock on `ip` (its certificate names that IP too).
    pub fn start_on(ip: std::net::Ipv4Addr) -> Self {
        let (ca_pem, cert_der, key_der) = certificates(ip);
        let dir = TempDir::new("mock");
        let ca_path = dir.0.join("ca.pem");
        std::fs::write(&ca_path, ca_pem).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert_der], key_der)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        continue;
                    };
                    let acceptor = acceptor.clone();
                    let record = record.clone();
                    tokio::spawn(async move {
                        if let Ok(tls) = acceptor.accept(tcp).await {
                            serve_conn(tls, record).await;
                        }
                    });
                }
            });
        });
        Self {
            port,
            ca_path,
            seen,
            _dir: dir,
        }
    }
}

pub fn certificates(
    ip: std::net::Ipv4Addr,
) -> (
    String,
    rustls_pki_types::CertificateDer<'static>,
    rustls_pki_types::PrivateKeyDer<'static>,
) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "oa-mcp test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        ip.to_string(),
    ])
    .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    (ca.pem(), leaf.der().clone(), key)
}

async fn serve_conn<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    record: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.lines();
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_owned();
        let target = first.next().unwrap_or("").to_owned();
        let mut length = 0usize;
        let mut authorization = None;
        let mut headers = Vec::new();
        for l in lines {
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("authorization:") {
                authorization = Some(l["authorization:".len()..].trim().to_owned());
            }
        }
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..head_end + length).skip(head_end).collect();
        record.lock().unwrap().push(Seen {
            method: method.clone(),
            target: target.clone(),
            authorization: authorization.clone(),
            headers,
            body,
        });
        if target.ends_with("/overview") {
            // A slow route, to see concurrent calls overlap.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        if target.ends_with("/agendas/slow") {
            // A slower one, to keep requests (and their bodies) in flight.
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        }
        let (status, extra, body) = route(&method, &target, authorization.as_deref());
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n{body}",
            body.len()
        );
        if s.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn route(method: &str, target: &str, auth: Option<&str>) -> (&'static str, String, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        ("GET", ["v3", "agendas", _, "events"]) => (
            "200 OK",
            String::new(),
            serde_json::json!({
                "data": [{"uid": 1, "title": {"en": "A"}}, {"uid": 2, "title": {"en": "B"}}],
                "pagination": {"after": null, "limit": 20},
                "echo": {"path": path, "query": query}
            })
            .to_string(),
        ),
        ("GET", ["v3", "agendas", uid, "overview"]) => (
            "200 OK",
            String::new(),
            serde_json::json!({"uid": uid.parse::<i64>().unwrap_or(0), "events": {}}).to_string(),
        ),
        ("GET", ["v3", "agendas", "401"]) => (
            "401 Unauthorized",
            String::new(),
            serde_json::json!({"error": {"message": format!("bad credential {}", auth.unwrap_or("none"))}}).to_string(),
        ),
        ("GET", ["v3", "agendas", "302"]) => (
            "302 Found",
            "location: https://elsewhere.invalid/v3/agendas/1\r\n".to_owned(),
            "{}".to_owned(),
        ),
        ("POST", ["v3", "agendas", _, "uploads"] | ["v3", "uploads", "staged"]) => (
            "200 OK",
            String::new(),
            serde_json::json!({"ref": "staging/mock-1"}).to_string(),
        ),
        ("GET", ["v3", "agendas", "echo-json"]) => {
            ("200 OK", String::new(), echo_json(auth.unwrap_or("")))
        }
        ("GET", ["v3", "agendas", "echo-text"]) => (
            "200 OK",
            String::new(),
            format!("token={}", percent_all(auth.unwrap_or(""))),
        ),
        ("GET", ["v3", "agendas", "echo-error"]) => (
            "403 Forbidden",
            String::new(),
            format!(
                r#"{{"error": {{"message": "refused {}"}}}}"#,
                escape_all(auth.unwrap_or(""))
            ),
        ),
        ("GET", ["v3", "agendas", uid]) => (
            "200 OK",
            String::new(),
            serde_json::json!({"uid": uid.parse::<i64>().unwrap_or(0), "title": "Agenda", "auth": auth.is_some()}).to_string(),
        ),
        _ => ("404 Not Found", String::new(), serde_json::json!({"error": {"message": "not found"}}).to_string()),
    }
}

/// `\u00XX` for every character (a JSON escape a parser turns back).
pub fn escape_all(text: &str) -> String {
    text.bytes().map(|b| format!("\\u{b:04x}")).collect()
}

/// `%XX` for every byte.
pub fn percent_all(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// The encodings the echo routes use, by name (the header value is
/// `Bearer KEY`).
pub fn echo_forms(auth: &str) -> Vec<(&'static str, String)> {
    use base64::Engine;
    let key = auth.strip_prefix("Bearer ").unwrap_or(auth);
    let b64 = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    vec![
        ("plain", auth.to_owned()),
        ("escaped", escape_all(auth)),
        ("percent", percent_all(auth)),
        (
            "percent-lower",
            auth.bytes().map(|b| format!("%{b:02x}")).collect(),
        ),
        ("html", auth.bytes().map(|b| format!("&#{b};")).collect()),
        ("base64", b64.encode(auth)),
        ("base64-key", b64.encode(key)),
        ("base64url-shifted", url.encode(format!("xy{key}z"))),
        ("hex", key.bytes().map(|b| format!("{b:02x}")).collect()),
        ("double-escaped", escape_all(auth).replace('\\', "\\\\")),
    ]
}

/// A JSON body with every form as a value, the escaped one also as a key
/// and inside a string that itself holds JSON.
fn echo_json(auth: &str) -> String {
    let mut body = String::from("{");
    for (name, form) in echo_forms(auth) {
        // Every form is valid inside a JSON string as it stands.
        body.push_str(&format!(r#""{name}": "{form}", "#));
    }
    body.push_str(&format!(
        r#""{}": "as a key", "nested": "{{\"inner\": \"{}\"}}"}}"#,
        escape_all(auth),
        escape_all(auth).replace('\\', "\\\\")
    ));
    body
}
