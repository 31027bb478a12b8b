//! proxy-bench: the proxy against a direct loopback connection, same run.
//!
//! `cargo run --release -p oajail-proxy --bin proxy-bench [-- --quick]
//! [--bulk-only] [--runs N] [--mib N] [--modes default,splice+sndbuf=auto,...]`
//!
//! The proxy runs in a child process (`proxy-bench serve`), as it does under
//! the supervisor, so its memory and CPU time can be read from /proc. Every
//! tunnel goes through the full production path: allow-list decision,
//! resolution (a fixed in-process answer), address check (the loopback
//! upstream is admitted by an explicit `127.0.0.1:<port>` entry), dial, 200,
//! ClientHello SNI peek, relay. The direct path uses the same client, the
//! same upstream, the same bytes and the same ClientHello. Scenarios
//! (reference egress-proxy.md §5.3):
//! - B1 bulk: one stream of 1 GiB per run, 7 runs per relay variant
//!   (`--runs`), direct runs interleaved (D P1 D P2 D …, the variants in a
//!   rotated order each round). Each proxied run is divided by the mean of
//!   the direct runs just before and after it; reported: the median and
//!   range of those ratios, CPU seconds per GiB of the proxy and of the two
//!   ends, and TCP retransmits per GiB;
//! - B3 short round trips (connect, CONNECT, hello, 1-byte answer, close)
//!   at concurrency 32 (ops/s) and 1 (p50/p99 latency);
//! - B6 1,000 concurrent idle tunnels: all still relay, proxy RSS per tunnel.
//!
//! `PROXY_BENCH_THREADS=N` sets the proxies' runtime worker threads.
mod bulk;

use bulk::bench_bulk;
use oajail_policy::domain::{DomainPattern, ListKind};
use oajail_policy::egress::EgressPlan;
use oajail_proxy::{Limits, ProxyConfig, ResolveFuture, Resolver, StartOptions};
use std::error::Error;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const NAME: &str = "bench.test";
const GIB: u64 = 1 << 30;

/// Resolves the bench name to loopback, nothing else.
struct FixedResolver;
impl Resolver for FixedResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        let ok = name == NAME;
        Box::pin(async move {
            if ok {
                Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
            } else {
                Err(std::io::ErrorKind::NotFound.into())
            }
        })
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let port: u16 = args
            .get(2)
            .ok_or("serve needs the upstream port")?
            .parse()?;
        let mode = args.get(3).map(String::as_str).unwrap_or("default");
        return serve_proxy(port, relay_limits(mode)?);
    }
    let quick = args.iter().any(|a| a == "--quick");
    bench(quick)
}

/// A relay variant: `default` (`Limits::default()`), or `splice` or
/// `copy:<buffer KiB>`, each optionally followed by `+sndbuf=<KiB>` or
/// `+sndbuf=auto` (the jail-side socket's send buffer; without it, the
/// default's).
fn relay_limits(mode: &str) -> Res<Limits> {
    let mut limits = Limits::default();
    let mut parts = mode.split('+');
    match parts.next().unwrap_or("default") {
        "default" => {}
        "splice" => limits.splice = true,
        m => {
            let kib: usize = m.strip_prefix("copy:").ok_or("bad relay mode")?.parse()?;
            limits.splice = false;
            limits.relay_buffer = kib * 1024;
        }
    }
    for extra in parts {
        limits.client_send_buffer = match extra.strip_prefix("sndbuf=") {
            Some("auto") => None,
            Some(kib) => Some(kib.parse::<usize>()? * 1024),
            None => return Err(format!("bad relay option {extra}").into()),
        };
    }
    Ok(limits)
}

/// Child mode: run the proxy, print its address, stop at stdin EOF.
fn serve_proxy(upstream_port: u16, limits: Limits) -> Res<()> {
    let allow = [
        format!("{NAME}:{upstream_port}"),
        format!("127.0.0.1:{upstream_port}"),
    ];
    let egress = EgressPlan {
        allow: allow
            .iter()
            .map(|t| DomainPattern::parse(t, ListKind::Allow))
            .collect::<Result<_, _>>()?,
        ..EgressPlan::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let config = ProxyConfig {
        egress,
        log_json: None,
        limits,
    };
    let threads = std::env::var("PROXY_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let options = StartOptions::default()
        .resolver(Arc::new(FixedResolver))
        .worker_threads(threads);
    let handle = oajail_proxy::start_with(config, vec![listener], options)?;
    println!("{addr}");
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    let summary = handle.shutdown();
    eprint!("{summary}");
    Ok(())
}

/// Upstream: read the hello, then either stream `n` bytes (first byte of
/// the request after the hello says which mode) or answer 1 byte.
fn upstream(hello_len: usize) -> Res<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let _ = serve_upstream(stream, hello_len);
            });
        }
    });
    Ok(addr)
}

