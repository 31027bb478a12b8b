//! `tls-bench --hudsucker PATH`: oajail's terminating proxy against
//! hudsucker 0.24 (`bench/hudsucker`), same client, same upstream, same run.
//!
//! First the four measures of the plain bench (bulk, keep-alive p50,
//! CONNECT + handshake p50, RSS per idle connection), rounds interleaved.
//! Then probes of the guarantees `docs/proxy.md` ("Why not hudsucker")
//! compares, each run against a fresh proxy of each kind and reported as
//! observed (answer, timing, what the upstream saw, resolutions counted from
//! the proxies' `resolve NAME` stderr lines):
//! - a CONNECT to an allowed name whose port is closed;
//! - CONNECT `bench.test` then a ClientHello with SNI `other.test`;
//! - three keep-alive requests, then one whose Host is `other.test`;
//! - HTTP/2 from the client with an upstream that offers HTTP/2, then a
//!   request whose `:authority` is `other.test`.
//!
//! The probe client does not verify certificates: it plays jailed code that
//! wants to reach another host, not a victim.
use super::{
    NAME, Proxy, Res, Round, connector, idle_kib, median, provider, rounds_of, stage, upstream,
};
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// What the upstream saw, one line per TLS connection (`conn N sni S alpn
/// A`) and per request (`conn N VERSION host H`), kept only once `RECORD`
/// is set (the probes; the measured rounds do not pay for it).
pub static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
pub static RECORD: AtomicBool = AtomicBool::new(false);
/// TLS connections the upstream accepted so far.
pub static UPSTREAM_CONNS: AtomicUsize = AtomicUsize::new(0);

/// Keeps `line()` in `SEEN` while `RECORD` is set (built only then).
pub fn record(line: impl FnOnce() -> String) {
    if RECORD.load(Ordering::SeqCst)
        && let Ok(mut seen) = SEEN.lock()
    {
        seen.push(line());
    }
}

/// The measured rounds, the idle phase, then the probes.
pub async fn run(exe: &Path, rounds: usize, mib: usize, requests: usize, idle: usize) -> Res<()> {
    let (dir, port, upstream_ca) = stage("tls-bench-hudsucker").await?;
    let ours_ca = dir.join("ours-ca.pem");
    let ours = Proxy::spawn(port, &upstream_ca, Some(&ours_ca), false)?;
    let (huds, huds_ca) = spawn_hudsucker(exe, &dir, &upstream_ca)?;
    let tls = connector(&[&upstream_ca, &ours_ca, &huds_ca])?;
    let proxies = [ours.addr, huds.addr];
    let (o, h) = rounds_of(
        rounds,
        proxies,
        "oajail / hudsucker",
        port,
        &tls,
        mib,
        requests,
    )
    .await?;
    summary(&o, &h);
    idle_both(&ours, &huds, port, &tls, idle).await?;
    drop((ours, huds));
    probes(exe, &dir).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Idle memory of each, and how many upstream connections its idle
/// tunnels opened (ours: one each; hudsucker: from its shared pool).
async fn idle_both(
    ours: &Proxy,
    huds: &Proxy,
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    n: usize,
) -> Res<()> {
    let mut rss = Vec::new();
    for (name, proxy) in [("oajail", ours), ("hudsucker", huds)] {
        let conns = UPSTREAM_CONNS.load(Ordering::SeqCst);
        rss.push(idle_kib(proxy, port, tls, n).await?);
        let opened = UPSTREAM_CONNS.load(Ordering::SeqCst) - conns;
        println!("idle: {name}: {n} client connections opened {opened} upstream connections");
    }
    println!(
        "idle: proxy RSS per client connection: oajail {:.1} KiB, hudsucker {:.1} KiB, ratio {:.2}",
        rss[0],
        rss[1],
        rss[1] / rss[0]
    );
    Ok(())
}

/// Medians and the medians of per-round ratios hudsucker / oajail.
fn summary(o: &[Round], h: &[Round]) {
    let pick = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    let ratio = |f: fn(&Round) -> f64| median(o.iter().zip(h).map(|(a, b)| f(b) / f(a)).collect());
    type Measure = (&'static str, &'static str, fn(&Round) -> f64);
    let measures: [Measure; 3] = [
        ("bulk", "MiB/s", |r| r.bulk_mib_s),
        ("keep-alive p50", "us", |r| r.p50_us),
        ("CONNECT + handshake p50", "us", |r| r.handshake_us),
    ];
    for (name, unit, f) in measures {
        println!(
            "{name}: oajail {:.0} {unit}, hudsucker {:.0} {unit}, ratio hudsucker/oajail median {:.2}",
            pick(o, f),
            pick(h, f),
            ratio(f)
        );
    }
}

/// hudsucker with a fresh CA (cert and key PEM handed on its command line).
fn spawn_hudsucker(exe: &Path, dir: &Path, upstream_ca: &Path) -> Res<(Proxy, PathBuf)> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let (cert_path, key_path) = (dir.join("hudsucker-ca.pem"), dir.join("hudsucker-ca.key"));
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    let mut cmd = Command::new(exe);
    cmd.arg("--ca-cert")
        .arg(&cert_path)
        .arg("--ca-key")
        .arg(&key_path);
    cmd.arg("--upstream-ca").arg(upstream_ca);
    Ok((Proxy::start(cmd, "hudsucker")?, cert_path))
}

