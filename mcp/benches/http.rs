//! Benchmark of the Streamable HTTP transport against stdio, same run,
//! same server binary, same script, same local TLS mock of the API:
//!
//! 1. execute latency at c=1: stdio (raw JSON lines) vs HTTP on loopback
//!    (2026-07-28 POSTs with a bearer token on one keep-alive connection,
//!    as an SDK client sends them), p50 and p99, and their ratio;
//! 2. 200 open legacy sessions (initialize, initialized, and the event
//!    stream a 2025-11-25 client keeps open), from 50 callers: the
//!    server's RSS before and with them;
//! 3. access-token verification with a cached key set, per algorithm, in
//!    the server's own code (`Verifier::verify`) for a token seen before
//!    (a session's later requests) and at first sight, and in jsonwebtoken
//!    alone.
//!
//! `cargo bench -p openagenda-mcp --bench http` (release). `OA_BENCH_N`:
//! executes per transport (default 1000); `OA_BENCH_VERIFY`: verifications
//! per algorithm (default 20000). Prints markdown for docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark report

#[path = "../tests/support/mod.rs"]
mod support;

use openagenda_mcp::oauth::jwks::KeyCache;
use openagenda_mcp::oauth::verify::Verifier;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use support::authz::{Authz, Discovery, Key};
use support::http::{HttpServer, env_for, resource};
use support::mock::Mock;
use support::{Server, meta};

const CODE: &str = "const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });\n\
const b = await oa.agendas.get({ path: { agendaUid: 2 } });\n\
console.log('got', a.data.data.length);\n\
return [...a.data.data.map(e => e.title.en), b.data.title];";

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn stdio_latencies(mock: &Mock, n: usize) -> Vec<f64> {
    let ca = mock.ca_path.display().to_string();
    let base = mock.base_url();
    let mut s = Server::start(
        &[
            ("OA_BASE_URL", &base),
            ("OA_EXTRA_CA_CERTS", &ca),
            ("OA_API_KEY", "oa_sk_bench"),
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ],
        &[],
    );
    let _ = s.call("tools/list", json!({"_meta": meta()}));
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..50 {
        s.execute(CODE);
    }
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = s.execute(CODE);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(r["isError"], json!(false), "{r}");
    }
    lat
}

/// One keep-alive HTTP/1.1 connection posting JSON-RPC to /mcp.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    port: u16,
    auth: String,
}

impl Conn {
    fn new(port: u16, token: &str) -> Self {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        Self {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            port,
            auth: format!("Bearer {token}"),
        }
    }

    /// Sends one request and reads one response (status, headers, body).
    fn send(&mut self, head: &[(&str, &str)], body: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nauthorization: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
            self.port,
            self.auth,
            body.len()
        );
        for (k, v) in head {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.writer.write_all(req.as_bytes()).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let chunked = (headers.iter())
            .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
        let body = if chunked {
            self.read_chunks()
        } else {
            let len = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; len];
            self.reader.read_exact(&mut body).unwrap();
            body
        };
        (status, headers, body)
    }

    /// A chunked body (an answer sent as an event stream that ends).
    fn read_chunks(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).unwrap();
            let size = size.trim().split(';').next().unwrap_or("0");
            let n = usize::from_str_radix(size, 16).unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            self.reader.read_exact(&mut chunk).unwrap();
            if n == 0 {
                return body;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
}

fn http_latencies(s: &HttpServer, token: &str, n: usize) -> Vec<f64> {
    let mut conn = Conn::new(s.port, token);
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "execute"),
    ];
    let call = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"_meta": meta(), "name": "execute", "arguments": {"code": CODE}}})
        .to_string()
    };
    for i in 0..50 {
        let (status, _, body) = conn.send(&headers, &call(i));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let body = call(1000 + i);
        let t = Instant::now();
        let (status, _, reply) = conn.send(&headers, &body);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        let v: Value = serde_json::from_slice(&reply).unwrap();
        assert!(
            status == 200 && v["result"]["isError"] == json!(false),
            "{v}"
        );
    }
    lat
}

/// Opens `count` legacy sessions from `callers` callers and keeps their
/// event streams open; returns the connections (dropping them closes).
fn open_sessions(s: &HttpServer, authz: &Authz, callers: usize, count: usize) -> Vec<TcpStream> {
    let aud = resource(s.port);
    let tokens: Vec<String> = (0..callers)
        .map(|i| authz.token_for(&format!("caller-{i}"), &aud))
        .collect();
    let mut streams = Vec::new();
    for i in 0..count {
        let token = &tokens[i % callers];
        let mut conn = Conn::new(s.port, token);
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}});
        let (status, headers, _) = conn.send(&[], &init.to_string());
        assert_eq!(status, 200);
        let session = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .unwrap();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let legacy = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let (status, _, _) = conn.send(&legacy, &note.to_string());
        assert_eq!(status, 202);
        // The standing event stream of the session, as SDK clients open it.
        let mut get = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let head = format!(
            "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nauthorization: Bearer {token}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n",
            s.port
        );
        get.write_all(head.as_bytes()).unwrap();
        let mut first = [0u8; 12];
        get.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200", "the event stream opens");
        streams.push(get);
        streams.push(conn.writer);
    }
    streams
}

