//! The server against independent MCP clients: the official Python SDK and
//! the MCP Inspector v2 CLI, each talking to the real binary over stdio with
//! the TLS mock behind it.
//!
//! The clients are installed by `.ci/run` (see docs/mcp.md); these tests
//! fail — they do not skip — when a client is missing. Locations:
//! - `OA_MCP_PYTHON`: a Python with `mcp` installed (default `python3`);
//! - `OA_MCP_INSPECTOR`: the `mcp-inspector` binary (default from PATH),
//!   with Node 22 first on PATH.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use std::process::Command;
use support::mock::Mock;

fn client_env(cmd: &mut Command, mock: &Mock) {
    cmd.env("OA_BASE_URL", mock.base_url())
        .env("OA_EXTRA_CA_CERTS", &mock.ca_path)
        .env("OA_API_KEY", "oa_sk_clients_test")
        .env("OA_CODE_EGRESS_AUTHORITY", "none")
        .env("OA_SANDBOX_TIMEOUT_MS", "1000")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
}

fn script(name: &str) -> String {
    format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run_checked(mut cmd: Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} could not start ({e}); install it as docs/mcp.md says"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"ok\": true")
            || String::from_utf8_lossy(&out.stdout).contains("\"ok\":true")
    );
}

fn python_mode(mode: &str) {
    let mock = Mock::start();
    let python = std::env::var("OA_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(&python);
    cmd.arg(script("python_client.py"))
        .arg(mode)
        .arg(support::BIN);
    client_env(&mut cmd, &mock);
    run_checked(
        cmd,
        &format!("python MCP SDK client ({python}, mode {mode})"),
    );
}

#[test]
fn python_sdk_modern_era() {
    python_mode("auto");
}

#[test]
fn python_sdk_legacy_era() {
    python_mode("legacy");
}

#[test]
fn mcp_inspector_cli() {
    let mock = Mock::start();
    let inspector = std::env::var("OA_MCP_INSPECTOR").unwrap_or_else(|_| "mcp-inspector".into());
    let mut cmd = Command::new("node");
    cmd.arg(script("inspector_client.mjs"))
        .arg(&inspector)
        .arg(support::BIN);
    client_env(&mut cmd, &mock);
    run_checked(cmd, &format!("MCP Inspector CLI ({inspector})"));
}
