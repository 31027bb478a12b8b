//! HTTPS sinks: a test CA made in memory, a leaf for the names a sink
//! answers, and an HTTP/1.1 + HTTP/2 (ALPN) server that hands every request
//! it parsed, and every connection's decrypted bytes, to a [`Handler`].
//!
//! Shared by the security lab (`oajail-lab` serves the lab's names on
//! [`crate::labspec::TLS_SINK_PORT`]) and the proxy's termination tests
//! (`proxy/tests/tlslab`), so both stand in for a real upstream the same
//! way. The CA's key never leaves this process: only its certificate is
//! written out, for the policy's `tlsTerminate.extraCaCertPaths`.
//!
//! Invariant: a connection's raw bytes are recorded before hyper parses
//! them, so a request hyper would refuse (a smuggling shape) is still seen
//! by the judge; a parsed request is recorded before it is answered.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Response;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Decrypted bytes kept per connection (the rest is counted only).
const RAW_KEEP: usize = 64 * 1024;

/// Why a sink could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSinkError {
    /// rcgen refused a certificate.
    #[error("make the sink certificate: {0}")]
    Certificate(#[source] rcgen::Error),
    /// rustls refused the server configuration.
    #[error("configure the sink's tls server: {0}")]
    Tls(#[source] rustls::Error),
}

/// A CA certificate (PEM) and a server configuration whose leaf it signed.
pub struct Identity {
    /// PEM of the CA that signed the leaf (what clients must trust).
    pub ca_pem: String,
    /// rustls server configuration, ALPN `h2` then `http/1.1`.
    pub config: Arc<rustls::ServerConfig>,
}

/// A fresh CA and a leaf for `names` (DNS names, `*.` wildcards allowed)
/// and `ips`, both made in memory.
pub fn identity(names: &[String], ips: &[IpAddr]) -> Result<Identity, TlsSinkError> {
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Distinct names: a leaf whose issuer reads as its own subject looks
    // self-signed to OpenSSL clients (curl, python, node).
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "oajail test sink ca");
    let ca_key = KeyPair::generate().map_err(TlsSinkError::Certificate)?;
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(TlsSinkError::Certificate)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::new(names.to_vec()).map_err(TlsSinkError::Certificate)?;
    params
        .subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    let leaf_cn = names.first().map_or("oajail test sink", String::as_str);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, leaf_cn);
    let key = KeyPair::generate().map_err(TlsSinkError::Certificate)?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(TlsSinkError::Certificate)?;
    let key_der = PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| TlsSinkError::Tls(rustls::Error::General(e.to_owned())))?;
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(TlsSinkError::Tls)?
    .with_no_client_auth()
    .with_single_cert(chain, key_der)
    .map_err(TlsSinkError::Tls)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Identity {
        ca_pem: ca_cert.pem(),
        config: Arc::new(config),
    })
}

/// One accepted TLS connection.
#[derive(Debug, Clone, Default)]
pub struct ConnInfo {
    /// The listener's address that was reached.
    pub local: String,
    /// The client's address.
    pub peer: String,
    /// The SNI the client sent, if any.
    pub sni: Option<String>,
    /// The negotiated ALPN protocol, if any.
    pub alpn: Option<String>,
}

/// What a sink does with what it receives.
pub trait Handler: Send + Sync + 'static {
    /// Answer one parsed request (its body already read whole).
    fn request(
        &self,
        conn: &ConnInfo,
        head: http::request::Parts,
        body: Bytes,
    ) -> Response<Full<Bytes>>;

    /// A connection ended: `raw` holds its first decrypted bytes (the
    /// request bytes as the client sent them), `total` their count; `error`
    /// is set when the handshake failed.
    fn closed(&self, conn: &ConnInfo, raw: &[u8], total: usize, error: Option<String>) {
        let _ = (conn, raw, total, error);
    }
}

/// Accept TLS connections on `listener` forever (on the current tokio
/// runtime) and serve each with `handler`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    identity: Arc<rustls::ServerConfig>,
    handler: Arc<dyn Handler>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(identity);
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            continue;
        };
        let (acceptor, handler) = (acceptor.clone(), Arc::clone(&handler));
        tokio::spawn(async move { connection(acceptor, tcp, peer, handler).await });
    }
}

async fn connection(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    handler: Arc<dyn Handler>,
) {
    let mut info = ConnInfo {
        local: tcp.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        peer: peer.to_string(),
        ..ConnInfo::default()
    };
    let tls = match acceptor.accept(tcp).await {
        Ok(tls) => tls,
        Err(e) => return handler.closed(&info, &[], 0, Some(e.to_string())),
    };
    let (_, server) = tls.get_ref();
    info.sni = server.server_name().map(str::to_owned);
    info.alpn = (server.alpn_protocol()).map(|p| String::from_utf8_lossy(p).into_owned());
    let raw = Arc::new(Mutex::new((Vec::new(), 0usize)));
    let io = Recording {
        inner: tls,
        raw: Arc::clone(&raw),
    };
    let conn = Arc::new(info);
    let service_conn = Arc::clone(&conn);
    let service_handler = Arc::clone(&handler);
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let (conn, handler) = (Arc::clone(&service_conn), Arc::clone(&service_handler));
        async move {
            let (head, body) = req.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, hyper::Error>(handler.request(&conn, head, body))
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), service)
        .await;
    let (bytes, total) = match raw.lock() {
        Ok(r) => r.clone(),
        Err(p) => p.into_inner().clone(),
    };
    handler.closed(&conn, &bytes, total, None);
}

/// The TLS stream, keeping a copy of what the client sent.
struct Recording<S> {
    inner: S,
    raw: Arc<Mutex<(Vec<u8>, usize)>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Recording<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let new = &buf.filled()[before..];
        if !new.is_empty() {
            let mut raw = match self.raw.lock() {
                Ok(r) => r,
                Err(p) => p.into_inner(),
            };
            let room = RAW_KEEP.saturating_sub(raw.0.len()).min(new.len());
            raw.0.extend_from_slice(&new[..room]);
            raw.1 += new.len();
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recording<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `METHOD path-and-query VERSION`, the first line every record starts with.
pub fn request_line(head: &http::request::Parts) -> String {
    let path = (head.uri.path_and_query()).map_or("/", |p| p.as_str());
    format!("{} {path} {:?}", head.method, head.version)
}

/// The request's host: the `Host` header, else the URI's authority (HTTP/2).
pub fn request_host(head: &http::request::Parts) -> String {
    (head.headers.get("host"))
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .or_else(|| head.uri.authority().map(|a| a.to_string()))
        .unwrap_or_default()
}

/// A plain-text response with `status`.
pub fn text(status: u16, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    r
}
