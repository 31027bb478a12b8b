//! A writable root holding ANOTHER user's git repository (issue 13, "srt
//! behaviours that break users"): the run starts (no exit 125), `git
//! status` works once the repository is named in `safe.directory` (git's
//! own ownership check, which the jail leaves as it is), and the guard
//! still refuses a hook.
//!
//! As root both directions run: root using a repository of `oajail-test`,
//! and `oajail-test` (through `runuser`) using one of root, each in a
//! writable root and with the repository open to everyone (mode a+rwX), so
//! only the guard can refuse the hook. As the unprivileged user, which
//! cannot make another user's files, the run uses the root-owned checkout
//! of this package (the CI clone, made readable by `.ci/make-test-user`)
//! as its writable root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

const TEST_USER: &str = "oajail-test";

/// `t NAME CMD…`: runs CMD quietly, prints `NAME=ok` or `NAME=fail`.
const T: &str =
    r#"t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=fail"; fi; }"#;

fn is_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// uid and gid of the test user (made by `.ci/make-test-user`).
fn test_user() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let o = Command::new("id").args([flag, TEST_USER]).output().unwrap();
        assert!(
            o.status.success(),
            "user {TEST_USER} missing: run `bash .ci/make-test-user` first"
        );
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

fn chown_tree(path: &Path, (uid, gid): (u32, u32)) {
    let o = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A repository with one commit at `dir`, open to everyone.
fn repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("README.md"), "hello\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main", "."][..],
        &["add", "-A"],
        &["commit", "-qm", "init"],
    ] {
        let o = host_git(dir, args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success());
}

/// In the jail: status with and without `safe.directory`, then a hook.
fn script(repo: &str) -> String {
    format!(
        "{T}
         t dubious git -C {repo} status --porcelain
         t status git -c safe.directory={repo} -C {repo} status --porcelain
         t hook sh -c 'echo x > {repo}/.git/hooks/pre-commit'"
    )
}

fn check(o: &Output, hook: &Path) {
    has(o, "dubious=fail");
    has(o, "status=ok");
    has(o, "hook=fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("oajail: refused write ") && err.contains(".git/hooks/pre-commit ("),
        "{err}"
    );
    assert!(!hook.exists(), "the hook reached the host");
}

#[test]
fn another_users_repository_in_a_writable_root() {
    if is_root() {
        root_uses_the_test_users_repository();
        the_test_user_uses_roots_repository();
    } else {
        unprivileged_uses_the_root_owned_checkout();
    }
}

fn root_uses_the_test_users_repository() {
    let lab = Lab::new("foreign-root");
    let dir = lab.ws.join("theirs");
    repo(&dir);
    chown_tree(&dir, test_user());
    let o = lab.run(
        json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []}),
        &script(&dir.display().to_string()),
    );
    check(&o, &dir.join(".git/hooks/pre-commit"));
}

fn the_test_user_uses_roots_repository() {
    let lab = Lab::new("foreign-user");
    let dir = lab.ws.join("roots");
    repo(&dir);
    let user = test_user();
    // The writable root and home are the user's; the repository is root's.
    for d in [&lab.ws, &lab.home] {
        std::os::unix::fs::chown(d, Some(user.0), Some(user.1)).unwrap();
    }
    let settings = lab.root.join("settings.json");
    std::fs::write(
        &settings,
        json!({
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []},
        })
        .to_string(),
    )
    .unwrap();
    let o = Command::new("runuser")
        .args(["-u", TEST_USER, "--", "env"])
        .arg(format!("HOME={}", lab.home.display()))
        .arg(OAJAIL)
        .arg("-s")
        .arg(&settings)
        .arg("-c")
        .arg(script(&dir.display().to_string()))
        .current_dir(&lab.ws)
        .env_remove("OAJAIL_SETTINGS")
        .output()
        .unwrap();
    check(&o, &dir.join(".git/hooks/pre-commit"));
}

/// The unprivileged pass: this package's checkout, owned by root, as the
/// writable root. git's ownership check applies, `safe.directory` lifts
/// it, and no hook can be written (the user has no write access here, and
/// the guard refuses before the kernel would be asked).
fn unprivileged_uses_the_root_owned_checkout() {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(
        std::fs::metadata(checkout).unwrap().uid(),
        0,
        "the unprivileged pass expects the checkout to belong to root (the CI clone)"
    );
    let lab = Lab::new("foreign-checkout");
    let settings = lab.root.join("settings.json");
    let path = checkout.display().to_string();
    std::fs::write(
        &settings,
        json!({
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": [path], "denyWrite": []},
        })
        .to_string(),
    )
    .unwrap();
    let hooks = format!("$(git -c safe.directory={path} -C {path} rev-parse --git-path hooks)");
    let script = format!(
        "{T}
         t dubious git -C {path} status --porcelain
         t status git -c safe.directory={path} -C {path} status --porcelain
         t hook sh -c \"echo x > {hooks}/pre-commit-oajail-test\""
    );
    let o = lab.command(&settings, &script).output().unwrap();
    has(&o, "dubious=fail");
    has(&o, "status=ok");
    has(&o, "hook=fail");
}
