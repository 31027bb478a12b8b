//! tls-bench: a terminated tunnel against the opaque tunnel, same run.
//!
//! `cargo run --release -p oajail-proxy --bin tls-bench [-- --rounds N]
//! [--mib N] [--requests N] [--idle N] [--masked]`
//!
//! Two proxies run as child processes (`tls-bench serve`), as under the
//! supervisor, so their memory can be read from /proc: one with the plan's
//! `tlsTerminate` on, one without (the opaque tunnel). Both reach the same
//! in-process HTTPS upstream (its own CA, trusted by the terminating proxy
//! through `extraCaCertPaths`) on loopback through the full production path
//! (decision, resolution, address check, dial, 200, SNI check). The client
//! is rustls + hyper in this process, trusting both CAs. Rounds interleave
//! opaque and terminated runs; medians are reported:
//! - bulk: one HTTPS download of `--mib` MiB per run (HTTP/1.1), MiB/s;
//! - keep-alive latency: `--requests` small GETs on one connection, p50;
//! - handshake: CONNECT + TLS handshake to a host whose leaf is cached, p50;
//! - idle memory: `--idle` open terminated connections (one request done
//!   on each, then idle), growth of the proxy's RSS per connection.
//!
//! `--masked` compares instead a terminating proxy without credentials and
//! one with a masked credential injected for the upstream (every request
//! carries its sentinel in `Authorization`, swapped on the second, passed
//! as is on the first): the added cost of the sentinel scans and swap.
//!
//! `--hudsucker PATH` compares instead oajail's terminating proxy with
//! hudsucker 0.24 (`bench/hudsucker`, built apart from the workspace: PATH is
//! its binary) on the same four measures, interleaved, then runs the
//! guarantee probes of `versus.rs` against both.
mod versus;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use oajail_policy::domain::{DomainPattern, ListKind};
use oajail_policy::egress::EgressPlan;
use oajail_policy::l7::TlsTerminate;
use oajail_proxy::{Limits, ProxyConfig, ResolveFuture, Resolver, StartOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const NAME: &str = "bench.test";
/// `bench.test:<upstream port>`, the Host header every request carries.
static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// `--masked`: the sentinel every request carries in `Authorization`.
static SENTINEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Every `*.test` name is 127.0.0.1; with `.0`, each resolution is written
/// to stderr as `resolve NAME` (the `--hudsucker` probes count them).
struct FixedResolver(bool);
impl Resolver for FixedResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        let ok = name.ends_with(".test");
        if self.0 {
            eprintln!("resolve {name}");
        }
        Box::pin(async move {
            if ok {
                Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
            } else {
                Err(std::io::ErrorKind::NotFound.into())
            }
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn arg(args: &[String], name: &str, default: usize) -> Res<usize> {
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args.get(i + 1).ok_or("missing value")?.parse()?),
        None => Ok(default),
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let port: u16 = args.get(2).ok_or("port")?.parse()?;
        let ca = args.get(3).ok_or("upstream ca")?;
        let out = args.get(4).ok_or("ca output")?;
        let masked = args.get(6).is_some_and(|a| a == "masked");
        let probe = args.get(6).is_some_and(|a| a == "probe");
        let ca_out = (args.len() > 5).then_some(out.as_str());
        return serve(port, ca, ca_out, masked, probe);
    }
    let rounds = arg(&args, "--rounds", 5)?;
    let mib = arg(&args, "--mib", 256)?;
    let requests = arg(&args, "--requests", 2000)?;
    let idle = arg(&args, "--idle", 500)?;
    let masked = args.iter().any(|a| a == "--masked");
    let hudsucker = args.iter().position(|a| a == "--hudsucker");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    if masked {
        return rt.block_on(bench_masked(rounds, mib, requests));
    }
    if let Some(i) = hudsucker {
        let path = Path::new(args.get(i + 1).ok_or("--hudsucker: missing path")?);
        return rt.block_on(versus::run(path, rounds, mib, requests, idle));
    }
    rt.block_on(bench(rounds, mib, requests, idle))
}

/// Child: a proxy for `bench.test:<port>`, terminating when `ca_out` is
/// given (the CA PEM is written there). Prints its address; stops at EOF.
/// `probe` also allows `bench.test` and `other.test` on every port and any
/// loopback port, and logs
/// resolutions.
fn serve(port: u16, upstream_ca: &str, ca_out: Option<&str>, masked: bool, probe: bool) -> Res<()> {
    let mut allow = vec![format!("{NAME}:{port}"), format!("127.0.0.1:{port}")];
    if probe {
        allow.extend([NAME.into(), "other.test".into(), "127.0.0.1".into()]);
    }
    let mut egress = EgressPlan {
        allow: (allow.iter())
            .map(|t| DomainPattern::parse(t, ListKind::Allow))
            .collect::<Result<_, _>>()?,
        ..EgressPlan::default()
    };
    if ca_out.is_some() {
        egress.tls_terminate = Some(TlsTerminate {
            ca_cert_path: None,
            ca_key_path: None,
            exclude_domains: Vec::new(),
            extra_ca_cert_paths: vec![upstream_ca.to_owned()],
            max_tunnels: 4096,
            handshake_timeout_ms: 10_000,
        });
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let config = ProxyConfig {
        egress,
        log_json: None,
        limits: Limits {
            max_connections: 8192,
            ..Limits::default()
        },
    };
    let mut options = StartOptions::default().resolver(Arc::new(FixedResolver(probe)));
    let mut sentinel = String::from("-");
    if masked {
        let rule = oajail_policy::credentials::MaskedVar {
            name: "BENCH_KEY".into(),
            inject_hosts: vec![DomainPattern::parse(&allow[0], ListKind::Allow)?],
        };
        let creds = oajail_proxy::Credentials::for_policy(&[rule], |_| {
            Some("bench-real-value-0123456789abcdef".into())
        })?;
        // Bench only: the client needs the sentinel to send it.
        sentinel = creds.jail_env().remove(0).1;
        options = options.credentials(creds);
    }
    let handle = oajail_proxy::start_with(config, vec![listener], options)?;
    if let (Some(path), Some(pem)) = (ca_out, handle.ca_cert_pem()) {
        std::fs::write(path, pem)?;
    }
    println!("{addr} {sentinel}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line)? > 0 {}
    drop(handle);
    Ok(())
}

struct Proxy {
    child: Child,
    addr: SocketAddr,
    /// The masked credential's sentinel (`-` without one).
    sentinel: String,
    /// `resolve NAME` lines the child wrote to stderr so far.
    resolutions: Arc<AtomicUsize>,
}

impl Proxy {
    fn spawn(port: u16, upstream_ca: &Path, ca_out: Option<&Path>, masked: bool) -> Res<Self> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("serve").arg(port.to_string()).arg(upstream_ca);
        cmd.arg(ca_out.unwrap_or(Path::new("-")));
        if ca_out.is_some() {
            cmd.arg("terminate");
        }
        if masked {
            cmd.arg("masked");
        }
        Self::start(cmd, "oajail")
    }

    /// Runs `cmd`, which prints `ADDR SENTINEL` once listening and stops at
    /// EOF on stdin; its stderr is counted (`resolve ` lines) and passed on
    /// with `label`.
    fn start(mut cmd: Command, label: &'static str) -> Res<Self> {
        let mut child = (cmd.stdin(Stdio::piped()).stdout(Stdio::piped()))
            .stderr(Stdio::piped())
            .spawn()?;
        let resolutions = Arc::new(AtomicUsize::new(0));
        let (count, err) = (resolutions.clone(), child.stderr.take().ok_or("stderr")?);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                match line.starts_with("resolve ") {
                    true => count.fetch_add(1, Ordering::SeqCst),
                    false => 0,
                };
                eprintln!("  [{label}] {line}");
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("stdout")?).read_line(&mut line)?;
        let (addr, sentinel) = line.trim().split_once(' ').ok_or("proxy address")?;
        Ok(Self {
            addr: addr.parse()?,
            sentinel: sentinel.to_owned(),
            child,
            resolutions,
        })
    }

    fn rss_kib(&self) -> Res<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .ok_or("VmRSS")?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .ok_or("VmRSS value")?
            .parse()?)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The upstream: HTTPS on loopback; `/bulk?mib=N` streams N MiB, every
/// other path answers 16 bytes. `h2` offers HTTP/2 by ALPN as well. Its
/// certificate names `bench.test` and `other.test` (one server, two names,
/// as on a CDN), so a proxy that follows the client to the other name gets
/// through.
async fn upstream(dir: &Path, h2: bool) -> Res<(u16, PathBuf)> {
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec![NAME.into(), "other.test".into()])?
        .signed_by(&key, &issuer)?;
    let ca_path = dir.join("upstream-ca.pem");
    std::fs::write(&ca_path, ca_cert.pem())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der())?,
        )?;
    if h2 {
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let conn = versus::UPSTREAM_CONNS.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                versus::record(|| {
                    let s = tls.get_ref().1;
                    let alpn = s.alpn_protocol().map(String::from_utf8_lossy);
                    format!("conn {conn} sni {:?} alpn {alpn:?}", s.server_name())
                });
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| async move {
                        versus::record(|| {
                            let host = (req.headers().get("host").map(|h| h.as_bytes()))
                                .map(String::from_utf8_lossy);
                            let authority = req.uri().authority();
                            let v = req.version();
                            format!("conn {conn} {v:?} host {host:?} authority {authority:?}")
                        });
                        let mib: usize = (req.uri().query())
                            .and_then(|q| q.strip_prefix("mib="))
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(body(mib)))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((port, ca_path))
}

