//! Tools over the HTTP transport with verified callers: both protocol
//! eras, sessions bound to their caller, refused bodies answered with
//! their id, per-caller limits with two callers at once, the RFC 8693
//! token exchange end to end (the API sees each caller's exchanged token
//! and nothing else), audit records, and SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::authz::{Authz, Discovery};
use support::http::{HttpServer, env_for, exchange_env, resource};
use support::mock::Mock;

fn server(authz: &Authz, mock: &Mock, extra: Vec<(String, String)>) -> HttpServer {
    HttpServer::start(
        |port| {
            let mut e = env_for(authz, mock, port);
            e.extend(extra.clone());
            e
        },
        &[],
    )
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const TWO_CALLS: &str = "const a = await oa.agendas.events.list({ path: { agendaUid: 1 } });\n\
                         const b = await oa.agendas.get({ path: { agendaUid: 1 } });\n\
                         return [a.data.data.length, b.data.title];";

#[test]
fn both_eras_and_sessions_bound_to_their_caller() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, vec![]);
    let aud = resource(s.port);
    let alice = authz.token_for("alice", &aud);
    let bob = authz.token_for("bob", &aud);
    // 2026-07-28: no session.
    let r = s.call_tool(&alice, 7, "execute", json!({"code": TWO_CALLS}));
    assert_eq!(r["id"], json!(7));
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([2, "Agenda"]),
        "{r}"
    );
    let r = s.call_tool(&alice, 8, "search_docs", json!({"query": "my agendas"}));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("me.agendas.list")
    );
    // 2025-11-25: initialize opens a session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let r = s.post(Some(&alice), &[], &init);
    assert_eq!(r.status, 200, "{r:?}\n{}", s.log());
    assert_eq!(r.json()["result"]["protocolVersion"], json!("2025-11-25"));
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let legacy = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(s.post(Some(&alice), &legacy, &note).status, 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "return 40 + 2"}}});
    let r = s.post(Some(&alice), &legacy, &call);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["structuredContent"]["result"], json!(42));
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    assert_eq!(
        s.post(Some(&alice), &legacy, &ping).json()["result"],
        json!({})
    );
    // Bob presents Alice's session: as unknown as a made-up one.
    let r = s.post(Some(&bob), &legacy, &call);
    assert_eq!(r.status, 404, "{r:?}");
    let r = s.request(
        "DELETE",
        "/mcp",
        &[
            ("authorization", &format!("Bearer {bob}")),
            ("mcp-session-id", &session),
        ],
        b"",
    );
    assert_eq!(r.status, 404);
    // Alice closes it; then it is gone for her too.
    let r = s.request(
        "DELETE",
        "/mcp",
        &[
            ("authorization", &format!("Bearer {alice}")),
            ("mcp-session-id", &session),
        ],
        b"",
    );
    assert!(r.status < 300, "{r:?}");
    assert_eq!(s.post(Some(&alice), &legacy, &ping).status, 404);
}

#[test]
fn refused_bodies_are_answered_with_their_id() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, vec![]);
    let token = authz.token_for("alice", &resource(s.port));
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    // Over the limit, the id in the first bytes.
    let mut big = br#"{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"execute","arguments":{"code":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    big.extend_from_slice(br#""}}}"#);
    let r = s.request("POST", "/mcp", &headers, &big);
    assert_eq!(r.status, 413, "{r:?}");
    let v = r.json();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!("big-1"), json!(-32600)),
        "{v}"
    );
    // Not JSON further on.
    let r = s.request(
        "POST",
        "/mcp",
        &headers,
        br#"{"jsonrpc":"2.0","id":77,"method":"tools/list","params":{"#,
    );
    assert_eq!(r.status, 400);
    let v = r.json();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(77), json!(-32700))
    );
    // A batch, a bad id: -32600.
    let r = s.request(
        "POST",
        "/mcp",
        &headers,
        br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600))
    );
    // The server still serves.
    let r = s.call_tool(&token, 9, "execute", json!({"code": "return 9"}));
    assert_eq!(r["result"]["structuredContent"]["result"], json!(9));
}

