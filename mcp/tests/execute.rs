//! execute against the real binary and a local TLS mock of the API:
//! API calls, error shapes, redaction, redirects, limits and hostile code.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};
use support::mock::Mock;
use support::{Server, error_code, meta};

const KEY: &str = "oa_sk_test_0123456789abcdef";

fn server_with(mock: &Mock, extra: &[(&str, &str)]) -> Server {
    let base = mock.base_url();
    let ca = mock.ca_path.display().to_string();
    let mut env = vec![
        ("OA_BASE_URL", base.as_str()),
        ("OA_EXTRA_CA_CERTS", ca.as_str()),
        ("OA_API_KEY", KEY),
        ("OA_CODE_EGRESS_AUTHORITY", "none"),
    ];
    env.extend_from_slice(extra);
    Server::start(&env, &[])
}

#[test]
fn two_api_calls_and_a_log_line() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.execute(
        "const a = await oa.agendas.events.list({ path: { agendaUid: 7 }, query: { city: ['Paris', 'Lyon'], fields: ['uid', 'title'], timings: { gte: '2026-01-01T00:00:00Z' }, limit: 5 } });\n\
         const b = await oa.agendas.get({ path: { agendaUid: 7 } });\n\
         console.log('got', a.data.data.length);\n\
         return { titles: a.data.data.map(e => e.title.en), agenda: b.data.title, authSeen: b.data.auth, echo: a.data.echo, errors: [a.error, b.error] };",
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["result"]["titles"], json!(["A", "B"]));
    assert_eq!(sc["result"]["agenda"], json!("Agenda"));
    assert_eq!(sc["result"]["authSeen"], json!(true));
    assert_eq!(sc["result"]["errors"], json!([null, null]));
    assert_eq!(sc["logs"], json!([{"level": "log", "text": "got 2"}]));
    assert_eq!(sc["result"]["echo"]["path"], json!("/v3/agendas/7/events"));
    let query = sc["result"]["echo"]["query"].as_str().unwrap();
    for part in [
        "city=Paris",
        "city=Lyon",
        "fields=uid%2Ctitle",
        "timings%5Bgte%5D=2026-01-01T00%3A00%3A00Z",
        "limit=5",
    ] {
        assert!(query.contains(part), "{part} missing in {query}");
    }
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(&format!("Bearer {KEY}")))
    );
    assert!(!r.to_string().contains(KEY));
}

#[test]
fn http_errors_resolve_and_the_key_is_redacted() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.execute("const r = await oa.agendas.get({ path: { agendaUid: 401 } }); return r;");
    assert_eq!(r["isError"], json!(false), "{r}");
    let err = &r["structuredContent"]["result"]["error"];
    assert_eq!(err["status"], json!(401));
    assert!(r["structuredContent"]["result"]["data"].is_null());
    assert!(!r.to_string().contains(KEY), "key leaked: {r}");
    assert!(r.to_string().contains("[redacted]"));

    let r = s.execute("const { data, error } = await oa.agendas.get({ path: { agendaUid: 401 } });\nif (error) throw error;\nreturn data;");
    assert_eq!(error_code(&r), "api_error");
    assert_eq!(r["structuredContent"]["error"]["status"], json!(401));
    assert!(!r.to_string().contains(KEY), "key leaked: {r}");
    assert!(!s.stderr.lock().unwrap().contains(KEY), "key in stderr");
}

#[test]
fn redirects_are_not_followed() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: 302 } })).error.status");
    assert_eq!(r["structuredContent"]["result"], json!(302), "{r}");
    assert_eq!(mock.seen.lock().unwrap().len(), 1);
}

#[test]
fn missing_path_parameter_is_an_error_value() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.execute("return (await oa.agendas.get({})).error.message");
    let msg = r["structuredContent"]["result"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("agendaUid"), "{msg}");
    assert!(mock.seen.lock().unwrap().is_empty());
}