/// `n` frames of 1 MiB from one shared buffer (no copy per frame).
struct Chunks {
    left: usize,
    chunk: Bytes,
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        self.left -= 1;
        std::task::Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact((self.left * self.chunk.len()) as u64)
    }
}

fn body(mib: usize) -> http_body_util::Either<Full<Bytes>, Chunks> {
    if mib == 0 {
        return http_body_util::Either::Left(Full::new(Bytes::from_static(b"0123456789abcdef")));
    }
    http_body_util::Either::Right(Chunks {
        left: mib,
        chunk: Bytes::from(vec![b'x'; 1 << 20]),
    })
}

type Client = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

/// CONNECT through `proxy`, TLS (trusting both CAs), HTTP/1.1; returns the
/// client and the time the TLS handshake completed after the start.
async fn open(
    proxy: SocketAddr,
    port: u16,
    tls: &tokio_rustls::TlsConnector,
) -> Res<(Client, Duration)> {
    let started = Instant::now();
    let mut tcp = TcpStream::connect(proxy).await?;
    tcp.set_nodelay(true)?;
    let target = format!("{NAME}:{port}");
    tcp.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tcp.read_exact(&mut b).await?;
        head.push(b[0]);
    }
    if !head.starts_with(b"HTTP/1.1 200") {
        return Err(String::from_utf8_lossy(&head).into_owned().into());
    }
    let stream = tls.connect(ServerName::try_from(NAME)?, tcp).await?;
    let handshake = started.elapsed();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok((send, handshake))
}

