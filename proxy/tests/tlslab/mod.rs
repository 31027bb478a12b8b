//! An HTTPS upstream for the termination tests: its own test CA (written to
//! a file the proxy is told to trust through `extraCaCertPaths`), HTTP/1.1
//! and HTTP/2 by ALPN, and a record of every request it served. It echoes
//! `METHOD PATH VERSION host body-bytes`, or serves files under `/files/`
//! (a dumb git remote).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct TlsUpstream {
    pub addr: SocketAddr,
    /// PEM of the CA that signed the upstream's certificate.
    pub ca_path: PathBuf,
    seen: Arc<Mutex<Vec<String>>>,
    _rt: tokio::runtime::Runtime,
}

impl TlsUpstream {
    /// Every request served so far: `METHOD PATH VERSION`.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn certificate(
    name: &str,
    ip: IpAddr,
) -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
    params.subject_alt_names.push(SanType::IpAddress(ip));
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let key_der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    (ca_cert.pem(), cert.der().clone(), key_der)
}

/// Start on `ip` (a lab stand-in) with a certificate for `name`; `files`
/// is served under `/files/`.
pub fn start(
    ip: std::net::Ipv4Addr,
    name: &str,
    dir: &Path,
    files: Option<PathBuf>,
) -> TlsUpstream {
    let (ca_pem, cert, key) = certificate(name, IpAddr::V4(ip));
    let ca_path = dir.join(format!("upstream-ca-{name}.pem"));
    std::fs::write(&ca_path, ca_pem).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(SocketAddr::from((ip, 0))))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, record, files) = (acceptor.clone(), record.clone(), files.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    serve(req, record.clone(), files.clone())
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    TlsUpstream {
        addr,
        ca_path,
        seen,
        _rt: rt,
    }
}

async fn serve(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<String>>>,
    files: Option<PathBuf>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let line = format!("{} {path} {:?}", parts.method, parts.version);
    seen.lock().unwrap().push(line.clone());
    let body = body.collect().await?.to_bytes();
    if let (Some(root), Some(rest)) = (files, parts.uri.path().strip_prefix("/files/")) {
        return Ok(match std::fs::read(root.join(rest)) {
            Ok(data) => Response::new(Full::new(Bytes::from(data))),
            Err(_) => {
                let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
                *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                r
            }
        });
    }
    let host = (parts.headers.get("host"))
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .or_else(|| parts.uri.authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let text = format!("{line} host={host} body={}\n", body.len());
    Ok(Response::new(Full::new(Bytes::from(text))))
}
