//! The Rust-side API client that performs `oa.*` calls for the workers.
//!
//! Invariants:
//! - requests go only to the base URL's scheme, host and port; URLs are
//!   built from the base and the operation's path template, never taken
//!   from the script;
//! - redirects are never followed, so the key cannot be carried elsewhere;
//! - the key is sent as a sensitive `Authorization: Bearer` header and is
//!   replaced by `[redacted]` in every text this module returns;
//! - proxies come from `HTTPS_PROXY`/`NO_PROXY` (inside oajail, the jail's
//!   proxy); TLS roots are the compiled-in Mozilla set plus
//!   `OA_EXTRA_CA_CERTS`, except under an oajail wrapper: its proxy
//!   terminates TLS to the API host with a CA made per run, so there the
//!   roots are the bundle the wrapper names in `SSL_CERT_FILE` (the host's
//!   roots plus that CA) instead of the compiled-in set.

use crate::McpError;
use crate::error::PemError;
use crate::spec::{Operation, Param, ParamIn, Style};
use reqwest::Url;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// API responses larger than this are refused.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Error bodies are cut to this many characters in excerpts.
const EXCERPT_CHARS: usize = 2000;

/// What one call gives back to the script, plus bookkeeping.
pub struct ApiReply {
    /// `{data, error}`.
    pub json: Value,
    /// HTTP status (0 for transport errors) when the call failed.
    pub failed_status: Option<u16>,
    /// Bounded, redacted excerpt of the failure.
    pub excerpt: String,
}

/// The client.
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    key: Option<String>,
}

impl ApiClient {
    /// Builds the client for `base_url`. `roots` replaces the compiled-in
    /// roots with a PEM bundle (the wrapper's, see the module docs).
    pub fn new(
        base_url: &str,
        key: Option<String>,
        roots: Option<&Path>,
        extra_ca: Option<&Path>,
        timeout: Duration,
    ) -> Result<Self, McpError> {
        let base = Url::parse(base_url).map_err(McpError::ClientUrl)?;
        let tls = tls_config(roots, extra_ca)?;
        let mut builder = reqwest::Client::builder();
        if let Some(proxy) = crate::egress::wrapper_proxy(roots)? {
            builder = builder.proxy(proxy);
        }
        let http = builder
            .use_preconfigured_tls(tls)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("openagenda-mcp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(McpError::ClientBuild)?;
        Ok(Self {
            http,
            base,
            key: key.filter(|k| !k.is_empty()),
        })
    }

    /// The same client (connections, roots, base) with `key` instead of
    /// its own: one execute's exchanged token ([`crate::access`]).
    pub fn with_key(&self, key: String) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            key: Some(key).filter(|k| !k.is_empty()),
        }
    }

    /// Replaces the key in `text`.
    pub fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(k) => text.replace(k.as_str(), "[redacted]"),
            None => text.to_owned(),
        }
    }

    /// Performs one operation with the script's `{path, query, body}`.
    pub async fn call(&self, op: &Operation, args: &Value) -> ApiReply {
        let url = match build_url(&self.base, op, args) {
            Ok(u) => u,
            Err(msg) => return self.failure(0, msg, None),
        };
        let method =
            reqwest::Method::from_bytes(op.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut req = self.http.request(method, url.clone());
        if let Some(key) = &self.key
            && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
        {
            v.set_sensitive(true);
            req = req.header(reqwest::header::AUTHORIZATION, v);
        }
        req = match with_headers(req, op, args) {
            Ok(r) => r,
            Err(msg) => return self.failure(0, msg, None),
        };
        if let Some(body) = args.get("body").filter(|b| !b.is_null()) {
            req = if op.multipart {
                match multipart_form(body) {
                    Ok(form) => req.multipart(form),
                    Err(msg) => return self.failure(0, msg, None),
                }
            } else {
                req.json(body)
            };
        }
        match req.send().await {
            Ok(resp) => self.read(resp).await,
            Err(e) => self.unsent(&e, &url, &op.id).await,
        }
    }

    /// A request that got no response: the jail's proxy's reason when it
    /// has one (`egress_reason`), said to the script and on stderr.
    async fn unsent(&self, e: &reqwest::Error, url: &Url, op: &str) -> ApiReply {
        let mut message = format!("request failed: {}", without_url(e));
        if e.is_connect()
            && let Some(why) = crate::egress_reason::ask_proxy(url).await
        {
            message = format!("request failed: {why}");
        }
        let message = self.redact(&message);
        crate::log::line("warning", &format!("api {op}: {message}"));
        self.failure(0, message, None)
    }

    async fn read(&self, mut resp: reqwest::Response) -> ApiReply {
        let status = resp.status().as_u16();
        let proxy_error = (resp.headers().get("x-proxy-error"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_BODY {
                        return self.failure(
                            status,
                            format!("response larger than {MAX_BODY} bytes"),
                            None,
                        );
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return self.failure(
                        status,
                        format!("reading the response failed: {}", without_url(&e)),
                        None,
                    );
                }
            }
        }
        // The key never reaches the script, not even when a server echoes it.
        let text = self.redact(&String::from_utf8_lossy(&body));
        if let Some(code) = proxy_error {
            // The jail's proxy answered itself (a request rule, a failed
            // upstream): its words, to the script and to stderr.
            let why = crate::egress_reason::from_response(status, &code, &text);
            crate::log::line("warning", &format!("api: {why}"));
            return self.failure(status, why, Some(Value::String(text)));
        }
        let parsed: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.to_string()));
        if (200..300).contains(&status) {
            return ApiReply {
                json: json!({"data": parsed, "error": null}),
                failed_status: None,
                excerpt: String::new(),
            };
        }
        let message = parsed
            .pointer("/error/message")
            .or_else(|| parsed.get("message"))
            .and_then(Value::as_str)
            .map_or_else(
                || format!("HTTP {status}"),
                |m| format!("HTTP {status}: {m}"),
            );
        self.failure(status, message, Some(parsed))
    }

    fn failure(&self, status: u16, message: String, body: Option<Value>) -> ApiReply {
        let message = self.redact(&message);
        let excerpt_src = body
            .as_ref()
            .map_or_else(|| message.clone(), Value::to_string);
        let excerpt: String = self
            .redact(&excerpt_src)
            .chars()
            .take(EXCERPT_CHARS)
            .collect();
        let body = body.map(|b| {
            let text = self.redact(&b.to_string());
            serde_json::from_str(&text).unwrap_or(Value::String(excerpt.clone()))
        });
        let mut error = json!({"status": status, "message": message});
        if let Some(b) = body {
            error["body"] = b;
        }
        ApiReply {
            json: json!({"data": null, "error": error}),
            failed_status: Some(status),
            excerpt,
        }
    }
}

