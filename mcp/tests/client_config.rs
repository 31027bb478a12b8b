//! The documented one-entry setup (`docs/mcp.md`, "MCP client entry"),
//! launched exactly as MCP clients launch servers: the Python SDK's
//! `stdio_client`, no shell, a minimal environment, the working directory
//! `$HOME` and then `/`. The entry is `openagenda-mcp --jail`, which runs
//! itself under the oajail found beside it with its own policy; the API
//! calls reach the TLS mock only through the jail's proxy.
//!
//! Needs `oajail` beside the server binary (a workspace build) or
//! `OA_MCP_OAJAIL`, and the Python SDK (`OA_MCP_PYTHON`, default `python3`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::mock::{Mock, TempDir};

fn oajail_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("OA_MCP_OAJAIL") {
        return p.into();
    }
    let sibling = Path::new(support::BIN).parent().unwrap().join("oajail");
    assert!(
        sibling.is_file(),
        "no oajail beside {}: build the workspace or set OA_MCP_OAJAIL",
        support::BIN
    );
    sibling
}

#[test]
fn the_documented_entry_works_from_home_and_from_root() {
    let oajail = oajail_binary();
    let ip = support::host_ip();
    let mock = Mock::start_on(ip);
    let base = format!("https://{ip}:{}/v3", mock.port);
    // The jail has a private /tmp: the CA bundle lives under /var/tmp.
    let dir = TempDir::new_in(&[PathBuf::from("/var/tmp")], "client-config");
    let ca = dir.0.join("ca.pem");
    std::fs::copy(&mock.ca_path, &ca).unwrap();
    let mut env = json!({
        "OA_API_KEY": "oa_sk_client_config",
        "OA_BASE_URL": base,
        "OA_EXTRA_CA_CERTS": ca,
    });
    if oajail != Path::new(support::BIN).parent().unwrap().join("oajail") {
        env["OA_OAJAIL"] = json!(oajail);
    }
    let config = json!({"mcpServers": {"openagenda": {
        "command": support::BIN,
        "args": ["--jail"],
        "env": env,
    }}});
    let config_path = dir.0.join("mcp.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
    let python = std::env::var("OA_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "{}/tests/clients/client_config.py",
        env!("CARGO_MANIFEST_DIR")
    );
    for cwd in [home.as_str(), "/"] {
        let out = Command::new(&python)
            .arg(&script)
            .arg(&config_path)
            .arg("openagenda")
            .arg(cwd)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("python ({python}) could not start: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "cwd {cwd}: {}\nstdout: {}\nstderr: {stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        let line: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(line["ok"], json!(true));
        // The policy never re-opens the home directory, whatever the cwd.
        assert!(!stderr.contains("re-opens"), "{stderr}");
    }
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one API call per launch");
    support::assert_real_key(&seen, "oa_sk_client_config");
}

#[test]
fn the_policy_and_its_hash_are_the_same_from_every_directory() {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
    let print = |cwd: &str| -> Value {
        let out = support::command(&[], &["print-egress-policy", "--format", "json"])
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_home = print(&home);
    assert_eq!(from_home, print("/"));
    let allow = from_home["filesystem"]["allowRead"].as_array().unwrap();
    assert!(!allow.is_empty());
    for entry in allow {
        let p = entry.as_str().unwrap();
        assert!(
            p.starts_with('/') && Path::new(p).is_file(),
            "{p} is not an absolute file"
        );
    }
}

#[test]
fn jail_without_an_oajail_names_the_fix() {
    let out = support::command(&[("OA_OAJAIL", "relative/oajail")], &["--jail"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OA_OAJAIL must be an absolute path"), "{err}");
}

#[test]
fn jail_keeps_a_relative_openapi_file_working() {
    let _ = oajail_binary();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
    let mut cmd = support::command(
        &[("HOME", &home)],
        &["--jail", "--openapi", "petstore.yaml"],
    );
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"));
    let mut s = support::Server::start_command(cmd);
    let r = s.tool("search_docs", json!({"query": "list pets"}));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("listPets"),
        "{r}"
    );
}
