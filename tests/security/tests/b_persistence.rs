//! Family B: persistence and integrity (dotfiles, in-workspace hooks and
//! editor/agent config at any depth, rename tricks, self-modification,
//! metadata, daemons). The global post-condition also checks that the fake
//! home is byte-for-byte unchanged after every run.
mod common;
use common::*;

fn write(id: &str, mode: &'static str, path: impl FnOnce(&Lab) -> String) {
    expect_blocked(id, HOME_READABLE, |l| argv!["write-file", mode, path(l)]);
}

#[test]
fn blocks_bashrc_append() {
    write("B1-bashrc-append", "append", |l| l.home(".bashrc"));
}

#[test]
fn blocks_profile_truncate() {
    write("B1-profile-truncate", "truncate", |l| l.home(".profile"));
}

#[test]
fn blocks_authorized_keys_create() {
    write("B1-authorized-keys", "create", |l| {
        l.home(".ssh/authorized_keys2")
    });
}

#[test]
fn blocks_systemd_user_unit() {
    write("B1-systemd-user-unit", "mkdirs", |l| {
        l.home(".config/systemd/user/evil.service")
    });
}

#[test]
fn blocks_autostart_entry() {
    write("B1-autostart", "mkdirs", |l| {
        l.home(".config/autostart/evil.desktop")
    });
}

#[test]
fn blocks_path_shim() {
    write("B1-path-shim", "create", |l| l.home(".local/bin/git"));
}

#[test]
fn blocks_rename_over_bashrc() {
    expect_blocked("B1-rename-over-bashrc", HOME_READABLE, |l| {
        argv!["rename-over", l.ws("staging"), l.home(".bashrc")]
    });
}

#[test]
fn blocks_gitconfig_append() {
    write("B1-gitconfig", "append", |l| l.home(".gitconfig"));
}

#[test]
fn blocks_git_hook() {
    write("B2-git-hook", "create", |l| l.ws(".git/hooks/pre-commit"));
}

#[test]
fn blocks_git_config() {
    write("B2-git-config", "append", |l| l.ws(".git/config"));
}

#[test]
fn blocks_nested_repo_hook() {
    write("B2-nested-repo-hook", "mkdirs", |l| {
        l.ws("vendor/lib/.git/hooks/post-checkout")
    });
}

#[test]
fn blocks_vscode_settings_truncate() {
    write("B2-vscode-settings", "truncate", |l| {
        l.ws(".vscode/settings.json")
    });
}

#[test]
fn blocks_vscode_tasks_create() {
    write("B2-vscode-tasks-new", "create", |l| {
        l.ws(".vscode/tasks.json")
    });
}

#[test]
fn blocks_idea_create() {
    write("B2-idea-new", "mkdirs", |l| l.ws(".idea/workspace.xml"));
}

#[test]
fn blocks_mcp_json() {
    write("B2-mcp-json", "create", |l| l.ws(".mcp.json"));
}

#[test]
fn blocks_claude_commands() {
    write("B2-claude-commands", "mkdirs", |l| {
        l.ws(".claude/commands/x.md")
    });
}

#[test]
fn blocks_gitmodules() {
    write("B2-gitmodules", "create", |l| l.ws(".gitmodules"));
}

// Names created during the run: the create-guard (pid 1 decides and
// performs every name-creating call of the command).

#[test]
fn blocks_new_repo_hook_at_depth_6() {
    write("B2-new-repo-hook-depth6", "mkdirs", |l| {
        l.ws("a/b/c/d/e/f/.git/hooks/pre-commit")
    });
}

#[test]
fn blocks_nested_claude_agents() {
    write("B2-claude-agents-nested", "mkdirs", |l| {
        l.ws("sub/.claude/agents/x.md")
    });
}

#[test]
fn blocks_bashrc_in_workspace() {
    write("B2-bashrc-in-workspace", "create", |l| l.ws(".bashrc"));
}

#[test]
fn blocks_git_file_in_new_repo() {
    write("B2-git-file-new", "mkdirs", |l| l.ws("r1/.git"));
}

#[test]
fn blocks_git_symlink() {
    expect_blocked("B2-git-symlink", HOME_READABLE, |l| {
        argv!["symlink-read", l.ws("tmp"), l.ws("src/.git")]
    });
}

#[test]
fn blocks_git_commondir() {
    write("B2-git-commondir", "mkdirs", |l| l.ws("r3/.git/commondir"));
}

#[test]
fn blocks_directory_renamed_onto_git() {
    expect_blocked("B2-rename-dir-onto-git", HOME_READABLE, |l| {
        argv!["rename-away", l.ws("tmp"), l.ws("src/.git")]
    });
}

#[test]
fn blocks_rename_of_git_dir() {
    expect_blocked("B3-rename-git-dir", HOME_READABLE, |l| {
        argv!["rename-away", l.ws(".git"), l.ws("git-old")]
    });
}

#[test]
fn blocks_rename_of_vscode_dir() {
    expect_blocked("B3-rename-vscode", HOME_READABLE, |l| {
        argv!["rename-away", l.ws(".vscode"), l.ws("vs")]
    });
}

#[test]
fn blocks_symlink_parent_swap() {
    expect_blocked("B3-symlink-parent", HOME_READABLE, |l| {
        argv!["symlink-parent", l.ws(".vscode"), l.ws("tmp"), "tasks.json"]
    });
}

#[test]
fn blocks_unlink_and_recreate_hook() {
    expect_blocked("B3-unlink-recreate-hook", HOME_READABLE, |l| {
        argv!["unlink-recreate", l.ws(".git/hooks/post-merge")]
    });
}