#[test]
fn api_call_cap_is_enforced() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[("OA_MAX_API_CALLS", "3")]);
    let r = s.execute(
        "const out = []; for (let i = 0; i < 5; i++) { const r = await oa.agendas.get({ path: { agendaUid: 1 } }); out.push(r.error ? r.error.message : 'ok'); } return out;",
    );
    let out = r["structuredContent"]["result"].as_array().unwrap().clone();
    assert_eq!(&out[..3], &[json!("ok"), json!("ok"), json!("ok")]);
    assert!(out[3].as_str().unwrap().contains("cap"), "{r}");
    assert_eq!(mock.seen.lock().unwrap().len(), 3);
}

/// Each hostile script gets its code within the deadline + 250 ms, and the
/// server keeps serving afterwards.
#[test]
fn hostile_scripts_get_their_code_in_time() {
    let mock = Mock::start();
    let deadline = Duration::from_millis(1000);
    let mut s = server_with(&mock, &[("OA_SANDBOX_TIMEOUT_MS", "1000")]);
    let cases: &[(&str, &str)] = &[
        ("while(true){}", "timeout"),
        ("while(true) await Promise.resolve()", "timeout"),
        ("new Array(2**32-1).join()", "timeout"),
        ("'x'.repeat(2**28)", "memory_limit"),
        (
            "const a = []; for (;;) a.push(new ArrayBuffer(1 << 24))",
            "memory_limit",
        ),
        (
            "function f(n) { return f(n + 1) + 1 } return f(0)",
            "js_runtime_error",
        ),
        ("return 'x'.repeat(2 * 1024 * 1024)", "output_limit"),
        (
            "for (let i = 0; i < 3000; i++) console.log('y'.repeat(1000))",
            "output_limit",
        ),
        ("throw new TypeError('boom')", "js_runtime_error"),
        ("await new Promise(() => {})", "timeout"),
        ("/(a+)+$/.test('a'.repeat(40) + 'b')", "timeout"),
        ("return require('fs')", "js_runtime_error"),
        ("return process.env", "js_runtime_error"),
        (
            "return await fetch('https://example.com/')",
            "js_runtime_error",
        ),
        ("await import('fs')", "js_runtime_error"),
        ("return std.open('/etc/passwd')", "js_runtime_error"),
    ];
    for (code, want) in cases {
        // One retry on a late answer only: the CI box has 2 cores shared
        // with parallel test binaries, and a descheduled client is not a
        // late server. A wrong code is never retried.
        let mut attempts = Vec::new();
        let r = loop {
            let start = Instant::now();
            let r = s.execute(code);
            attempts.push(start.elapsed());
            assert_eq!(&error_code(&r), want, "code {code:?} gave {r}");
            let late = attempts[attempts.len() - 1] > deadline + Duration::from_millis(250);
            if !late || attempts.len() == 2 {
                break r;
            }
        };
        let took = attempts[attempts.len() - 1];
        assert!(
            took <= deadline + Duration::from_millis(250),
            "{code:?} took {attempts:?}"
        );
        if *want == "js_runtime_error" && code.contains("TypeError") {
            assert!(r["structuredContent"]["error"]["stack"].is_string(), "{r}");
        }
    }
    let r = s.execute("return 6 * 7");
    assert_eq!(r["structuredContent"]["result"], json!(42));
}

#[test]
fn globals_offer_no_way_out() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.execute(
        "return [typeof require, typeof process, typeof fetch, typeof std, typeof os, typeof setTimeout, typeof XMLHttpRequest, typeof __oa_call, typeof __oa_log, typeof oa.agendas.events.list]",
    );
    assert_eq!(
        r["structuredContent"]["result"],
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "function"
        ])
    );
    // Another host cannot be named: only operations exist, and their URLs
    // are built from the base URL.
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: '../../../elsewhere.invalid' } })).error");
    assert_eq!(r["isError"], json!(false), "{r}");
    let seen = mock.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|s| s.target.starts_with("/v3/agendas/")),
        "{seen:?}"
    );
}

