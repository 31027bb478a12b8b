//! Real git in a real repository, through the real binary: the workflow a
//! developer runs in a writable project works (and host and jail agree on
//! the result), and what git itself would later execute on the host cannot
//! be planted — hooks, `core.fsmonitor` through an implicit git directory,
//! hooks under `core.hooksPath`, a separate git directory behind a `.git`
//! file. Each escape is also checked from the host: the user's own
//! `git status`/`git commit` after the run must not run anything planted.
//! Runs as root and as an unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use std::process::Command;

/// A repository with one commit, made on the host.
fn repo(lab: &Lab) {
    for args in [
        &["init", "-q", "-b", "main", "."][..],
        &["config", "core.hooksPath", ".git/hooks"],
    ] {
        assert!(host_git(&lab.ws, args).status.success());
    }
    lab.file("ws/README.md", "hello\n");
    lab.file("ws/src/lib.rs", "pub fn f() {}\n");
    assert!(host_git(&lab.ws, &["add", "-A"]).status.success());
    assert!(
        host_git(&lab.ws, &["commit", "-qm", "init"])
            .status
            .success()
    );
}

#[test]
fn the_repository_workflow_works_and_host_and_jail_agree() {
    let lab = Lab::new("repo-flow");
    repo(&lab);
    let script = format!(
        "{T}echo changed >> README.md; echo new > new.txt; mkdir -p a/b; echo deep > a/b/c.txt
         t add G add -A
         t commit G commit -qm second
         t branch G switch -q -c topic
         echo t > topic.txt; t commit2 G add topic.txt; t commit3 G commit -qm topic
         t switch G switch -q main
         t merge G merge -q --no-edit topic
         t status sh -c 'test -z \"$(git status --porcelain)\"'
         git rev-parse HEAD | sed 's/^/head=/'
         t hook sh -c 'echo x > .git/hooks/post-commit'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "add=ok",
        "commit=ok",
        "branch=ok",
        "commit2=ok",
        "commit3=ok",
        "switch=ok",
        "merge=ok",
        "status=ok",
        "hook=fail",
    ] {
        has(&o, want);
    }
    // The user's own git sees the same clean tree and the same HEAD, and
    // nothing the jail did left an untracked file behind.
    let status = host_git(&lab.ws, &["status", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    let head = host_git(&lab.ws, &["rev-parse", "HEAD"]);
    has(
        &o,
        &format!("head={}", String::from_utf8_lossy(&head.stdout).trim()),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("oajail: refused write ") && err.contains(".git/hooks/post-commit ("),
        "{err}"
    );
}

#[test]
fn git_init_and_clone_at_the_root_and_below_with_allow_git_config() {
    let lab = Lab::new("repo-init");
    lab.file("origin/f.txt", "f\n");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "o"],
    ] {
        assert!(host_git(&lab.root.join("origin"), args).status.success());
    }
    let origin = lab.root.join("origin").display().to_string();
    let script = format!(
        "{T}t initroot git init -q .
         t initsub git init -q sub/deeper
         t clone git clone -q {origin} cloned
         t cloned test -f cloned/f.txt
         t clonehook sh -c 'echo x > cloned/.git/hooks/pre-commit'
         echo x > x; t rootadd G add x; t rootcommit G commit -qm x"
    );
    // The lab's policy reads the origin: it lies beside the workspace.
    let o = lab.run(ws(true), &script);
    for want in [
        "initroot=ok",
        "initsub=ok",
        "clone=ok",
        "cloned=ok",
        "clonehook=fail",
        "rootadd=ok",
        "rootcommit=ok",
    ] {
        has(&o, want);
    }
}

