//! print-egress-policy and the boot check of the egress authority.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use openagenda_mcp::egress::Confinement;
use serde_json::{Value, json};
use std::io::Write;
use std::process::Stdio;
use support::command;

fn output(envs: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    command(envs, args).stdin(Stdio::null()).output().unwrap()
}

#[test]
fn srt_policy_allows_only_the_api_host() {
    let out = output(
        &[("OA_BASE_URL", "https://dapi.openagenda.com/v3")],
        &["print-egress-policy", "--format", "srt"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["network"],
        json!({"allowedDomains": ["dapi.openagenda.com"], "deniedDomains": [], "tlsTerminate": {}})
    );
    assert_eq!(v["filesystem"]["denyRead"], json!(["~"]));
    assert_eq!(v["filesystem"]["allowWrite"], json!([]));
    // Exactly the server binary and its worker, by absolute path: no "."
    // (which re-opened all of `~` when a client started the server there).
    let bin = std::fs::canonicalize(support::BIN).unwrap();
    let worker = bin.with_file_name("openagenda-mcp-worker");
    assert_eq!(
        v["filesystem"]["allowRead"],
        json!([bin.display().to_string(), worker.display().to_string()])
    );
}

#[test]
fn json_hash_equals_the_policy_crate_hash_of_the_srt_output() {
    let srt = output(&[], &["print-egress-policy", "--format", "srt"]);
    let json_out = output(&[], &["print-egress-policy", "--format", "json"]);
    assert!(
        json_out.status.success(),
        "{}",
        String::from_utf8_lossy(&json_out.stderr)
    );
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let text = String::from_utf8(srt.stdout.clone()).unwrap();
    // What oajail exports for a settings file: the policy with the built-in
    // secret stores it keeps denied under every settings file.
    let mut loaded = oajail_policy::Policy::from_settings_json(&text, "test").unwrap();
    loaded.policy.deny_builtin_secret_stores();
    let expected = loaded.policy.sha256();
    assert_eq!(v["policySha256"], json!(expected));
    assert_eq!(expected.len(), 64);
    // And what oajail itself says, when there is one.
    if let Some(oajail) = support::oajail_binary() {
        let dir = support::mock::TempDir::new("egress-hash");
        let file = dir.0.join("policy.json");
        std::fs::write(&file, &srt.stdout).unwrap();
        let out = std::process::Command::new(oajail)
            .args(["policy", "hash", "-s"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);
    }
}

#[test]
fn unknown_format_is_refused() {
    let out = output(&[], &["print-egress-policy", "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
}

fn boot(envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = command(envs, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // An immediate EOF: a server that boots exits cleanly at once.
    drop(child.stdin.take().map(|mut s| s.flush()));
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn our_hash() -> String {
    let v: Value =
        serde_json::from_slice(&output(&[], &["print-egress-policy", "--format", "json"]).stdout)
            .unwrap();
    v["policySha256"].as_str().unwrap().to_owned()
}

#[test]
fn wrapper_authority_refuses_a_missing_or_different_hash() {
    let ours = our_hash();
    let (code, err) = boot(&[("OAJAIL", "1")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("OAJAIL_POLICY_SHA256 is not set") && err.contains(&ours),
        "{err}"
    );

    let theirs = "0".repeat(64);
    let (code, err) = boot(&[
        ("OA_CODE_EGRESS_AUTHORITY", "wrapper"),
        ("OAJAIL_POLICY_SHA256", &theirs),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&theirs) && err.contains(&ours),
        "both hashes: {err}"
    );
    assert!(
        err.contains("openagenda-mcp --jail") && err.contains("print-egress-policy"),
        "regenerate command: {err}"
    );
}

#[test]
fn wrapper_authority_checks_real_confinement() {
    let ours = our_hash();
    let (code, err) = boot(&[
        ("OA_CODE_EGRESS_AUTHORITY", "wrapper"),
        ("OAJAIL_POLICY_SHA256", &ours),
    ]);
    let problems = Confinement::read().unwrap().problems();
    if problems.is_empty() {
        assert_eq!(code, Some(0), "confined, so it must boot: {err}");
    } else {
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("not confined"), "{err}");
        assert!(err.contains(&problems[0]), "{err}");
    }
}

#[test]
fn no_authority_boots_with_a_banner() {
    let (code, err) = boot(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("egress is NOT bounded"), "{err}");
    let (code, err) = boot(&[("OA_CODE_EGRESS_AUTHORITY", "sometimes")]);
    assert_eq!(code, Some(2));
    assert!(err.contains("OA_CODE_EGRESS_AUTHORITY"), "{err}");
}
