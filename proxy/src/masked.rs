//! Masked credentials (srt `credentials` with `mode: "mask"`): the run's
//! sentinels, the real values behind them, and the scans the proxy runs on
//! every request.
//!
//! The supervisor builds [`Credentials`] from the policy and its own
//! environment; the real values live only in this value (in the supervisor
//! process, never in the jail) and nothing returns them. Each sentinel is
//! `oajail_masked_` followed by 32 lower-case hex digits from the system's
//! secure random source (128 bits), so it can pass through headers, URLs,
//! JSON and DNS labels unchanged and cannot be guessed.
//!
//! The rule the proxy enforces: a sentinel may appear only in the request
//! headers of a terminated request to one of its credential's
//! `injectHosts`, where it is replaced by the real value. Anywhere else
//! (another host, the URL, the body, a CONNECT or SOCKS host name, plain
//! HTTP) the request is refused. Scans look for the random core only,
//! ASCII case-insensitively, so a shortened prefix or a change of case does
//! not hide it; a sentinel split across two header values is found because
//! the values are scanned as one run, and one split across body chunks
//! because each chunk is scanned together with the end of the previous one.
use crate::ProxyError;
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use memchr::memmem;
use oajail_policy::credentials::{MaskedFile, MaskedVar};
use oajail_policy::host::Host;
use oajail_policy::issued::IssuedTokens;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

/// The visible prefix of every sentinel.
const PREFIX: &str = "oajail_masked_";
/// Hex digits of the random core (16 bytes).
const CORE_LEN: usize = 32;
/// Shortest real value looked for in response headers.
const MIN_UNSWAP: usize = 8;

/// One masked variable of this run.
struct Secret {
    name: String,
    /// `PREFIX` + core: what the jail sees.
    sentinel: String,
    /// The random core, lower-case hex: what the scans look for.
    core: Vec<u8>,
    /// The real value (read by the supervisor, never in the jail).
    real: String,
    rule: MaskedVar,
    /// The policy's path text, for a masked file.
    file: Option<String>,
    /// When an issued token's sentinel stops being swapped (`issued.rs`).
    until: Option<Instant>,
}

impl Secret {
    /// A fresh sentinel for `real`; refused when the value could not
    /// travel in an HTTP header.
    fn new(rule: MaskedVar, real: String, file: Option<String>) -> Result<Self, ProxyError> {
        if HeaderValue::from_str(&real).is_err() {
            return Err(ProxyError::Credential(format!(
                "credentials: {} holds bytes an http header cannot carry, so it cannot be masked",
                rule.name
            )));
        }
        let random = rustls::crypto::ring::default_provider().secure_random;
        let mut bytes = [0u8; CORE_LEN / 2];
        random
            .fill(&mut bytes)
            .map_err(|_| ProxyError::Credential("credentials: no secure random".into()))?;
        let core: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Secret {
            name: rule.name.clone(),
            sentinel: format!("{PREFIX}{core}"),
            core: core.into_bytes(),
            real,
            rule,
            file,
            until: None,
        })
    }

    fn live(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now < u)
    }
}

/// Most live sentinels of issued tokens.
const MAX_ISSUED: usize = 4096;

/// The run's masked credentials; cheap to clone.
#[derive(Clone, Default)]
pub struct Credentials(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// Masked variables and files, fixed for the run.
    fixed: Vec<Arc<Secret>>,
    /// `oajail.issuedTokens`: where issued tokens come from.
    issuers: Vec<IssuedTokens>,
    /// Sentinels of tokens issued during the run.
    issued: Mutex<Vec<Arc<Secret>>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: neither the sentinel nor the real value is printed.
        let names: Vec<String> = self.all().iter().map(|s| s.name.clone()).collect();
        f.debug_tuple("Credentials").field(&names).finish()
    }
}

/// Why a request was refused: the credential's name (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leak {
    pub name: String,
    pub place: &'static str,
}

