//! The HTTP transport against independent MCP clients: the official Python
//! SDK (a bearer header in both eras, and its own OAuth discovery flow
//! from the 401 to a client-credentials token) and the MCP Inspector v2
//! CLI with `--header`. Like tests/clients.rs they fail, never skip, when
//! a client is missing (`OA_MCP_PYTHON`, `OA_MCP_INSPECTOR`; .ci/install-deps).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use std::process::Command;
use support::authz::{Authz, Discovery};
use support::http::{HttpServer, env_for, resource};
use support::mock::Mock;

fn script(name: &str) -> String {
    format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run_checked(mut cmd: Command, what: &str, server: &HttpServer) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} could not start ({e}); install it as docs/mcp.md says"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && (stdout.contains("\"ok\": true") || stdout.contains("\"ok\":true")),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}\nserver:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

fn python() -> String {
    std::env::var("OA_MCP_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn with_token(mode: &str) {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = HttpServer::start(|port| env_for(&authz, &mock, port), &[]);
    let token = authz.token_for("alice", &resource(s.port));
    let mut cmd = Command::new(python());
    cmd.arg(script("python_http_client.py"))
        .args([mode, &s.url(), &token]);
    run_checked(cmd, &format!("python MCP SDK over HTTP ({mode})"), &s);
    assert!(s.log().contains("\"sub\":\"alice\""), "{}", s.log());
}

#[test]
fn python_sdk_modern_era_over_http() {
    with_token("auto");
}

#[test]
fn python_sdk_legacy_era_over_http() {
    with_token("legacy");
}

#[test]
fn python_sdk_discovers_the_issuer_from_the_401() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = HttpServer::start(|port| env_for(&authz, &mock, port), &[]);
    let mut cmd = Command::new(python());
    cmd.arg(script("python_http_client.py")).args([
        "discover",
        &s.url(),
        &authz.issuer(),
        "alice-app",
        "cc-secret",
    ]);
    run_checked(cmd, "python MCP SDK OAuth discovery", &s);
    assert!(
        authz
            .state
            .cc_tokens
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1,
        "the client got its token from the issuer"
    );
    assert!(s.log().contains("\"sub\":\"alice-app\""), "{}", s.log());
}

#[test]
fn mcp_inspector_cli_over_http() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = HttpServer::start(|port| env_for(&authz, &mock, port), &[]);
    let token = authz.token_for("carol", &resource(s.port));
    let inspector = std::env::var("OA_MCP_INSPECTOR").unwrap_or_else(|_| "mcp-inspector".into());
    let mut cmd = Command::new("node");
    cmd.arg(script("inspector_http_client.mjs"))
        .args([&inspector, &s.url(), &token]);
    run_checked(
        cmd,
        &format!("MCP Inspector CLI over HTTP ({inspector})"),
        &s,
    );
    assert!(s.log().contains("\"sub\":\"carol\""));
}
