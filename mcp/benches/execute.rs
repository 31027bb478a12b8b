//! Benchmark of openagenda-mcp through MCP on stdio, against the Node
//! baselines of the reference notes, in the same run.
//!
//! `cargo bench -p openagenda-mcp --bench execute` (release). Environment:
//! - `OA_BENCH_N`: executes per measurement (default 1000);
//! - `OAJAIL_TEST_FULL_SPEC`: the public OpenAgenda v3 spec for the search_docs
//!   measurement (default `../shared/data/openagenda-v3/openapi.yaml`);
//! - `OA_MCP_NODE_DIR`: a directory whose `node_modules` holds
//!   `@modelcontextprotocol/sdk` and `zod`; `node` on PATH runs the
//!   baselines. Without it the Node rows are skipped and say so;
//! - `OA_MCP_AB`: `label=/path/to/openagenda-mcp,label2=/other/openagenda-mcp`
//!   measures those server builds (each with its worker binary next to it)
//!   alternately instead of the one built with this bench, for same-session
//!   before/after comparisons; `OA_MCP_AB_ROUNDS` rounds (default 3);
//! - `OA_WORKER_POOL` is passed on to the server (pool size experiments).
//!
//! Prints markdown rows for docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark report

#[path = "../tests/support/mod.rs"]
mod support;

use openagenda_mcp::render::render;
use openagenda_mcp::search::SearchIndex;
use openagenda_mcp::spec::Catalogue;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::mock::Mock;
use support::{Server, meta};

const RUST_CODE: &str = "const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });\n\
const b = await oa.agendas.get({ path: { agendaUid: 2 } });\n\
console.log('got', a.data.data.length);\n\
return [...a.data.data.map(e => e.title.en), b.data.title];";

const NODE_CODE: &str = "const a = await api.get(\"/agendas/1/events\"); const b = await api.get(\"/x\"); \
console.log(\"got\", a.data.length); return [...a.data, ...b.data].map(e => e.title);";