#[test]
fn stdio_answers_bad_lines_with_the_id_of_their_first_bytes() {
    let mut s = support::Server::start(&[("OA_CODE_EGRESS_AUTHORITY", "none")], &[]);
    let mut big = br#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"execute","arguments":{"code":""#.to_vec();
    big.extend(std::iter::repeat_n(b'y', 5 * 1024 * 1024));
    big.extend_from_slice(b"\"}}}\n");
    s.send_raw(&big);
    let r = s.next_message(Duration::from_secs(30));
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(31), json!(-32600)),
        "{r}"
    );
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"ping\",\"params\":{]}\n");
    let r = s.next_message(Duration::from_secs(10));
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!("q"), json!(-32700)),
        "{r}"
    );
}

fn error_code(reply: &Value) -> String {
    let res = &reply["result"];
    assert_eq!(res["isError"], json!(true), "{reply}");
    res["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn two_callers_at_once_one_over_its_rate_limit() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(
        &authz,
        &mock,
        pairs(&[("OA_RATE_LIMIT_PER_MIN", "6"), ("OA_RATE_LIMIT_BURST", "3")]),
    );
    let aud = resource(s.port);
    let (alice, bob) = (authz.token_for("alice", &aud), authz.token_for("bob", &aud));
    std::thread::scope(|scope| {
        let greedy = scope.spawn(|| {
            (0..6)
                .map(|i| s.call_tool(&alice, 100 + i, "execute", json!({"code": "return 1"})))
                .collect::<Vec<_>>()
        });
        let polite = scope.spawn(|| {
            (0..3)
                .map(|i| s.call_tool(&bob, 200 + i, "execute", json!({"code": "return 2"})))
                .collect::<Vec<_>>()
        });
        let greedy = greedy.join().unwrap();
        let polite = polite.join().unwrap();
        let refused: Vec<&Value> = greedy
            .iter()
            .filter(|r| r["result"]["isError"] == json!(true))
            .collect();
        assert_eq!(
            greedy.len() - refused.len(),
            3,
            "the burst of 3 passes: {greedy:?}"
        );
        for r in &refused {
            assert_eq!(error_code(r), "rate_limited");
            let e = &r["result"]["structuredContent"]["error"];
            assert_eq!(e["retryable"], json!(true));
            let m = e["message"].as_str().unwrap();
            assert!(
                m.contains("OA_RATE_LIMIT_PER_MIN=6") && m.contains("retry in"),
                "{m}"
            );
        }
        for r in &polite {
            assert_eq!(
                r["result"]["structuredContent"]["result"],
                json!(2),
                "bob is served: {r}"
            );
        }
    });
    let log = s.log();
    assert!(
        log.contains("\"outcome\":\"rate_limited\"") && log.contains("\"sub\":\"alice\""),
        "{log}"
    );
}

#[test]
fn one_callers_executes_are_capped_while_another_is_served() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(
        &authz,
        &mock,
        pairs(&[
            ("OA_MAX_CONCURRENCY_PER_CALLER", "1"),
            ("OA_RATE_LIMIT_PER_MIN", "0"),
        ]),
    );
    let aud = resource(s.port);
    let (alice, bob) = (authz.token_for("alice", &aud), authz.token_for("bob", &aud));
    let slow = "const t = Date.now(); while (Date.now() - t < 700) {} return 'slow';";
    std::thread::scope(|scope| {
        let first = scope.spawn(|| s.call_tool(&alice, 1, "execute", json!({"code": slow})));
        std::thread::sleep(Duration::from_millis(250));
        let second = s.call_tool(&alice, 2, "execute", json!({"code": "return 2"}));
        assert_eq!(error_code(&second), "caller_busy");
        let m = second["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(m.contains("OA_MAX_CONCURRENCY_PER_CALLER=1"), "{m}");
        let other = s.call_tool(&bob, 3, "execute", json!({"code": "return 3"}));
        assert_eq!(other["result"]["structuredContent"]["result"], json!(3));
        let first = first.join().unwrap();
        assert_eq!(
            first["result"]["structuredContent"]["result"],
            json!("slow")
        );
    });
    // Once the first finished, Alice may run again.
    let again = s.call_tool(&alice, 4, "execute", json!({"code": "return 4"}));
    assert_eq!(again["result"]["structuredContent"]["result"], json!(4));
}

