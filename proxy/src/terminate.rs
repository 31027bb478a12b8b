//! A terminated TLS tunnel: the CONNECT was decided, the checked address
//! dialed and the ClientHello's SNI checked exactly as for the opaque
//! tunnel (`relay.rs`); only then does this module take over.
//!
//! Order: upstream TLS first (verified against the host's roots and
//! `extraCaCertPaths`, SNI = the CONNECT host, over the already-dialed
//! checked address), then the client's handshake with a leaf for the host.
//! A failed upstream handshake is a TLS alert to the client, never a
//! plaintext answer. Then hyper serves HTTP/1.1 or HTTP/2 (ALPN) to the
//! client and speaks HTTP/1.1 or HTTP/2 (ALPN) upstream; every request is
//! checked (`inspect.rs`) and logged, each on its own. An HTTP/1.1
//! upstream connection that closes is dialed again at the same checked
//! address, never resolved again.
use crate::form;
use crate::inspect::{self, Dest, Refused};
use crate::log::Record;
use crate::masked::{Leak, Scanned};
use crate::route::Ctx;
use crate::shared::Shared;
use crate::sniff::{Counters, Rewind};
use crate::unreached::Failed;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, Uri, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use oajail_policy::host::Host;
use oajail_policy::l7::RequestFacts;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_rustls::client::TlsStream;

type Body = BoxBody<Bytes, hyper::Error>;
/// What goes upstream: the client's body, scanned for sentinels when the
/// run masks credentials.
type UpBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;
/// Where a body scan records the credential it found.
type Hit = Arc<std::sync::OnceLock<String>>;
/// A request head.
type Parts = http::request::Parts;

/// The upstream side: one HTTP/2 connection (multiplexed) or one HTTP/1.1
/// connection used by one request at a time.
enum Sender {
    H1(Option<http1::SendRequest<UpBody>>),
    H2(http2::SendRequest<UpBody>),
}

/// What every request of one tunnel shares.
struct Conn {
    shared: Arc<Shared>,
    ctx: Ctx,
    host: Host,
    port: u16,
    addr: SocketAddr,
    sni: Option<String>,
    sender: Mutex<Sender>,
}

/// The termination state; only asked for on a path that needs it.
fn termination(shared: &Shared) -> Result<&crate::mitm::Mitm, Failed> {
    shared.mitm().ok_or(Failed {
        reason: "no_ca",
        message: "tls termination was asked for without a ca".into(),
    })
}

fn failed(reason: &'static str, message: impl Into<String>) -> Failed {
    Failed {
        reason,
        message: message.into(),
    }
}

