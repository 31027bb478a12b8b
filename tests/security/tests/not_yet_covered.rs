//! Attacks the jail does not block yet. They are kept out of the default
//! run (this file compiles only with `--features not-yet-covered`) and are
//! listed in docs/security-tests.md under "Not yet covered"; each one moves
//! to its family file once the jail blocks it. Run them with
//! `cargo test -p oajail-security-tests --features not-yet-covered --test not_yet_covered`.
#![cfg(feature = "not-yet-covered")]
mod common;
use common::*;

#[test]
fn blocks_new_repo_hook_at_depth_6() {
    expect_blocked("B2-new-repo-hook-depth6", HOME_READABLE, |l| {
        argv![
            "write-file",
            "mkdirs",
            l.ws("a/b/c/d/e/f/.git/hooks/pre-commit")
        ]
    });
}

#[test]
fn blocks_nested_claude_agents() {
    expect_blocked("B2-claude-agents-nested", HOME_READABLE, |l| {
        argv!["write-file", "mkdirs", l.ws("sub/.claude/agents/x.md")]
    });
}

#[test]
fn blocks_bashrc_in_workspace() {
    expect_blocked("B2-bashrc-in-workspace", HOME_READABLE, |l| {
        argv!["write-file", "create", l.ws(".bashrc")]
    });
}
