//! Issue 12's defects of a bare server, each against the real binary:
//! unanswered or mis-coded protocol errors, an unbounded search on the
//! event loop, promises as results, silently ignored configuration, the
//! key's handling, and shutdown (orphaned workers, false errors).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::mock::Mock;
use support::{Server, command, error_code};

const SECS: Duration = Duration::from_secs(10);

fn server() -> Server {
    Server::start(&[("OA_CODE_EGRESS_AUTHORITY", "none")], &[])
}

fn error_of(msg: &Value) -> (i64, Value) {
    (
        msg["error"]["code"].as_i64().unwrap_or(0),
        msg["id"].clone(),
    )
}

#[test]
fn malformed_lines_get_json_rpc_errors_with_id_null() {
    let mut s = server();
    s.send_raw(b"this is not json\n");
    assert_eq!(error_of(&s.next_message(SECS)), (-32700, Value::Null));
    s.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n");
    assert_eq!(error_of(&s.next_message(SECS)), (-32600, Value::Null));
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":7}\n");
    assert_eq!(error_of(&s.next_message(SECS)), (-32600, json!(7)));
    // tools/call without a name is invalid params, not "method not found".
    let r = s.call(
        "tools/call",
        json!({"_meta": support::meta(), "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    // The server still serves.
    assert_eq!(
        s.execute("return 2")["structuredContent"]["result"],
        json!(2)
    );
}

#[test]
fn an_oversize_message_is_answered_and_the_stream_resynchronises() {
    let mut s = server();
    let mut big = vec![b' '; 17 * 1024 * 1024];
    big.extend_from_slice(b"\"x\"\n");
    s.send_raw(&big);
    let reply = s.next_message(Duration::from_secs(30));
    assert_eq!(error_of(&reply), (-32600, Value::Null), "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit")
    );
    assert_eq!(
        s.execute("return 3")["structuredContent"]["result"],
        json!(3)
    );
}

#[test]
fn a_huge_search_query_is_refused_at_once_and_execute_keeps_its_deadline() {
    let mut s = Server::start(
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
            ("OA_SANDBOX_TIMEOUT_MS", "2000"),
        ],
        &[],
    );
    let query = "events in paris ".repeat(100_000);
    let started = Instant::now();
    let search = s.request(
        "tools/call",
        json!({"_meta": support::meta(), "name": "search_docs", "arguments": {"query": query}}),
    );
    let exec = s.request(
        "tools/call",
        json!({"_meta": support::meta(), "name": "execute", "arguments": {"code": "return 1"}}),
    );
    let e = s.response(exec, SECS);
    assert_eq!(e["result"]["structuredContent"]["result"], json!(1), "{e}");
    let r = s.response(search, SECS);
    assert_eq!(error_code(&r["result"]), "invalid_params", "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A query at the cap still searches.
    let ok = s.tool("search_docs", json!({"query": "x".repeat(1024)}));
    assert_eq!(ok["isError"], json!(false), "{ok}");
}

#[test]
fn a_promise_as_the_last_expression_is_awaited() {
    let mut s = server();
    let result =
        |s: &mut Server, code: &str| s.execute(code)["structuredContent"]["result"].clone();
    assert_eq!(result(&mut s, "Promise.resolve(5)"), json!(5));
    assert_eq!(result(&mut s, "({ then(ok) { ok(7) } })"), json!(7));
    assert_eq!(
        result(&mut s, "const p = oa.agendas.get({ path: {} }); p"),
        json!({"data": null, "error": {"status": 0, "message": "path parameter agendaUid is required (pass { path: { agendaUid } })"}})
    );
    let r = s.execute("Promise.reject(new TypeError('nope'))");
    assert_eq!(error_code(&r), "js_runtime_error");
    assert_eq!(
        r["structuredContent"]["error"]["message"],
        json!("TypeError: nope")
    );
    let r = s.execute("console.log(new RangeError('far')); 1");
    assert_eq!(
        r["structuredContent"]["logs"][0]["text"],
        json!("RangeError: far"),
        "{r}"
    );
}

#[test]
fn tool_schemas_and_extra_arguments() {
    let mut s = server();
    let list = s.call("tools/list", json!({"_meta": support::meta()}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    assert_eq!(
        by_name("search_docs")["annotations"]["idempotentHint"],
        json!(true)
    );
    assert_eq!(by_name("execute")["outputSchema"]["type"], json!("object"));
    let r = s.tool("execute", json!({"code": "1", "timeout": 99}));
    assert_eq!(error_code(&r), "invalid_params");
    let r = s.tool("search_docs", json!({"query": "events", "page": 2}));
    assert_eq!(error_code(&r), "invalid_params");
}

fn refused(envs: &[(&str, &str)]) -> String {
    let out = command(envs, &[]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{envs:?} was accepted");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn unsupported_oa_settings_refuse_to_start() {
    for (k, v) in [
        ("OA_EXECUTOR", "bogus"),
        ("OA_MCP_MODE", "http"),
        ("OA_LOCAL_NO_SANDBOX", "1"),
        ("OA_SANDBOX_TIMEOUT", "100"),
        ("OA_EXECUTE_DISABLED", "perhaps"),
    ] {
        let err = refused(&[(k, v)]);
        assert!(err.contains(k), "{err}");
    }
    let err = refused(&[
        ("OA_BASE_URL", "http://api.example.test/v3"),
        ("OA_API_KEY", "k"),
    ]);
    assert!(err.contains("http://"), "{err}");
}

#[test]
fn the_key_is_trimmed_and_a_missing_key_warns() {
    let mock = Mock::start();
    let base = mock.base_url();
    let ca = mock.ca_path.to_str().unwrap().to_owned();
    let envs = [
        ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ("OA_BASE_URL", base.as_str()),
        ("OA_EXTRA_CA_CERTS", ca.as_str()),
        ("OA_API_KEY", "oa_sk_pasted\n"),
    ];
    let mut s = Server::start(&envs, &[]);
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: 3 } })).error");
    assert_eq!(r["structuredContent"]["result"], json!(null), "{r}");
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer oa_sk_pasted")
    );
    drop(s);
    let mut s = Server::start(&envs[..3], &[]);
    s.execute("return 1");
    let log = s.stderr.lock().unwrap().clone();
    assert_eq!(log.matches("OA_API_KEY is not set").count(), 1, "{log}");
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn workers_die_with_a_killed_server() {
    let mut s = server();
    s.execute("return 0");
    let deadline = Instant::now() + SECS;
    let mut workers = support::children(s.pid());
    while workers.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        workers = support::children(s.pid());
    }
    assert!(!workers.is_empty(), "no pooled worker to watch");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    s.wait_exit(SECS).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while workers.iter().any(|w| alive(*w)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        workers.iter().all(|w| !alive(*w)),
        "workers outlived the server: {workers:?}"
    );
}

