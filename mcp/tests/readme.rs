//! The README's "local mock" recipe, run exactly as written: the shell
//! block between `<!-- local-mock:begin -->` and `<!-- local-mock:end -->`
//! is handed to bash with `openagenda-mcp` and `oajail` first on `PATH`
//! and a fresh `HOME` (the recipe works in `~/oa-mock`); its output must
//! hold the mock's answer with the key swapped in by the jail's proxy.
//!
//! Needs `openssl`, `python3` and the `oajail` binary (as tests/jail.rs);
//! the recipe's port (18443) must be free.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use std::process::Command;
use support::mock::TempDir;

fn recipe() -> String {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("<!-- local-mock:begin -->")
        .expect("the begin marker");
    let end = readme
        .find("<!-- local-mock:end -->")
        .expect("the end marker");
    let block = &readme[start..end];
    let open = block.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let close = block[open..].find("\n```").expect("the block's end") + open;
    block[open..close].to_owned()
}

#[test]
fn the_local_mock_recipe_works_as_written() {
    let Some(oajail) = support::oajail_binary() else {
        return;
    };
    let bin_dir = std::path::Path::new(support::BIN).parent().unwrap();
    assert_eq!(
        oajail.parent(),
        Some(bin_dir),
        "the recipe runs both from one directory"
    );
    let home = TempDir::new("readme-home");
    let out = Command::new("bash")
        .arg("-c")
        .arg(recipe())
        .env_clear()
        .env("HOME", &home.0)
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {}\n{stdout}\n{stderr}",
        out.status
    );
    let answer: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer:\n{stdout}\n{stderr}"));
    assert_eq!(
        answer["result"]["structuredContent"],
        serde_json::json!({"logs": [], "result": {"key": true, "path": "/v3/agendas/1"}}),
        "{stdout}\n{stderr}"
    );
    // The recipe's files are where it says, and nothing runs on.
    assert!(home.0.join("oa-mock/ca.pem").is_file());
}