async fn get(client: &mut Client, path: &str) -> Res<u64> {
    client.ready().await?;
    let host = HOST.get().map_or(NAME, String::as_str);
    let mut req = hyper::Request::get(path).header("host", host);
    if let Some(s) = SENTINEL.get() {
        req = req.header("authorization", format!("Bearer {s}"));
    }
    let req = req.body(Empty::new())?;
    let mut body = client.send_request(req).await?.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            n += data.len() as u64;
        }
    }
    Ok(n)
}

fn connector(cas: &[&Path]) -> Res<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add(CertificateDer::from_pem_file(ca)?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Round {
    bulk_mib_s: f64,
    p50_us: f64,
    handshake_us: f64,
}

async fn round(
    proxy: SocketAddr,
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    mib: usize,
    requests: usize,
) -> Res<Round> {
    let (mut c, _) = open(proxy, port, tls).await?;
    let t = Instant::now();
    let n = get(&mut c, &format!("/bulk?mib={mib}")).await?;
    let bulk_mib_s = n as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
    get(&mut c, "/warm").await?;
    let mut lat = Vec::with_capacity(requests);
    for _ in 0..requests {
        let t = Instant::now();
        get(&mut c, "/small").await?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let mut hs = Vec::new();
    for _ in 0..50 {
        let (_, d) = open(proxy, port, tls).await?;
        hs.push(d.as_secs_f64() * 1e6);
    }
    Ok(Round {
        bulk_mib_s,
        p50_us: median(lat),
        handshake_us: median(hs),
    })
}

/// `n` rounds of [`pair`] over the two proxies, each printed as it ends;
/// `names` labels the two columns ("opaque / terminated").
async fn rounds_of(
    n: usize,
    proxies: [SocketAddr; 2],
    names: &str,
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    mib: usize,
    requests: usize,
) -> Res<(Vec<Round>, Vec<Round>)> {
    let (mut first, mut second) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for r in 0..n {
        let (a, b) = pair(r, proxies, port, tls, mib, requests).await?;
        println!(
            "round {r}: bulk {:.0} / {:.0} MiB/s, p50 {:.0} / {:.0} us, handshake {:.0} / {:.0} us ({names})",
            a.bulk_mib_s, b.bulk_mib_s, a.p50_us, b.p50_us, a.handshake_us, b.handshake_us
        );
        first.push(a);
        second.push(b);
    }
    Ok((first, second))
}

/// Round `r` on each of two proxies; which goes first alternates by round,
/// so drift on a loaded machine evens out.
async fn pair(
    r: usize,
    proxies: [SocketAddr; 2],
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    mib: usize,
    requests: usize,
) -> Res<(Round, Round)> {
    let [a, b] = proxies;
    if r.is_multiple_of(2) {
        let x = round(a, port, tls, mib, requests).await?;
        Ok((x, round(b, port, tls, mib, requests).await?))
    } else {
        let y = round(b, port, tls, mib, requests).await?;
        Ok((round(a, port, tls, mib, requests).await?, y))
    }
}

async fn idle_kib(
    proxy: &Proxy,
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    n: usize,
) -> Res<f64> {
    let before = proxy.rss_kib()?;
    let mut open_conns = Vec::with_capacity(n);
    for _ in 0..n {
        let (mut c, _) = open(proxy.addr, port, tls).await?;
        get(&mut c, "/small").await?;
        open_conns.push(c);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = proxy.rss_kib()?;
    drop(open_conns);
    Ok((after.saturating_sub(before)) as f64 / n as f64)
}

/// A scratch directory `<tag>-<pid>` and the HTTP/1.1 upstream every
/// client of the run dials (as `HOST`): its port and CA certificate.
async fn stage(tag: &str) -> Res<(PathBuf, u16, PathBuf)> {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (port, upstream_ca) = upstream(&dir, false).await?;
    let _ = HOST.set(format!("{NAME}:{port}"));
    Ok((dir, port, upstream_ca))
}

async fn bench(rounds: usize, mib: usize, requests: usize, idle: usize) -> Res<()> {
    let (dir, port, upstream_ca) = stage("tls-bench").await?;
    let proxy_ca = dir.join("proxy-ca.pem");
    let opaque = Proxy::spawn(port, &upstream_ca, None, false)?;
    let term = Proxy::spawn(port, &upstream_ca, Some(&proxy_ca), false)?;
    let tls = connector(&[&upstream_ca, &proxy_ca])?;
    let proxies = [opaque.addr, term.addr];
    let (o, t) = rounds_of(
        rounds,
        proxies,
        "opaque / terminated",
        port,
        &tls,
        mib,
        requests,
    )
    .await?;
    let ratios: Vec<f64> = o
        .iter()
        .zip(&t)
        .map(|(a, b)| b.bulk_mib_s / a.bulk_mib_s)
        .collect();
    let added: Vec<f64> = o.iter().zip(&t).map(|(a, b)| b.p50_us - a.p50_us).collect();
    let pick = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    println!(
        "bulk: opaque {:.0} MiB/s, terminated {:.0} MiB/s, ratio median {:.2} (target >= 0.5)",
        pick(&o, |r| r.bulk_mib_s),
        pick(&t, |r| r.bulk_mib_s),
        median(ratios)
    );
    println!(
        "keep-alive p50: opaque {:.0} us, terminated {:.0} us, added median {:.0} us (target <= 300)",
        pick(&o, |r| r.p50_us),
        pick(&t, |r| r.p50_us),
        median(added)
    );
    println!(
        "handshake p50 (CONNECT + TLS, cached leaf): opaque {:.0} us, terminated {:.0} us (target <= 2000)",
        pick(&o, |r| r.handshake_us),
        pick(&t, |r| r.handshake_us)
    );
    let idle_o = idle_kib(&opaque, port, &tls, idle).await?;
    let idle_t = idle_kib(&term, port, &tls, idle).await?;
    println!(
        "idle: {idle} connections, proxy RSS per connection: opaque {idle_o:.1} KiB, terminated {idle_t:.1} KiB (target <= 64)"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `--masked`: terminated without credentials (A) against terminated with
/// a masked credential swapped into every request (B), interleaved.
async fn bench_masked(rounds: usize, mib: usize, requests: usize) -> Res<()> {
    let (dir, port, upstream_ca) = stage("tls-bench-masked").await?;
    let (ca_a, ca_b) = (dir.join("ca-a.pem"), dir.join("ca-b.pem"));
    let plain = Proxy::spawn(port, &upstream_ca, Some(&ca_a), false)?;
    let masked = Proxy::spawn(port, &upstream_ca, Some(&ca_b), true)?;
    let _ = SENTINEL.set(masked.sentinel.clone());
    let tls = connector(&[&upstream_ca, &ca_a, &ca_b])?;
    let (a, b) = rounds_of(
        rounds,
        [plain.addr, masked.addr],
        "terminated / terminated + masked",
        port,
        &tls,
        mib,
        requests,
    )
    .await?;
    let added: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y.p50_us - x.p50_us).collect();
    let ratio: Vec<f64> = (a.iter().zip(&b))
        .map(|(x, y)| y.bulk_mib_s / x.bulk_mib_s)
        .collect();
    let pick = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    println!(
        "keep-alive p50: terminated {:.0} us, + masked credential {:.0} us, added median {:.0} us",
        pick(&a, |r| r.p50_us),
        pick(&b, |r| r.p50_us),
        median(added)
    );
    println!(
        "bulk download: ratio median {:.2} (masked / unmasked)",
        median(ratio)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