#[test]
fn blocks_policy_file_write() {
    expect_blocked("B4-policy-file", HOME_READABLE, |l| {
        argv!["open-write", l.path("policy.json")]
    });
}

#[test]
fn blocks_proc1_exe_write() {
    expect_blocked("B4-proc1-exe", HOME_READABLE, |_| {
        argv!["open-write", "/proc/1/exe"]
    });
}

#[test]
fn blocks_oajail_binary_write() {
    expect_blocked("B4-oajail-binary", HOME_READABLE, |l| {
        argv!["open-write", l.tools.oajail.display()]
    });
}

#[test]
fn blocks_chmod_outside_roots() {
    expect_blocked("B6-chmod", HOME_READABLE, |l| {
        argv!["metadata", "chmod", l.home(".bashrc")]
    });
}

#[test]
fn blocks_utime_outside_roots() {
    expect_blocked("B6-utime", HOME_READABLE, |l| {
        argv!["metadata", "utime", l.home(".bashrc")]
    });
}

#[test]
fn blocks_truncate_outside_roots() {
    expect_blocked("B6-truncate", HOME_READABLE, |l| {
        argv!["metadata", "truncate", l.home(".bashrc")]
    });
}

#[test]
fn blocks_daemon_outliving_the_jail() {
    let mut lab = Lab::new("B7-daemonize");
    let marker = format!("oajail-daemon-{}", lab.token);
    let opts = RunOptions {
        daemon_marker: Some(marker.clone()),
        ..RunOptions::default()
    };
    let run = lab.jailed(HOME_READABLE, &["daemonize", &marker], &opts);
    assert_contained(&mut lab, "B7-daemonize", &run);
}

/// B5: a checkout left `ws/sub/.git` as a link to `ws/elsewhere`, a git
/// directory (HEAD, objects) the command may write. Its hooks are a git
/// directory's hooks wherever it lives: the write through the link, and
/// the write to the real path, are refused.
#[test]
fn blocks_hook_through_git_link() {
    let id = "B5-git-link-hooks";
    let mut lab = Lab::new(id);
    let elsewhere = lab.ws("elsewhere");
    for d in ["objects", "refs", "hooks"] {
        std::fs::create_dir_all(format!("{elsewhere}/{d}")).expect("mkdir ws/elsewhere");
    }
    std::fs::write(format!("{elsewhere}/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    std::fs::create_dir_all(lab.ws("sub")).expect("mkdir ws/sub");
    std::os::unix::fs::symlink("../elsewhere", lab.ws("sub/.git")).expect("plant ws/sub/.git");
    let hook = lab.ws("sub/.git/hooks/pre-commit");
    let run = lab.jailed(
        HOME_READABLE,
        &["write-file", "create", &hook],
        &RunOptions::default(),
    );
    oajail_security::judge::assert_blocked_or_refused(&mut lab, id, &run);
}

/// B5: an earlier run left `ws/decisions.jsonl -> ~/.bashrc`; the caller
/// then points `--log-json` at it. oajail must not append its decision
/// log to `~/.bashrc` (it may refuse to start instead). The global
/// post-condition compares the fake home byte for byte.
#[test]
fn blocks_log_json_through_planted_symlink() {
    let id = "B5-log-json-symlink";
    let mut lab = Lab::new(id);
    let log = lab.ws("decisions.jsonl");
    plant_symlink(&lab, &lab.home(".bashrc"), &log);
    let opts = RunOptions {
        oajail_args: vec!["--log-json".into(), log.clone()],
        ..RunOptions::default()
    };
    // A denied request, so the proxy has a decision to log.
    let run = lab.jailed(
        "attack-proxy.json",
        &["proxy-get", "http://evil.test/", "-"],
        &opts,
    );
    oajail_security::judge::assert_blocked_or_refused(&mut lab, id, &run);
}

/// B8: `allowWrite: ["./out*"]`. srt skips allowWrite globs on Linux, so
/// nothing matching it is writable there; oajail must not grant more (it
/// ignores the glob with a warning). `out1` exists in the workspace and a
/// write into it must fail.
#[test]
fn blocks_writes_granted_only_by_an_allow_write_glob() {
    let id = "B8-allow-write-glob";
    let mut lab = Lab::new(id);
    std::fs::create_dir(lab.ws("out1")).expect("mkdir out1");
    let fixture = "attack-allow-write-glob.json";
    let target = lab.ws("out1/planted");
    let run = lab.jailed(
        fixture,
        &["write-file", "create", &target],
        &RunOptions::default(),
    );
    assert!(
        run.stderr
            .contains("allowWrite: out*: globs grant no write"),
        "no warning for the ignored glob: {}",
        run.stderr
    );
    assert_blocked(&mut lab, id, &run);
}

/// B8: with TLS termination on, the command tries to add its own CA to the
/// jail's trust bundle (every CA variable names it). The bundle must be
/// there first, so that a refusal is the read-only mount, not a missing
/// file.
#[test]
fn blocks_trust_bundle_tamper() {
    let id = "B8-trust-bundle-tamper";
    let fixture = "attack-tls-terminate.json";
    let bundle = "/tmp/.oajail-trust/ca-bundle.pem";
    let mut lab = Lab::new(id);
    let opts = RunOptions::default();
    let check = format!("test -s {bundle} && [ \"$SSL_CERT_FILE\" = {bundle} ] && echo present");
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        lab.policy(fixture),
        "-c".into(),
        check,
    ];
    let pre = lab.run(argv, &opts);
    assert_eq!(pre.stdout.trim(), "present", "{}", pre.stderr);
    let run = lab.jailed(fixture, &["write-file", "append", bundle], &opts);
    assert_blocked(&mut lab, id, &run);
}
