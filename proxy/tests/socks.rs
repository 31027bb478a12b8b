//! SOCKS5 cases of the proxy attack list (reference egress-proxy.md §6,
//! cases 28–29; F14).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use oajail_proxy::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn socks_request(cmd: u8, atyp: u8, addr: &[u8], port: u16) -> Vec<u8> {
    let mut r = vec![5, 1, 0, 5, cmd, 0, atyp];
    r.extend_from_slice(addr);
    r.extend_from_slice(&port.to_be_bytes());
    r
}

fn domain(name: &str) -> Vec<u8> {
    let mut v = vec![name.len() as u8];
    v.extend_from_slice(name.as_bytes());
    v
}

/// Send a greeting + request, return (greeting answer, request reply).
fn socks(proxy: std::net::SocketAddr, bytes: &[u8]) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = vec![0u8; 12];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut out[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    out.truncate(got);
    (s, out)
}

fn setup() -> (Lab, Upstream) {
    let up = Upstream::raw(public(3));
    let lab = Lab::start(
        &[
            &format!("api.allowed.test:{}", up.addr.port()),
            "tls.allowed.test",
        ],
        &[],
    );
    lab.resolver.map("api.allowed.test", public(3));
    lab.resolver.map("tls.allowed.test", public(3));
    (lab, up)
}

#[test]
fn case28_domain_connect_tunnels_with_the_same_rules() {
    let (lab, up) = setup();
    let p = up.addr.port();
    let (mut s, reply) = socks(
        lab.proxy,
        &socks_request(1, 3, &domain("api.allowed.test"), p),
    );
    assert_eq!(&reply[..4], &[5, 0, 5, 0], "{reply:?}");
    s.write_all(b"SSH-2.0-x\r\n").unwrap();
    assert!(eventually(|| up.received() == b"SSH-2.0-x\r\n"));
    // A TLS-only entry: a wrong SNI is refused after the success reply.
    let (mut s, reply) = socks(
        lab.proxy,
        &socks_request(1, 3, &domain("tls.allowed.test"), p),
    );
    assert_eq!(&reply[..4], &[5, 0, 5, 0]);
    s.write_all(&client_hello(Some("evil.test"), &[])).unwrap();
    let rest = read_rest(&mut s);
    assert_eq!(
        rest.get(rest.len().saturating_sub(7)..),
        Some(&[0x15u8, 3, 3, 0, 2, 2, 0x31][..]),
        "{rest:?}"
    );
    assert_eq!(lab.decisions().pop().unwrap()["reason"], "sni_mismatch");
    assert_eq!(up.received(), b"SSH-2.0-x\r\n");
}

#[test]
fn case28_refusals_and_unsupported_commands() {
    let (lab, up) = setup();
    let p = up.addr.port();
    let cases: [(Vec<u8>, u8); 6] = [
        (socks_request(1, 1, &[127, 0, 0, 3], p), 2),
        (
            socks_request(1, 4, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], p),
            2,
        ),
        (socks_request(1, 3, &domain("evil.test"), 443), 2),
        (socks_request(2, 3, &domain("api.allowed.test"), p), 7),
        (socks_request(3, 3, &domain("api.allowed.test"), p), 7),
        (
            socks_request(1, 3, &domain("nxdomain.tls.allowed.test"), 443),
            2,
        ),
    ];
    for (req, code) in cases {
        let (_s, reply) = socks(lab.proxy, &req);
        assert_eq!(reply.get(3), Some(&code), "{req:?} → {reply:?}");
    }
    assert!(
        lab.resolver.queries().is_empty(),
        "{:?}",
        lab.resolver.queries()
    );
    // Allowed but unreachable: reply 4.
    lab.resolver.map("tls.allowed.test", public(4));
    let (_s, reply) = socks(
        lab.proxy,
        &socks_request(1, 3, &domain("tls.allowed.test"), 9),
    );
    assert_eq!(reply.get(3), Some(&4), "{reply:?}");
    assert_eq!(up.hits(), 0);
}

#[test]
fn case29_malformed_socks_is_closed() {
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let up = Upstream::raw(public(3));
    let lab = Lab::with(plan(&["api.allowed.test"], &[]), limits);
    let long = "a".repeat(254);
    let cases: Vec<Vec<u8>> = vec![
        vec![4, 1, 0, 80, 127, 0, 0, 3, 0],                    // SOCKS4
        vec![4, 1, 0, 80, 0, 0, 0, 1, 0, b'a', b'.', b'b', 0], // SOCKS4a
        vec![5, 1, 2],                                         // username/password only
        socks_request(1, 3, &[0], 443),                        // empty domain
        socks_request(1, 3, &domain(&long), 443),              // over 253
        vec![5, 2, 0],                                         // truncated greeting
        vec![5, 1, 0, 4, 1, 0, 3],                             // wrong version in request
        socks_request(1, 9, &[1, 2, 3, 4], 443),               // unknown address type
    ];
    for bytes in cases {
        let (_s, reply) = socks(lab.proxy, &bytes);
        assert!(reply.len() <= 2 || reply[3] != 0, "{bytes:?} → {reply:?}");
        assert!(reply.len() < 4 || reply[3] != 0);
    }
    assert_eq!(up.hits(), 0);
    assert!(lab.resolver.queries().is_empty());
}