pub(crate) fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

pub(crate) fn tls_config(
    roots_file: Option<&Path>,
    extra_ca: Option<&Path>,
) -> Result<rustls::ClientConfig, McpError> {
    let mut roots = rustls::RootCertStore::empty();
    match roots_file {
        Some(path) => add_pem(&mut roots, path, "SSL_CERT_FILE")?,
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    if let Some(path) = extra_ca {
        add_pem(&mut roots, path, "OA_EXTRA_CA_CERTS")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(McpError::ClientTls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Adds every certificate of the PEM file `path` (named `what` in errors).
fn add_pem(
    roots: &mut rustls::RootCertStore,
    path: &Path,
    var: &'static str,
) -> Result<(), McpError> {
    let err = |source: PemError| McpError::ClientPem {
        var,
        path: path.to_owned(),
        source,
    };
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| err(PemError::Read(e)))? {
        let cert = cert.map_err(|e| err(PemError::Read(e)))?;
        roots.add(cert).map_err(|e| err(PemError::Certificate(e)))?;
    }
    Ok(())
}

/// Headers a spec's header parameter may never set: the server owns them.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
];

/// Adds the operation's declared header parameters from `args.header`;
/// undeclared names are ignored, required ones must be there.
fn with_headers(
    mut req: reqwest::RequestBuilder,
    op: &Operation,
    args: &Value,
) -> Result<reqwest::RequestBuilder, String> {
    let given = args.get("header");
    for p in op.params.iter().filter(|p| p.location == ParamIn::Header) {
        if RESERVED_HEADERS.contains(&p.name.to_ascii_lowercase().as_str()) {
            continue;
        }
        let Some(value) = given.and_then(|h| h.get(&p.name)).filter(|v| !v.is_null()) else {
            if p.required {
                return Err(format!(
                    "header parameter {} is required (pass {{ header: {{ '{}': … }} }})",
                    p.name, p.name
                ));
            }
            continue;
        };
        let text = scalar(value)
            .ok_or_else(|| format!("header parameter {} must be a string or a number", p.name))?;
        let value = reqwest::header::HeaderValue::from_str(&text).map_err(|_| {
            format!(
                "header parameter {} has characters a header cannot carry",
                p.name
            )
        })?;
        req = req.header(p.name.as_str(), value);
    }
    Ok(req)
}

/// A `multipart/form-data` body from the script's object: scalars are text
/// fields; `{ filename?, contentType?, base64 | text }` is a file part.
pub fn multipart_form(body: &Value) -> Result<reqwest::multipart::Form, String> {
    use base64::Engine;
    let fields = body
        .as_object()
        .ok_or("a multipart body must be an object of fields")?;
    let mut form = reqwest::multipart::Form::new();
    for (name, value) in fields {
        if let Some(text) = scalar(value) {
            form = form.text(name.clone(), text);
            continue;
        }
        let file = value
            .as_object()
            .ok_or_else(|| format!("multipart field {name} must be a string or a file object"))?;
        let bytes = match (file.get("base64"), file.get("text")) {
            (Some(Value::String(b64)), _) => base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| format!("multipart field {name}: base64: {e}"))?,
            (None, Some(Value::String(text))) => text.clone().into_bytes(),
            _ => {
                return Err(format!(
                    "multipart field {name}: a file needs `base64` or `text`"
                ));
            }
        };
        let mut part = reqwest::multipart::Part::bytes(bytes);
        let filename = file.get("filename").and_then(Value::as_str).unwrap_or(name);
        part = part.file_name(filename.to_owned());
        if let Some(ct) = file.get("contentType").and_then(Value::as_str) {
            part = part
                .mime_str(ct)
                .map_err(|e| format!("multipart field {name}: contentType: {e}"))?;
        }
        form = form.part(name.clone(), part);
    }
    Ok(form)
}

/// Builds the request URL from the base, the path template and the args.
pub fn build_url(base: &Url, op: &Operation, args: &Value) -> Result<Url, String> {
    let path_args = args.get("path");
    let mut url = base.clone();
    {
        let mut segs = url
            .path_segments_mut()
            .map_err(|()| "base url cannot have a path".to_string())?;
        segs.pop_if_empty();
        for seg in op.path.split('/').filter(|s| !s.is_empty()) {
            segs.push(&fill_segment(seg, path_args)?);
        }
    }
    let query = args.get("query").and_then(Value::as_object);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        let mut pairs = url.query_pairs_mut();
        for (name, value) in q {
            let spec = op
                .params
                .iter()
                .find(|p| p.name == *name && p.location == ParamIn::Query);
            for (k, v) in query_pairs(name, value, spec) {
                pairs.append_pair(&k, &v);
            }
        }
    }
    for p in op
        .params
        .iter()
        .filter(|p| p.required && p.location == ParamIn::Query)
    {
        if query
            .and_then(|q| q.get(&p.name))
            .is_none_or(Value::is_null)
        {
            return Err(format!("query parameter {} is required", p.name));
        }
    }
    if url.host_str() != base.host_str()
        || url.port_or_known_default() != base.port_or_known_default()
    {
        return Err("refusing a request to another host".into());
    }
    Ok(url)
}