fn verify_bench(n: usize) {
    let authz = Authz::start(Discovery::OAuth);
    let aud = "https://mcp.bench.example/mcp";
    let settings =
        openagenda_mcp::oauth::Settings::parse(Some(&authz.issuer()), Some(aud), None, None)
            .unwrap()
            .unwrap();
    let client =
        openagenda_mcp::oauth::client::Client::new(None, None, Duration::from_secs(5)).unwrap();
    let verifier = Verifier::new(settings.clone(), KeyCache::new(client, &settings));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| Algorithm | server, token seen before: mean | p50 | p99 | server, first sight: mean | p50 | jsonwebtoken decode alone, mean |"
    );
    println!("|---|---|---|---|---|---|---|");
    for key in [Key::Rsa, Key::Ec, Key::Ed] {
        let token = authz.token(key, aud, json!({}));
        rt.block_on(verifier.verify(&token)).unwrap();
        let (seen_mean, seen) = time_verifies(&rt, &verifier, &vec![token.as_str(); n]);
        // First sight: a distinct token per request (unique `jti`), so
        // every one is checked in full; signing them is not timed.
        let fresh: Vec<String> = (0..n.min(2000))
            .map(|i| authz.token(key, aud, json!({"jti": format!("bench-{i}")})))
            .collect();
        let fresh_refs: Vec<&str> = fresh.iter().map(String::as_str).collect();
        let (first_mean, first) = time_verifies(&rt, &verifier, &fresh_refs);
        let raw = crate_decode_mean(key, aud, &token, n);
        println!(
            "| {:?} | {seen_mean:.1} µs | {:.1} µs | {:.1} µs | {first_mean:.1} µs | {:.1} µs | {raw:.1} µs |",
            key.alg(),
            pct(&seen, 0.5),
            pct(&seen, 0.99),
            pct(&first, 0.5),
        );
    }
}

/// Mean and sorted latencies (µs) of verifying each token in turn.
fn time_verifies(
    rt: &tokio::runtime::Runtime,
    verifier: &Verifier,
    tokens: &[&str],
) -> (f64, Vec<f64>) {
    let mut lat = Vec::with_capacity(tokens.len());
    let begin = Instant::now();
    for token in tokens {
        let t = Instant::now();
        let c = rt.block_on(verifier.verify(token)).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(c);
    }
    let mean = begin.elapsed().as_secs_f64() * 1e6 / tokens.len() as f64;
    lat.sort_by(f64::total_cmp);
    (mean, lat)
}

/// Mean µs of jsonwebtoken's own decode and validation of `token`.
fn crate_decode_mean(key: Key, aud: &str, token: &str, n: usize) -> f64 {
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.jwk()).unwrap();
    let dk = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
    let mut v = jsonwebtoken::Validation::new(key.alg());
    v.set_audience(&[aud]);
    let begin = Instant::now();
    for _ in 0..n {
        std::hint::black_box(jsonwebtoken::decode::<Value>(token, &dk, &v).unwrap());
    }
    begin.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let n: usize = std::env::var("OA_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let verifies: usize = std::env::var("OA_BENCH_VERIFY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let machine = Command::new("uname")
        .arg("-sr")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "Machine: {machine}, {} CPUs, load average {}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mock = Mock::start();
    let authz = Authz::start(Discovery::OAuth);

    // 1. Latency, stdio then HTTP, twice each, alternating.
    println!("| Transport | round | c=1 p50 | c=1 p99 |");
    println!("|---|---|---|---|");
    let mut ratios = Vec::new();
    for round in 1..=2 {
        let mut stdio = stdio_latencies(&mock, n);
        stdio.sort_by(f64::total_cmp);
        println!(
            "| stdio | {round} | {:.3} ms | {:.3} ms |",
            pct(&stdio, 0.5),
            pct(&stdio, 0.99)
        );
        let s = HttpServer::start(
            |port| {
                let mut e = env_for(&authz, &mock, port);
                e.push(("OA_RATE_LIMIT_PER_MIN".into(), "0".into()));
                e
            },
            &[],
        );
        let token = authz.token_for("bench", &resource(s.port));
        let mut http = http_latencies(&s, &token, n);
        http.sort_by(f64::total_cmp);
        println!(
            "| Streamable HTTP, bearer token, keep-alive | {round} | {:.3} ms | {:.3} ms |",
            pct(&http, 0.5),
            pct(&http, 0.99)
        );
        ratios.push(pct(&http, 0.5) / pct(&stdio, 0.5));
    }
    println!(
        "\nHTTP/stdio p50 ratio per round: {}\n",
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // 2. Sessions (the warm-up executes would pass the default rate limit).
    let s = HttpServer::start(
        |port| {
            let mut e = env_for(&authz, &mock, port);
            e.push(("OA_RATE_LIMIT_PER_MIN".into(), "0".into()));
            e
        },
        &[],
    );
    let probe = authz.token_for("probe", &resource(s.port));
    let _ = http_latencies(&s, &probe, 10);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_kib(s.pid());
    let begin = Instant::now();
    let held = open_sessions(&s, &authz, 50, 200);
    let opened = begin.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let with = rss_kib(s.pid());
    // Still serving with them open.
    let mut one = http_latencies(&s, &probe, 20);
    one.sort_by(f64::total_cmp);
    println!(
        "200 legacy sessions (50 callers, each session's event stream open, {} connections): server RSS {:.1} MiB before, {:.1} MiB with them (+{:.1} KiB per session); opened in {:.2} s; execute p50 {:.2} ms with them open\n",
        held.len(),
        before as f64 / 1024.0,
        with as f64 / 1024.0,
        (with.saturating_sub(before)) as f64 / 200.0,
        opened.as_secs_f64(),
        pct(&one, 0.5)
    );
    drop(held);

    // 3. Verification.
    verify_bench(verifies);
}
