//! The work a developer does in a guarded workspace, through the real
//! binary: `git clone` of a repository with nested directories, a checkout
//! that changes files and back, `rm -rf` of the clone (its hooks, its
//! `info/exclude`, its config and all), cleaning a `node_modules` that holds
//! nested repositories (a `.git` directory with hooks, a `.git` file, editor
//! and hook-manager directories) and a build directory with links. Each one
//! succeeds, the guard still refuses planting a hook on the way, and the
//! host outside the workspace is byte for byte what it was before. Runs as
//! root and as an unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Every entry of the lab but the workspace and the settings file written
/// for each run: kind, mode, link target or content, and modification time.
/// What "the host as it was" means.
fn host(lab: &Lab) -> BTreeMap<PathBuf, String> {
    tree(&lab.root, &[&lab.ws, &lab.root.join("settings.json")])
}

fn tree(root: &Path, skip: &[&Path]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if skip.contains(&path.as_path()) {
                continue;
            }
            let m = std::fs::symlink_metadata(&path).unwrap();
            let what = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else if m.is_dir() {
                todo.push(path.clone());
                "dir".to_owned()
            } else {
                format!("file {:?}", std::fs::read(&path).unwrap())
            };
            let line = format!(
                "{what} mode {:o} mtime {}",
                m.mode(),
                m.mtime_nsec() + m.mtime()
            );
            out.insert(path, line);
        }
    }
    out
}

/// A repository on the host, outside the workspace: 600 files in nested
/// directories, a branch `other` that changes 150 of them, a hook.
fn source(lab: &Lab) -> PathBuf {
    let src = lab.dir("src/repo");
    for i in 0..600 {
        let rel = format!("src/repo/pkg{}/sub{}/f{i}.txt", i % 6, (i / 6) % 5);
        lab.file(&rel, &format!("line {i}\n"));
    }
    lab.file("src/repo/.gitattributes", "*.txt text\n");
    for args in [
        &["init", "-q", "-b", "main", "."][..],
        &["add", "-A"],
        &["commit", "-qm", "init"],
        &["switch", "-q", "-c", "other"],
    ] {
        assert!(host_git(&src, args).status.success(), "{args:?}");
    }
    for i in (0..600).step_by(4) {
        let rel = format!("src/repo/pkg{}/sub{}/f{i}.txt", i % 6, (i / 6) % 5);
        lab.file(&rel, &format!("line {i}\nchanged\n"));
    }
    for args in [&["commit", "-qam", "change"][..], &["switch", "-q", "main"]] {
        assert!(host_git(&src, args).status.success(), "{args:?}");
    }
    lab.file("src/repo/.git/hooks/post-checkout", "#!/bin/sh\nexit 0\n");
    src
}

#[test]
fn clone_checkout_and_remove_a_repository() {
    let lab = Lab::new("wf-clone");
    let src = source(&lab);
    let before = host(&lab);
    let script = format!(
        "{T}t clone G clone -q {src} c
         cd c
         t branch G branch -q other origin/other
         t checkout G checkout -q other
         grep -c changed pkg0/sub0/f0.txt | sed 's/^/changed=/'
         t back G checkout -q main
         t clean sh -c 'test -z \"$(git status --porcelain)\"'
         ls pkg*/sub*/f*.txt | wc -l | sed 's/^/files=/'
         t hook sh -c 'echo x > .git/hooks/pre-commit'
         t exclude sh -c 'echo x >> .git/info/exclude'
         cd ..
         t rmrf rm -rf c
         test -e c; echo gone=$?",
        src = src.display()
    );
    let o = lab.run(ws(true), &script);
    for want in [
        "clone=ok",
        "branch=ok",
        "checkout=ok",
        "changed=1",
        "back=ok",
        "clean=ok",
        "files=600",
        "hook=fail",
        "exclude=fail",
        "rmrf=ok",
        "gone=1",
    ] {
        has(&o, want);
    }
    assert_eq!(host(&lab), before, "the host changed");
    assert!(std::fs::read_dir(&lab.ws).unwrap().next().is_none());
}

#[test]
fn clean_a_node_modules_with_nested_repositories() {
    let lab = Lab::new("wf-nm");
    // A package installed from git, with its repository, a hook and a
    // config; one whose `.git` is a file (a submodule's); editor, agent and
    // hook-manager directories; a package's own dotfiles.
    let nm = "ws/node_modules";
    for i in 0..40 {
        lab.file(&format!("{nm}/p{i}/index.js"), "module.exports = 1;\n");
        lab.file(&format!("{nm}/p{i}/lib/a/b/c.js"), "1\n");
    }
    let gitpkg = lab.dir(&format!("{nm}/gitdep"));
    lab.file(&format!("{nm}/gitdep/index.js"), "1\n");
    assert!(host_git(&gitpkg, &["init", "-q", "."]).status.success());
    assert!(host_git(&gitpkg, &["add", "-A"]).status.success());
    assert!(host_git(&gitpkg, &["commit", "-qm", "x"]).status.success());
    lab.file(&format!("{nm}/gitdep/.git/hooks/post-merge"), "#!/bin/sh\n");
    lab.file(&format!("{nm}/sub/.git"), "gitdir: ../gitdep/.git\n");
    lab.file(&format!("{nm}/sub/x.js"), "1\n");
    for rel in [
        ".vscode/settings.json",
        ".husky/pre-commit",
        ".claude/settings.json",
        ".devcontainer/devcontainer.json",
        ".bashrc",
        ".gitmodules",
        ".pre-commit-config.yaml",
    ] {
        lab.file(&format!("{nm}/tooling/{rel}"), "{}\n");
    }
    let before = host(&lab);
    let script = format!(
        "{T}t plant sh -c 'echo x > node_modules/gitdep/.git/hooks/pre-commit'
         t planttool sh -c 'echo x > node_modules/tooling/.husky/pre-push'
         t rmrf rm -rf node_modules
         test -e node_modules; echo gone=$?
         t again sh -c 'mkdir -p node_modules/x && echo 1 > node_modules/x/i.js'
         t replant sh -c 'mkdir -p node_modules/tooling/.vscode'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "plant=fail",
        "planttool=fail",
        "rmrf=ok",
        "gone=1",
        "again=ok",
        "replant=fail",
    ] {
        has(&o, want);
    }
    assert_eq!(host(&lab), before, "the host changed");
}

#[test]
fn clean_a_build_directory() {
    let lab = Lab::new("wf-build");
    let before = host(&lab);
    let script = format!(
        "{T}mkdir -p build/obj/a/b build/bin
         for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > build/obj/a/b/o$i.o; done
         ln -s ../obj/a/b/o1.o build/bin/link
         ln -s /usr/bin build/bin/usr
         chmod 755 build/bin; chmod 600 build/obj/a/b/o2.o; touch -d @0 build/obj/a/b/o3.o
         t rmrf rm -rf build
         test -e build; echo gone=$?
         test -e /usr/bin/env; echo usr=$?"
    );
    let o = lab.run(ws(false), &script);
    for want in ["rmrf=ok", "gone=1", "usr=0"] {
        has(&o, want);
    }
    assert_eq!(host(&lab), before, "the host changed");
}
