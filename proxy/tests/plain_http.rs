//! Plain-HTTP cases of the proxy attack list (reference egress-proxy.md §6,
//! cases 21–27, and F4/F10/F13/F16 of sandboxes-and-attacks.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

struct Http {
    lab: Lab,
    up: Upstream,
}

/// `allowed.test` (any port) → an HTTP upstream on 127.0.0.2 that echoes
/// the request it received.
fn http_lab() -> Http {
    let up = Upstream::http(public(2));
    let lab = Lab::start(
        &["allowed.test", "*.allowed.test"],
        &["denied.allowed.test"],
    );
    lab.resolver.map("allowed.test", public(2));
    lab.resolver.map("ws.allowed.test", public(2));
    lab.resolver.map("canary.allowed.test", CANARY);
    Http { lab, up }
}

fn url(h: &Http, host: &str, path: &str) -> String {
    format!("http://{host}:{}{path}", h.up.addr.port())
}

#[test]
fn case21_host_header_is_rewritten_and_logged() {
    let h = http_lab();
    let u = url(&h, "allowed.test", "/x?y=1");
    let resp = raw(
        h.lab.proxy,
        format!("GET {u} HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 200, "{resp}");
    let seen = String::from_utf8(h.up.received()).unwrap();
    assert!(seen.starts_with("GET /x?y=1 HTTP/1.1\r\n"), "{seen}");
    assert!(
        seen.contains(&format!("Host: allowed.test:{}\r\n", h.up.addr.port())),
        "{seen}"
    );
    assert!(!seen.contains("evil.test"), "{seen}");
    let d = h.lab.decisions();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["client_host_header"], "evil.test");
    assert_eq!(d[0]["resolved"], h.up.addr.to_string());
    // Two Host headers: refused.
    let resp = raw(
        h.lab.proxy,
        format!("GET {u} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 400, "{resp}");
}

#[test]
fn case22_userinfo_and_parser_differentials_are_never_allowed() {
    let h = http_lab();
    let p = h.up.addr.port();
    for target in [
        format!("http://allowed.test@evil.test:{p}/"),
        format!("http://allowed.test:{p}@evil.test/"),
        format!("http://evil.test#@allowed.test:{p}/"),
        format!("http://evil.test\\@allowed.test:{p}/"),
        format!("http://allowed.test%2f@evil.test:{p}/"),
        format!("http://evil.test%2f@allowed.test:{p}"),
        format!("http://evil.test%00.allowed.test:{p}/"),
        format!("http://evil.test:{p}/"),
    ] {
        let resp = raw(
            h.lab.proxy,
            format!("GET {target} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(matches!(status(&resp), 400 | 403), "{target}: {resp}");
    }
    // CRLF injected into the host never makes a second header line upstream.
    let resp = raw(
        h.lab.proxy,
        format!("GET http://allowed.test\r\nX: y:{p}/ HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 400, "{resp}");
    assert_eq!(h.up.hits(), 0);
    assert!(
        h.lab.resolver.queries().iter().all(|q| !q.contains("evil")),
        "{:?}",
        h.lab.resolver.queries()
    );
}

#[test]
fn case23_origin_form_https_and_other_schemes_are_refused() {
    let h = http_lab();
    for target in [
        "/",
        "*",
        "https://allowed.test/",
        "ftp://allowed.test/",
        "gopher://allowed.test/",
        "file:///etc/passwd",
        "ws://allowed.test/",
    ] {
        let resp = raw(
            h.lab.proxy,
            format!("GET {target} HTTP/1.1\r\nHost: allowed.test\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 400, "{target}: {resp}");
    }
    assert_eq!(h.up.hits(), 0);
}

#[test]
fn case24_every_keep_alive_request_is_decided() {
    let h = http_lab();
    let mut s = TcpStream::connect(h.lab.proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n\r\n",
            url(&h, "allowed.test", "/1")
        )
        .as_bytes(),
    )
    .unwrap();
    let head = read_head(&mut s);
    assert_eq!(status(&head), 200, "{head}");
    assert!(head.contains("Connection: keep-alive"), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    // Second request on the same connection, to a host that is not allowed.
    s.write_all(
        format!(
            "GET http://evil.test:{}/ HTTP/1.1\r\n\r\n",
            h.up.addr.port()
        )
        .as_bytes(),
    )
    .unwrap();
    let rest = String::from_utf8(read_rest(&mut s)).unwrap();
    assert_eq!(status(&rest), 403, "{rest}");
    assert!(rest.contains("X-Proxy-Error: blocked-by-allowlist"));
    assert_eq!(h.up.hits(), 1);
    // Pipelined pair in one write: the second is decided on its own.
    let pair = format!(
        "GET {} HTTP/1.1\r\n\r\nGET http://denied.allowed.test:{}/ HTTP/1.1\r\n\r\n",
        url(&h, "allowed.test", "/2"),
        h.up.addr.port()
    );
    let out = raw(h.lab.proxy, pair.as_bytes());
    assert_eq!(out.matches("HTTP/1.1 200").count(), 1, "{out}");
    assert_eq!(out.matches("HTTP/1.1 403").count(), 1, "{out}");
    assert_eq!(h.up.hits(), 2);
}

#[test]
fn case25_smuggling_shapes_are_400_and_never_reach_upstream() {
    let h = http_lab();
    let u = url(&h, "allowed.test", "/");
    for extra in [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: xchunked\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: 0x10\r\n",
    ] {
        let resp = raw(
            h.lab.proxy,
            format!("POST {u} HTTP/1.1\r\n{extra}\r\nhello").as_bytes(),
        );
        assert_eq!(status(&resp), 400, "{extra:?}: {resp}");
    }
    let resp = raw(
        h.lab.proxy,
        format!("POST {u} HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 400, "{resp}");
    assert_eq!(h.up.hits(), 0);
    // A well-formed chunked body is re-framed and delivered.
    let resp = raw(h.lab.proxy, format!("POST {u} HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n").as_bytes());
    assert_eq!(status(&resp), 200, "{resp}");
    assert!(
        String::from_utf8(h.up.received())
            .unwrap()
            .ends_with("5\r\nhello\r\n0\r\n\r\n")
    );
}

#[test]
fn case26_hop_by_hop_headers_are_stripped_and_h2c_refused() {
    let h = http_lab();
    let u = url(&h, "allowed.test", "/");
    let req = format!(
        "GET {u} HTTP/1.1\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
         Connection: X-Secret, close\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nTrailer: X\r\nX-Kept: yes\r\n\r\n"
    );
    let resp = raw(h.lab.proxy, req.as_bytes());
    assert_eq!(status(&resp), 200, "{resp}");
    let seen = String::from_utf8(h.up.received())
        .unwrap()
        .to_ascii_lowercase();
    for gone in [
        "proxy-authorization",
        "proxy-connection",
        "x-secret",
        "keep-alive",
        "\r\nte:",
        "trailer",
    ] {
        assert!(!seen.contains(gone), "{gone} forwarded: {seen}");
    }
    assert!(seen.contains("x-kept: yes"));
    let resp = raw(h.lab.proxy, format!("GET {u} HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n").as_bytes());
    assert_eq!(status(&resp), 403, "{resp}");
    let denied = format!("http://evil.test:{}/", h.up.addr.port());
    let resp = raw(
        h.lab.proxy,
        format!("GET {denied} HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status(&resp), 403, "{resp}");
    assert_eq!(h.up.hits(), 1);
}

#[test]
fn case26_websocket_upgrade_to_an_allowed_host_becomes_a_tunnel() {
    let listener = std::net::TcpListener::bind((public(6), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = read_head(&mut s);
        s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n").unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
    });
    let lab = Lab::start(&["ws.lab.test"], &[]);
    lab.resolver.map("ws.lab.test", public(6));
    let mut s = TcpStream::connect(lab.proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("GET http://ws.lab.test:{port}/chat HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").as_bytes()).unwrap();
    let head = read_head(&mut s);
    assert_eq!(status(&head), 101, "{head}");
    s.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
}

#[test]
fn case27_loops_and_private_resolutions_are_refused() {
    let h = http_lab();
    let canary = Upstream::http_at(std::net::SocketAddr::new(CANARY.into(), 0)).unwrap();
    let p = canary.addr.port();
    for target in [
        format!("http://127.0.0.1:{}/", h.lab.proxy.port()),
        format!("http://canary.allowed.test:{p}/"),
        format!("http://localhost:{p}/"),
    ] {
        let resp = raw(
            h.lab.proxy,
            format!("GET {target} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&resp), 403, "{target}: {resp}");
    }
    assert_eq!(canary.hits(), 0);
}

#[test]
fn unreachable_name_is_502_and_answers_say_why() {
    let h = http_lab();
    let resp = raw(
        h.lab.proxy,
        b"GET http://nxdomain.allowed.test/ HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status(&resp), 502, "{resp}");
    assert!(
        resp.contains("cannot resolve nxdomain.allowed.test"),
        "{resp}"
    );
    let resp = raw(
        h.lab.proxy,
        b"GET http://denied.allowed.test/ HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status(&resp), 403, "{resp}");
    assert!(resp.contains("deny list"), "{resp}");
    assert_eq!(h.lab.resolver.count("denied.allowed.test"), 0);
}

#[test]
fn empty_allow_list_means_no_network() {
    let lab = Lab::start(&[], &[]);
    let resp = raw(lab.proxy, b"GET http://example.test/ HTTP/1.1\r\n\r\n");
    assert_eq!(status(&resp), 403, "{resp}");
    assert!(resp.contains("allowedDomains is empty"), "{resp}");
    assert!(lab.resolver.queries().is_empty());
}

#[test]
fn http_proxy_port_hands_connections_to_the_users_proxy() {
    // The "user's proxy": records what it gets and answers 200.
    let user = Upstream::http(CANARY);
    let mut egress = plan(&[], &[]);
    egress.http_proxy_port = Some(user.addr.port());
    let lab = Lab::with(egress, oajail_proxy::Limits::default());
    let resp = raw(
        lab.proxy,
        b"GET http://anything.test/ HTTP/1.1\r\nProxy-Authorization: x\r\n\r\n",
    );
    assert_eq!(status(&resp), 200, "{resp}");
    // Bytes pass unchanged: the user's proxy does all filtering.
    assert_eq!(
        String::from_utf8(user.received()).unwrap(),
        "GET http://anything.test/ HTTP/1.1\r\nProxy-Authorization: x\r\n\r\n"
    );
    assert!(lab.resolver.queries().is_empty());
    let d = lab.decisions();
    assert_eq!((d.len(), d[0]["reason"].as_str()), (1, Some("user_proxy")));
    // SOCKS is still filtered by oajail when only httpProxyPort is set.
    let mut s = TcpStream::connect(lab.proxy).unwrap();
    s.write_all(&[5, 1, 0, 5, 1, 0, 3, 4, b'a', b'.', b'b', b'c', 0, 80])
        .unwrap();
    let mut reply = [0u8; 12];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply[3], 2);
}
