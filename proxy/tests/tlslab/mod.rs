//! An HTTPS upstream for the termination tests: the security suite's HTTPS
//! sink (`oajail_audit::tlssink`: its own test CA, written to a file the
//! proxy is told to trust through `extraCaCertPaths`; HTTP/1.1 and HTTP/2 by
//! ALPN) with a record of every request it served. It echoes
//! `METHOD PATH VERSION host body-bytes`, or serves files under `/files/`
//! (a dumb git remote).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use oajail_audit::tlssink::{self, ConnInfo, Handler};
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

/// Start on `ip` (a lab stand-in) with a certificate for `name`; `files`
/// is served under `/files/`.
pub fn start(
    ip: std::net::Ipv4Addr,
    name: &str,
    dir: &Path,
    files: Option<PathBuf>,
) -> TlsUpstream {
    let id = tlssink::identity(&[name.to_owned()], &[IpAddr::V4(ip)]).unwrap();
    let ca_path = dir.join(format!("upstream-ca-{name}.pem"));
    std::fs::write(&ca_path, &id.ca_pem).unwrap();
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
    let upstream = Upstream {
        seen: seen.clone(),
        files,
    };
    rt.spawn(tlssink::serve(listener, id.config, Arc::new(upstream)));
    TlsUpstream {
        addr,
        ca_path,
        seen,
        _rt: rt,
    }
}

struct Upstream {
    seen: Arc<Mutex<Vec<String>>>,
    files: Option<PathBuf>,
}

impl Handler for Upstream {
    fn request(
        &self,
        _conn: &ConnInfo,
        head: http::request::Parts,
        body: Bytes,
    ) -> Response<Full<Bytes>> {
        let line = tlssink::request_line(&head);
        self.seen.lock().unwrap().push(line.clone());
        if let (Some(root), Some(rest)) = (&self.files, head.uri.path().strip_prefix("/files/")) {
            return match std::fs::read(root.join(rest)) {
                Ok(data) => tlssink::text(200, data),
                Err(_) => tlssink::text(404, "not found\n"),
            };
        }
        let host = tlssink::request_host(&head);
        tlssink::text(200, format!("{line} host={host} body={}\n", body.len()))
    }
}
