//! The Rust-side API client that performs `oa.*` calls for the workers.
//!
//! Invariants:
//! - requests go only to the base URL's scheme, host and port; URLs are
//!   built from the base and the operation's path template, never taken
//!   from the script;
//! - redirects are never followed, so the key cannot be carried elsewhere;
//! - the key is sent as a sensitive `Authorization: Bearer` header and is
//!   replaced by `[redacted]` in every text this module returns, as the
//!   script will see it: in JSON strings once decoded, and percent-, base64-
//!   or hex-encoded ([`crate::redact`]);
//! - a response is turned into the script's `{data, error}` as text
//!   ([`crate::reply`]), within the server's response budget
//!   ([`crate::budget`]);
//! - proxies come from `HTTPS_PROXY`/`NO_PROXY` (inside oajail, the jail's
//!   proxy); TLS roots are the compiled-in Mozilla set plus
//!   `OA_EXTRA_CA_CERTS`, except under an oajail wrapper: its proxy
//!   terminates TLS to the API host with a CA made per run, so there the
//!   roots are the bundle the wrapper names in `SSL_CERT_FILE` (the host's
//!   roots plus that CA) instead of the compiled-in set.

use crate::McpError;
use crate::budget::{Held, RESPONSE_BUDGET, ResponseBudget};
use crate::error::PemError;
use crate::redact::Redactor;
pub use crate::reply::ApiReply;
use crate::reply::{self, failure};
use crate::spec::{Operation, Param, ParamIn, Style};
use reqwest::Url;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::Value;
use serde_json::value::RawValue;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// API responses larger than this are refused.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Bodies up to this size are redacted on the event loop; larger ones on a
/// blocking thread, so that no request waits behind a 16 MiB scan.
const INLINE_BODY: usize = 64 * 1024;

/// The client.
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    key: Option<String>,
    redactor: Arc<Redactor>,
    responses: ResponseBudget,
}

/// The script's arguments of one call. The body stays JSON text: it is sent
/// as it came, never held as a tree.
#[derive(serde::Deserialize)]
struct CallArgs<'a> {
    #[serde(default)]
    path: Option<Value>,
    #[serde(default)]
    query: Option<Value>,
    #[serde(default)]
    header: Option<Value>,
    #[serde(default, borrow)]
    body: Option<&'a RawValue>,
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
        let http = http_client(roots, extra_ca, timeout)?;
        let key = key.filter(|k| !k.is_empty());
        Ok(Self {
            http,
            base,
            redactor: Arc::new(Redactor::new(key.as_deref())),
            key,
            responses: ResponseBudget::new(RESPONSE_BUDGET),
        })
    }

    /// The same client (connections, roots, base, response budget) with
    /// `key` instead of its own, redacted as its own is: one execute's
    /// exchanged token ([`crate::access`]).
    pub fn with_key(&self, key: String) -> Self {
        let key = Some(key).filter(|k| !k.is_empty());
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            redactor: Arc::new(Redactor::new(key.as_deref())),
            key,
            responses: self.responses.clone(),
        }
    }

    /// Replaces the key, in every form [`Redactor`] knows, in `text`.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.text(text).into_owned()
    }

    /// Performs one operation with the script's `{path, query, header,
    /// body}`. The arguments are parsed while the request is built and
    /// dropped before it is sent: only the request's own bytes stay while
    /// the API answers.
    pub async fn call(&self, op: &Operation, args: Box<RawValue>) -> ApiReply {
        let req = self.request(op, &args);
        drop(args);
        let (req, url) = match req {
            Ok(r) => r,
            Err(msg) => return failure(&self.redactor, 0, &msg, None, Held::none()),
        };
        match req.send().await {
            Ok(resp) => self.read(resp).await,
            Err(e) => self.unsent(&e, &url, &op.id).await,
        }
    }

    /// A request that got no response: the jail's proxy's reason when it
    /// has one ([`crate::egress_reason`]), said to the script and on stderr.
    async fn unsent(&self, e: &reqwest::Error, url: &Url, op: &str) -> ApiReply {
        let mut message = format!("request failed: {}", without_url(e));
        if e.is_connect()
            && let Some(why) = crate::egress_reason::ask_proxy(url).await
        {
            message = format!("request failed: {why}");
        }
        let message = self.redact(&message);
        crate::log::line("warning", &format!("api {op}: {message}"));
        failure(&self.redactor, 0, &message, None, Held::none())
    }

    fn request(
        &self,
        op: &Operation,
        args: &RawValue,
    ) -> Result<(reqwest::RequestBuilder, Url), String> {
        let args: CallArgs<'_> = serde_json::from_str(args.get())
            .map_err(|_| "the argument must be an object { path, query, header, body }")?;
        let url = build_url(&self.base, op, args.path.as_ref(), args.query.as_ref())?;
        let method =
            reqwest::Method::from_bytes(op.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut req = self.http.request(method, url.clone());
        if let Some(key) = &self.key
            && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
        {
            v.set_sensitive(true);
            req = req.header(reqwest::header::AUTHORIZATION, v);
        }
        req = with_headers(req, op, args.header.as_ref())?;
        if let Some(body) = args.body {
            req = if op.multipart {
                let fields: Value = serde_json::from_str(body.get()).map_err(|e| e.to_string())?;
                req.multipart(multipart_form(&fields)?)
            } else {
                req.header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.get().to_owned())
            };
        }
        Ok((req, url))
    }

    /// Reads the body within [`MAX_BODY`] and the server's response budget,
    /// then redacts it into the script's reply.
    async fn read(&self, mut resp: reqwest::Response) -> ApiReply {
        let status = resp.status().as_u16();
        let fail = |msg: String| failure(&self.redactor, status, &msg, None, Held::none());
        if let Some(code) = resp.headers().get("x-proxy-error") {
            let code = String::from_utf8_lossy(code.as_bytes()).into_owned();
            return self.proxy_answer(resp, status, &code).await;
        }
        let too_large = || fail(format!("response larger than {MAX_BODY} bytes"));
        let mut held = Held::none();
        let announced = resp
            .content_length()
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if let Some(n) = announced {
            if n > MAX_BODY {
                return too_large();
            }
            if !self.responses.take(&mut held, n) {
                return fail(over_budget());
            }
        }
        let mut body = Vec::with_capacity(announced.unwrap_or(0).min(MAX_BODY));
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY {
                        return too_large();
                    }
                    if body.len() + chunk.len() > announced.unwrap_or(0)
                        && !self.responses.take(&mut held, chunk.len())
                    {
                        return fail(over_budget());
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return fail(format!("reading the response failed: {}", without_url(&e)));
                }
            }
        }
        if body.len() <= INLINE_BODY {
            return reply::from_body(&self.redactor, status, &body, held);
        }
        let redactor = self.redactor.clone();
        tokio::task::spawn_blocking(move || reply::from_body(&redactor, status, &body, held))
            .await
            .unwrap_or_else(|e| fail(format!("reading the response failed: {e}")))
    }
}