/// Our terminating proxy also allowing `bench.test` and `other.test` on any
/// port, logging resolutions.
fn spawn_ours(port: u16, upstream_ca: &Path, dir: &Path) -> Res<Proxy> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("serve").arg(port.to_string()).arg(upstream_ca);
    cmd.arg(dir.join("ours-probe-ca.pem"))
        .arg("terminate")
        .arg("probe");
    Proxy::start(cmd, "oajail")
}

async fn probes(exe: &Path, dir: &Path) -> Res<()> {
    RECORD.store(true, Ordering::SeqCst);
    let (port, upstream_ca) = upstream(dir, true).await?;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    for kind in ["oajail", "hudsucker"] {
        println!("== probes: {kind} (a fresh proxy for each)");
        // A fresh proxy per probe: hudsucker's connection pool would
        // otherwise carry an upstream connection from one probe to the next.
        let fresh = || match kind {
            "oajail" => spawn_ours(port, &upstream_ca, dir),
            _ => Ok(spawn_hudsucker(exe, dir, &upstream_ca)?.0),
        };
        let p = fresh()?;
        probe(&p, "closed upstream port", closed_port(p.addr, closed)).await;
        let p = fresh()?;
        let name = "SNI other.test after CONNECT bench.test";
        probe(&p, name, sni(p.addr, port)).await;
        let p = fresh()?;
        let name = "HTTP/1.1 keep-alive, then Host other.test";
        probe(&p, name, keep_alive(p.addr, port)).await;
        let p = fresh()?;
        let name = "HTTP/2 both ways, then :authority other.test";
        probe(&p, name, h2(p.addr, port)).await;
    }
    Ok(())
}

/// Runs one probe (10 s at most) and prints what it observed, the
/// resolutions the proxy made and what the upstream saw meanwhile.
async fn probe(proxy: &Proxy, name: &str, steps: impl std::future::Future<Output = Res<String>>) {
    let before = proxy.resolutions.load(Ordering::SeqCst);
    if let Ok(mut seen) = SEEN.lock() {
        seen.clear();
    }
    let outcome = match tokio::time::timeout(Duration::from_secs(10), steps).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => format!("error: {e}"),
        Err(_) => "timed out after 10 s".into(),
    };
    // Let the stderr reader and the upstream catch up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resolved = proxy.resolutions.load(Ordering::SeqCst) - before;
    let seen = SEEN.lock().map(|s| s.join("; ")).unwrap_or_default();
    println!("- {name}: {outcome}\n  resolutions: {resolved}; upstream saw: [{seen}]");
}

/// CONNECT and the proxy's answer head (status line) and when it came.
async fn connect(proxy: SocketAddr, target: &str) -> Res<(TcpStream, String, Duration)> {
    let started = Instant::now();
    let mut tcp = TcpStream::connect(proxy).await?;
    tcp.set_nodelay(true)?;
    tcp.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if tcp.read(&mut b).await? == 0 {
            break;
        }
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or("closed without an answer");
    Ok((tcp, status.to_owned(), started.elapsed()))
}