struct Load {
    p50: f64,
    p99: f64,
    per_sec: f64,
    errors: usize,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `n` calls with `conc` in flight; latencies in ms.
fn load(s: &mut Server, meta_on: bool, code: &str, n: usize, conc: usize) -> Load {
    let params = |code: &str| {
        let mut p = json!({"name": "execute", "arguments": {"code": code}});
        if meta_on {
            p["_meta"] = meta();
        }
        p
    };
    let mut started: HashMap<i64, Instant> = HashMap::new();
    let mut lat = Vec::with_capacity(n);
    let mut errors = 0;
    let begin = Instant::now();
    let mut sent = 0;
    while lat.len() < n {
        while sent < n && started.len() < conc {
            let id = s.request("tools/call", params(code));
            started.insert(id, Instant::now());
            sent += 1;
        }
        let r = s.recv_any(Duration::from_secs(30));
        let id = r["id"].as_i64().unwrap();
        let t0 = started.remove(&id).unwrap();
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
        if r.get("error").is_some() || r["result"]["isError"] == json!(true) {
            errors += 1;
        }
    }
    let total = begin.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    Load {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        per_sec: n as f64 / total,
        errors,
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn children_rss(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in text
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            total += rss_kib(child, "VmRSS:");
        }
    }
    total
}

/// (own, reaped children) CPU seconds of a process.
fn cpu_secs(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let tick = 100.0;
    if f.len() < 15 {
        return (0.0, 0.0);
    }
    // Fields 14-17 of stat (utime, stime, cutime, cstime) are 11-14 here.
    ((f[11] + f[12]) / tick, (f[13] + f[14]) / tick)
}

fn row(name: &str, c1: &Load, c4: &Load, idle: u64, peak: u64) {
    println!(
        "| {name} | {:.2} | {:.2} | {:.0}/s | {:.2} | {:.0}/s | {:.1} MiB | {:.1} MiB | {} |",
        c1.p50,
        c1.p99,
        c1.per_sec,
        c4.p50,
        c4.per_sec,
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        c1.errors + c4.errors
    );
}

fn bench_rust(mock: &Mock, n: usize, label: &str, bin: &Path) -> (f64, f64) {
    let base = mock.base_url();
    let ca = mock.ca_path.display().to_string();
    let env = [
        ("OA_BASE_URL", base.as_str()),
        ("OA_EXTRA_CA_CERTS", ca.as_str()),
        ("OA_API_KEY", "oa_sk_bench"),
        ("OA_CODE_EGRESS_AUTHORITY", "none"),
    ];
    let mut cmd = Command::new(bin);
    cmd.env_clear().env("PATH", "/usr/bin:/bin").envs(env);
    if let Ok(size) = std::env::var("OA_WORKER_POOL") {
        cmd.env("OA_WORKER_POOL", size);
    }
    let mut s = Server::start_command(cmd);
    let _ = s.call("tools/list", json!({"_meta": meta()}));
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_kib(s.pid(), "VmRSS:");
    let pool = children_rss(s.pid());
    let _warm = load(&mut s, true, RUST_CODE, 50, 1);
    let (own0, kids0) = cpu_secs(s.pid());
    let c1 = load(&mut s, true, RUST_CODE, n, 1);
    std::thread::sleep(Duration::from_millis(100));
    let inside = audit_p50(&s.stderr.lock().unwrap(), n);
    let c4 = load(&mut s, true, RUST_CODE, n, 4);
    std::thread::sleep(Duration::from_millis(300));
    let (own1, kids1) = cpu_secs(s.pid());
    let per = |d: f64| d * 1000.0 / (2 * n) as f64;
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(s.pid(), "VmRSS:");
    let peak = rss_kib(s.pid(), "VmHWM:");
    row(
        &format!("openagenda-mcp {label} (rmcp + QuickJS worker per execute)"),
        &c1,
        &c4,
        idle,
        peak,
    );
    println!(
        "\nopenagenda-mcp: idle RSS {:.1} MiB at start, {:.1} MiB after the load; {} pre-started workers hold {:.1} MiB together.\n",
        idle as f64 / 1024.0,
        after as f64 / 1024.0,
        4,
        pool as f64 / 1024.0
    );
    println!(
        "CPU per execute: server {:.2} ms, worker processes {:.2} ms (the mock API runs in the bench process).\n",
        per(own1 - own0),
        per(kids1 - kids0)
    );
    println!(
        "c=1 split: p50 {inside:.2} ms inside the server's execute (audit durationMs: admission, worker, API calls, rendering), {:.2} ms outside it (client, pipes, MCP framing).\n",
        c1.p50 - inside
    );
    // A clean exit (stdin closed) lets a wrapper such as `perf stat` report.
    let _ = s.finish();
    (c1.p50, c4.per_sec)
}

/// Median `durationMs` of the last `n` audit lines on the server's stderr.
fn audit_p50(stderr: &str, n: usize) -> f64 {
    let mut ms: Vec<f64> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["audit"]["durationMs"].as_f64())
        .collect();
    let mut last = ms.split_off(ms.len().saturating_sub(n));
    last.sort_by(f64::total_cmp);
    if last.is_empty() {
        0.0
    } else {
        pct(&last, 0.5)
    }
}

/// Alternates the builds named in `OA_MCP_AB` for `OA_MCP_AB_ROUNDS` rounds.
fn bench_ab(mock: &Mock, n: usize, spec: &str) {
    let builds: Vec<(&str, &str)> = spec
        .split(',')
        .map(|b| b.split_once('=').expect("OA_MCP_AB: label=path,..."))
        .collect();
    let rounds: usize = std::env::var("OA_MCP_AB_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for round in 1..=rounds {
        for (label, bin) in &builds {
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("round {round}, {label}, load {}", load.trim());
            bench_rust(mock, n, label, Path::new(bin));
        }
    }
}

fn bench_node(dir: &Path, mode: &str, n: usize) -> Option<(f64, f64)> {
    let script = dir.join("oa-mcp-bench-codemode-vm.mjs");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/benches/node/codemode-vm.mjs"),
        &script,
    )
    .ok()?;
    let mut cmd = Command::new("node");
    cmd.arg(&script).env("EXEC_MODE", mode);
    let mut s = Server::start_command(cmd);
    let init = s.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    );
    init.get("result")?;
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss_kib(s.pid(), "VmRSS:");
    let n = if mode == "subprocess" { n / 10 } else { n };
    let _warm = load(&mut s, false, NODE_CODE, 20, 1);
    let c1 = load(&mut s, false, NODE_CODE, n, 1);
    let c4 = load(&mut s, false, NODE_CODE, n, 4);
    let peak = rss_kib(s.pid(), "VmHWM:");
    let name = if mode == "subprocess" {
        format!("Node: TS SDK + node subprocess per execute ({n} calls)")
    } else {
        "Node: TS SDK 1.32.2 + node:vm".to_owned()
    };
    row(&name, &c1, &c4, idle, peak);
    let _ = std::fs::remove_file(script);
    Some((c1.p50, c4.per_sec))
}

