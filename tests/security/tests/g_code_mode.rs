//! The code-mode path: `openagenda-mcp` running under the real oajail in
//! the lab, with the egress policy it prints for itself (so its wrapper boot
//! check passes) and a canary API key. Model-written JavaScript then tries
//! to reach host APIs, another host, the key, and to exhaust CPU and memory.
//! Everything goes through one MCP session on stdin; each execute is judged
//! on its own and every run also meets the global post-conditions (no
//! canary — including the API key — in any output, sink or DNS query).
mod common;
use common::*;
use labspec::SinkEvent;
use oajail_security::judge::assert_blocked_allowing;
use oajail_security::lab::Run;
use oajail_security::verdict::{ProbeReport, Verdict};
use serde_json::{Value, json};
use std::path::PathBuf;

const HOST_APIS: &str = r#"const r = {};
for (const n of ["std", "os", "require", "fetch", "process", "setTimeout", "XMLHttpRequest", "Deno", "Bun"]) {
  try { r[n] = typeof globalThis[n]; } catch (e) { r[n] = "error"; }
}
try { await import("os"); r.importOs = "loaded"; } catch (e) { r.importOs = "error"; }
try { await import("std"); r.importStd = "loaded"; } catch (e) { r.importStd = "error"; }
r"#;

const OTHER_HOST: &str = r#"const out = [];
for (const uid of ["1@evil.test", "../../../..//evil.test/x", "1?x=@evil.test", "%2F%2Fevil.test"]) {
  const { error } = await oa.agendas.get({ path: { agendaUid: uid } });
  out.push(error ? error.status : "ok");
}
out"#;

const API_KEY: &str = r#"const seen = Object.getOwnPropertyNames(globalThis);
const { error } = await oa.agendas.get({ path: { agendaUid: 1 } });
({ seen, error: error ? String(error.message) : null, env: typeof process })"#;

const CPU: &str = "while (true) {}";
const MEMORY: &str = "let a = []; while (true) { a.push(new Array(1e6).fill(1)); }";
const AFTER: &str = "6 * 7";

fn mcp_binary(lab: &Lab) -> PathBuf {
    let p = lab.tools.oajail.with_file_name("openagenda-mcp");
    assert!(
        p.is_file(),
        "{} not found (build it with `cargo build -p openagenda-mcp`)",
        p.display()
    );
    p
}

fn session() -> Vec<u8> {
    let mut msgs = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oajail-security", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (id, code) in [
        (2, HOST_APIS),
        (3, OTHER_HOST),
        (4, API_KEY),
        (5, CPU),
        (6, MEMORY),
        (7, AFTER),
    ] {
        msgs.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}}));
    }
    msgs.iter()
        .map(|m| format!("{m}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The one lab run shared by every check of this file.
fn run_session(lab: &Lab) -> Run {
    let mcp = mcp_binary(lab);
    let printed = std::process::Command::new(&mcp)
        .args([
            "print-egress-policy",
            "--format",
            "srt",
            "--base-url",
            "https://allowed.test/v3",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run openagenda-mcp print-egress-policy: {e}"));
    assert!(printed.status.success(), "print-egress-policy failed");
    let policy = lab.policy_text(&String::from_utf8_lossy(&printed.stdout));
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        policy,
        "--env-keep".into(),
        "OA_API_KEY".into(),
        "--".into(),
        mcp.display().to_string(),
        "--base-url".into(),
        "https://allowed.test/v3".into(),
    ];
    let opts = RunOptions {
        env: vec![
            (
                "OA_API_KEY".into(),
                oajail_security::canary::canary(&lab.token, "oa-api-key"),
            ),
            ("OA_SANDBOX_TIMEOUT_MS".into(), "1500".into()),
        ],
        stdin: Some(session()),
        stdin_hold_ms: 9_000,
        ..RunOptions::default()
    };
    lab.run(argv, &opts)
}

fn response(run: &Run, id: i64) -> Value {
    run.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == json!(id))
        .unwrap_or_else(|| {
            panic!(
                "no MCP response {id}; stdout: {} stderr: {}",
                run.stdout, run.stderr
            )
        })
}

/// The proxy may resolve the allowed API host; nothing else may be contacted.
fn allowed(ev: &SinkEvent) -> bool {
    ev.sink == "dns" && ev.name.as_deref() == Some("allowed.test")
}

fn judge(lab: &mut Lab, run: &Run, id: &str, blocked: bool, detail: String) {
    let mut run = run.clone();
    run.report = Some(ProbeReport {
        attack: id.into(),
        verdict: if blocked {
            Verdict::Blocked
        } else {
            Verdict::Succeeded
        },
        errno: None,
        errno_name: None,
        signal: None,
        detail,
    });
    assert_blocked_allowing(lab, id, &run, &allowed);
}

fn error_code(v: &Value) -> String {
    v["result"]["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn blocks_code_mode_attacks() {
    let mut lab = Lab::new("code-mode");
    let run = run_session(&lab);
    assert!(
        run.lab.lab_error.is_none(),
        "lab failed: {:?}",
        run.lab.lab_error
    );

    let host = response(&run, 2)["result"]["structuredContent"]["result"].clone();
    let exposed: Vec<String> = host
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| *v != "undefined" && *v != "error")
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        })
        .unwrap_or_else(|| vec![format!("no result: {host}")]);
    judge(
        &mut lab,
        &run,
        "G2-code-mode-host-apis",
        exposed.is_empty(),
        format!("exposed: {exposed:?}"),
    );

    let other = response(&run, 3);
    judge(
        &mut lab,
        &run,
        "G2-code-mode-other-host",
        true,
        format!(
            "statuses: {}",
            other["result"]["structuredContent"]["result"]
        ),
    );

    let key = response(&run, 4);
    let seen = key["result"]["structuredContent"]["result"]["seen"].to_string();
    judge(
        &mut lab,
        &run,
        "G1-code-mode-api-key",
        !seen.contains("OA_API_KEY"),
        "key absent from the result, logs and sinks".into(),
    );

    let cpu = response(&run, 5);
    let after = response(&run, 7);
    let survived = after["result"]["structuredContent"]["result"] == json!(42);
    judge(
        &mut lab,
        &run,
        "H4-code-mode-cpu",
        error_code(&cpu) == "timeout" && survived,
        format!(
            "busy loop: {}; next execute answered: {survived}",
            error_code(&cpu)
        ),
    );

    // Either bound is fine (a loaded machine may hit the deadline first);
    // an unbounded allocation would kill the worker or the server instead.
    let mem = response(&run, 6);
    let code = error_code(&mem);
    let bounded = code == "memory_limit" || code == "timeout";
    judge(
        &mut lab,
        &run,
        "H2-code-mode-memory",
        bounded && survived,
        format!("allocation loop: {code}"),
    );
}

