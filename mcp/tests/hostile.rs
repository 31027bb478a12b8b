//! Issue 32: hostile `execute` scripts against the real server over stdio,
//! bare and under `--jail`, with the API mocked on loopback (bare) or on
//! this host's address (jailed). Each test ends with [`Rig::end`]: `ping`
//! answers at once, `SIGTERM` ends the server within a second and no process
//! it started is left.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::rig::{Mode, Rig};

fn result(r: &Value) -> &Value {
    &r["structuredContent"]["result"]
}

/// A path parameter whose value is itself a template used to loop for ever
/// at 100% CPU on the event loop (no request, deadline or SIGTERM answered
/// any more), and let one parameter pull in another's value. Each
/// parameter is substituted once, from the caller's value, percent-encoded.
fn self_referencing_template(mode: Mode) {
    let Some(mut rig) = Rig::start(mode, &[], &[]) else {
        return;
    };
    let started = Instant::now();
    let r = rig.server.execute(
        "const a = await oa.agendas.get({ path: { agendaUid: '{agendaUid}' } });\n\
         const b = await oa.agendas.events.get({ path: { agendaUid: '{eventUid}', eventUid: '{agendaUid}' } });\n\
         return [a.error, b.error && b.error.status];",
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result(&r), &json!([null, 404]), "{r}");
    let targets: Vec<String> = rig
        .mock
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.target.clone())
        .collect();
    assert_eq!(
        targets,
        [
            "/v3/agendas/%7BagendaUid%7D",
            "/v3/agendas/%7BeventUid%7D/events/%7BagendaUid%7D"
        ]
    );
    rig.end();
}

#[test]
fn a_self_referencing_path_template_bare() {
    self_referencing_template(Mode::Bare);
}

#[test]
fn a_self_referencing_path_template_jailed() {
    self_referencing_template(Mode::Jailed);
}

/// Sends `code` as `n` executes at once; returns each answer's `result`
/// and how long the slowest took.
fn executes_at_once(rig: &mut Rig, code: &str, n: usize) -> (Vec<Value>, Duration) {
    let started = Instant::now();
    let ids: Vec<i64> = (0..n)
        .map(|_| {
            rig.server.request(
                "tools/call",
                json!({"_meta": support::meta(), "name": "execute", "arguments": {"code": code}}),
            )
        })
        .collect();
    let answers = ids
        .into_iter()
        .map(|id| rig.server.response(id, Duration::from_secs(30))["result"].clone())
        .collect();
    (answers, started.elapsed())
}

/// Big arguments to many API calls against a slow API once grew the server
/// by a gigabyte (each call's arguments parsed and queued without a bound).
/// Now one call's arguments take at most 1 MiB and the calls one execute
/// has queued or in flight at most 4 MiB (`request_limit` beyond), and the
/// server's peak resident set stays under its bound.
fn argument_flood(mode: Mode) {
    // A long deadline: on a loaded machine a debug worker takes seconds to
    // serialise its 600 KB arguments seven times, and the test is about the
    // bounds, not the deadline.
    let Some(mut rig) = Rig::start(mode, &[("OA_SANDBOX_TIMEOUT_MS", "10000")], &[]) else {
        return;
    };
    let flood = |bytes: usize, calls: usize| {
        format!(
            "const big = 'x'.repeat({bytes});\n\
             const calls = [];\n\
             for (let i = 0; i < {calls}; i++) calls.push(oa.agendas.get({{ path: {{ agendaUid: 'slow' }}, body: {{ big }} }}));\n\
             return (await Promise.all(calls)).map((r) => r.error ? r.error.status : r.data.uid);"
        )
    };
    // Over the per-call bound, and over the queued bound: refused at once.
    for (bytes, why) in [
        (1_200_000, "one call takes at most"),
        (600_000, "queued or in flight"),
    ] {
        let (answers, took) = executes_at_once(&mut rig, &flood(bytes, 50), 4);
        for a in &answers {
            assert_eq!(code_of(a), "request_limit", "{}", error_text(a));
            let message = a["structuredContent"]["error"]["message"].as_str().unwrap();
            assert!(message.contains(why), "{message}");
        }
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    // Within the bounds: four executes with six 600 KB calls each in flight
    // against the slow route at once succeed.
    let (answers, took) = executes_at_once(&mut rig, &flood(600_000, 6), 4);
    for a in &answers {
        assert_eq!(result(a), &json!([0, 0, 0, 0, 0, 0]), "{}", error_text(a));
    }
    assert!(took < Duration::from_secs(10), "{took:?}");
    let peak = rig.peak_rss_kib();
    eprintln!("{mode:?}: peak RSS of the server {peak} KiB");
    assert!(peak < SERVER_RSS_BOUND_KIB, "peak RSS {peak} KiB");
    rig.end();
}

/// What the argument flood may cost the server at its peak (debug build):
/// its idle set plus four executes' queued arguments (4 × 4 MiB), their
/// requests in flight and the allocator's slack. Before issue 32 the same
/// flood took it to about 967 MiB.
const SERVER_RSS_BOUND_KIB: u64 = 96 * 1024;

#[test]
fn an_argument_flood_against_a_slow_api_bare() {
    argument_flood(Mode::Bare);
}

#[test]
fn an_argument_flood_against_a_slow_api_jailed() {
    argument_flood(Mode::Jailed);
}

/// A result nested 120 deep passed the 1 MiB cap as compact JSON, then a
/// pretty-printed copy with no limit made the reply 124 times larger
/// (130 MB). The reply as sent, every form counted, is now at most
/// `REPLY_CAP`: the text block is compact when the pretty copy does not
/// fit, and a reply that does not fit at all is `output_limit`.
fn deeply_nested_result(mode: Mode) {
    let Some(mut rig) = Rig::start(mode, &[("OA_SANDBOX_TIMEOUT_MS", "10000")], &[]) else {
        return;
    };
    let nested = |n: usize| {
        format!(
            "const leaf = () => {{ let v = [0]; for (let i = 0; i < 118; i++) v = [v]; return v; }};\n\
             const out = []; for (let i = 0; i < {n}; i++) out.push(leaf()); out"
        )
    };
    // 480 KB of JSON, 120 deep: delivered, its text block compact (pretty,
    // it would be about 60 MB).
    let r = rig.server.execute(&nested(2000));
    assert_eq!(r["isError"], json!(false), "{}", error_text(&r));
    let sent = r.to_string().len();
    assert!(sent <= REPLY_CAP, "reply of {sent} bytes");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains('\n'), "the text block is compact");
    assert_eq!(result(&r).as_array().map(Vec::len), Some(2000));
    // A megabyte of objects nested in each other would take the server
    // over 100 MiB as a tree: refused, in a small reply.
    let chains = "const chain = () => { let v = 1; for (let i = 0; i < 119; i++) v = { a: v }; return v; };\n\
                  const out = []; for (let i = 0; i < 1500; i++) out.push(chain()); out";
    let r = rig.server.execute(chains);
    assert_eq!(code_of(&r), "output_limit", "{}", error_text(&r));
    assert!(r.to_string().len() < 4096);
    // Console lines the worker counts as 1 MB escape to 6 MB each way.
    let r = rig
        .server
        .execute("console.log('\\u0001'.repeat(1000000)); 1");
    assert_eq!(code_of(&r), "output_limit", "{}", error_text(&r));
    assert!(r.to_string().len() < 4096);
    // A small result is still pretty-printed.
    let r = rig.server.execute("({ a: [1, 2] })");
    assert_eq!(
        r["content"][0]["text"],
        json!("{\n  \"a\": [\n    1,\n    2\n  ]\n}")
    );
    let peak = rig.peak_rss_kib();
    eprintln!("{mode:?}: peak RSS of the server {peak} KiB");
    assert!(peak < SERVER_RSS_BOUND_KIB, "peak RSS {peak} KiB");
    rig.end();
}