/// Upstream TLS over an already-dialed checked address.
async fn upstream_tls(
    shared: &Shared,
    host: &Host,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, Failed> {
    let mitm = termination(shared)?;
    let name = match host.ip() {
        Some(ip) => ServerName::IpAddress(ip.into()),
        None => ServerName::try_from(host.to_string())
            .map_err(|e| failed("upstream_tls", format!("{host}: {e}")))?,
    };
    let connector = tokio_rustls::TlsConnector::from(mitm.upstream.clone());
    match tokio::time::timeout(mitm.handshake_timeout, connector.connect(name, stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(failed(
            "upstream_tls",
            format!("TLS with {host} failed: {e}"),
        )),
        Err(_) => Err(failed("upstream_tls", format!("TLS with {host} timed out"))),
    }
}

async fn handshake_upstream(tls: TlsStream<TcpStream>) -> Result<Sender, Failed> {
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    let err = |e: hyper::Error| failed("upstream_error", format!("upstream HTTP: {e}"));
    if h2 {
        let (send, conn) = http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(err)?;
        tokio::spawn(conn);
        Ok(Sender::H2(send))
    } else {
        let (send, conn) = http1::handshake(io).await.map_err(err)?;
        tokio::spawn(conn);
        Ok(Sender::H1(Some(send)))
    }
}

/// The tunnel being terminated.
pub(crate) struct Tunnel {
    pub host: Host,
    pub port: u16,
    pub sni: Option<String>,
    pub counters: Arc<Counters>,
}

/// Everything that must hold before the client's handshake: a tunnel slot,
/// a verified upstream, a leaf.
async fn prepare(
    shared: &Shared,
    host: &Host,
    stream: TcpStream,
) -> Result<
    (
        tokio::sync::OwnedSemaphorePermit,
        Sender,
        Arc<rustls::ServerConfig>,
    ),
    Failed,
> {
    let mitm = termination(shared)?;
    let permit = mitm.tunnels.clone().try_acquire_owned().map_err(|_| {
        failed(
            "tunnel_limit",
            "too many terminated tunnels (network.tlsTerminate.maxTunnels)",
        )
    })?;
    let upstream = upstream_tls(shared, host, stream).await?;
    let sender = handshake_upstream(upstream).await?;
    let config = mitm
        .server_config(host)
        .map_err(|e| failed("leaf_error", e))?;
    Ok((permit, sender, config))
}

/// Serve one terminated tunnel; returns the close reason.
pub(crate) async fn run(
    shared: &Arc<Shared>,
    ctx: &Ctx,
    client: crate::conn::BufConn,
    route: crate::route::Route,
    t: Tunnel,
) -> Result<&'static str, Failed> {
    let mitm = termination(shared)?;
    let addr = route.addr;
    let (_permit, sender, config) = match prepare(shared, &t.host, route.stream).await {
        Ok(ready) => ready,
        Err(f) => {
            // The client is still in its handshake: never plaintext; the
            // reason inside TLS (unreached.rs), or an alert.
            crate::unreached::answer(mitm, client, &t.host, t.port, t.counters, &f).await;
            return Err(f);
        }
    };
    let (host, port, sni) = (t.host, t.port, t.sni);
    let watch = Idle {
        counters: t.counters.clone(),
        after: shared.limits.idle_timeout,
    };
    let io = Rewind::new(client.buf, client.stream, t.counters);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let tls = match tokio::time::timeout(mitm.handshake_timeout, acceptor.accept(io)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return Err(failed("client_tls", format!("client TLS failed: {e}"))),
        Err(_) => return Err(failed("client_tls", "client TLS timed out")),
    };
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        ctx: ctx.clone(),
        host,
        port,
        addr,
        sni,
        sender: Mutex::new(sender),
    });
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        return Ok(serve_io(tls, conn, watch).await);
    }
    let (limits, log_conn) = (&shared.limits, conn.clone());
    let guard = crate::sniff::H1Guard::new(limits.max_head_bytes, limits.max_headers);
    let guarded = crate::sniff::Guarded::new(tls, guard, move |why| log_conn.malformed(why));
    Ok(serve_io(guarded, conn, watch).await)
}

/// hyper serves the client (HTTP/1.1 or HTTP/2) until it is done or idle.
async fn serve_io<I>(io: I, conn: Arc<Conn>, idle: Idle) -> &'static str
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok::<_, std::convert::Infallible>(conn.handle(req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let served = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        r = served => if r.is_ok() { "closed" } else { "error" },
        () = idle.wait() => "idle",
    }
}

/// The tunnel's idle watchdog: no byte either way for `after` (as for the
/// opaque tunnel; a long download that keeps moving is never cut).
struct Idle {
    counters: Arc<Counters>,
    after: std::time::Duration,
}

impl Idle {
    async fn wait(&self) {
        let moved = || {
            let c = &self.counters;
            c.up.load(std::sync::atomic::Ordering::Relaxed)
                + c.down.load(std::sync::atomic::Ordering::Relaxed)
        };
        let mut last = moved();
        loop {
            tokio::time::sleep(self.after).await;
            let now = moved();
            if now == last {
                return;
            }
            last = now;
        }
    }
}

