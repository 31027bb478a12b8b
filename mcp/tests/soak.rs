//! Hostile-input soak: 10,000 random and malformed frames, huge queries and
//! scripts, 50 concurrent executes, cancellations, then a SIGTERM in the
//! middle of a call. The server must answer every well-formed request (and
//! every malformed line, with `id: null`), keep its resident set under a
//! bound, and exit cleanly. Deterministic (a fixed xorshift seed).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use support::{Server, meta};

/// The server process's resident set must stay under this (debug build,
/// full spec loaded, 4 executes at once; workers are separate processes).
const RSS_BOUND_KIB: u64 = 96 * 1024;
const FRAMES: usize = 10_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn status_field(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// The event loop's thread plus tokio's blocking pool, capped at two
/// (`BLOCKING_THREADS` in main.rs): each thread keeps a malloc arena for
/// good, so a burst must not leave one per concurrent spawn or search.
const MAX_THREADS: u64 = 3;

fn call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"_meta": meta(), "name": name, "arguments": args}})
}

/// One frame: `(bytes, Some(id))` when it is a request that must be
/// answered with its id, `(bytes, None)` when it is malformed and must be
/// answered with `id: null`.
fn frame(rng: &mut Rng, id: u64) -> (Vec<u8>, Option<u64>) {
    let req = |v: Value| (v.to_string().into_bytes(), Some(id));
    match rng.below(100) {
        0..=24 => {
            // Random bytes that cannot be JSON (a leading control byte).
            let len = rng.below(200) as usize;
            let mut b = vec![1u8];
            b.extend(
                (0..len)
                    .map(|_| (rng.below(255) as u8 + 1).max(11))
                    .filter(|c| *c != b'\n'),
            );
            (b, None)
        }
        25..=34 => ("[1, {\"jsonrpc\": \"2.0\"}]".as_bytes().to_vec(), None),
        35..=66 => {
            req(json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"_meta": meta()}}))
        }
        67..=76 => req(
            json!({"jsonrpc": "2.0", "id": id, "method": "no/such/method", "params": {"_meta": meta()}}),
        ),
        77..=84 => req(call(
            id,
            "search_docs",
            json!({"query": ["not", "a", "string"]}),
        )),
        85..=91 => req(call(id, "nope", json!({}))),
        92..=93 => req(call(
            id,
            "search_docs",
            json!({"query": "events in a city", "limit": 1 + rng.below(40)}),
        )),
        94..=95 => req(call(
            id,
            "search_docs",
            json!({"query": "x".repeat(200_000)}),
        )),
        96..=97 => req(call(id, "execute", json!({"code": "y".repeat(300_000)}))),
        _ => req(call(
            id,
            "execute",
            json!({"code": format!("return {}", rng.below(1000))}),
        )),
    }
}

#[test]
fn hostile_input_soak() {
    let started = Instant::now();
    let mut s = Server::start(
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
            ("OA_SANDBOX_TIMEOUT_MS", "1000"),
            ("OA_SANDBOX_MEMORY_MB", "64"),
        ],
        &[],
    );
    let pid = s.pid();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut expected: HashSet<u64> = HashSet::new();
    let mut malformed = 0usize;
    let mut max_rss = 0u64;
    let mut id = 1u64;
    let mut got_null = 0usize;
    let mut answered: HashSet<u64> = HashSet::new();
    let drain =
        |s: &mut Server, until: Duration, answered: &mut HashSet<u64>, got_null: &mut usize| {
            let deadline = Instant::now() + until;
            while let Some(msg) =
                s.try_next_message(deadline.saturating_duration_since(Instant::now()))
            {
                match msg.get("id") {
                    Some(Value::Null) => *got_null += 1,
                    Some(v) => {
                        answered.insert(v.as_u64().unwrap());
                    }
                    None => {}
                }
            }
        };
    for i in 0..FRAMES {
        let (mut bytes, want) = frame(&mut rng, id);
        id += 1;
        match want {
            Some(w) => {
                expected.insert(w);
            }
            None => malformed += 1,
        }
        bytes.push(b'\n');
        s.send_raw(&bytes);
        if i % 500 == 499 {
            // Keep the reply pipe moving and sample memory.
            drain(
                &mut s,
                Duration::from_millis(50),
                &mut answered,
                &mut got_null,
            );
            max_rss = max_rss.max(rss_kib(pid));
        }
    }
    // 50 executes at once, a third of them cancelled in flight.
    for k in 0..50u64 {
        let code = if k % 3 == 0 {
            "while (true) {}"
        } else {
            "let t = Date.now(); while (Date.now() - t < 50) {} return 1"
        };
        s.send(&call(id + k, "execute", json!({"code": code})));
        expected.insert(id + k);
    }
    std::thread::sleep(Duration::from_millis(100));
    // The spec lets a server leave a cancelled request unanswered (rmcp
    // does): those ids are not expected.
    for k in (0..50u64).step_by(3) {
        expected.remove(&(id + k));
        s.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": id + k, "reason": "soak"}}),
        );
    }
    id += 50;
    let deadline = Instant::now() + Duration::from_secs(40);
    while !expected.is_subset(&answered) && Instant::now() < deadline {
        drain(
            &mut s,
            Duration::from_millis(200),
            &mut answered,
            &mut got_null,
        );
        max_rss = max_rss.max(rss_kib(pid));
    }
    let missing: Vec<_> = expected.difference(&answered).take(10).collect();
    assert!(
        missing.is_empty(),
        "{} unanswered, e.g. {missing:?}",
        expected.len() - answered.len()
    );
    assert_eq!(
        got_null, malformed,
        "every malformed line gets one id:null error"
    );
    assert!(max_rss < RSS_BOUND_KIB, "server RSS reached {max_rss} KiB");
    let threads = status_field(pid, "Threads:");
    assert!(
        (1..=MAX_THREADS).contains(&threads),
        "{threads} threads after 50 concurrent executes"
    );
    // A SIGTERM in the middle of a call: the call is answered, then a clean exit.
    s.send(&call(
        id,
        "execute",
        json!({"code": "let t = Date.now(); while (Date.now() - t < 400) {} return 'last'"}),
    ));
    std::thread::sleep(Duration::from_millis(100));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let r = s.response(id as i64, Duration::from_secs(10));
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!("last"),
        "{r}"
    );
    assert!(s.wait_exit(Duration::from_secs(10)).unwrap().success());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
