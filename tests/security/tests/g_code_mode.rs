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