#[test]
fn worktrees_and_submodules_are_refused_with_a_way_out() {
    let lab = Lab::new("repo-worktree");
    repo(&lab);
    let script = format!(
        "{T}t worktree G worktree add -q wt2
         mkdir -p lib && t submodule sh -c 'G -c protocol.file.allow=always submodule add -q ./ lib/self'"
    );
    let o = lab.run(ws(true), &script);
    has(&o, "worktree=fail");
    has(&o, "submodule=fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("run them outside the jail"), "{err}");
}

/// Plant a fake fsmonitor: running it leaves `pwned` beside the workspace.
fn fsmonitor(lab: &Lab) -> String {
    let marker = lab.root.join("pwned");
    format!("touch {}", marker.display())
}

#[test]
fn no_implicit_git_directory_in_the_worktree() {
    let lab = Lab::new("repo-implicit");
    repo(&lab);
    let cmd = fsmonitor(&lab);
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"{cmd}\"\n"
    );
    lab.file("cfg.txt", &config);
    let cfg = lab.root.join("cfg.txt").display().to_string();
    // Corrupt .git/HEAD (allowed: git writes it) so git looks further, then
    // try to make the worktree itself, or a subdirectory, a git directory.
    let script = format!(
        "{T}echo garbage > .git/HEAD
         for d in . sub; do mkdir -p $d
           t $d-head sh -c \"echo 'ref: refs/heads/main' > $d/HEAD\"
           t $d-objects mkdir $d/objects
           t $d-refs mkdir $d/refs
           t $d-config cp {cfg} $d/config
         done
         ls HEAD objects config sub/HEAD sub/objects sub/config 2>/dev/null | sed 's/^/left=/'"
    );
    let o = lab.run(ws(false), &script);
    for d in [".", "sub"] {
        // The first marker alone is harmless; the one completing a git
        // directory is refused, whatever the order.
        has(&o, &format!("{d}-head=ok"));
        has(&o, &format!("{d}-objects=fail"));
        has(&o, &format!("{d}-config=fail"));
    }
    // The user's next `git status`, at the root and in the subdirectory.
    for dir in [lab.ws.clone(), lab.ws.join("sub")] {
        let _ = host_git(&dir, &["status"]);
    }
    assert!(
        !lab.root.join("pwned").exists(),
        "fsmonitor ran on the host"
    );
}

#[test]
fn hooks_under_core_hooks_path_and_programs_in_the_config() {
    let lab = Lab::new("repo-hookspath");
    repo(&lab);
    assert!(
        host_git(&lab.ws, &["config", "core.hooksPath", "tools/githooks"])
            .status
            .success()
    );
    assert!(
        host_git(&lab.ws, &["config", "diff.x.textconv", "./tools/conv.sh"])
            .status
            .success()
    );
    lab.file("ws/tools/githooks/pre-commit", "#!/bin/sh\nexit 0\n");
    lab.file("ws/.husky/_/pre-commit", "#!/bin/sh\nexit 0\n");
    let marker = lab.root.join("pwned").display().to_string();
    let script = format!(
        "{T}t hook sh -c 'printf \"#!/bin/sh\\ntouch {marker}\\n\" > tools/githooks/pre-commit'
         t newhook sh -c 'echo x > tools/githooks/post-checkout'
         t husky sh -c 'echo x >> .husky/_/pre-commit'
         t conv sh -c 'echo x > tools/conv.sh'
         t swap sh -c 'mv tools tools.old && mkdir -p evil/githooks && ln -s evil tools'
         t other sh -c 'echo x > tools.old/notes.txt || echo x > tools/notes.txt'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "hook=fail",
        "newhook=fail",
        "husky=fail",
        "conv=fail",
        "swap=fail",
    ] {
        has(&o, want);
    }
    // The user's next commit runs only their own hook.
    std::fs::write(lab.ws.join("README.md"), "again\n").unwrap();
    let _ = host_git(&lab.ws, &["commit", "-qam", "after"]);
    assert!(
        !lab.root.join("pwned").exists(),
        "a planted hook ran on the host"
    );
}

#[test]
fn a_separate_git_directory_behind_a_git_file() {
    let lab = Lab::new("repo-gitfile");
    let gitdir = lab.dir("ws/store").join("repo.git");
    let out = Command::new("git")
        .args(["init", "-q", "--separate-git-dir"])
        .arg(&gitdir)
        .arg(lab.ws.join("wt"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let marker = lab.root.join("pwned").display().to_string();
    let script = format!(
        "{T}t hook sh -c 'printf \"#!/bin/sh\\ntouch {marker}\\n\" > store/repo.git/hooks/post-checkout'
         t config sh -c 'printf \"[core]\\n\\tfsmonitor = touch {marker}\\n\" >> store/repo.git/config'
         t info sh -c 'echo \"* diff=x\" > store/repo.git/info/attributes'
         t gitfile sh -c 'echo gitdir: ../elsewhere > wt/.git'
         t ordinary sh -c 'echo x > wt/file.txt'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "hook=fail",
        "config=fail",
        "info=fail",
        "gitfile=fail",
        "ordinary=ok",
    ] {
        has(&o, want);
    }
    let _ = host_git(&lab.ws.join("wt"), &["status"]);
    assert!(!lab.root.join("pwned").exists());
}
