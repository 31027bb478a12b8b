//! What a test puts in the lab before an attack on the guard, and what it
//! checks on the host afterwards: repositories as git makes them (a
//! `core.hooksPath`, a separate git directory behind a `.git` file), a
//! protected file deep in `node_modules`, and the user's own `git status`
//! run after the jail exited, with a marker file that any command planted
//! for git to run leaves behind.
//!
//! Setup failures panic: an attack whose stage could not be set proves
//! nothing and must not be recorded.

use crate::lab::Lab;
use std::fs;
use std::path::Path;
use std::process::Command;

/// A protected name at depth 9 inside nested `node_modules`.
pub const DEEP_BASHRC: &str = "node_modules/a/node_modules/b/lib/c/d/e/.bashrc";

fn file(path: &str, text: &str) {
    if let Some(dir) = Path::new(path).parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("plant: mkdir {}: {e}", dir.display()));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("plant: write {path}: {e}"));
}

fn dir(path: &str) {
    fs::create_dir_all(path).unwrap_or_else(|e| panic!("plant: mkdir {path}: {e}"));
}

/// Make the workspace's `.git` one that git accepts (the lab's has only
/// `HEAD` and `config`): `objects/` and `refs/heads/`.
pub fn valid_repo(lab: &Lab) {
    dir(&lab.ws(".git/objects"));
    dir(&lab.ws(".git/refs/heads"));
}

/// Point the workspace repository's `core.hooksPath` at `hooks` (relative
/// to the worktree) and put the user's own `pre-commit` there.
pub fn hooks_path(lab: &Lab, hooks: &str) {
    valid_repo(lab);
    let config = lab.ws(".git/config");
    let mut text = fs::read_to_string(&config).unwrap_or_default();
    text.push_str(&format!("\thooksPath = {hooks}\n"));
    file(&config, &text);
    file(
        &lab.ws(&format!("{hooks}/pre-commit")),
        "#!/bin/sh\n# the user's own hook\nexit 0\n",
    );
}

/// `git init --separate-git-dir ws/store/repo.git ws/wt`, by the host's
/// git: `ws/wt/.git` is a `gitdir:` file naming the real git directory.
/// Returns the git directory's path.
pub fn separate_git_dir(lab: &Lab) -> String {
    let git_dir = lab.ws("store/repo.git");
    dir(&lab.ws("store"));
    let out = host_git(lab, &lab.ws(""))
        .args(["init", "-q", "--separate-git-dir", &git_dir, &lab.ws("wt")])
        .output()
        .unwrap_or_else(|e| panic!("plant: run git init: {e}"));
    assert!(out.status.success(), "plant: git init: {out:?}");
    dir(&format!("{git_dir}/hooks"));
    git_dir
}

/// `ws/.evil/` (where the command would put Claude Code settings with
/// hooks) beside `ws/pkg/`, whose `.claude` it then tries to point there.
pub fn evil_beside_pkg(lab: &Lab) {
    dir(&lab.ws(".evil"));
    dir(&lab.ws("pkg"));
}

/// The protected file at [`DEEP_BASHRC`], with the user's content.
pub fn deep_bashrc(lab: &Lab) -> String {
    let path = lab.ws(DEEP_BASHRC);
    file(&path, "# a package's own .bashrc\n");
    file(
        &lab.ws("node_modules/a/node_modules/b/lib/index.js"),
        "//\n",
    );
    path
}

/// Where a command planted for the host's git leaves its mark.
pub fn marker(lab: &Lab) -> String {
    lab.path("host-ran")
}

/// The host's git as the lab's user would run it: the lab's home, no
/// system configuration, discovery stopped at the lab directory.
fn host_git(lab: &Lab, cwd: &str) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", lab.path("home"))
        .env("LANG", "C.UTF-8")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CEILING_DIRECTORIES", &lab.dir);
    cmd
}

/// The user's next `git status` in `dir` (a shell prompt is enough), on
/// the host, after the jail exited. Returns what it ran that the jail
/// planted: empty when the [`marker`] is still absent. A marker found is
/// removed, so the next check stands on its own.
pub fn host_git_status(lab: &Lab, dir: &str) -> Vec<String> {
    host_git(lab, dir)
        .arg("status")
        .output()
        .unwrap_or_else(|e| panic!("host check: run git status: {e}"));
    let ran = fs::remove_file(marker(lab)).is_ok();
    ran.then(|| format!("the user's `git status` in {dir} ran the planted command"))
        .into_iter()
        .collect()
}

/// The fsmonitor configuration a jailed command would plant: git runs
/// `touch MARKER` on the next `git status`.
pub fn fsmonitor_config(lab: &Lab) -> String {
    format!("[core]\n\tfsmonitor = \"touch {}\"\n", marker(lab))
}
