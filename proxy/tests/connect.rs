//! CONNECT cases of the proxy attack list (docs/proxy.md "Tests", reference
//! egress-proxy.md §6, cases 1–20), against the real proxy on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use oajail_proxy::Limits;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

/// The §6 allowlist, on lab addresses: `api.allowed.test:<p>` and
/// `*.cdn.allowed.test:<p>` on a recording upstream (127.0.0.3).
struct Std {
    lab: Lab,
    up: Upstream,
    /// A lab port where nothing listens (allowed as dead.allowed.test).
    dead: u16,
}

fn std_lab() -> Std {
    std_lab_with(Limits::default())
}

fn std_lab_with(limits: Limits) -> Std {
    let up = Upstream::raw(public(3));
    let p = up.addr.port();
    let dead = std::net::TcpListener::bind((public(4), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lab = Lab::with(
        plan(
            &[
                &format!("api.allowed.test:{p}"),
                &format!("*.cdn.allowed.test:{p}"),
                &format!("other.allowed.test:{p}"),
                &format!("dead.allowed.test:{dead}"),
                "tls-only.allowed.test",
                "[2001:db8::1]:443",
            ],
            &[],
        ),
        limits,
    );
    for name in [
        "api.allowed.test",
        "a.cdn.allowed.test",
        "a.b.cdn.allowed.test",
        "tls-only.allowed.test",
        "other.allowed.test",
    ] {
        lab.resolver.map(name, public(3));
    }
    lab.resolver.map("dead.allowed.test", public(4));
    Std { lab, up, dead }
}

fn target(s: &Std, host: &str) -> String {
    format!("{host}:{}", s.up.addr.port())
}

#[test]
fn case01_allowed_tls_tunnel_reaches_upstream_after_200() {
    let s = std_lab();
    let hello = client_hello(Some("api.allowed.test"), &[]);
    let (mut c, head) = connect(s.lab.proxy, &target(&s, "api.allowed.test"), &[]);
    assert_eq!(status(&head), 200, "{head}");
    c.write_all(&hello).unwrap();
    c.write_all(b"after-hello").unwrap();
    let mut want = hello.clone();
    want.extend_from_slice(b"after-hello");
    assert!(
        eventually(|| s.up.received() == want),
        "upstream got {:?}",
        s.up.received().len()
    );
    c.shutdown(Shutdown::Both).unwrap();
    let close = s.lab.wait_log("close", 1);
    assert_eq!(close[0]["bytes_up"], want.len() as u64);
    let d = s.lab.decisions();
    assert_eq!(d.len(), 1, "exactly one decision line: {d:#?}");
    assert_eq!(d[0]["decision"], "allow");
    assert_eq!(d[0]["sni"], "api.allowed.test");
    assert_eq!(d[0]["resolved"], s.up.addr.to_string());
    assert_eq!(s.lab.resolver.count("api.allowed.test"), 1);
}

#[test]
fn case01_dead_upstream_gets_502_never_200() {
    let s = std_lab();
    let resp = raw(
        s.lab.proxy,
        format!("CONNECT dead.allowed.test:{} HTTP/1.1\r\n\r\n", s.dead).as_bytes(),
    );
    assert_eq!(status(&resp), 502, "{resp}");
    assert!(!resp.contains(" 200 "));
    let d = s.lab.decisions();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["reason"], "upstream_unreachable");
}

#[test]
fn case02_not_allowed_is_403_with_header_and_no_dns() {
    let s = std_lab();
    let resp = raw(s.lab.proxy, b"CONNECT notallowed.test:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status(&resp), 403, "{resp}");
    assert!(
        resp.contains("X-Proxy-Error: blocked-by-allowlist"),
        "{resp}"
    );
    assert!(
        resp.contains("network.allowedDomains"),
        "the answer says how to allow it: {resp}"
    );
    assert!(
        s.lab.resolver.queries().is_empty(),
        "denied name reached DNS"
    );
    let d = s.lab.decisions();
    assert_eq!((d.len(), d[0]["reason"].as_str()), (1, Some("not_allowed")));
    let summary = s.lab.shutdown();
    assert!(
        summary.to_string().contains("notallowed.test:443"),
        "{summary}"
    );
}

#[test]
fn case03_wildcards_and_case() {
    let s = std_lab();
    for (host, sni, want) in [
        ("a.cdn.allowed.test", "a.cdn.allowed.test", 200),
        ("a.b.cdn.allowed.test", "a.b.cdn.allowed.test", 200),
        ("API.ALLOWED.TEST.", "api.allowed.test", 200),
        ("cdn.allowed.test", "cdn.allowed.test", 403),
        ("evilcdn.allowed.test", "evilcdn.allowed.test", 403),
        (
            "cdn.allowed.test.evil.test",
            "cdn.allowed.test.evil.test",
            403,
        ),
    ] {
        let (c, head) = connect(
            s.lab.proxy,
            &target(&s, host),
            &client_hello(Some(sni), &[]),
        );
        assert_eq!(status(&head), want, "{host}: {head}");
        let _ = c.shutdown(Shutdown::Both);
    }
    for q in s.lab.resolver.queries() {
        assert!(
            q.ends_with(".cdn.allowed.test") || q == "api.allowed.test",
            "unexpected DNS query {q}"
        );
    }
}

#[test]
fn case04_05_06_ip_literals_and_ip_like_names_are_refused_without_dns() {
    let s = std_lab();
    let p = s.up.addr.port();
    for host in [
        "1.2.3.4",
        "[2606:4700::1]",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.000.000.001",
        "127.0.0.1.",
        "0x7f.1",
        "017700000001",
        "[::1]",
        "[::]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:0:0:1]",
        "[::127.0.0.1]",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:a9fe:a9fe::]",
        "[fd00:ec2::254]",
        "[::ffff:169.254.169.254]",
        "169.254.169.254",
        "0.0.0.0",
    ] {
        let resp = raw(
            s.lab.proxy,
            format!("CONNECT {host}:{p} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 403, "{host}: {resp}");
    }
    for host in ["[fe80::1%25lo]", "[fe80::1%lo]"] {
        let resp = raw(
            s.lab.proxy,
            format!("CONNECT {host}:{p} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 400, "{host}: {resp}");
    }
    assert!(s.lab.resolver.queries().is_empty());
    assert_eq!(s.up.hits(), 0);
    // An allowed IPv6 documentation literal is still not public.
    let resp = raw(s.lab.proxy, b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n");
    assert_eq!(
        status(&resp),
        502,
        "an explicit IP entry admits its address deliberately: {resp}"
    );
}

#[test]
fn case07_names_resolving_to_private_addresses_are_refused() {
    let up = Upstream::raw(CANARY);
    let lab = Lab::start(&["*.lab.test", "localhost", "x.localhost"], &[]);
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let cases = [
        ("localhost", vec![ip("127.0.0.1")]),
        ("LOCALHOST.", vec![ip("127.0.0.1")]),
        ("127.0.0.1.nip.lab.test", vec![ip("127.0.0.1")]),
        ("x.localhost", vec![ip("127.0.0.1")]),
        ("metadata.lab.test", vec![ip("169.254.169.254")]),
        ("alibaba.lab.test", vec![ip("100.100.100.200")]),
        ("azure.lab.test", vec![ip("168.63.129.16")]),
        ("mixed.lab.test", vec![ip("127.0.0.2"), ip("10.0.0.1")]),
        ("v6.lab.test", vec![ip("fd00:ec2::254")]),
        ("mapped.lab.test", vec![ip("::ffff:127.0.0.1")]),
        ("nat64.lab.test", vec![ip("64:ff9b::7f00:1")]),
        ("zero.lab.test", vec![ip("0.0.0.0")]),
    ];
    for (name, addrs) in &cases {
        lab.resolver.set(name, vec![addrs.clone()]);
    }
    for (name, addrs) in &cases {
        let resp = raw(
            lab.proxy,
            format!("CONNECT {name}:{} HTTP/1.1\r\n\r\n", up.addr.port()).as_bytes(),
        );
        assert_eq!(status(&resp), 403, "{name}: {resp}");
        let bad = addrs.last().unwrap().to_string();
        assert!(
            resp.contains(&bad),
            "{name}: the answer names the address {bad}: {resp}"
        );
        if !resp.contains("never be a destination") && !resp.contains("deny list") {
            assert!(
                resp.contains("allowPrivateDestinations"),
                "{name}: says how to allow it: {resp}"
            );
        }
    }
    assert_eq!(up.hits(), 0, "the private canary was reached");
    assert!(lab.decisions().iter().all(|d| d["decision"] == "deny"));
}

#[test]
fn case07_private_destination_opt_ins() {
    let up = Upstream::raw(CANARY);
    let p = up.addr.port();
    let mut egress = plan(&["named.lab.test", &format!("127.0.0.1:{p}")], &[]);
    let lab = Lab::with(egress.clone(), Limits::default());
    lab.resolver.map("named.lab.test", CANARY);
    // The IP entry admits the literal address, on its port only.
    let (_c, head) = connect(lab.proxy, &format!("127.0.0.1:{p}"), b"SSH-2.0-x\r\n");
    assert_eq!(status(&head), 200, "{head}");
    // srt semantics: a hostname resolving to an address the allow list
    // names explicitly is admitted too.
    let (_c2, head) = connect(
        lab.proxy,
        &format!("named.lab.test:{p}"),
        &client_hello(Some("named.lab.test"), &[]),
    );
    assert_eq!(status(&head), 200, "{head}");
    drop(lab);
    // allowPrivateDestinations admits a range for allowed names.
    egress.allow = plan(&["named.lab.test"], &[]).allow;
    egress.allow_private = vec![oajail_policy::domain::IpNet::parse("127.0.0.0/8").unwrap()];
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map("named.lab.test", CANARY);
    let (_c3, head) = connect(
        lab.proxy,
        &format!("named.lab.test:{p}"),
        &client_hello(Some("named.lab.test"), &[]),
    );
    assert_eq!(status(&head), 200, "{head}");
}

#[test]
fn case09_invalid_names_are_400_without_dns() {
    let s = std_lab();
    let long_label = format!("{}.allowed.test", "a".repeat(64));
    let long_name = format!("{}.test", ["abcdefghi"; 26].join("."));
    for host in [
        "%61pi.allowed.test",
        "api..allowed.test",
        long_label.as_str(),
        long_name.as_str(),
        "a_b.allowed.test",
    ] {
        let resp = raw(
            s.lab.proxy,
            format!("CONNECT {host}:443 HTTP/1.1\r\n\r\n").as_bytes(),
        );
        let want = if host.starts_with("a_b") { 403 } else { 400 };
        assert_eq!(status(&resp), want, "{host}: {resp}");
    }
    let resp = raw(
        s.lab.proxy,
        "CONNECT exämple.test:443 HTTP/1.1\r\n\r\n".as_bytes(),
    );
    assert!(matches!(status(&resp), 400 | 403), "{resp}");
    assert!(s.lab.resolver.queries().is_empty());
}

#[test]
fn case10_ports() {
    let s = std_lab();
    for port in ["22", "25", "6379"] {
        let resp = raw(
            s.lab.proxy,
            format!("CONNECT api.allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 403, "{port}: {resp}");
        assert!(
            resp.contains(&format!("api.allowed.test:{port}")),
            "says which entry to add: {resp}"
        );
    }
    assert!(
        s.lab
            .decisions()
            .iter()
            .all(|d| d["reason"] == "port_not_allowed")
    );
    for t in [
        "api.allowed.test:0",
        "api.allowed.test:65536",
        "api.allowed.test:443abc",
        "api.allowed.test:+443",
        "api.allowed.test: 443",
        "api.allowed.test",
    ] {
        let resp = raw(
            s.lab.proxy,
            format!("CONNECT {t} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 400, "{t}: {resp}");
    }
    assert!(s.lab.resolver.queries().is_empty());
}

#[test]
fn case11_12_connect_forms_and_garbage_are_400_and_closed() {
    let s = std_lab();
    let t = target(&s, "api.allowed.test");
    let cases: Vec<Vec<u8>> = vec![
        format!("CONNECT http://{t}/ HTTP/1.1\r\n\r\n").into_bytes(),
        format!("CONNECT user:pw@{t} HTTP/1.1\r\n\r\n").into_bytes(),
        b"CONNECT /x HTTP/1.1\r\n\r\n".to_vec(),
        format!("CONNECT {t} HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").into_bytes(),
        format!("CONNECT {t} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").into_bytes(),
        client_hello(Some("api.allowed.test"), &[]),
        vec![0x8f, 0x00, 0xff, 0x13, 0x37, 0x42],
        b"CONNECT\r\n\r\n".to_vec(),
        format!("connect {t} HTTP/1.1\r\n\r\n").into_bytes(),
        format!("CONNECT {t} HTTP/1.1\nHost: x\n\n").into_bytes(),
        format!("CONNECT {t} HTTP/1.1\r\nHost: a\0b\r\n\r\n").into_bytes(),
        format!("CONNECT {t} HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n").into_bytes(),
    ];
    for bytes in cases {
        let resp = raw(s.lab.proxy, &bytes);
        assert_eq!(
            status(&resp),
            400,
            "{:?}: {resp}",
            String::from_utf8_lossy(&bytes)
        );
        assert!(resp.contains("Connection: close"));
    }
    assert!(s.lab.resolver.queries().is_empty());
    assert_eq!(s.up.hits(), 0);
}

#[test]
fn case13_size_limits_are_431() {
    let s = std_lab();
    let big = format!(
        "CONNECT a.test:443 HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(17 * 1024)
    );
    assert_eq!(status(&raw(s.lab.proxy, big.as_bytes())), 431);
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let resp = raw(
        s.lab.proxy,
        format!("CONNECT a.test:443 HTTP/1.1\r\n{many}\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 431, "{resp}");
}

#[test]
fn case14_slowloris_and_connection_cap() {
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        max_connections: 2,
        ..Limits::default()
    };
    let s = std_lab_with(limits);
    let mut slow = std::net::TcpStream::connect(s.lab.proxy).unwrap();
    slow.write_all(b"CONNECT api.allowed.test:443 HTTP/1.1\r\nX-A: ")
        .unwrap();
    let mut other = std::net::TcpStream::connect(s.lab.proxy).unwrap();
    other.write_all(b"G").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let third = raw(
        s.lab.proxy,
        b"CONNECT api.allowed.test:443 HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status(&third), 503, "{third}");
    slow.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let started = std::time::Instant::now();
    let rest = String::from_utf8_lossy(&read_rest(&mut slow)).into_owned();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "slowloris connection still open"
    );
    assert!(rest.is_empty() || status(&rest) == 400, "{rest}");
    // The proxy keeps serving after the slow clients are gone.
    drop(other);
    std::thread::sleep(Duration::from_millis(400));
    let resp = raw(s.lab.proxy, b"CONNECT notallowed.test:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status(&resp), 403, "{resp}");
}

#[test]
fn case15_early_data_is_held_until_the_check() {
    let s = std_lab();
    // Allowed: the hello sent with the CONNECT head arrives upstream.
    let hello = client_hello(Some("api.allowed.test"), &[]);
    let (_c, head) = connect(s.lab.proxy, &target(&s, "api.allowed.test"), &hello);
    assert_eq!(status(&head), 200);
    assert!(eventually(|| s.up.received() == hello));
    // Refused by SNI: the early hello never reaches the upstream.
    let before = s.up.received().len();
    let (mut c, head) = connect(
        s.lab.proxy,
        &target(&s, "api.allowed.test"),
        &client_hello(Some("evil.test"), &[]),
    );
    assert_eq!(status(&head), 200);
    let rest = read_rest(&mut c);
    assert_eq!(
        rest,
        [0x15, 3, 3, 0, 2, 2, 0x31],
        "TLS access_denied alert, then close"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        s.up.received().len(),
        before,
        "a refused hello reached the upstream"
    );
}

#[test]
fn case16_sni_must_equal_the_connect_host() {
    let s = std_lab();
    for (sni, reason) in [
        (Some("evil.test"), "sni_mismatch"),
        (Some("other.allowed.test"), "sni_mismatch"),
        (None, "sni_missing"),
        (Some("127.0.0.1"), "sni_missing"),
    ] {
        let (mut c, head) = connect(
            s.lab.proxy,
            &target(&s, "api.allowed.test"),
            &client_hello(sni, &[]),
        );
        assert_eq!(status(&head), 200, "{head}");
        let rest = read_rest(&mut c);
        assert_eq!(rest, [0x15, 3, 3, 0, 2, 2, 0x31], "{sni:?}");
        let last = s.lab.decisions().pop().unwrap();
        assert_eq!(
            (last["decision"].as_str(), last["reason"].as_str()),
            (Some("deny"), Some(reason)),
            "{sni:?}"
        );
    }
    assert!(
        s.up.received().is_empty(),
        "a refused hello reached the upstream"
    );
    let summary = s.lab.shutdown().to_string();
    assert!(summary.contains("does not match"), "{summary}");
}

#[test]
fn case17_non_tls_needs_an_entry_naming_the_port() {
    let limits = Limits {
        peek_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let s = std_lab_with(limits);
    let tls_only = target(&s, "tls-only.allowed.test");
    for first in [&b"GET / HTTP/1.1\r\n\r\n"[..], b"SSH-2.0-OpenSSH_9.6\r\n"] {
        let (mut c, head) = connect(s.lab.proxy, &tls_only, first);
        assert_eq!(status(&head), 200);
        assert!(read_rest(&mut c).is_empty());
        let last = s.lab.decisions().pop().unwrap();
        assert_eq!(last["reason"], "not_tls");
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains(&format!("\\\"{tls_only}\\\"").replace("\\\"", "\"")),
            "{last}"
        );
    }
    let (mut c, _) = connect(s.lab.proxy, &tls_only, &[]);
    assert!(read_rest(&mut c).is_empty());
    assert_eq!(s.lab.decisions().pop().unwrap()["reason"], "peek_timeout");
    assert!(s.up.received().is_empty());
    // The explicit-port entry admits SSH.
    let (_c, head) = connect(
        s.lab.proxy,
        &target(&s, "api.allowed.test"),
        b"SSH-2.0-OpenSSH_9.6\r\n",
    );
    assert_eq!(status(&head), 200);
    assert!(eventually(|| s.up.received() == b"SSH-2.0-OpenSSH_9.6\r\n"));
    assert_eq!(s.lab.decisions().pop().unwrap()["reason"], "allowed_raw");
}

#[test]
fn case18_client_hello_framing() {
    let s = std_lab();
    let t = target(&s, "api.allowed.test");
    let hello = client_hello(Some("api.allowed.test"), &[]);
    // One byte per segment.
    let (mut c, head) = connect(s.lab.proxy, &t, &[]);
    assert_eq!(status(&head), 200);
    c.set_nodelay(true).unwrap();
    for b in &hello {
        c.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(
        eventually(|| s.up.received() == hello),
        "byte-by-byte hello not forwarded"
    );
    // Spread over three records.
    let split = records(&handshake_of(&hello), 40);
    let (_c2, head) = connect(s.lab.proxy, &t, &split);
    assert_eq!(status(&head), 200);
    assert!(eventually(|| s.up.received().ends_with(&split)));
    // An oversized record, and an endless hello.
    let mut huge = vec![0x16, 3, 1, 0xff, 0xff];
    huge.extend(std::iter::repeat_n(1u8, 70_000));
    let before = s.up.received().len();
    let (mut c3, head) = connect(s.lab.proxy, &t, &huge[..1024]);
    assert_eq!(status(&head), 200);
    let _ = c3.write_all(&huge[1024..]);
    let _ = read_rest(&mut c3);
    assert_eq!(
        s.lab.decisions().pop().unwrap()["reason"],
        "bad_client_hello"
    );
    assert_eq!(s.up.received().len(), before);
}

#[test]
fn case19_grease_ech_passes_with_matching_sni() {
    let s = std_lab();
    let hello = client_hello(
        Some("api.allowed.test"),
        &[(
            0xfe0d,
            vec![0, 0, 1, 0, 1, 7, 0, 4, 1, 2, 3, 4, 0, 4, 9, 9, 9, 9],
        )],
    );
    let (_c, head) = connect(s.lab.proxy, &target(&s, "api.allowed.test"), &hello);
    assert_eq!(status(&head), 200);
    assert!(eventually(|| s.up.received() == hello));
    assert_eq!(s.lab.decisions().pop().unwrap()["decision"], "allow");
}

#[test]
fn case20_half_close_and_idle_timeout() {
    half_close_and_idle(true);
}

#[test]
fn case20_half_close_and_idle_timeout_copy_relay() {
    half_close_and_idle(false);
}

fn half_close_and_idle(splice: bool) {
    // Upstream: read to EOF, then answer.
    let listener = std::net::TcpListener::bind((public(5), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let mut s = s.unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            s.write_all(format!("got {} bytes", all.len()).as_bytes())
                .unwrap();
        }
    });
    let limits = Limits {
        idle_timeout: Duration::from_millis(400),
        splice,
        ..Limits::default()
    };
    let lab = Lab::with(plan(&[&format!("half.lab.test:{port}")], &[]), limits);
    lab.resolver.map("half.lab.test", public(5));
    let (mut c, head) = connect(
        lab.proxy,
        &format!("half.lab.test:{port}"),
        b"SSH-2.0-x\r\n",
    );
    assert_eq!(status(&head), 200);
    c.shutdown(Shutdown::Write).unwrap();
    let answer = String::from_utf8(read_rest(&mut c)).unwrap();
    assert_eq!(answer, "got 11 bytes");
    let close = lab.wait_log("close", 1);
    assert_eq!(
        (close[0]["bytes_up"].as_u64(), close[0]["reason"].as_str()),
        (Some(11), Some("closed"))
    );
    // Idle: nothing moves, the proxy closes the tunnel.
    let (mut c, head) = connect(
        lab.proxy,
        &format!("half.lab.test:{port}"),
        b"SSH-2.0-x\r\n",
    );
    assert_eq!(status(&head), 200);
    let started = std::time::Instant::now();
    let _ = read_rest(&mut c);
    assert!(started.elapsed() < Duration::from_secs(3));
    let close = lab.wait_log("close", 2);
    assert_eq!(close[1]["reason"], "idle");
}