impl Credentials {
    /// A sentinel for each masked variable that `real` knows (a variable
    /// the supervisor was not given is simply absent in the jail too).
    /// Refused when a value could not travel in an HTTP header.
    pub fn for_policy(
        masked: &[MaskedVar],
        real: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProxyError> {
        Self::with_files(masked, real, &[])
    }

    /// As [`Credentials::for_policy`], plus masked files, each with the
    /// real content the supervisor read (its value, line ending removed).
    pub fn with_files(
        masked: &[MaskedVar],
        real: impl Fn(&str) -> Option<String>,
        files: &[(&MaskedFile, String)],
    ) -> Result<Self, ProxyError> {
        let mut out = Vec::new();
        for rule in masked {
            if let Some(value) = real(&rule.name) {
                out.push(Arc::new(Secret::new(rule.clone(), value, None)?));
            }
        }
        for (file, value) in files {
            let rule = MaskedVar {
                name: format!("file {}", file.path.path),
                inject_hosts: file.inject_hosts.clone(),
            };
            let path = Some(file.path.path.clone());
            out.push(Arc::new(Secret::new(rule, value.clone(), path)?));
        }
        Ok(Self(Arc::new(Inner {
            fixed: out,
            ..Inner::default()
        })))
    }

    /// These credentials, plus the token endpoints whose issued tokens are
    /// masked as they arrive (`oajail.issuedTokens`, `issued.rs`).
    pub fn with_issued(self, issuers: &[IssuedTokens]) -> Self {
        Self(Arc::new(Inner {
            fixed: self.0.fixed.clone(),
            issuers: issuers.to_vec(),
            issued: Mutex::new(Vec::new()),
        }))
    }

    /// Every live secret: the fixed ones and the issued ones not expired.
    fn all(&self) -> Vec<Arc<Secret>> {
        let mut out = self.0.fixed.clone();
        if !self.0.issuers.is_empty() {
            let now = Instant::now();
            let issued = self.0.issued.lock().unwrap_or_else(|p| p.into_inner());
            out.extend(issued.iter().filter(|s| s.live(now)).cloned());
        }
        out
    }

    /// The issuer rule for a request, when it is a `POST` to its endpoint.
    pub(crate) fn issuer(
        &self,
        method: &str,
        host: &Host,
        port: u16,
        path: &str,
    ) -> Option<&IssuedTokens> {
        if method != "POST" {
            return None;
        }
        (self.0.issuers.iter()).find(|r| r.is_endpoint(host, port, path))
    }

    /// A sentinel for a token issued during the run (`issued.rs`), swapped
    /// for `inject_hosts` until `until`; the soonest to expire goes when
    /// [`MAX_ISSUED`] are live.
    pub(crate) fn keep_issued(
        &self,
        name: String,
        real: String,
        inject_hosts: Vec<oajail_policy::domain::DomainPattern>,
        until: Instant,
    ) -> Result<String, ProxyError> {
        let rule = MaskedVar { name, inject_hosts };
        let mut secret = Secret::new(rule, real, None)?;
        secret.until = Some(until);
        let sentinel = secret.sentinel.clone();
        let mut issued = self.0.issued.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        issued.retain(|s| s.live(now));
        if issued.len() >= MAX_ISSUED
            && let Some(i) = (0..issued.len()).min_by_key(|i| issued[*i].until)
        {
            issued.remove(i);
        }
        issued.push(Arc::new(secret));
        Ok(sentinel)
    }

    /// `(name, sentinel)` for the jail's environment.
    pub fn jail_env(&self) -> Vec<(String, String)> {
        (self.0.fixed.iter())
            .filter(|s| s.file.is_none())
            .map(|s| (s.name.clone(), s.sentinel.clone()))
            .collect()
    }

    /// `(path as written in the policy, sentinel)` for each masked file.
    pub fn file_sentinels(&self) -> Vec<(String, String)> {
        (self.0.fixed.iter())
            .filter_map(|s| Some((s.file.clone()?, s.sentinel.clone())))
            .collect()
    }

    /// No masked variable and no issued-token rule in this run.
    pub fn is_empty(&self) -> bool {
        self.0.fixed.is_empty() && self.0.issuers.is_empty()
    }

    /// The first credential whose sentinel core is in `hay` (any case).
    pub(crate) fn find(&self, hay: &[u8]) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let lower = hay.to_ascii_lowercase();
        (self.all().iter())
            .find(|s| memmem::find(&lower, &s.core).is_some())
            .map(|s| s.name.clone())
    }