async fn tls(tcp: TcpStream, sni: &str, alpn: &[u8]) -> Res<Tls> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    Ok(connector
        .connect(ServerName::try_from(sni.to_owned())?, tcp)
        .await?)
}

async fn h1_statuses(stream: Tls, hosts: &[String]) -> Res<Vec<String>> {
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut out = Vec::new();
    for host in hosts {
        if send.ready().await.is_err() {
            out.push("connection closed".into());
            break;
        }
        let req = hyper::Request::get("/small").header("host", host.as_str());
        match send.send_request(req.body(Empty::<Bytes>::new())?).await {
            Ok(resp) => out.push(resp.status().as_u16().to_string()),
            Err(e) => out.push(format!("error: {e}")),
        }
    }
    Ok(out)
}

async fn closed_port(proxy: SocketAddr, closed: u16) -> Res<String> {
    let started = Instant::now();
    let (tcp, status, at) = connect(proxy, &format!("{NAME}:{closed}")).await?;
    let mut out = format!("CONNECT answered {status:?} after {:.2} ms", ms(at));
    if status.contains(" 200") {
        let stream = tls(tcp, NAME, b"http/1.1").await?;
        out += &format!(
            "; TLS with the client done after {:.2} ms",
            ms(started.elapsed())
        );
        let got = h1_statuses(stream, &[format!("{NAME}:{closed}")]).await?;
        out += &format!(
            "; GET answered {got:?} after {:.2} ms",
            ms(started.elapsed())
        );
    }
    Ok(out)
}

async fn sni(proxy: SocketAddr, port: u16) -> Res<String> {
    let (tcp, status, _) = connect(proxy, &format!("{NAME}:{port}")).await?;
    let mut out = format!("CONNECT answered {status:?}");
    match tls(tcp, "other.test", b"http/1.1").await {
        Err(e) => out += &format!("; TLS with SNI other.test failed: {e}"),
        Ok(stream) => {
            let got = h1_statuses(stream, &[format!("other.test:{port}")]).await?;
            out += &format!("; TLS with SNI other.test accepted; GET Host other.test: {got:?}");
        }
    }
    Ok(out)
}

async fn keep_alive(proxy: SocketAddr, port: u16) -> Res<String> {
    let (tcp, status, _) = connect(proxy, &format!("{NAME}:{port}")).await?;
    let stream = tls(tcp, NAME, b"http/1.1").await?;
    let mut hosts = vec![format!("{NAME}:{port}"); 3];
    hosts.push(format!("other.test:{port}"));
    let got = h1_statuses(stream, &hosts).await?;
    Ok(format!(
        "CONNECT {status:?}; statuses (3 x bench.test, 1 x other.test): {got:?}"
    ))
}

async fn h2(proxy: SocketAddr, port: u16) -> Res<String> {
    let (tcp, status, _) = connect(proxy, &format!("{NAME}:{port}")).await?;
    let stream = tls(tcp, NAME, b"h2").await?;
    let alpn = stream
        .get_ref()
        .1
        .alpn_protocol()
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let mut out = format!("CONNECT {status:?}; client ALPN with the proxy {alpn:?}");
    if alpn.as_deref() != Some("h2") {
        return Ok(out + "; no HTTP/2 from the proxy to the client");
    }
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut got = Vec::new();
    for host in [NAME, NAME, "other.test"] {
        let uri = format!("https://{host}:{port}/small");
        let req = hyper::Request::get(uri).body(Empty::<Bytes>::new())?;
        match send.send_request(req).await {
            Ok(resp) => got.push(format!("{host}: {}", resp.status().as_u16())),
            Err(e) => got.push(format!("{host}: error: {e}")),
        }
    }
    out += &format!("; statuses by :authority {got:?}");
    Ok(out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Accepts any certificate: the probes' client is the attacker.
#[derive(Debug)]
struct AnyCert;

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