/// An async recursion exhausts the heap through its promise chain; QuickJS
/// then throws `null` (it cannot allocate the error) and frees the chain
/// before the run ends.
#[test]
fn async_recursion_hits_the_heap_limit() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[
            ("OA_SANDBOX_MEMORY_MB", "32"),
            ("OA_SANDBOX_TIMEOUT_MS", "20000"),
        ],
    );
    let r = s.execute("async function f(n) { await null; return f(n + 1) } return await f(0)");
    assert_eq!(error_code(&r), "memory_limit", "{r}");
    assert_eq!(
        s.execute("return 'still here'")["structuredContent"]["result"],
        json!("still here")
    );
}

#[test]
fn object_bomb_hits_the_heap_limit() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[
            ("OA_SANDBOX_MEMORY_MB", "32"),
            ("OA_SANDBOX_TIMEOUT_MS", "3000"),
        ],
    );
    let r = s.execute("const a = []; for (;;) a.push({ a: a.length, b: [1, 2, 3] })");
    assert_eq!(error_code(&r), "memory_limit");
    assert_eq!(
        s.execute("return 'still here'")["structuredContent"]["result"],
        json!("still here")
    );
}

#[test]
fn workers_run_under_seccomp_and_die_with_their_execute() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[("OA_SANDBOX_TIMEOUT_MS", "3000"), ("OA_WORKER_POOL", "2")],
    );
    // Warm up so the pool exists.
    assert_eq!(
        s.execute("return 1")["structuredContent"]["result"],
        json!(1)
    );
    std::thread::sleep(Duration::from_millis(300));
    let id = s.request(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "while(true){}"}}),
    );
    std::thread::sleep(Duration::from_millis(500));
    let kids = support::children(s.pid());
    assert!(!kids.is_empty(), "no workers found");
    for k in &kids {
        let status = std::fs::read_to_string(format!("/proc/{k}/status")).unwrap_or_default();
        if status.is_empty() {
            continue;
        }
        assert!(
            status.contains("Seccomp:\t2"),
            "worker {k} not seccomped:\n{status}"
        );
        assert!(
            status.contains("NoNewPrivs:\t1"),
            "worker {k} without no_new_privs"
        );
    }
    let r = s.response(id, Duration::from_secs(10));
    assert_eq!(error_code(&r["result"]), "timeout");
    std::thread::sleep(Duration::from_millis(300));
    let after = support::children(s.pid());
    let busy_gone = kids.iter().any(|k| !after.contains(k));
    assert!(
        busy_gone,
        "the timed-out worker is still alive: before {kids:?} after {after:?}"
    );
}

#[test]
fn cancellation_stops_a_running_execute() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[("OA_SANDBOX_TIMEOUT_MS", "5000")]);
    let start = Instant::now();
    let id = s.request(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "while(true){}"}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "test"}}));
    // The next request is served while the first would still be running.
    let r = s.execute("return 'alive'");
    assert_eq!(r["structuredContent"]["result"], json!("alive"));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "cancel did not stop the run"
    );
}

#[test]
fn a_full_queue_answers_busy() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[
            ("OA_SANDBOX_TIMEOUT_MS", "1500"),
            ("OA_MAX_CONCURRENCY", "1"),
            ("OA_EXEC_MAX_QUEUE", "0"),
        ],
    );
    let first = s.request(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "while(true){}"}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    let r = s.execute("return 1");
    assert_eq!(error_code(&r), "busy");
    assert_eq!(r["structuredContent"]["error"]["retryable"], json!(true));
    let r = s.response(first, Duration::from_secs(5));
    assert_eq!(error_code(&r["result"]), "timeout");
    assert_eq!(
        s.execute("return 2")["structuredContent"]["result"],
        json!(2)
    );
}

#[test]
fn execute_can_be_disabled() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[("OA_EXECUTE_DISABLED", "1")]);
    let list = s.call("tools/list", json!({"_meta": meta()}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["search_docs"]);
    let r = s.call(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "1"}}),
    );
    assert_eq!(r["error"]["code"], json!(-32602));
    let r = s.tool("search_docs", json!({"query": "events"}));
    assert_eq!(r["isError"], json!(false));
}

