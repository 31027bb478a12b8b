//! The hermetic lab the proxy tests run in.
//!
//! - The proxy runs for real on 127.0.0.1 (ephemeral port), with the real
//!   public-address check. 127.0.0.2–127.0.0.9 stand in for public internet
//!   hosts: they are declared with the test-only `lab_public` option (the
//!   `test-lab` feature; see docs/proxy.md "Testing"). Every other address,
//!   127.0.0.1 included, is judged by the production classifier.
//! - Names resolve through [`LabResolver`], which records every query (so a
//!   test can assert that a refused name never reached DNS) and can change
//!   its answer on every call (DNS rebinding).
//! - Upstreams are small std servers that record what they receive.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::domain::{DomainPattern, ListKind};
use oajail_policy::egress::{DenyRule, EgressPlan};
use oajail_proxy::{Limits, ProxyConfig, ProxyHandle, Resolver, StartOptions, Summary};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The canary: loopback, private, must never be reached through the proxy.
pub const CANARY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

/// A lab stand-in for a public host.
pub fn public(n: u8) -> Ipv4Addr {
    assert!((2..=9).contains(&n));
    Ipv4Addr::new(127, 0, 0, n)
}

/// A resolver under the test's control.
#[derive(Default)]
pub struct LabResolver {
    /// name → answers; call k gets answers[k % len].
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
    calls: Mutex<Vec<String>>,
}

impl LabResolver {
    pub fn set(&self, name: &str, answers: Vec<Vec<IpAddr>>) {
        self.answers
            .lock()
            .unwrap()
            .insert(name.to_owned(), answers);
    }
    pub fn map(&self, name: &str, ip: Ipv4Addr) {
        self.set(name, vec![vec![IpAddr::V4(ip)]]);
    }
    /// Every name queried so far, in order.
    pub fn queries(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    pub fn count(&self, name: &str) -> usize {
        self.queries().iter().filter(|q| *q == name).count()
    }
}

impl Resolver for LabResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> oajail_proxy::ResolveFuture<'a> {
        let k = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(name.to_owned());
            calls.iter().filter(|c| *c == name).count() - 1
        };
        let answer = self
            .answers
            .lock()
            .unwrap()
            .get(name)
            .map(|a| a[k % a.len()].clone());
        Box::pin(async move {
            answer.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such name in the lab")
            })
        })
    }
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A running proxy plus its resolver and log file.
pub struct Lab {
    pub proxy: SocketAddr,
    pub resolver: Arc<LabResolver>,
    pub log_path: PathBuf,
    handle: Option<ProxyHandle>,
    dir: PathBuf,
}

pub fn plan(allow: &[&str], deny: &[&str]) -> EgressPlan {
    EgressPlan {
        allow: allow
            .iter()
            .map(|t| DomainPattern::parse(t, ListKind::Allow).unwrap())
            .collect(),
        deny: deny
            .iter()
            .map(|t| DenyRule {
                pattern: DomainPattern::parse(t, ListKind::Deny).unwrap(),
                reason: None,
            })
            .collect(),
        ..EgressPlan::default()
    }
}

impl Lab {
    pub fn start(allow: &[&str], deny: &[&str]) -> Lab {
        Lab::with(plan(allow, deny), Limits::default())
    }