#[test]
fn token_exchange_end_to_end() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, exchange_env(&authz));
    let aud = resource(s.port);
    let (alice, bob) = (authz.token_for("alice", &aud), authz.token_for("bob", &aud));
    let r = s.call_tool(&alice, 1, "execute", json!({"code": TWO_CALLS}));
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([2, "Agenda"]),
        "{r}\n{}",
        s.log()
    );
    let r = s.call_tool(&bob, 2, "execute", json!({"code": TWO_CALLS}));
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([2, "Agenda"])
    );
    // Alice again: her exchanged token is reused, not exchanged anew.
    let r = s.call_tool(&alice, 3, "execute", json!({"code": TWO_CALLS}));
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([2, "Agenda"])
    );
    let exchanges = authz.exchanges();
    assert_eq!(
        exchanges
            .iter()
            .map(|(sub, _)| sub.as_str())
            .collect::<Vec<_>>(),
        vec!["alice", "bob"]
    );
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6);
    let auths: Vec<&str> = seen
        .iter()
        .map(|x| x.authorization.as_deref().unwrap_or(""))
        .collect();
    let alice_api = format!("Bearer {}", exchanges[0].1);
    let bob_api = format!("Bearer {}", exchanges[1].1);
    let want = [
        &alice_api, &alice_api, &bob_api, &bob_api, &alice_api, &alice_api,
    ];
    assert_eq!(auths, want.map(|s| s.as_str()));
    // An API echoing the credential: the script sees it redacted.
    let r = s.call_tool(
        &alice,
        4,
        "execute",
        json!({"code": "return (await oa.agendas.get({ path: { agendaUid: 401 } })).error"}),
    );
    let text = r.to_string();
    assert!(
        !text.contains(&exchanges[0].1) && text.contains("[redacted]"),
        "{text}"
    );
    // The audit trail names callers and credentials by fingerprint only.
    let audits = s.audits(4);
    let log = s.log();
    for secret in [&alice, &bob, &exchanges[0].1, &exchanges[1].1] {
        assert!(!log.contains(secret.as_str()), "a token in the log");
    }
    assert_eq!(audits.len(), 4, "{log}");
    let first = &audits[0];
    assert_eq!(first["transport"], json!("http"));
    assert_eq!(first["caller"]["sub"], json!("alice"));
    assert_eq!(first["caller"]["clientId"], json!("test-client"));
    assert_eq!(first["credential"]["kind"], json!("exchanged"));
    assert!(
        first["credential"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(first["outcome"], json!("ok"));
    assert_eq!(first["apiCalls"], json!(2));
    assert_eq!(first["code"], json!(TWO_CALLS));
    assert_eq!(first["codeBytes"], json!(TWO_CALLS.len()));
    assert!(first["durationMs"].as_f64().unwrap() > 0.0 && first["bytesOut"].as_u64().unwrap() > 0);
    assert_ne!(
        audits[0]["credential"], audits[1]["credential"],
        "two callers, two credentials"
    );
    assert_eq!(audits[0]["credential"], audits[2]["credential"]);
}

#[test]
fn a_refused_exchange_is_the_executes_error() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, exchange_env(&authz));
    let revoked = authz.token_for("revoked", &resource(s.port));
    let r = s.call_tool(&revoked, 1, "execute", json!({"code": "return 1"}));
    assert_eq!(error_code(&r), "token_exchange_failed");
    let e = &r["result"]["structuredContent"]["error"];
    assert!(
        e["message"].as_str().unwrap().contains("invalid_grant"),
        "{e}"
    );
    assert_eq!(e["retryable"], json!(false));
    assert!(
        mock.seen.lock().unwrap().is_empty(),
        "no API call without the caller's token"
    );
    // search_docs needs no API authority.
    let r = s.call_tool(&revoked, 2, "search_docs", json!({"query": "events"}));
    assert_eq!(r["result"]["isError"], json!(false));
}

#[test]
fn sigterm_finishes_requests_in_flight() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let mut s = server(&authz, &mock, vec![]);
    let token = authz.token_for("alice", &resource(s.port));
    // Warm: keys fetched.
    let r = s.call_tool(&token, 1, "execute", json!({"code": "return 1"}));
    assert_eq!(r["result"]["structuredContent"]["result"], json!(1));
    let slow = "const t = Date.now(); while (Date.now() - t < 600) {} return 'done';";
    std::thread::scope(|scope| {
        let running = scope.spawn(|| s.call_tool(&token, 2, "execute", json!({"code": slow})));
        std::thread::sleep(Duration::from_millis(200));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(s.pid() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let r = running.join().unwrap();
        assert_eq!(r["result"]["structuredContent"]["result"], json!("done"));
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = s.try_wait() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "no exit after SIGTERM: {}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}\n{}", s.log());
}