#[test]
fn invalid_arguments_are_tool_errors() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let r = s.tool("execute", json!({"code": 5}));
    assert_eq!(error_code(&r), "invalid_params");
    let r = s.tool("search_docs", json!({"query": "x", "limit": 0}));
    assert_eq!(error_code(&r), "invalid_params");
    // stderr is read by another thread: give it a moment to catch up.
    let audit_lines = || {
        s.stderr
            .lock()
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("audit").is_some())
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while audit_lines() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(audit_lines() >= 2, "one audit line per call");
}

#[test]
fn proxy_environment_is_honoured() {
    let mock = Mock::start();
    // A proxy that is not there: every call must fail without reaching the mock.
    let mut s = server_with(&mock, &[("HTTPS_PROXY", "http://127.0.0.1:9")]);
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: 1 } })).error");
    assert_eq!(r["structuredContent"]["result"]["status"], json!(0), "{r}");
    assert!(
        mock.seen.lock().unwrap().is_empty(),
        "the call bypassed HTTPS_PROXY"
    );
    drop(s);
    // NO_PROXY exempts the API host.
    let mut s = server_with(
        &mock,
        &[
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("NO_PROXY", "localhost"),
        ],
    );
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: 1 } })).data.title");
    assert_eq!(r["structuredContent"]["result"], json!("Agenda"), "{r}");
}

#[test]
fn a_killed_worker_does_not_take_the_server_down() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[("OA_SANDBOX_TIMEOUT_MS", "5000"), ("OA_WORKER_POOL", "1")],
    );
    assert_eq!(
        s.execute("return 1")["structuredContent"]["result"],
        json!(1)
    );
    let id = s.request(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "while(true){}"}}),
    );
    std::thread::sleep(Duration::from_millis(400));
    let start = Instant::now();
    // The workers are children of the server this test started.
    for k in support::children(s.pid()) {
        let _ = Command::new("kill").arg("-9").arg(k.to_string()).status();
    }
    let r = s.response(id, Duration::from_secs(10));
    assert!(r["result"]["isError"] == json!(true), "{r}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "the kill was not noticed"
    );
    assert_eq!(
        s.execute("return 'up'")["structuredContent"]["result"],
        json!("up")
    );
}

#[test]
fn promise_all_runs_api_calls_concurrently() {
    let mock = Mock::start();
    let mut s = server_with(&mock, &[]);
    let start = Instant::now();
    let r = s.execute(
        "const rs = await Promise.all([1, 2, 3, 4, 5].map((uid) => oa.agendas.overview({ path: { agendaUid: uid } })));\n\
         return rs.map((r) => r.data.uid);",
    );
    let took = start.elapsed();
    assert_eq!(
        r["structuredContent"]["result"],
        json!([1, 2, 3, 4, 5]),
        "{r}"
    );
    // Five 300 ms calls one after the other would take 1.5 s.
    assert!(
        took < Duration::from_millis(1200),
        "calls did not overlap: {took:?}"
    );
    assert_eq!(mock.seen.lock().unwrap().len(), 5);
}

#[test]
fn a_queued_execute_gives_up_after_the_queue_timeout() {
    let mock = Mock::start();
    let mut s = server_with(
        &mock,
        &[
            ("OA_SANDBOX_TIMEOUT_MS", "2000"),
            ("OA_MAX_CONCURRENCY", "1"),
            ("OA_EXEC_MAX_QUEUE", "4"),
            ("OA_EXEC_QUEUE_TIMEOUT_MS", "300"),
        ],
    );
    let first = s.request(
        "tools/call",
        json!({"_meta": meta(), "name": "execute", "arguments": {"code": "while(true){}"}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let r = s.execute("return 1");
    let waited = start.elapsed();
    assert_eq!(error_code(&r), "busy");
    assert!(
        waited >= Duration::from_millis(250),
        "answered busy before the queue timeout: {waited:?}"
    );
    assert_eq!(
        error_code(&s.response(first, Duration::from_secs(5))["result"]),
        "timeout"
    );
}