    pub fn with(egress: EgressPlan, limits: Limits) -> Lab {
        let dir = std::env::temp_dir().join(format!(
            "oajail-proxy-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let log_path = dir.join("decisions.jsonl");
        let resolver = Arc::new(LabResolver::default());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = listener.local_addr().unwrap();
        let lab: Vec<IpAddr> = (2..=9).map(|n| IpAddr::V4(public(n))).collect();
        let options = StartOptions::default()
            .resolver(resolver.clone())
            .lab_public(lab);
        let config = ProxyConfig {
            egress,
            log_json: Some(log_path.clone()),
            limits,
        };
        let handle = oajail_proxy::start_with(config, vec![listener], options).unwrap();
        Lab {
            proxy,
            resolver,
            log_path,
            handle: Some(handle),
            dir,
        }
    }

    /// The decision log so far, one JSON value per line.
    pub fn log(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn decisions(&self) -> Vec<serde_json::Value> {
        self.log()
            .into_iter()
            .filter(|r| r["event"] == "decision")
            .collect()
    }

    /// Wait until the log has at least `n` lines of `event` (tunnels write
    /// their close line asynchronously).
    pub fn wait_log(&self, event: &str, n: usize) -> Vec<serde_json::Value> {
        for _ in 0..200 {
            let got: Vec<_> = self
                .log()
                .into_iter()
                .filter(|r| r["event"] == event)
                .collect();
            if got.len() >= n {
                return got;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("log never reached {n} {event} lines: {:#?}", self.log());
    }

    pub fn shutdown(mut self) -> Summary {
        self.handle.take().unwrap().shutdown()
    }

    /// The run's TLS-termination CA, when the plan terminates some host.
    pub fn ca_pem(&self) -> Option<String> {
        self.handle.as_ref()?.ca_cert_pem()
    }

    pub fn proxy_url(&self) -> String {
        format!("http://{}", self.proxy)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An upstream that records every connection's bytes. With `http`, it
/// answers each request head with 200 and the head as the body, then
/// closes; otherwise it only reads.
pub struct Upstream {
    pub addr: SocketAddr,
    pub conns: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Upstream {
    pub fn http(ip: Ipv4Addr) -> Upstream {
        Self::spawn(TcpListener::bind((ip, 0)).unwrap(), true)
    }
    pub fn raw(ip: Ipv4Addr) -> Upstream {
        Self::spawn(TcpListener::bind((ip, 0)).unwrap(), false)
    }
    /// Bind on a given port (for a canary next to a public host).
    pub fn http_at(addr: SocketAddr) -> Option<Upstream> {
        TcpListener::bind(addr).ok().map(|l| Self::spawn(l, true))
    }

    fn spawn(listener: TcpListener, http: bool) -> Upstream {
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let record = conns.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let record = record.clone();
                let idx = {
                    let mut c = record.lock().unwrap();
                    c.push(Vec::new());
                    c.len() - 1
                };
                thread::spawn(move || serve_upstream(stream, record, idx, http));
            }
        });
        Upstream { addr, conns }
    }

    pub fn hits(&self) -> usize {
        self.conns.lock().unwrap().len()
    }

    pub fn received(&self) -> Vec<u8> {
        self.conns.lock().unwrap().concat()
    }
}

fn serve_upstream(mut stream: TcpStream, record: Arc<Mutex<Vec<Vec<u8>>>>, idx: usize, http: bool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 16384];
    let mut seen = Vec::new();
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        seen.extend_from_slice(&buf[..n]);
        record.lock().unwrap()[idx].extend_from_slice(&buf[..n]);
        if http && let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = &seen[..end + 4];
            let body_len = content_length(head);
            let chunked = String::from_utf8_lossy(head)
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked");
            while seen.len() < end + 4 + body_len || (chunked && !seen.ends_with(b"0\r\n\r\n")) {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        record.lock().unwrap()[idx].extend_from_slice(&buf[..n]);
                    }
                }
            }
            let body = seen.clone();
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes());
            let _ = stream.write_all(&body);
            return;
        }
    }
}

fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// Send raw bytes to the proxy and read until it closes (or 5 s pass).
pub fn raw(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Read one response head from `s` (up to the empty line).
pub fn read_head(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => out.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Status code of a response text.
pub fn status(resp: &str) -> u16 {
    resp.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Run a command, return (exit code, stdout, stderr). A missing program is
/// a test failure, never a skip.
pub fn run(cmd: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(cmd)
        .args(args)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd} (install it; tests do not skip): {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A minimal, well-formed TLS 1.3 ClientHello record (what rustls and real
/// servers parse), with an optional SNI and extra raw extensions.
pub fn client_hello(sni: Option<&str>, extra: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut exts: Vec<u8> = Vec::new();
    let mut push_ext = |ty: u16, data: &[u8]| {
        exts.extend_from_slice(&ty.to_be_bytes());
        exts.extend_from_slice(&(data.len() as u16).to_be_bytes());
        exts.extend_from_slice(data);
    };
    if let Some(name) = sni {
        let mut list = vec![0u8];
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name.as_bytes());
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend_from_slice(&list);
        push_ext(0x0000, &data);
    }
    push_ext(0x002b, &[2, 0x03, 0x04]); // supported_versions: TLS 1.3
    push_ext(0x000a, &[0, 2, 0x00, 0x1d]); // supported_groups: x25519
    push_ext(0x000d, &[0, 2, 0x08, 0x04]); // signature_algorithms
    let mut key_share = vec![0, 36, 0x00, 0x1d, 0, 32];
    key_share.extend_from_slice(&[7u8; 32]);
    push_ext(0x0033, &key_share);
    for (ty, data) in extra {
        push_ext(*ty, data);
    }
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // cipher suites
    body.extend_from_slice(&[1, 0]); // compression: null
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    records(&hs, hs.len())
}

/// Wrap handshake bytes in TLS records of at most `max` bytes each.
pub fn records(hs: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in hs.chunks(max) {
        out.extend_from_slice(&[0x16, 0x03, 0x01]);
        out.extend_from_slice(&(part.len() as u16).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// The handshake message inside a single-record hello.
pub fn handshake_of(record: &[u8]) -> Vec<u8> {
    record[5..].to_vec()
}

/// Open a CONNECT tunnel: returns the stream and the answer head.
pub fn connect(proxy: SocketAddr, target: &str, early: &[u8]) -> (TcpStream, String) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").into_bytes();
    req.extend_from_slice(early);
    s.write_all(&req).unwrap();
    let head = read_head(&mut s);
    (s, head)
}

/// Read whatever arrives until close or timeout.
pub fn read_rest(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Poll `f` for up to 2 s.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}
