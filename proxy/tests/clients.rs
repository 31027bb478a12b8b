//! Real clients through the real proxy: curl (http, https via CONNECT,
//! socks5h), python urllib, git (dumb http), `openssl s_client` with a
//! mismatched `-servername`, the ssh ProxyCommand helper, and DNS
//! rebinding with 200 tries. Missing programs fail the test (no skips).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed when the test ends.
struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port(ip: std::net::Ipv4Addr) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(addr: SocketAddr) {
    assert!(
        eventually(|| TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok()),
        "{addr} never started listening"
    );
}

/// `openssl s_server -www` for `name` on a lab address; its stdout (which
/// includes the SNI it saw, with -servername_fatal off) is kept in a file.
fn tls_server(dir: &std::path::Path, name: &str, ip: std::net::Ipv4Addr) -> (Kill, SocketAddr) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let (code, _, err) = run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            &format!("subjectAltName=DNS:{name}"),
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let port = free_port(ip);
    let addr = SocketAddr::new(ip.into(), port);
    let log = std::fs::File::create(dir.join("s_server.log")).unwrap();
    let child = Command::new("openssl")
        .args([
            "s_server",
            "-accept",
            &addr.to_string(),
            "-cert",
            cert.to_str().unwrap(),
            "-key",
            key.to_str().unwrap(),
            "-www",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("openssl s_server");
    let child = Kill(child);
    wait_listening(addr);
    (child, addr)
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("oajail-proxy-clients-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn curl_http_https_and_socks5h() {
    let dir = temp_dir("curl");
    let http = Upstream::http(public(2));
    let (_tls, tls_addr) = tls_server(&dir, "secure.allowed.test", public(3));
    let lab = Lab::start(
        &[
            "web.allowed.test",
            &format!("raw.allowed.test:{}", http.addr.port()),
            "secure.allowed.test",
        ],
        &[],
    );
    lab.resolver.map("web.allowed.test", public(2));
    lab.resolver.map("raw.allowed.test", public(2));
    lab.resolver.map("secure.allowed.test", public(3));
    let proxy = lab.proxy_url();
    let p = http.addr.port();
    let (code, out, err) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "-x",
            &proxy,
            &format!("http://web.allowed.test:{p}/hello"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("GET /hello HTTP/1.1\r\n"), "{out}");
    let (code, out, err) = run(
        "curl",
        &[
            "-sS",
            "-k",
            "--max-time",
            "10",
            "-x",
            &proxy,
            &format!("https://secure.allowed.test:{}/", tls_addr.port()),
        ],
    );
    assert_eq!(code, 0, "https through CONNECT: {err}");
    assert!(out.contains("s_server"), "{out}");
    let socks = format!("socks5h://{}", lab.proxy);
    let (code, out, err) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "-x",
            &socks,
            &format!("http://raw.allowed.test:{p}/s"),
        ],
    );
    assert_eq!(code, 0, "socks5h: {err}");
    assert!(out.starts_with("GET /s HTTP/1.1"), "{out}");
    // Refusals as curl users see them.
    let (_, out, _) = run(
        "curl",
        &[
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-x",
            &proxy,
            "http://evil.test/",
        ],
    );
    assert_eq!(out, "403");
    let (code, _, err) = run("curl", &["-sS", "-k", "-x", &proxy, "https://evil.test/"]);
    assert_eq!(code, 56, "{err}");
    assert!(err.contains("403"), "{err}");
    let (code, _, _) = run("curl", &["-sS", "-x", &socks, "http://evil.test/"]);
    assert_eq!(code, 97);
    assert!(lab.resolver.queries().iter().all(|q| q != "evil.test"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn python_urllib_through_the_proxy() {
    let http = Upstream::http(public(2));
    let lab = Lab::start(&["py.allowed.test"], &[]);
    lab.resolver.map("py.allowed.test", public(2));
    let script = format!(
        "import urllib.request as u\n\
         o = u.build_opener(u.ProxyHandler({{'http': '{proxy}'}}))\n\
         print(o.open('http://py.allowed.test:{p}/py').read().decode())\n\
         try:\n    o.open('http://evil.test/')\nexcept Exception as e:\n    print('refused', getattr(e, 'code', e))\n",
        proxy = lab.proxy_url(),
        p = http.addr.port()
    );
    let (code, out, err) = run("python3", &["-c", &script]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("GET /py HTTP/1.1"), "{out}");
    assert!(out.contains("refused 403"), "{out}");
}

#[test]
fn git_clone_over_dumb_http_through_the_proxy() {
    let dir = temp_dir("git");
    let repo = dir.join("src");
    let bare = dir.join("repo.git");
    let sh = format!(
        "set -e; git init -q -b main {r}; cd {r}; echo hi > f; git add f; \
         git -c user.name=t -c user.email=t@t commit -qm init; \
         git clone -q --bare {r} {b}; cd {b}; git update-server-info",
        r = repo.display(),
        b = bare.display()
    );
    let (code, _, err) = run("sh", &["-c", &sh]);
    assert_eq!(code, 0, "{err}");
    let port = free_port(public(4));
    let server = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.4",
            &port.to_string(),
            "--directory",
            bare.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 http.server");
    let _server = Kill(server);
    wait_listening(SocketAddr::new(public(4).into(), port));
    let lab = Lab::start(&["git.allowed.test"], &[]);
    lab.resolver.map("git.allowed.test", public(4));
    let out_dir = dir.join("clone");
    let (code, _, err) = run(
        "git",
        &[
            "-c",
            &format!("http.proxy={}", lab.proxy_url()),
            "clone",
            "-q",
            &format!("http://git.allowed.test:{port}/"),
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(out_dir.join("f")).unwrap(), "hi\n");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn openssl_s_client_with_a_mismatched_servername_is_cut_off() {
    let dir = temp_dir("sclient");
    let (_tls, tls_addr) = tls_server(&dir, "secure.allowed.test", public(3));
    let lab = Lab::start(&["secure.allowed.test"], &[]);
    lab.resolver.map("secure.allowed.test", public(3));
    let target = format!("secure.allowed.test:{}", tls_addr.port());
    let (code, _, _) = run(
        "sh",
        &[
            "-c",
            &format!(
                "echo | openssl s_client -proxy {} -connect {target} -servername evil.test",
                lab.proxy
            ),
        ],
    );
    assert_ne!(code, 0, "the handshake must fail");
    let d = lab.decisions();
    assert_eq!(d.last().unwrap()["reason"], "sni_mismatch", "{d:#?}");
    assert_eq!(d.last().unwrap()["sni"], "evil.test");
    // The server never saw a handshake for evil.test.
    let server_log = std::fs::read_to_string(dir.join("s_server.log")).unwrap_or_default();
    assert!(!server_log.contains("evil.test"), "{server_log}");
    // And the matching name works.
    let (code, out, err) = run(
        "sh",
        &[
            "-c",
            &format!(
                "echo | openssl s_client -proxy {} -connect {target} -servername secure.allowed.test",
                lab.proxy
            ),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs only as the child of `ssh_helper_relays_stdin_and_stdout`.
#[test]
fn ssh_helper_child() {
    let Ok(spec) = std::env::var("OAJAIL_SSH_HELPER_CHILD") else {
        return;
    };
    let (proxy, port) = spec.split_once(' ').unwrap();
    let r = oajail_proxy::ssh_connect_helper(
        proxy.parse().unwrap(),
        "git.allowed.test",
        port.parse().unwrap(),
    );
    if let Err(e) = r {
        eprintln!("helper: {e}");
        std::process::exit(3);
    }
    std::process::exit(0);
}

#[test]
fn ssh_helper_relays_stdin_and_stdout() {
    let listener = TcpListener::bind((public(5), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"SSH-2.0-lab_server\r\n").unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        *record.lock().unwrap() = all;
    });
    let lab = Lab::start(&[&format!("git.allowed.test:{port}")], &[]);
    lab.resolver.map("git.allowed.test", public(5));
    let child = |port: u16| {
        let mut c = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "ssh_helper_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("OAJAIL_SSH_HELPER_CHILD", format!("{} {port}", lab.proxy))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A refused helper may exit before it reads stdin: a broken pipe
        // here is that, and its exit status says the rest.
        let _ = c.stdin.take().unwrap().write_all(b"SSH-2.0-lab_client\r\n");
        c.wait_with_output().unwrap()
    };
    let out = child(port);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("SSH-2.0-lab_server"));
    assert!(eventually(
        || seen.lock().unwrap().as_slice() == b"SSH-2.0-lab_client\r\n"
    ));
    // A port the policy does not name: the helper fails with the reason.
    let out = child(22);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("403") && err.contains("git.allowed.test:22"),
        "{err}"
    );
}

#[test]
fn dns_rebinding_200_tries_never_reach_the_private_target() {
    // A public stand-in and the loopback canary on the same port.
    let (public_up, canary) = loop {
        let up = Upstream::http(public(2));
        if let Some(c) = Upstream::http_at(SocketAddr::new(CANARY.into(), up.addr.port())) {
            break (up, c);
        }
    };
    let port = public_up.addr.port();
    let lab = Lab::start(&["rebind.allowed.test"], &[]);
    let ip = |a: std::net::Ipv4Addr| std::net::IpAddr::V4(a);
    lab.resolver.set(
        "rebind.allowed.test",
        vec![vec![ip(public(2))], vec![ip(CANARY)]],
    );
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..200 {
        let resp = raw(
            lab.proxy,
            format!(
                "GET http://rebind.allowed.test:{port}/{i} HTTP/1.1\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        *statuses.entry(status(&resp)).or_insert(0) += 1;
    }
    for _ in 0..50 {
        let (_c, head) = connect(
            lab.proxy,
            &format!("rebind.allowed.test:{port}"),
            &client_hello(Some("rebind.allowed.test"), &[]),
        );
        *statuses.entry(status(&head)).or_insert(0) += 1;
    }
    assert_eq!(canary.hits(), 0, "the private target was reached");
    assert_eq!(
        lab.resolver.count("rebind.allowed.test"),
        250,
        "exactly one lookup per request"
    );
    assert_eq!(statuses.get(&200), Some(&125), "{statuses:?}");
    assert_eq!(statuses.get(&403), Some(&125), "{statuses:?}");
    assert!(public_up.hits() >= 100);
    // Mixed answers: the whole set is refused.
    lab.resolver
        .set("rebind.allowed.test", vec![vec![ip(public(2)), ip(CANARY)]]);
    let resp = raw(
        lab.proxy,
        format!("GET http://rebind.allowed.test:{port}/ HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 403, "{resp}");
    assert_eq!(canary.hits(), 0);
}

#[test]
fn curl_post_with_expect_100_continue_does_not_stall() {
    let http = Upstream::http(public(2));
    let lab = Lab::start(&["post.allowed.test"], &[]);
    lab.resolver.map("post.allowed.test", public(2));
    let body = "x".repeat(4096);
    let started = std::time::Instant::now();
    let (code, out, err) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "-H",
            "Expect: 100-continue",
            "--expect100-timeout",
            "5",
            "--data-binary",
            &body,
            "-x",
            &lab.proxy_url(),
            &format!("http://post.allowed.test:{}/up", http.addr.port()),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("POST /up HTTP/1.1"), "{out}");
    assert!(out.ends_with(&body), "the body arrived whole");
    assert!(
        !out.to_ascii_lowercase().contains("expect:"),
        "Expect is answered by the proxy: {out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "curl waited for 100 Continue: {:?}",
        started.elapsed()
    );
}
