//! End to end through the real jail: curl inside `oajail` reaches a host
//! server only through the proxy, and only where the policy allows.
//!
//! Hermetic: the one "destination" is an HTTP server on the host's
//! loopback, admitted deliberately by an IP entry (`127.0.0.1:<port>`), which
//! is the documented way to reach a private address. The jail's own
//! loopback is a different network namespace, so a direct connection fails.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::*;

/// A host-side HTTP server that answers every request with "hello-from-host".
fn host_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\nhello-from-host");
        }
    });
    (port, hits)
}

#[test]
fn curl_in_the_jail_goes_through_the_proxy_only() {
    let (port, hits) = host_server();
    let home = scratch_home("proxy-e2e");
    let settings = home.join("settings.json");
    std::fs::write(
        &settings,
        format!(
            r#"{{"network":{{"allowedDomains":["127.0.0.1:{port}"],"deniedDomains":[]}},
                "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}}}}"#
        ),
    )
    .unwrap();
    let log = home.join("decisions.jsonl");
    let _ = std::fs::remove_file(&log);
    // NO_PROXY lists 127.0.0.1 (the jail's own loopback), so each curl
    // names the proxy explicitly.
    let script = format!(
        "p=$HTTP_PROXY\n\
         curl -sS --max-time 10 --noproxy '' -x $p http://127.0.0.1:{port}/via-http; echo\n\
         curl -sS --max-time 10 --noproxy '' -x socks5h://127.0.0.1:3128 http://127.0.0.1:{port}/via-socks; echo\n\
         curl -s -o /dev/null -w 'denied %{{http_code}}\\n' --noproxy '' -x $p http://evil.test/\n\
         curl -s -o /dev/null -w 'other-port %{{http_code}}\\n' --noproxy '' -x $p http://127.0.0.1:{other}/\n\
         curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:{port}/direct || echo direct-failed\n",
        other = port.wrapping_add(1).max(1)
    );
    let o = oajail_logged("proxy-e2e", &settings, &log, &script)
        .output()
        .unwrap();
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "hello-from-host",
            "hello-from-host",
            "denied 403",
            "other-port 403",
            "direct-failed"
        ],
        "stderr: {}",
        err(&o)
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "only the two proxied requests reached the host"
    );
    // The exit summary names the refused destinations and how to allow them.
    let stderr = err(&o);
    assert!(
        stderr.contains("the proxy refused 2 connection(s)"),
        "{stderr}"
    );
    assert!(stderr.contains("evil.test:80"), "{stderr}");
    // One decision line per request, each with its outcome.
    let decisions: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["event"] == "decision")
        .collect();
    let outcomes: Vec<(&str, &str)> = decisions
        .iter()
        .map(|d| {
            (
                d["proto"].as_str().unwrap(),
                d["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("http", "allow"),
            ("socks5", "allow"),
            ("http", "deny"),
            ("http", "deny")
        ],
        "{decisions:#?}"
    );
}