/// `openagenda_mcp::budget::REPLY_CAP`, as documented.
const REPLY_CAP: usize = 3 * 1024 * 1024;

/// The error code of a reply (empty when it is not an error).
fn code_of(r: &Value) -> &str {
    r["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
}

fn error_text(r: &Value) -> String {
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    text.chars().take(300).collect()
}

#[test]
fn a_deeply_nested_result_bare() {
    deeply_nested_result(Mode::Bare);
}

#[test]
fn a_deeply_nested_result_jailed() {
    deeply_nested_result(Mode::Jailed);
}

/// 2,000 searches in a burst once delayed an execute of `1+1` to 13.5 s
/// against a 5 s deadline: spawns shared two blocking threads with the
/// searches, and the deadline only started with a worker. Searches now run
/// on a lane of their own and a burst beyond its queue answers `busy` at
/// once; the execute answers within its deadline plus a second.
fn search_flood(mode: Mode) {
    let Some(mut rig) = Rig::start(mode, &[("OA_SANDBOX_TIMEOUT_MS", "5000")], &[]) else {
        return;
    };
    // Take the pool's workers first, so the execute below needs a spawn.
    let (warm, _) = executes_at_once(&mut rig, "1", 4);
    assert!(warm.iter().all(|r| result(r) == &json!(1)));
    let searches: Vec<i64> = (0..2000)
        .map(|i| {
            rig.server.request(
                "tools/call",
                json!({"_meta": support::meta(), "name": "search_docs",
                       "arguments": {"query": format!("upcoming events in city {i}")}}),
            )
        })
        .collect();
    let sent = Instant::now();
    let exec = rig.server.request(
        "tools/call",
        json!({"_meta": support::meta(), "name": "execute", "arguments": {"code": "1+1"}}),
    );
    let answer = rig.server.response(exec, Duration::from_secs(30));
    let took = sent.elapsed();
    assert_eq!(
        result(&answer["result"]),
        &json!(2),
        "{}",
        error_text(&answer)
    );
    assert!(
        took < Duration::from_secs(6),
        "execute answered after {took:?}"
    );
    let (mut ok, mut busy) = (0, 0);
    for id in searches {
        let r = rig.server.response(id, Duration::from_secs(60));
        match code_of(&r["result"]) {
            "" => ok += 1,
            "busy" => busy += 1,
            other => panic!("search answered {other}: {}", error_text(&r["result"])),
        }
    }
    eprintln!("{mode:?}: execute after {took:?}; searches ok {ok}, busy {busy}");
    assert!(ok > 0 && busy > 0, "ok {ok}, busy {busy}");
    rig.end();
}

#[test]
fn a_search_flood_bare() {
    search_flood(Mode::Bare);
}

#[test]
fn a_search_flood_jailed() {
    search_flood(Mode::Jailed);
}
