//! "Say why it failed": under `--jail`, an API request the jail's proxy
//! refused or could not complete gives the script (and so the model) the
//! proxy's own reason, and the server's stderr the same line: a name the
//! proxy cannot resolve, an upstream whose TLS it cannot verify, a request
//! its rules refuse.
//!
//! Needs the `oajail` binary (as tests/jail.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::Command;
use support::Server;
use support::mock::{Mock, TempDir};

fn jailed(base_url: &str, extra: &[(&str, &str)]) -> Option<(Server, TempDir)> {
    let oajail = support::oajail_binary()?;
    let home = TempDir::new("why-home");
    let mut cmd = Command::new(support::BIN);
    cmd.arg("--jail")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home.0)
        .env("OA_OAJAIL", &oajail)
        .env("OA_BASE_URL", base_url)
        .env("OA_API_KEY", "oa_sk_why_test")
        .env("OA_SANDBOX_TIMEOUT_MS", "8000")
        .envs(extra.iter().copied());
    Some((Server::start_command(cmd), home))
}

/// Whether the server's stderr gets `line` within a few seconds (stderr
/// is read by its own thread, after the answer may have arrived).
fn logs(s: &Server, line: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if s.stderr.lock().unwrap().contains(line) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// The `error` of one call, and the server's stderr.
fn error_of(s: &mut Server, call: &str) -> (Value, String) {
    let r = s.execute(&format!("return (await {call}).error"));
    let e = r["structuredContent"]["result"].clone();
    (e, s.stderr.lock().unwrap().clone())
}

#[test]
fn a_name_the_proxy_cannot_resolve() {
    let Some((mut s, _home)) = jailed("https://api.oajail-test.invalid/v3", &[]) else {
        return;
    };
    let (e, log) = error_of(&mut s, "oa.agendas.get({ path: { agendaUid: 1 } })");
    let message = e["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.starts_with("request failed: the jail's proxy answered 502")
            && message.contains("api.oajail-test.invalid"),
        "{e}\n{log}"
    );
    assert!(!message.contains("tunnel error"), "{message}");
    let line = format!("openagenda-mcp: warning: api agendas.get: {message}");
    assert!(logs(&s, &line), "{log}");
}

#[test]
fn an_upstream_the_proxy_cannot_verify() {
    let ip = support::host_ip();
    let mock = Mock::start_on(ip);
    // The mock's CA is not given: the proxy cannot verify it.
    let base = format!("https://{ip}:{}/v3", mock.port);
    let Some((mut s, _home)) = jailed(&base, &[]) else {
        return;
    };
    let (e, log) = error_of(&mut s, "oa.agendas.get({ path: { agendaUid: 1 } })");
    let message = e["message"].as_str().unwrap_or_default().to_owned();
    assert_eq!(e["status"], json!(502), "{e}\n{log}");
    assert!(
        message.starts_with("the jail's proxy answered 502 (upstream-failed)")
            && message.contains("TLS with")
            && message.contains("certificate"),
        "{e}\n{log}"
    );
    let line = format!("openagenda-mcp: warning: api: {message}");
    assert!(logs(&s, &line), "{log}");
    assert!(mock.seen.lock().unwrap().is_empty());
    // Uncaught, it is the execute's error, with the reason.
    let r = s.execute("const r = await oa.agendas.get({ path: { agendaUid: 1 } }); if (r.error) throw new Error(r.error.message); return 1;");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        r["isError"] == json!(true) && text.contains("upstream-failed"),
        "{r}"
    );
}

#[test]
fn a_request_the_proxy_refuses() {
    let ip = support::host_ip();
    let mock = Mock::start_on(ip);
    let base = format!("https://{ip}:{}/v3", mock.port);
    let Some((mut s, _home)) = jailed(
        &base,
        &[("OA_EXTRA_CA_CERTS", mock.ca_path.to_str().unwrap())],
    ) else {
        return;
    };
    // A slash inside a path parameter: the proxy's rules refuse the path.
    let (e, log) = error_of(&mut s, "oa.agendas.get({ path: { agendaUid: 'a/b' } })");
    let message = e["message"].as_str().unwrap_or_default();
    assert_eq!(e["status"], json!(403), "{e}\n{log}");
    assert!(
        message.starts_with("the jail's proxy answered 403 (blocked-by-http-rules)"),
        "{e}"
    );
    assert!(logs(&s, message), "{log}");
}