fn bench_search(spec: &Path) {
    let queries = [
        "upcoming events in Paris",
        "my agendas",
        "get one event by uid",
        "create an event",
        "how many events per city",
        "zzzzz-nonsense",
        "locations of an agenda",
        "agenda statistics",
    ];
    let cat = Catalogue::from_file(spec, true).expect("full spec");
    let index = SearchIndex::build(&cat);
    let mut lib = Vec::new();
    for i in 0..2000 {
        let q = queries[i % queries.len()];
        let t = Instant::now();
        let hits = index.search(q, 8);
        let text = render(&cat, &hits, q);
        lib.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!text.is_empty());
    }
    lib.sort_by(f64::total_cmp);
    let path = spec.display().to_string();
    let mut s = Server::start(
        &[("OA_CODE_EGRESS_AUTHORITY", "none")],
        &["--openapi", &path, "--allow-writes"],
    );
    let mut mcp = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..1000 {
        let q = queries[i % queries.len()];
        let t = Instant::now();
        let r = s.tool("search_docs", json!({"query": q}));
        mcp.push(t.elapsed().as_secs_f64() * 1000.0);
        if i < queries.len() {
            bytes.push((q, r["content"][0]["text"].as_str().unwrap().len()));
        }
    }
    mcp.sort_by(f64::total_cmp);
    println!(
        "search_docs on the full public spec ({} operations): in-process index+render p50 {:.3} ms, p99 {:.3} ms; through MCP p50 {:.3} ms, p99 {:.3} ms.",
        cat.ops.len(),
        pct(&lib, 0.5),
        pct(&lib, 0.99),
        pct(&mcp, 0.5),
        pct(&mcp, 0.99)
    );
    let sizes: Vec<String> = bytes
        .iter()
        .map(|(q, b)| format!("\"{q}\" {:.1} KB", *b as f64 / 1000.0))
        .collect();
    println!("Answer sizes: {}.", sizes.join(", "));
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this
    // binary is only smoke-run, so it does nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let n: usize = std::env::var("OA_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mock = Mock::start();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("Load average at start: {}", load().trim());
    println!(
        "| Server | c=1 p50 ms | c=1 p99 ms | c=1 rate | c=4 p50 ms | c=4 rate | idle RSS | peak RSS | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    if let Ok(ab) = std::env::var("OA_MCP_AB") {
        bench_ab(&mock, n, &ab);
        println!("Load average at end: {}", load().trim());
        return;
    }
    let (rust_p50, rust_rate) = bench_rust(&mock, n, "", Path::new(support::BIN));
    if let Some(dir) = std::env::var_os("OA_MCP_NODE_DIR").map(PathBuf::from) {
        for mode in ["vm", "subprocess"] {
            match bench_node(&dir, mode, n) {
                Some((p50, rate)) => println!(
                    "Ratios, openagenda-mcp / Node {mode}: c=1 p50 {:.2} (Node p50 / ours = {:.2}), c=4 throughput {:.2}.\n",
                    rust_p50 / p50,
                    p50 / rust_p50,
                    rust_rate / rate
                ),
                None => println!("Node {mode} baseline did not start.\n"),
            }
        }
    } else {
        println!("Node baselines skipped: set OA_MCP_NODE_DIR.\n");
    }
    let spec = std::env::var_os("OAJAIL_TEST_FULL_SPEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/data/openagenda-v3/openapi.yaml"
            ))
        });
    if spec.exists() {
        bench_search(&spec);
    } else {
        println!(
            "search_docs on the full spec skipped: {} not found.",
            spec.display()
        );
    }
    println!("Load average at end: {}", load().trim());
}