#[test]
fn sigterm_mid_call_answers_then_exits_cleanly() {
    let mut s = server();
    s.execute("return 0");
    let id = s.request(
        "tools/call",
        json!({"_meta": support::meta(), "name": "execute",
               "arguments": {"code": "const t = Date.now(); while (Date.now() - t < 700) {} return 'done'"}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let r = s.response(id, SECS);
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!("done"),
        "{r}"
    );
    let status = s.wait_exit(SECS).expect("exit after SIGTERM");
    assert!(status.success(), "{status:?}");
    let log = s.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("worker setup") && !log.contains("error"),
        "{log}"
    );
}

#[test]
fn a_normal_shutdown_logs_no_error() {
    let mut s = server();
    s.execute("return 0");
    // Let the pool refill, so idle workers are there when stdin closes.
    std::thread::sleep(Duration::from_millis(300));
    let log = s.stderr.clone();
    assert!(s.finish().success());
    std::thread::sleep(Duration::from_millis(200));
    let log = log.lock().unwrap().clone();
    assert!(
        !log.contains("worker setup") && !log.contains("error"),
        "{log}"
    );
}

#[test]
fn a_worker_killed_before_its_deadline_is_reported_as_out_of_memory() {
    // A pod's `limits.memory` (or any memory cgroup) ends a worker whose
    // heap outgrows it with the OOM killer's SIGKILL, long before the
    // execute's deadline: the model must hear "memory", not "infinite loop".
    let mut s = Server::start(
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
            ("OA_SANDBOX_TIMEOUT_MS", "8000"),
        ],
        &[],
    );
    s.execute("return 0");
    let id = s.request(
        "tools/call",
        json!({"_meta": support::meta(), "name": "execute",
               "arguments": {"code": "const t = Date.now(); while (Date.now() - t < 4000) {} return 'done'"}}),
    );
    std::thread::sleep(Duration::from_millis(400));
    for worker in support::children(s.pid()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(worker as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let r = s.response(id, SECS);
    assert_eq!(error_code(&r["result"]), "memory_limit", "{r}");
    let text = r["result"].to_string();
    assert!(
        text.contains("out-of-memory killer") && text.contains("before its 8000 ms deadline"),
        "{text}"
    );
}