fn serve_upstream(mut s: TcpStream, hello_len: usize) -> Res<()> {
    s.set_nodelay(true)?;
    let mut hello = vec![0u8; hello_len + 9];
    s.read_exact(&mut hello)?;
    let cmd = &hello[hello_len..];
    let n = u64::from_be_bytes(cmd[1..9].try_into()?);
    match cmd[0] {
        b'B' => {
            let chunk = vec![0x5a_u8; 256 * 1024];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                s.write_all(&chunk[..k])?;
                left -= k as u64;
            }
        }
        b'E' => loop {
            // Echo until EOF (idle-tunnel check).
            let mut b = [0u8; 1];
            if s.read(&mut b)? == 0 {
                break;
            }
            s.write_all(&b)?;
        },
        _ => s.write_all(b"!")?,
    }
    Ok(())
}

/// Open a path to the upstream: direct, or through CONNECT. Sends the hello
/// and the command.
fn open(
    proxy: Option<SocketAddr>,
    up: SocketAddr,
    hello: &[u8],
    cmd: u8,
    n: u64,
) -> Res<TcpStream> {
    let mut s = TcpStream::connect(proxy.unwrap_or(up))?;
    s.set_nodelay(true)?;
    let mut first = Vec::with_capacity(hello.len() + 128);
    if proxy.is_some() {
        let target = format!("{NAME}:{}", up.port());
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())?;
        let mut head = [0u8; 39];
        s.read_exact(&mut head)?;
        if !head.starts_with(b"HTTP/1.1 200 ") {
            return Err(format!("proxy answered {}", String::from_utf8_lossy(&head)).into());
        }
    }
    first.extend_from_slice(hello);
    first.push(cmd);
    first.extend_from_slice(&n.to_be_bytes());
    s.write_all(&first)?;
    Ok(s)
}

fn round_trip(proxy: Option<SocketAddr>, up: SocketAddr, hello: &[u8]) -> Res<Duration> {
    let start = Instant::now();
    let mut s = open(proxy, up, hello, b'R', 0)?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    Ok(start.elapsed())
}