    /// `text` with every sentinel core replaced by `[masked NAME]`, for
    /// logs and messages.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in self.all().iter() {
            let core = String::from_utf8_lossy(&s.core).into_owned();
            while let Some(at) = out.to_ascii_lowercase().find(&core) {
                out.replace_range(at..at + CORE_LEN, &format!("[masked {}]", s.name));
            }
        }
        out
    }

    /// Check one request's head. Sentinels of credentials that inject to
    /// `host:port` are swapped for the real value in header values (when
    /// `inject` is true: a terminated request); any sentinel left anywhere
    /// in the target or the headers refuses the request.
    pub(crate) fn check_head(
        &self,
        target: &str,
        headers: &mut HeaderMap,
        dest: Option<(&Host, u16)>,
    ) -> Result<(), Leak> {
        if self.is_empty() {
            return Ok(());
        }
        if let Some(name) = self.find(target.as_bytes()) {
            return Err(leak(&name, "the request url"));
        }
        if let Some((host, port)) = dest {
            self.swap(headers, host, port);
        }
        // One run over every name and value, in order: a sentinel split
        // across two values (of one name or neighbours) is still found.
        // Names are scanned on their own run; the decoded credentials of
        // `Basic` values too (a sentinel left there goes nowhere else).
        let mut run = Vec::new();
        let mut names = Vec::new();
        for (name, value) in headers.iter() {
            names.extend_from_slice(name.as_str().as_bytes());
            run.extend_from_slice(value.as_bytes());
        }
        for value in headers.values() {
            if let Some(decoded) = value.to_str().ok().and_then(basic_decoded) {
                run.extend_from_slice(decoded.as_bytes());
            }
        }
        match self.find(&run).or_else(|| self.find(&names)) {
            Some(name) => Err(leak(&name, "a request header")),
            None => Ok(()),
        }
    }

    fn swap(&self, headers: &mut HeaderMap, host: &Host, port: u16) {
        let all = self.all();
        let injecting: Vec<&Secret> = (all.iter())
            .filter(|s| s.rule.injects_to(host, port))
            .map(|s| s.as_ref())
            .collect();
        if injecting.is_empty() {
            return;
        }
        let replace = |text: &str| {
            let mut out = text.to_owned();
            for s in &injecting {
                out = out.replace(&s.sentinel, &s.real);
            }
            out
        };
        for value in headers.values_mut() {
            let Ok(text) = value.to_str() else { continue };
            let swapped = match basic_decoded(text) {
                // HTTP Basic (a client secret): swapped inside the
                // encoding, as the client meant it.
                Some(decoded) if injecting.iter().any(|s| decoded.contains(&s.sentinel)) => {
                    use base64::Engine;
                    format!("Basic {}", b64().encode(replace(&decoded)))
                }
                _ if injecting.iter().any(|s| text.contains(&s.sentinel)) => replace(text),
                _ => continue,
            };
            // Both parts are valid header text (checked at start).
            if let Ok(new) = HeaderValue::from_str(&swapped) {
                *value = new;
            }
        }
    }

    /// Put the sentinel back where a response echoes a real value in a
    /// header, so the jail never reads it there. Values shorter than
    /// [`MIN_UNSWAP`] are left alone: they would match unrelated text
    /// (and are no secret worth the name).
    pub(crate) fn unswap(&self, headers: &mut HeaderMap) {
        let all = self.all();
        for value in headers.values_mut() {
            let Ok(text) = value.to_str() else { continue };
            let hit = (all.iter()).filter(|s| s.real.len() >= MIN_UNSWAP && text.contains(&s.real));
            let mut fixed: Option<String> = None;
            for s in hit {
                let current = fixed.take().unwrap_or_else(|| text.to_owned());
                fixed = Some(current.replace(&s.real, &s.sentinel));
            }
            if let Some(new) = fixed.and_then(|f| HeaderValue::from_str(&f).ok()) {
                *value = new;
            }
        }
    }

    /// (real value, sentinel) of every live value long enough to be looked
    /// for in a response body (`unswap.rs`).
    pub(crate) fn unswap_pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        (self.all().iter())
            .filter(|s| s.real.len() >= MIN_UNSWAP)
            .map(|s| (s.real.clone().into_bytes(), s.sentinel.clone().into_bytes()))
            .collect()
    }

    /// Whether some value is swapped in for `host:port`.
    pub(crate) fn injects_to(&self, host: &Host, port: u16) -> bool {
        !self.is_empty() && self.all().iter().any(|s| s.rule.injects_to(host, port))
    }

    /// A streaming scanner for one request body.
    pub(crate) fn scanner(&self) -> BodyScan {
        BodyScan {
            creds: self.clone(),
            tail: Vec::new(),
        }
    }
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// The decoded `user:password` of an HTTP `Basic` value.
fn basic_decoded(value: &str) -> Option<String> {
    use base64::Engine;
    let (scheme, rest) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    String::from_utf8(b64().decode(rest.trim()).ok()?).ok()
}