/// Issue 32: one execute must never stall, bloat or outlive the server.
/// The server reads each path parameter once (a value that is its own
/// template is data), bounds a call's arguments (1 MiB) and what one execute
/// queues (4 MiB), bounds the reply as sent (3 MiB), and runs searches on a
/// lane of their own that answers `busy` beyond its queue. Each hostile
/// script is followed by an execute that must still be answered; the jail's
/// policy bounds the server's memory and tasks as a whole
/// (`oajail.limits`). Latencies and the server's peak resident set are
/// measured by `mcp/tests/hostile.rs`.
const TEMPLATE_LOOP: &str = "const r = await oa.agendas.get({ path: { agendaUid: '{agendaUid}' } }); r.error ? r.error.status : 'answered'";
const FLOOD: &str = "const big = 'x'.repeat(1200000); const calls = [];\n\
     for (let i = 0; i < 50; i++) calls.push(oa.agendas.get({ path: { agendaUid: 1 }, body: { big } }));\n\
     await Promise.all(calls)";
const NESTED: &str = "const leaf = () => { let v = [0]; for (let i = 0; i < 118; i++) v = [v]; return v; };\n\
     const out = []; for (let i = 0; i < 2000; i++) out.push(leaf()); out";
const SEARCHES: i64 = 2000;