/// `ops` round trips over `conc` threads: (ops/s, sorted latencies).
fn rate(
    proxy: Option<SocketAddr>,
    up: SocketAddr,
    hello: &[u8],
    conc: usize,
    ops: usize,
) -> Res<(f64, Vec<Duration>)> {
    let start = Instant::now();
    let workers: Vec<_> = (0..conc)
        .map(|_| {
            let hello = hello.to_vec();
            thread::spawn(move || -> Res<Vec<Duration>> {
                (0..ops / conc)
                    .map(|_| round_trip(proxy, up, &hello))
                    .collect()
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(ops);
    for w in workers {
        lat.extend(w.join().map_err(|_| "worker panicked")??);
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort();
    Ok((lat.len() as f64 / secs, lat))
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rss_kib(pid: u32) -> Res<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).ok_or("bad VmRSS")?.parse()?)
}

/// A proxy child process (`serve`), stopped when dropped.
struct ProxyChild {
    child: std::process::Child,
    addr: SocketAddr,
}

impl ProxyChild {
    fn spawn(up: SocketAddr, mode: &str) -> Res<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["serve", &up.port().to_string(), mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("no child stdout")?).read_line(&mut line)?;
        Ok(Self {
            addr: line.trim().parse()?,
            child,
        })
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

struct Setup {
    up: SocketAddr,
    hello: Vec<u8>,
    /// The relay variants; the first is the default (`Limits::default()`).
    proxies: Vec<(String, ProxyChild)>,
}

/// Relay variants compared in B1 unless `--modes` names others; the
/// default relay (`Limits::default()`) first.
const MODES: &str = "default,splice+sndbuf=auto,copy:64,copy:256";

/// `--name value` from the command line.
fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

fn bench(quick: bool) -> Res<()> {
    let hello = client_hello(NAME);
    let up = upstream(hello.len())?;
    let mut proxies = Vec::new();
    for mode in flag("--modes").as_deref().unwrap_or(MODES).split(',') {
        proxies.push((mode.to_owned(), ProxyChild::spawn(up, mode)?));
    }
    let s = Setup { up, hello, proxies };
    println!(
        "proxy-bench: {} CPUs, upstream {up}, load average {}",
        thread::available_parallelism()?.get(),
        load_average()
    );
    for (label, p) in &s.proxies {
        println!("  proxy {label}: {} (pid {})", p.addr, p.child.id());
        rate(Some(p.addr), up, &s.hello, 4, 400)?; // warm-up
    }
    rate(None, up, &s.hello, 4, 400)?;
    let (mut bulk_bytes, mut runs, ops_32, ops_1) = if quick {
        (GIB / 4, 3, 4_000, 2_000)
    } else {
        (GIB, 7, 20_000, 10_000)
    };
    if let Some(r) = flag("--runs") {
        runs = r.parse()?;
    }
    if let Some(m) = flag("--mib") {
        bulk_bytes = m.parse::<u64>()? << 20;
    }
    if std::env::args().any(|a| a == "--bulk-only") {
        bench_bulk(&s, bulk_bytes, runs)?;
        println!("load average at the end: {}", load_average());
        return Ok(());
    }
    bench_startup()?;
    bench_bulk(&s, bulk_bytes, runs)?;
    let default = &s.proxies[0].1;
    bench_rate(&s, Some(default.addr), ops_32, ops_1)?;
    bench_idle(&s, default)?;
    println!("load average at the end: {}", load_average());
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn bench_rate(s: &Setup, proxy: Option<SocketAddr>, ops_32: usize, ops_1: usize) -> Res<()> {
    let (mut dr, mut pr, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (d, _) = rate(None, s.up, &s.hello, 32, ops_32)?;
        let (p, _) = rate(proxy, s.up, &s.hello, 32, ops_32)?;
        dr.push(d);
        pr.push(p);
        ratios.push(p / d);
    }
    println!(
        "B3 c=32 {ops_32} round trips x3: direct {:.0} ops/s, proxy {:.0} ops/s, ratio {:.2} (median of per-run ratios)",
        median(dr),
        median(pr),
        median(ratios)
    );
    let (_, dl) = rate(None, s.up, &s.hello, 1, ops_1)?;
    let (_, pl) = rate(proxy, s.up, &s.hello, 1, ops_1)?;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, d99, p50, p99) = (
        us(pct(&dl, 0.5)),
        us(pct(&dl, 0.99)),
        us(pct(&pl, 0.5)),
        us(pct(&pl, 0.99)),
    );
    println!(
        "B3 c=1 {ops_1} round trips: direct p50 {d50:.0} us p99 {d99:.0} us; proxy p50 {p50:.0} us p99 {p99:.0} us; added p50 {:.0} us p99 {:.0} us",
        p50 - d50,
        p99 - d99
    );
    Ok(())
}

/// What the proxy adds to `oajail -- /bin/true`: start (runtime threads,
/// listener registration) and shutdown, in this process.
fn bench_startup() -> Res<()> {
    let (mut start, mut stop) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let config = ProxyConfig {
            egress: EgressPlan::default(),
            log_json: None,
            limits: Limits::default(),
        };
        let t = Instant::now();
        let handle = oajail_proxy::start(config, vec![listener])?;
        start.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        let _ = handle.shutdown();
        stop.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "start-up: proxy start {:.0} us, shutdown {:.0} us (median of 20)",
        median(start),
        median(stop)
    );
    Ok(())
}

/// 1,000 tunnels opened, left idle, then each must still relay one byte.
fn bench_idle(s: &Setup, proxy: &ProxyChild) -> Res<()> {
    let pid = proxy.child.id();
    let before = rss_kib(pid)?;
    let mut tunnels = Vec::with_capacity(1000);
    for _ in 0..1000 {
        tunnels.push(open(Some(proxy.addr), s.up, &s.hello, b'E', 0)?);
    }
    thread::sleep(Duration::from_millis(1500));
    let after = rss_kib(pid)?;
    for t in &mut tunnels {
        t.write_all(b"x")?;
    }
    let mut ok = 0;
    for t in &mut tunnels {
        let mut b = [0u8; 1];
        t.set_read_timeout(Some(Duration::from_secs(5)))?;
        if t.read_exact(&mut b).is_ok() && b[0] == b'x' {
            ok += 1;
        }
    }
    println!(
        "B6 1000 idle tunnels: {ok}/1000 relay after idling; proxy RSS {before} KiB -> {after} KiB, {:.1} KiB per tunnel",
        (after.saturating_sub(before)) as f64 / 1000.0
    );
    Ok(())
}

/// A well-formed TLS 1.3 ClientHello with SNI `name` (the tunnel's first
/// bytes, so every proxied run pays for the SNI peek).
fn client_hello(name: &str) -> Vec<u8> {
    let mut sni = vec![0u8];
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name.as_bytes());
    let mut sni_ext = (sni.len() as u16).to_be_bytes().to_vec();
    sni_ext.extend_from_slice(&sni);
    let mut key_share = vec![0, 36, 0x00, 0x1d, 0, 32];
    key_share.extend_from_slice(&[7u8; 32]);
    let exts: [(u16, &[u8]); 5] = [
        (0x0000, &sni_ext),
        (0x002b, &[2, 3, 4]),
        (0x000a, &[0, 2, 0, 0x1d]),
        (0x000d, &[0, 2, 8, 4]),
        (0x0033, &key_share),
    ];
    let mut ext_bytes = Vec::new();
    for (ty, data) in exts {
        ext_bytes.extend_from_slice(&ty.to_be_bytes());
        ext_bytes.extend_from_slice(&(data.len() as u16).to_be_bytes());
        ext_bytes.extend_from_slice(data);
    }
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x42; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(ext_bytes.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext_bytes);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}