fn leak(name: &str, place: &'static str) -> Leak {
    Leak {
        name: name.to_owned(),
        place,
    }
}

impl Leak {
    /// The refusal text: the credential by name, never a value.
    pub(crate) fn message(&self, dest: &str) -> String {
        format!(
            "the masked credential {} in {} to {dest}: a sentinel may only go in the headers of https requests to its injectHosts",
            self.name, self.place
        )
    }
}

/// Scans a body chunk by chunk; each chunk is scanned after the last
/// `CORE_LEN - 1` bytes of the one before, so a split sentinel is found
/// when its last byte arrives, before that chunk is passed on.
#[derive(Debug)]
pub(crate) struct BodyScan {
    creds: Credentials,
    tail: Vec<u8>,
}

impl BodyScan {
    /// Scan the next chunk; `Some(name)` refuses the request.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Option<String> {
        if self.creds.is_empty() {
            return None;
        }
        self.tail.extend_from_slice(chunk);
        let hit = self.creds.find(&self.tail);
        let keep = self.tail.len().min(CORE_LEN - 1);
        self.tail.drain(..self.tail.len() - keep);
        hit
    }
}

/// A request body that is scanned as it streams upstream. On a sentinel
/// it fails instead of yielding the chunk (the upstream request is
/// aborted) and records the credential's name in `hit`.
pub(crate) struct Scanned<B> {
    inner: B,
    scan: BodyScan,
    pub hit: Arc<OnceLock<String>>,
}