/// A plain-text answer of the proxy's own.
pub(crate) fn answer(
    status: u16,
    extra: Option<(&'static str, &'static str)>,
    message: &str,
) -> Response<Body> {
    let body = Full::new(Bytes::from(format!("{message}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut resp = Response::new(body);
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::FORBIDDEN);
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some((name, value)) = extra {
        headers.insert(name, HeaderValue::from_static(value));
    }
    resp
}

impl Conn {
    fn record(&self, method: &str, path: &str) -> Record {
        let mut rec = self.ctx.record("request", "allowed");
        rec.method = Some(method.to_owned());
        rec.host = Some(self.host.to_string());
        rec.port = Some(self.port);
        rec.resolved = Some(self.addr.to_string());
        rec.sni = self.sni.clone();
        rec.message = Some(path.to_owned());
        rec
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let started = Instant::now();
        let method = req.method().to_string();
        let path = (req.uri().path_and_query()).map_or("/".to_owned(), |p| p.to_string());
        let path = self.shared.creds.redact(&path);
        let mut rec = self.record(&method, &path);
        let tunnel = Dest {
            host: &self.host,
            port: self.port,
        };
        let rule = match inspect::check(&self.shared.plan, &tunnel, &req) {
            Ok(rule) => rule,
            Err(refused) => return self.refuse(rec, refused),
        };
        let req = match self.form_check(req).await {
            Ok(req) => req,
            Err(refused) => return self.refuse(rec, refused),
        };
        let issuer = (self.shared.creds)
            .issuer(&method, &self.host, self.port, req.uri().path())
            .cloned();
        let (mut parts, body, hit) = match self.mask_check(req) {
            Ok(checked) => checked,
            Err(leak) => return self.refuse(rec, self.leaked(&leak)),
        };
        // A host that gets a real value (or issues one) answers in clear,
        // so an echo of the value can be found (unswap.rs, issued.rs).
        if issuer.is_some() || self.shared.creds.injects_to(&self.host, self.port) {
            let identity = HeaderValue::from_static("identity");
            parts
                .headers
                .insert(http::header::ACCEPT_ENCODING, identity);
        }
        rec.decision = Some("allow");
        rec.entry = rule;
        let resp = match self.forward(parts, body).await {
            Ok(resp) => resp,
            Err(_) if hit.as_ref().is_some_and(|h| h.get().is_some()) => {
                let name = hit.and_then(|h| h.get().cloned()).unwrap_or_default();
                let leak = Leak {
                    name,
                    place: "the request body",
                };
                rec.entry = None;
                return self.refuse(rec, self.leaked(&leak));
            }
            Err(message) => {
                rec.decision = Some("error");
                rec.reason = "upstream_error".into();
                rec.message = Some(format!("{path}: {message}"));
                self.shared.log.write(rec);
                return answer(502, None, &message);
            }
        };
        let resp = match issuer {
            Some(rule) => match crate::issued::mask(&self.shared.creds, &rule, resp).await {
                Ok(masked) => masked,
                Err(why) => {
                    crate::log::say(format_args!(
                        "oajail: proxy refused the answer of {}: {why}",
                        rule.token_url
                    ));
                    rec.decision = Some("deny");
                    rec.reason = "issued_token_unreadable".into();
                    rec.message = Some(why.clone());
                    self.shared.log.write(rec);
                    return answer(
                        502,
                        Some(("x-proxy-error", "issued-token-unreadable")),
                        &why,
                    );
                }
            },
            None => resp,
        };
        rec.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.shared.log.write(rec);
        resp
    }

    /// Masked credentials: swap or refuse sentinels in the head, and wrap
    /// the body in the chunk scanner (whose `hit` names a sentinel found
    /// after the request went upstream).
    fn mask_check(&self, req: Request<UpBody>) -> Result<(Parts, UpBody, Option<Hit>), Leak> {
        let (mut parts, body) = req.into_parts();
        let creds = &self.shared.creds;
        if creds.is_empty() {
            return Ok((parts, body, None));
        }
        let target = parts.uri.to_string();
        let dest = Some((&self.host, self.port));
        creds.check_head(&target, &mut parts.headers, dest)?;
        let scanned = Scanned::new(body, creds.scanner());
        let hit = scanned.hit.clone();
        Ok((parts, BoxBody::new(scanned), Some(hit)))
    }

    /// A POST form's `_method` (`form.rs`): its body is buffered and
    /// judged when the rules refuse some method on this URL.
    async fn form_check(&self, req: Request<Incoming>) -> Result<Request<UpBody>, Refused> {
        let rules = &self.shared.plan.http_rules;
        let method = req.method().to_string();
        let path = (req.uri().path_and_query()).map_or("/".to_owned(), |p| p.to_string());
        let facts = RequestFacts {
            https: true,
            host: &self.host,
            port: self.port,
            method: &method,
            path: &path,
        };
        let types = req.headers().get_all(http::header::CONTENT_TYPE).iter();
        let Some(need) = form::need(rules, &facts, types.map(HeaderValue::as_bytes)) else {
            return Ok(req.map(|b| b.map_err(Into::into).boxed()));
        };
        let headers = (req.headers().iter()).map(|(n, v)| (n.as_str(), v.as_bytes()));
        let overrides = oajail_policy::l7::path::header_overrides(headers);
        match form::check_buffered(&need, rules, &facts, overrides, req).await {
            Ok(req) => Ok(req.map(|b| b.map_err(|e| match e {}).boxed())),
            Err(why) => Err(Refused {
                status: 403,
                reason: "http_rule",
                message: format!(
                    "{method} https://{}{path} is refused: {why}",
                    self.host.authority(self.port)
                ),
            }),
        }
    }

    /// A request head the strict parser refused (`sniff.rs`): the
    /// connection is dropped before hyper or the upstream sees it.
    fn malformed(&self, why: String) {
        let message = format!(
            "a malformed request in the tunnel to {}: {why}",
            self.host.authority(self.port)
        );
        crate::log::say(format_args!("oajail: proxy refused {message}"));
        let mut rec = self.record("", "");
        rec.method = None;
        rec.decision = Some("deny");
        rec.reason = "bad_request".into();
        rec.message = Some(message);
        self.shared.log.write(rec);
    }

    fn refuse(&self, mut rec: Record, r: Refused) -> Response<Body> {
        // Names the client sent may carry a sentinel: never logged as is.
        let message = self.shared.creds.redact(&r.message);
        // A live line: the user sees the refusal while the command runs.
        crate::log::say(format_args!("oajail: proxy refused {message}"));
        rec.decision = Some("deny");
        rec.reason = r.reason.into();
        rec.message = Some(message.clone());
        self.shared.log.write(rec);
        let header = match r.reason {
            "masked_credential" => Some(("x-proxy-error", "blocked-masked-credential")),
            _ if r.status == 403 => Some(("x-proxy-error", "blocked-by-http-rules")),
            _ => None,
        };
        answer(r.status, header, &message)
    }

    /// A request carrying a sentinel where none may go.
    fn leaked(&self, leak: &Leak) -> Refused {
        Refused {
            status: 403,
            reason: "masked_credential",
            message: leak.message(&format!("https://{}", self.host.authority(self.port))),
        }
    }

    /// Send upstream in the form the upstream connection speaks.
    async fn forward(&self, mut parts: Parts, body: UpBody) -> Result<Response<Body>, String> {
        strip_hop_by_hop(&mut parts.headers);
        let authority = if self.port == 443 {
            self.host.to_string()
        } else {
            self.host.authority(self.port)
        };
        let path = (parts.uri.path_and_query())
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut sender = self.sender.lock().await;
        if let Sender::H1(slot) = &*sender
            && slot.as_ref().is_none_or(|s| s.is_closed())
        {
            *sender = self.redial().await?;
        }
        let resp = match &mut *sender {
            Sender::H2(send) => {
                parts.version = Version::HTTP_2;
                parts.headers.remove(http::header::HOST);
                parts.uri = Uri::try_from(format!("https://{authority}{path}"))
                    .map_err(|e| e.to_string())?;
                let mut send = send.clone();
                // HTTP/2 multiplexes: the next request need not wait.
                drop(sender);
                send.send_request(Request::from_parts(parts, body)).await
            }
            Sender::H1(slot) => {
                let send = slot.as_mut().ok_or("no upstream connection")?;
                send.ready().await.map_err(|e| e.to_string())?;
                parts.version = Version::HTTP_11;
                parts.uri = Uri::try_from(path).map_err(|e| e.to_string())?;
                let value = HeaderValue::try_from(authority).map_err(|e| e.to_string())?;
                parts.headers.insert(http::header::HOST, value);
                let fut = send.send_request(Request::from_parts(parts, body));
                drop(sender);
                fut.await
            }
        };
        let mut resp = resp.map_err(|e| format!("the upstream failed: {e}"))?;
        strip_hop_by_hop(resp.headers_mut());
        self.shared.creds.unswap(resp.headers_mut());
        let resp = resp.map(|b| b.boxed());
        if crate::unswap::encoded(&resp) && self.shared.creds.injects_to(&self.host, self.port) {
            return Err(
                "a compressed answer from a host that gets a masked value could hide an echo of it; \
                 it is not passed into the jail"
                    .into(),
            );
        }
        Ok(crate::unswap::response(&self.shared.creds, resp))
    }

    /// A new HTTP connection to the same checked address (never a new
    /// resolution), for an HTTP/1.1 upstream that closed its connection.
    async fn redial(&self) -> Result<Sender, String> {
        let limits = &self.shared.limits;
        let stream = tokio::time::timeout(limits.connect_timeout, TcpStream::connect(self.addr))
            .await
            .map_err(|_| format!("{}: connect timed out", self.addr))?
            .map_err(|e| format!("{}: {e}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let tls = upstream_tls(&self.shared, &self.host, stream)
            .await
            .map_err(|f| f.message)?;
        handshake_upstream(tls).await.map_err(|f| f.message)
    }
}

/// Connection-specific headers never cross the proxy (and HTTP/2 forbids
/// them): `Connection` and what it lists, `Keep-Alive`, `Proxy-*`, `TE`,
/// `Trailer`, `Transfer-Encoding`, `Upgrade`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect();
    for name in listed {
        headers.remove(name.as_str());
    }
    let proxy: Vec<_> = (headers.keys())
        .filter(|k| k.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy {
        headers.remove(name);
    }
    for name in [
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}
