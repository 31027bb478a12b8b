//! hudsucker-bench: hudsucker 0.24 as a terminating (MITM) proxy on
//! loopback, set up as its own examples do (rcgen CA, rustls client, the
//! no-op handler that intercepts every CONNECT), for `tls-bench --hudsucker`.
//!
//! `hudsucker-bench --ca-cert PEM --ca-key PEM --upstream-ca PEM`
//!
//! Two changes from the examples, both needed to run on loopback without
//! DNS or the web PKI: the upstream client trusts `--upstream-ca` (instead of
//! the webpki roots), and names ending in `.test` resolve to 127.0.0.1
//! (tls-bench's fixed resolver does the same for oajail's proxy). Every
//! resolution is written to stderr as `resolve NAME`, so the driver can count
//! them. Prints `ADDR -` on stdout once listening; exits at EOF on stdin.
//! Like oajail's proxy, the runtime has two worker threads and the crypto
//! provider is ring.
use hudsucker::certificate_authority::RcgenAuthority;
use hudsucker::rcgen::{Issuer, KeyPair};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::error::Error;
use std::future::Future;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::AsyncBufReadExt;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// `*.test` → 127.0.0.1, anything else not found; logs each call.
#[derive(Clone)]
struct TestResolver;

type Addrs = std::vec::IntoIter<SocketAddr>;
type ResolveFut = Pin<Box<dyn Future<Output = Result<Addrs, std::io::Error>> + Send>>;

impl tower_service::Service<Name> for TestResolver {
    type Response = Addrs;
    type Error = std::io::Error;
    type Future = ResolveFut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let name = name.as_str().to_owned();
        eprintln!("resolve {name}");
        Box::pin(async move {
            if name.ends_with(".test") {
                Ok(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 0))].into_iter())
            } else {
                Err(std::io::ErrorKind::NotFound.into())
            }
        })
    }
}

fn arg(args: &[String], name: &str) -> Res<String> {
    let i = args.iter().position(|a| a == name).ok_or(name.to_owned())?;
    Ok(args
        .get(i + 1)
        .ok_or(format!("{name}: missing value"))?
        .clone())
}

fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// hyper-rustls over an `HttpConnector` with the `.test` resolver, trusting
/// only the upstream CA; HTTP/1.1 and HTTP/2 by ALPN, as
/// `with_rustls_connector` builds it.
fn connector(upstream_ca: &str) -> Res<hyper_rustls::HttpsConnector<HttpConnector<TestResolver>>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(upstream_ca)?)?;
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new_with_resolver(TestResolver);
    http.enforce_http(false);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http))
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let key = KeyPair::from_pem(&std::fs::read_to_string(arg(&args, "--ca-key")?)?)?;
    let cert = std::fs::read_to_string(arg(&args, "--ca-cert")?)?;
    let issuer = Issuer::from_ca_cert_pem(&cert, key)?;
    let ca = RcgenAuthority::new(issuer, 1_000, provider());
    let https = connector(&arg(&args, "--upstream-ca")?)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let proxy = hudsucker::Proxy::builder()
            .with_listener(listener)
            .with_ca(ca)
            .with_http_connector(https)
            .with_graceful_shutdown(stdin_closed())
            .build()?;
        println!("{addr} -");
        std::io::stdout().flush()?;
        proxy.start().await?;
        Ok(())
    })
}

/// Resolves when the driver closes our stdin.
async fn stdin_closed() {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = lines.next_line().await {}
}