fn hostile_session() -> Vec<u8> {
    let call = |id: i64, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": args}})
    };
    let exec = |id, code: &str| call(id, "execute", json!({"code": code}));
    let mut msgs = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oajail-security", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        exec(10, TEMPLATE_LOOP),
        exec(11, AFTER),
    ];
    msgs.extend((12..16).map(|id| exec(id, FLOOD)));
    msgs.push(exec(16, AFTER));
    msgs.push(exec(17, NESTED));
    msgs.extend((0..SEARCHES).map(|i| {
        call(
            100 + i,
            "search_docs",
            json!({"query": format!("events in city {i}")}),
        )
    }));
    msgs.push(exec(18, AFTER));
    msgs.iter()
        .map(|m| format!("{m}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The code-mode server under oajail with the policy it prints, fed `stdin`.
fn run_server(lab: &Lab, mcp: &std::path::Path, stdin: Vec<u8>, hold_ms: u64) -> Run {
    let printed = std::process::Command::new(mcp)
        .args([
            "print-egress-policy",
            "--format",
            "srt",
            "--base-url",
            "https://allowed.test/v3",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run {} print-egress-policy: {e}", mcp.display()));
    assert!(printed.status.success(), "print-egress-policy failed");
    let policy = lab.policy_text(&String::from_utf8_lossy(&printed.stdout));
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        policy,
        "--".into(),
        mcp.display().to_string(),
        "--base-url".into(),
        "https://allowed.test/v3".into(),
    ];
    let opts = RunOptions {
        env: vec![
            (
                "OA_API_KEY".into(),
                oajail_security::canary::canary(&lab.token, "oa-api-key"),
            ),
            ("OA_SANDBOX_TIMEOUT_MS".into(), "5000".into()),
        ],
        stdin: Some(stdin),
        stdin_hold_ms: hold_ms,
        ..RunOptions::default()
    };
    lab.run(argv, &opts)
}

fn code_of(v: &Value) -> &str {
    v["result"]["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn hostile_scripts_neither_stall_nor_bloat_the_server() {
    let mut lab = Lab::new("code-mode-hostile");
    let mcp = mcp_binary(&lab);
    let run = run_server(&lab, &mcp, hostile_session(), 20_000);
    assert!(
        run.lab.lab_error.is_none(),
        "lab failed: {:?}",
        run.lab.lab_error
    );
    let answered = |id| response(&run, id)["result"]["structuredContent"]["result"] == json!(42);

    let looped = response(&run, 10);
    judge(
        &mut lab,
        &run,
        "H11-code-mode-template-loop",
        looped.get("result").is_some() && answered(11),
        format!(
            "template: {}; next execute answered: {}",
            looped["result"]["structuredContent"],
            answered(11)
        ),
    );

    let codes: Vec<String> = (12..16)
        .map(|id| code_of(&response(&run, id)).to_owned())
        .collect();
    judge(
        &mut lab,
        &run,
        "H11-code-mode-argument-flood",
        codes.iter().all(|c| c == "request_limit") && answered(16),
        format!(
            "4 x 50 calls of 1.2 MB: {codes:?}; next execute answered: {}",
            answered(16)
        ),
    );

    let nested = response(&run, 17);
    let sent = nested.to_string().len();
    judge(
        &mut lab,
        &run,
        "H11-code-mode-nested-result",
        nested["result"]["isError"] == json!(false) && sent <= 3 * 1024 * 1024,
        format!("a result nested 120 deep: reply of {sent} bytes (cap 3 MiB)"),
    );

    let all: std::collections::HashMap<i64, Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| Some((v["id"].as_i64()?, v)))
        .collect();
    let missing = (0..SEARCHES)
        .filter(|i| !all.contains_key(&(100 + i)))
        .count();
    assert_eq!(missing, 0, "searches without an answer");
    let busy = (0..SEARCHES)
        .filter(|i| code_of(&all[&(100 + i)]) == "busy")
        .count();
    judge(
        &mut lab,
        &run,
        "H11-code-mode-search-flood",
        busy > 0 && answered(18),
        format!(
            "{SEARCHES} searches: {busy} answered busy; the execute behind them answered: {}",
            answered(18)
        ),
    );
}

/// The worker's own seccomp filter is an allow list: the real server under
/// the jail runs `openagenda-mcp-syscall-probe` as its worker (the worker's
/// code with a syscall probe in place of the script), and every call the
/// probe makes after the filter (fchmodat2, open_tree, fsopen, setxattr,
/// utimensat, shmget, prctl(PR_SET_PDEATHSIG, 0), setsid and some hundred
/// more) must get the filter's own ENOSYS.
#[test]
fn the_worker_filter_refuses_every_call_outside_its_allow_list() {
    let mut lab = Lab::new("code-mode-worker-syscalls");
    let mcp = mcp_binary(&lab);
    let probe = mcp.with_file_name("openagenda-mcp-syscall-probe");
    assert!(
        probe.is_file(),
        "{} not found (build it with `cargo build -p openagenda-mcp`)",
        probe.display()
    );
    // A copy of the server with the probe beside it as its worker.
    let dir = PathBuf::from(lab.path("mcp-probe"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let server = dir.join("openagenda-mcp");
    for (from, to) in [
        (&mcp, server.clone()),
        (&probe, dir.join("openagenda-mcp-worker")),
    ] {
        if std::fs::hard_link(from, &to).is_err() {
            std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
    }
    let session = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oajail-security", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "execute", "arguments": {"code": "probe"}}}),
    ];
    let stdin = session
        .iter()
        .map(|m| format!("{m}\n"))
        .collect::<String>()
        .into_bytes();
    let run = run_server(&lab, &server, stdin, 6_000);
    let report = response(&run, 2)["result"]["structuredContent"]["result"].clone();
    let after = report["after"].as_object().cloned().unwrap_or_default();
    let controls = [
        "getpid",
        "write-empty",
        "getrandom",
        "clock_gettime",
        "mmap-rw",
        "futex-wake",
    ];
    let enosys = format!("errno {}", libc::ENOSYS);
    let open: Vec<String> = after
        .iter()
        .filter(|(name, seen)| {
            let want = if controls.contains(&name.as_str()) {
                "ok"
            } else {
                enosys.as_str()
            };
            seen["got"].as_str() != Some(want)
        })
        .map(|(name, seen)| format!("{name}: {}", seen["got"]))
        .collect();
    let reviewed = [
        "fchmodat2",
        "open_tree",
        "fsopen",
        "setxattr",
        "utimensat",
        "shmget",
        "prctl-pdeathsig-0",
        "setsid",
    ];
    let complete = after.len() > 100 && reviewed.iter().all(|n| after.contains_key(*n));
    judge(
        &mut lab,
        &run,
        "D11-code-mode-worker-syscalls",
        complete && open.is_empty(),
        format!(
            "{} calls after the worker's filter; not refused as they should be: {open:?}",
            after.len()
        ),
    );
}