impl<B> Scanned<B> {
    pub(crate) fn new(inner: B, scan: BodyScan) -> Self {
        Self {
            inner,
            scan,
            hit: Arc::new(OnceLock::new()),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<B> Body for Scanned<B>
where
    B: Body<Data = bytes::Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let found = match (frame.data_ref(), frame.trailers_ref()) {
            (Some(data), _) => this.scan.feed(data),
            (None, Some(trailers)) => {
                let run: Vec<u8> = trailers
                    .values()
                    .flat_map(|v| v.as_bytes().to_vec())
                    .collect();
                this.scan.creds.find(&run)
            }
            (None, None) => None,
        };
        match found {
            Some(name) => {
                let _ = this.hit.set(name);
                Poll::Ready(Some(Err(
                    "a masked credential's sentinel in the body".into()
                )))
            }
            None => Poll::Ready(Some(Ok(frame))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oajail_policy::domain::{DomainPattern, ListKind};

    fn creds() -> Credentials {
        let rule = MaskedVar {
            name: "KEY".into(),
            inject_hosts: vec![DomainPattern::parse("api.test", ListKind::Allow).unwrap()],
        };
        Credentials::for_policy(&[rule], |_| Some("real-value-123".into())).unwrap()
    }

    fn sentinel(c: &Credentials) -> String {
        c.jail_env()[0].1.clone()
    }

    #[test]
    fn sentinels_are_random_and_well_formed() {
        let (a, b) = (sentinel(&creds()), sentinel(&creds()));
        assert_ne!(a, b);
        assert_eq!(a.len(), PREFIX.len() + CORE_LEN);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        );
        assert!(!format!("{:?}", creds()).contains(PREFIX));
    }

    #[test]
    fn headers_swap_only_for_inject_hosts() {
        let c = creds();
        let s = sentinel(&c);
        let api = oajail_policy::host::canonicalize("api.test").unwrap();
        let other = oajail_policy::host::canonicalize("other.test").unwrap();
        let mut h = HeaderMap::new();
        h.insert("authorization", format!("Bearer {s}").parse().unwrap());
        let mut h2 = h.clone();
        assert!(c.check_head("/", &mut h, Some((&api, 443))).is_ok());
        assert_eq!(h["authorization"], "Bearer real-value-123");
        let err = c.check_head("/", &mut h2, Some((&other, 443))).unwrap_err();
        assert_eq!(err.name, "KEY");
        let mut plain = HeaderMap::new();
        plain.insert("x", s.to_uppercase().parse().unwrap());
        assert!(c.check_head("/", &mut plain, Some((&api, 443))).is_err());
        let mut none = HeaderMap::new();
        let query = format!("/v1?key={s}");
        assert!(c.check_head(&query, &mut none, Some((&api, 443))).is_err());
    }

    #[test]
    fn basic_credentials_are_swapped_inside_their_encoding() {
        use base64::Engine;
        let c = creds();
        let s = sentinel(&c);
        let api = oajail_policy::host::canonicalize("api.test").unwrap();
        let other = oajail_policy::host::canonicalize("other.test").unwrap();
        let basic = format!("Basic {}", b64().encode(format!("client:{s}")));
        let mut h = HeaderMap::new();
        h.insert("authorization", basic.parse().unwrap());
        let mut h2 = h.clone();
        assert!(c.check_head("/", &mut h, Some((&api, 443))).is_ok());
        let want = format!("Basic {}", b64().encode("client:real-value-123"));
        assert_eq!(h["authorization"], want.as_str());
        // To another host the encoded sentinel is found, and refused.
        assert_eq!(
            c.check_head("/", &mut h2, Some((&other, 443)))
                .unwrap_err()
                .name,
            "KEY"
        );
    }

    #[test]
    fn issued_tokens_are_swapped_until_they_expire() {
        let rule = IssuedTokens {
            token_url: "https://auth.test/token".into(),
            inject_hosts: vec![DomainPattern::parse("api.test", ListKind::Allow).unwrap()],
        };
        let c = Credentials::default().with_issued(&[rule]);
        let api = oajail_policy::host::canonicalize("api.test").unwrap();
        let hosts = vec![DomainPattern::parse("api.test", ListKind::Allow).unwrap()];
        let now = Instant::now();
        let live = c
            .keep_issued(
                "t".into(),
                "issued-real-1".into(),
                hosts.clone(),
                now + std::time::Duration::from_secs(60),
            )
            .unwrap();
        let gone = c
            .keep_issued("u".into(), "issued-real-2".into(), hosts, now)
            .unwrap();
        let mut h = HeaderMap::new();
        h.insert("authorization", format!("Bearer {live}").parse().unwrap());
        assert!(c.check_head("/", &mut h, Some((&api, 443))).is_ok());
        assert_eq!(h["authorization"], "Bearer issued-real-1");
        // An expired sentinel is no longer swapped (it goes as it is).
        let mut h = HeaderMap::new();
        h.insert("authorization", format!("Bearer {gone}").parse().unwrap());
        assert!(c.check_head("/", &mut h, Some((&api, 443))).is_ok());
        assert_eq!(h["authorization"], format!("Bearer {gone}").as_str());
    }

    #[test]
    fn split_sentinels_are_found() {
        let c = creds();
        let s = sentinel(&c);
        let (a, b) = s.split_at(30);
        let mut h = HeaderMap::new();
        h.append("x-a", a.parse().unwrap());
        h.append("x-a", b.parse().unwrap());
        assert!(c.check_head("/", &mut h, None).is_err());
        for cut in [1, 15, 31, 40] {
            let mut scan = c.scanner();
            let body = format!("{{\"k\": \"{s}\"}}");
            let (x, y) = body.split_at(cut);
            assert_eq!(scan.feed(x.as_bytes()), None, "{cut}");
            assert_eq!(scan.feed(y.as_bytes()).as_deref(), Some("KEY"), "{cut}");
        }
    }

    #[test]
    fn echoes_and_logs_hide_values() {
        let c = creds();
        let s = sentinel(&c);
        let mut h = HeaderMap::new();
        h.insert("x-echo", "got real-value-123".parse().unwrap());
        c.unswap(&mut h);
        assert_eq!(h["x-echo"], format!("got {s}").as_str());
        assert_eq!(
            c.redact(&format!("/a?k={s}")),
            "/a?k=oajail_masked_[masked KEY]"
        );
    }
}