fn fill_segment(seg: &str, path_args: Option<&Value>) -> Result<String, String> {
    let mut out = seg.to_owned();
    while let Some(start) = out.find('{') {
        let end = out[start..]
            .find('}')
            .map(|e| start + e)
            .ok_or("bad path template")?;
        let name = out[start + 1..end].to_owned();
        let value = path_args
            .and_then(|p| p.get(&name))
            .filter(|v| !v.is_null())
            .ok_or_else(|| {
                format!("path parameter {name} is required (pass {{ path: {{ {name} }} }})")
            })?;
        let text = scalar(value)
            .ok_or_else(|| format!("path parameter {name} must be a string or a number"))?;
        if text.is_empty() || text == "." || text == ".." {
            return Err(format!(
                "path parameter {name} must not be empty, \".\" or \"..\""
            ));
        }
        out.replace_range(start..=end, &text);
    }
    Ok(out)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Serialises one query value by the parameter's style.
fn query_pairs(name: &str, value: &Value, spec: Option<&Param>) -> Vec<(String, String)> {
    let style = spec.map_or(Style::Form, |p| p.style);
    let explode = spec.is_none_or(|p| p.explode);
    match value {
        Value::Null => Vec::new(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().filter_map(scalar).collect();
            if explode {
                items.into_iter().map(|v| (name.to_owned(), v)).collect()
            } else {
                vec![(name.to_owned(), items.join(","))]
            }
        }
        Value::Object(map) if style == Style::DeepObject || explode => map
            .iter()
            .flat_map(|(k, v)| match v {
                Value::Array(a) => a
                    .iter()
                    .filter_map(scalar)
                    .map(|s| (format!("{name}[{k}]"), s))
                    .collect(),
                other => scalar(other)
                    .map(|s| (format!("{name}[{k}]"), s))
                    .into_iter()
                    .collect::<Vec<_>>(),
            })
            .collect(),
        Value::Object(map) => {
            let flat: Vec<String> = map
                .iter()
                .flat_map(|(k, v)| [k.clone(), scalar(v).unwrap_or_default()])
                .collect();
            vec![(name.to_owned(), flat.join(","))]
        }
        other => scalar(other)
            .map(|s| (name.to_owned(), s))
            .into_iter()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Catalogue;
    use serde_json::json;

    fn url(op: &str, args: Value) -> Result<String, String> {
        let cat = Catalogue::builtin(false).map_err(|e| e.to_string())?;
        let base = Url::parse("https://api.example/v3").map_err(|e| e.to_string())?;
        build_url(&base, cat.op(op).ok_or("no op")?, &args).map(|u| u.to_string())
    }

    #[test]
    fn client_errors_keep_their_sources() {
        use std::error::Error as _;
        let bad_url = ApiClient::new("not a url", None, None, None, Duration::from_secs(1));
        let e = bad_url.err().expect("a relative url is refused");
        assert!(matches!(e, McpError::ClientUrl(_)), "{e}");
        assert!(e.source().is_some());
        let missing = Path::new("/nonexistent/oajail-bundle.pem");
        let e = ApiClient::new(
            "https://api.example/v3",
            None,
            Some(missing),
            None,
            Duration::from_secs(1),
        )
        .err()
        .expect("a missing bundle is refused");
        assert!(
            e.to_string()
                .starts_with("api client: SSL_CERT_FILE /nonexistent/oajail-bundle.pem: "),
            "{e}"
        );
        let pem = e.source().expect("the bundle's error");
        assert!(pem.source().is_some(), "the reader's error is kept: {pem}");
    }

    #[test]
    fn path_values_are_one_encoded_segment() {
        let u = url("agendas.get", json!({"path": {"agendaUid": "a/../b?c#d"}}));
        assert_eq!(
            u.as_deref(),
            Ok("https://api.example/v3/agendas/a%2F..%2Fb%3Fc%23d")
        );
        assert!(url("agendas.get", json!({"path": {"agendaUid": ".."}})).is_err());
        assert!(url("agendas.get", json!({"path": {"agendaUid": {"x": 1}}})).is_err());
        assert!(url("agendas.get", json!({})).is_err());
    }

    #[test]
    fn query_styles_follow_the_spec() {
        let u = url(
            "agendas.events.list",
            json!({"path": {"agendaUid": 1}, "query": {"city": ["Paris", "Lyon"], "fields": ["uid", "title"],
                   "timings": {"gte": "2026-01-01"}, "limit": 5, "skip": null}}),
        );
        assert_eq!(
            u.as_deref(),
            Ok(
                "https://api.example/v3/agendas/1/events?city=Paris&city=Lyon&fields=uid%2Ctitle&limit=5&timings%5Bgte%5D=2026-01-01"
            )
        );
    }

    #[test]
    fn required_query_parameters_are_checked() {
        assert!(url("agendas.events.facets", json!({"path": {"agendaUid": 1}})).is_err());
        assert!(
            url(
                "agendas.events.facets",
                json!({"path": {"agendaUid": 1}, "query": {"facets": ["cities"]}})
            )
            .is_ok()
        );
    }
}
