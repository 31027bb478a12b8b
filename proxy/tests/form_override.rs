//! A POST whose form body carries `_method=delete` is what Rails (Rack::
//! MethodOverride), Laravel and Symfony route as DELETE: `oajail.httpRules`
//! judge it under that method too, through the real proxy, with curl, for
//! plain HTTP (Content-Length, chunked, `Expect: 100-continue`) and inside
//! a terminated TLS tunnel (HTTP/1.1 and HTTP/2). Missing programs fail the
//! test (no skips).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tlslab;

use common::*;
use oajail_policy::l7::{HttpRule, HttpRules, TlsTerminate};
use oajail_proxy::Limits;
use std::process::Command;

/// Rails-style rules: reads and creates are allowed, nothing else, except
/// under `/open/` where any method is.
fn rules(base: &str) -> HttpRules {
    let r = |m: &str, p: &str| HttpRule::parse(&format!("{m} {base}{p}")).unwrap();
    HttpRules {
        allow: vec![
            r("GET", "/events/**"),
            r("POST", "/events/**"),
            r("*", "/open/**"),
        ],
        deny: Vec::new(),
    }
}

/// curl through `proxy`; stdout+stderr.
fn curl(proxy: &str, args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--proxy", proxy])
        .args(args)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn refused(out: &str) -> bool {
    out.contains(" 403") && out.to_ascii_lowercase().contains("blocked-by-http-rules")
}

#[test]
fn plain_http_form_bodies_are_judged_by_their_method_field() {
    let up = Upstream::http(public(4));
    let name = "rails.lab.test";
    let base = format!("http://{name}:{}", up.addr.port());
    let mut egress = plan(&[name], &[]);
    egress.http_rules = rules(&base);
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map(name, public(4));
    let proxy = lab.proxy_url();
    let url = format!("{base}/events/7");
    let delete = "title=x&_method=delete";
    for extra in [
        &["--data", delete][..],
        &["-H", "Transfer-Encoding: chunked", "--data", delete],
        &["-H", "Expect: 100-continue", "--data", delete],
        &["-F", "title=x", "-F", "_method=DELETE"],
    ] {
        let out = curl(&proxy, &[extra, &[url.as_str()]].concat());
        assert!(refused(&out), "{extra:?}: {out}");
        assert!(
            out.contains("the form body's _method asks for DELETE"),
            "{out}"
        );
    }
    assert_eq!(up.hits(), 0, "no refused request went upstream");
    // The same field naming an allowed method, a JSON body, and a route
    // where every method is allowed go through with their bodies intact.
    let out = curl(&proxy, &["--data", "_method=post&title=x", &url]);
    assert!(
        out.contains(" 200") && out.contains("_method=post&title=x"),
        "{out}"
    );
    let json = r#"{"_method":"delete"}"#;
    let out = curl(
        &proxy,
        &["-H", "Content-Type: application/json", "--data", json, &url],
    );
    assert!(out.contains(" 200") && out.contains(json), "{out}");
    let chunked = [
        "-H",
        "Transfer-Encoding: chunked",
        "--data",
        "a=1&_method=get",
        &url,
    ];
    let out = curl(&proxy, &chunked);
    assert!(
        out.contains(" 200") && out.contains("a=1&_method=get"),
        "{out}"
    );
    let open = format!("{base}/open/x");
    let out = curl(&proxy, &["--data", delete, &open]);
    assert!(out.contains(" 200"), "{out}");
    assert_eq!(up.hits(), 4);
}

#[test]
fn a_form_body_over_the_limit_is_refused_where_an_override_could_be() {
    let up = Upstream::http(public(5));
    let name = "big.lab.test";
    let base = format!("http://{name}:{}", up.addr.port());
    let mut egress = plan(&[name], &[]);
    egress.http_rules = rules(&base);
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map(name, public(5));
    let proxy = lab.proxy_url();
    let dir = std::env::temp_dir().join(format!("oajail-form-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.form");
    std::fs::write(&big, format!("pad={}&_method=post", "a".repeat(70_000))).unwrap();
    let data = format!("@{}", big.display());
    let out = curl(
        &proxy,
        &["--data-binary", &data, &format!("{base}/events/1")],
    );
    assert!(refused(&out), "{out}");
    assert!(
        out.contains("is over the 65536 bytes the proxy reads to find a _method override"),
        "{out}"
    );
    let chunked = ["-H", "Transfer-Encoding: chunked", "--data-binary", &data];
    let out = curl(
        &proxy,
        &[&chunked[..], &[&format!("{base}/events/1")]].concat(),
    );
    assert!(refused(&out), "{out}");
    assert_eq!(up.hits(), 0);
    // Where no override can be refused, the body is not read at all.
    let out = curl(
        &proxy,
        &["--data-binary", &data, &format!("{base}/open/up")],
    );
    assert!(out.contains(" 200"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn terminated_tls_form_bodies_are_judged_by_their_method_field() {
    const NAME: &str = "tls-rails.lab.test";
    let dir = std::env::temp_dir().join(format!("oajail-form-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let up = tlslab::start(public(6), NAME, &dir, None);
    let base = format!("https://{NAME}:{}", up.addr.port());
    let mut egress = plan(&[NAME], &[]);
    egress.http_rules = rules(&base);
    egress.tls_terminate = Some(TlsTerminate {
        ca_cert_path: None,
        ca_key_path: None,
        exclude_domains: Vec::new(),
        extra_ca_cert_paths: vec![up.ca_path.display().to_string()],
        max_tunnels: 64,
        handshake_timeout_ms: 5000,
    });
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map(NAME, public(6));
    let ca = dir.join("proxy-ca.pem");
    std::fs::write(&ca, lab.ca_pem().unwrap()).unwrap();
    let ca = ca.display().to_string();
    let proxy = lab.proxy_url();
    let url = format!("{base}/events/7");
    for version in ["--http1.1", "--http2"] {
        let with = |extra: &[&str]| {
            let head = [version, "--cacert", ca.as_str()];
            curl(&proxy, &[&head[..], extra, &[url.as_str()]].concat())
        };
        let out = with(&["--data", "title=x&_method=delete"]);
        assert!(refused(&out), "{out}");
        assert!(
            out.contains("the form body's _method asks for DELETE"),
            "{out}"
        );
        let out = with(&["-F", "_method=patch"]);
        assert!(out.contains("asks for PATCH"), "{out}");
        let out = with(&["--data", "_method=post&title=xy"]);
        assert!(out.contains(" 200") && out.contains("body=21"), "{out}");
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 2, "only the allowed requests: {seen:?}");
    assert!(
        seen.iter().all(|l| l.starts_with("POST /events/7")),
        "{seen:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
