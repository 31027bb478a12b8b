//! Family B, what git and Claude Code run on the host after the jail
//! exits, reached by making names and links: a git directory made next to
//! a corrupted `.git` (an implicit bare repository with `core.fsmonitor`),
//! hooks under `core.hooksPath`, the real git directory behind a `.git`
//! file, a symlink swapped between a safe directory and `.git/hooks` while
//! another thread writes through it, `.git/config` and `.git/hooks`
//! reached through the `/proc/self/fd` magic link of an `O_PATH`
//! descriptor, and `.claude` made a symlink by rename or `link()`. Where
//! git would run a planted command, the user's own `git status` runs on
//! the host after the jail and must leave no marker.
mod common;
use common::*;
use oajail_security::judge::assert_blocked_host_clean;
use oajail_security::plant;

/// Make `dir` a git directory next to a corrupted `.git/HEAD`, then run the
/// user's `git status` there on the host.
fn implicit_git_dir(id: &str, order: &str, sub: &str) {
    let mut lab = Lab::new(id);
    plant::valid_repo(&lab);
    let dir = lab.ws(sub);
    let argv = [
        "implicit-git-dir".to_owned(),
        order.to_owned(),
        lab.ws(".git/HEAD"),
        dir.clone(),
        plant::marker(&lab),
    ];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(HOME_READABLE, &argv, &RunOptions::default());
    let mut host = plant::host_git_status(&lab, &dir);
    if !sub.is_empty() {
        host.extend(plant::host_git_status(&lab, &lab.ws("")));
    }
    assert_blocked_host_clean(&mut lab, id, &run, &host);
}

#[test]
fn blocks_implicit_git_dir_at_the_root() {
    implicit_git_dir("B2-implicit-git-dir-root", "head-first", "");
}

#[test]
fn blocks_implicit_git_dir_in_a_subdirectory() {
    implicit_git_dir("B2-implicit-git-dir-subdir", "head-last", "pkg/sub");
}

#[test]
fn blocks_husky_hook_under_hooks_path() {
    let id = "B2-hookspath-husky";
    let mut lab = Lab::new(id);
    plant::hooks_path(&lab, ".husky/_");
    let hook = lab.ws(".husky/_/pre-commit");
    let run = lab.jailed(
        HOME_READABLE,
        &["write-file", "append", &hook],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_new_hook_under_a_custom_hooks_path() {
    let id = "B2-hookspath-custom";
    let mut lab = Lab::new(id);
    plant::hooks_path(&lab, "tools/githooks");
    let hook = lab.ws("tools/githooks/post-checkout");
    let run = lab.jailed(
        HOME_READABLE,
        &["write-file", "create", &hook],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_hook_in_a_separate_git_dir() {
    let id = "B2-separate-gitdir-hook";
    let mut lab = Lab::new(id);
    let git_dir = plant::separate_git_dir(&lab);
    let hook = format!("{git_dir}/hooks/post-checkout");
    let run = lab.jailed(
        HOME_READABLE,
        &["write-file", "create", &hook],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_fsmonitor_in_a_separate_git_dir_config() {
    let id = "B2-separate-gitdir-config";
    let mut lab = Lab::new(id);
    let git_dir = plant::separate_git_dir(&lab);
    let config = format!("{git_dir}/config");
    let text = plant::fsmonitor_config(&lab);
    let run = lab.jailed(
        HOME_READABLE,
        &["append-text", &config, &text],
        &RunOptions::default(),
    );
    let host = plant::host_git_status(&lab, &lab.ws("wt"));
    assert_blocked_host_clean(&mut lab, id, &run, &host);
}

#[test]
fn blocks_racing_symlink_into_git_hooks() {
    let id = "B3-race-link-hook";
    let mut lab = Lab::new(id);
    std::fs::create_dir_all(lab.ws("safe")).expect("mkdir ws/safe");
    let argv = [
        "race-link-hook".to_owned(),
        lab.ws("safe"),
        lab.ws(".git/hooks"),
        lab.ws("link"),
        "3000".to_owned(),
    ];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(HOME_READABLE, &argv, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}

// `/proc/self/fd` magic links of `O_PATH` descriptors: pid 1 decides on
// the object they lead to.

#[test]
fn blocks_reopen_of_an_o_path_descriptor_for_writing() {
    expect_blocked("B3-proc-fd-opath-reopen", HOME_READABLE, |l| {
        argv!["opath-reopen", l.ws(".git/config")]
    });
}

#[test]
fn blocks_hook_created_through_a_directory_magic_link() {
    expect_blocked("B3-proc-fd-hook-create", HOME_READABLE, |l| {
        argv!["opath-dir-create", l.ws(".git/hooks"), "pre-commit"]
    });
}

// `.claude` turned into a symlink to a directory the command fills: a
// rename or a link is judged by what the source is.

fn evil_dir(lab: &Lab) {
    plant::evil_beside_pkg(lab);
}

#[test]
fn blocks_symlink_renamed_onto_claude() {
    blocked_after("B3-claude-symlink-rename", evil_dir, |l| {
        argv![
            "symlink-rename",
            "../.evil",
            l.ws("pkg/t"),
            l.ws("pkg/.claude")
        ]
    });
}

#[test]
fn blocks_hard_link_of_a_symlink_onto_claude() {
    blocked_after("B3-claude-link-of-symlink", evil_dir, |l| {
        argv![
            "link-symlink",
            "../.evil",
            l.ws("pkg/t"),
            l.ws("pkg/.claude")
        ]
    });
}

/// Run `args` after `setup` prepared the lab; require a block.
fn blocked_after(id: &str, setup: fn(&Lab), args: impl FnOnce(&Lab) -> Vec<String>) {
    let mut lab = Lab::new(id);
    setup(&lab);
    let argv = args(&lab);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(HOME_READABLE, &argv, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}