impl ApiClient {
    /// A response the jail's proxy made itself (a request rule, a failed
    /// upstream: `X-Proxy-Error`): its words, to the script and to stderr,
    /// its text kept as the error's `body`.
    async fn proxy_answer(&self, resp: reqwest::Response, status: u16, code: &str) -> ApiReply {
        let text = resp.text().await.unwrap_or_default();
        let text: String = self.redact(&text).chars().take(4000).collect();
        let why = crate::egress_reason::from_response(status, code, &text);
        crate::log::line("warning", &format!("api: {why}"));
        let body = serde_json::to_string(&text).unwrap_or_default();
        failure(&self.redactor, status, &why, Some(&body), Held::none())
    }
}

fn over_budget() -> String {
    format!(
        "the server already holds {} MiB of API responses for the executes running now; retry",
        RESPONSE_BUDGET / (1024 * 1024)
    )
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

/// The HTTP client every outbound call of the server uses (the API and
/// the authorization server): these trust roots, through the wrapper's
/// proxy when there is one, no redirects, `timeout` for connect and whole.
pub(crate) fn http_client(
    roots: Option<&Path>,
    extra_ca: Option<&Path>,
    timeout: Duration,
) -> Result<reqwest::Client, McpError> {
    let tls = tls_config(roots, extra_ca)?;
    let mut builder = reqwest::Client::builder();
    if let Some(proxy) = crate::egress::wrapper_proxy(roots)? {
        builder = builder.proxy(proxy);
    }
    builder
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("openagenda-mcp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(McpError::ClientBuild)
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
    given: Option<&Value>,
) -> Result<reqwest::RequestBuilder, String> {
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

/// Builds the request URL from the base, the path template and the
/// script's `path` and `query` arguments.
pub fn build_url(
    base: &Url,
    op: &Operation,
    path_args: Option<&Value>,
    query: Option<&Value>,
) -> Result<Url, String> {
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
    let query = query.and_then(Value::as_object);
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

/// Fills one segment of the path template in a single pass over the
/// template: each `{name}` is replaced once by the caller's value, and the
/// value is never scanned again, so a value that itself contains `{…}` is
/// data (it ends up percent-encoded by the segment push) and can neither
/// loop nor pull in another parameter's value.
fn fill_segment(seg: &str, path_args: Option<&Value>) -> Result<String, String> {
    let mut out = String::with_capacity(seg.len());
    let mut rest = seg;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find('}').ok_or("bad path template")?;
        out.push_str(&path_value(&after[..end], path_args)?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if out.is_empty() || out == "." || out == ".." {
        return Err(format!(
            "path segment {seg} must not be empty, \".\" or \"..\""
        ));
    }
    Ok(out)
}

/// The caller's value of path parameter `name`, as text.
fn path_value(name: &str, path_args: Option<&Value>) -> Result<String, String> {
    let value = path_args
        .and_then(|p| p.get(name))
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
    Ok(text)
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
        let op = cat.op(op).ok_or("no op")?;
        build_url(&base, op, args.get("path"), args.get("query")).map(|u| u.to_string())
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
    fn a_value_that_looks_like_a_template_is_data() {
        // Once looped for ever (the value was expanded again and again).
        let u = url("agendas.get", json!({"path": {"agendaUid": "{agendaUid}"}}));
        assert_eq!(
            u.as_deref(),
            Ok("https://api.example/v3/agendas/%7BagendaUid%7D")
        );
        // One parameter cannot pull in another's value.
        let u = url(
            "agendas.events.get",
            json!({"path": {"agendaUid": "{eventUid}", "eventUid": "{agendaUid}"}}),
        );
        assert_eq!(
            u.as_deref(),
            Ok("https://api.example/v3/agendas/%7BeventUid%7D/events/%7BagendaUid%7D")
        );
        let u = url(
            "agendas.events.get",
            json!({"path": {"agendaUid": "{{}{", "eventUid": "}{x}%7B"}}),
        );
        assert_eq!(
            u.as_deref(),
            Ok("https://api.example/v3/agendas/%7B%7B%7D%7B/events/%7D%7Bx%7D%257B")
        );
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
