//! srt's mandatory write denies through the real binary, held by the guard
//! alone: at depth 0 to 6, existing and missing, in nested repositories;
//! renames of protected paths refused, removals allowed (making them again
//! refused); links named like protected
//! files and their targets; nothing is ever created on the host to enforce
//! them; the settings file is never writable. Runs as root and as an
//! unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;

fn writable_ws() -> serde_json::Value {
    json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []})
}

/// `ws/d1/…/dN` for N = 0..=6 (`ws` itself for 0).
fn depth_dir(n: usize) -> String {
    let mut p = "ws".to_owned();
    for i in 1..=n {
        p.push_str(&format!("/d{i}"));
    }
    p
}

#[test]
fn existing_protected_files_are_read_only_at_every_depth() {
    let lab = Lab::new("depth");
    let mut script = String::new();
    for n in 0..=6 {
        let d = depth_dir(n);
        for name in [
            ".bashrc",
            ".zshrc",
            ".gitconfig",
            ".gitmodules",
            ".mcp.json",
            ".ripgreprc",
        ] {
            lab.file(&format!("{d}/{name}"), "ORIG");
        }
        lab.file(&format!("{d}/.vscode/settings.json"), "ORIG");
        lab.file(&format!("{d}/.idea/workspace.xml"), "ORIG");
        lab.file(&format!("{d}/.claude/commands/c.md"), "ORIG");
        lab.file(&format!("{d}/.claude/agents/a.md"), "ORIG");
        lab.file(&format!("{d}/.claude/settings.json"), "ORIG");
        lab.file(&format!("{d}/ok.txt"), "ORIG");
        let rel = d.strip_prefix("ws").unwrap().trim_start_matches('/');
        let rel = if rel.is_empty() {
            ".".to_owned()
        } else {
            rel.to_owned()
        };
        script.push_str(&format!(
            "for f in .bashrc .zshrc .gitconfig .gitmodules .mcp.json .ripgreprc .vscode/settings.json \
             .idea/workspace.xml .claude/commands/c.md .claude/agents/a.md .claude/settings.json; do \
             echo {n}:$f=$(w {rel}/$f); done; echo {n}:new=$(w {rel}/.vscode/new.json); echo {n}:ok=$(w {rel}/ok.txt);\n"
        ));
    }
    let o = lab.run(writable_ws(), &script);
    for n in 0..=6 {
        for f in [
            ".bashrc",
            ".zshrc",
            ".gitconfig",
            ".gitmodules",
            ".mcp.json",
            ".ripgreprc",
            ".vscode/settings.json",
            ".idea/workspace.xml",
            ".claude/commands/c.md",
            ".claude/agents/a.md",
            ".claude/settings.json",
        ] {
            has(&o, &format!("{n}:{f}=DENIED"));
            let content = std::fs::read_to_string(lab.root.join(depth_dir(n)).join(f)).unwrap();
            assert_eq!(content, "ORIG", "depth {n} {f}");
        }
        has(&o, &format!("{n}:new=DENIED"));
        has(&o, &format!("{n}:ok=WROTE"));
    }
}

#[test]
fn git_hooks_and_config_are_protected_in_every_existing_repository() {
    let lab = Lab::new("git");
    for d in [depth_dir(0), depth_dir(4)] {
        lab.file(&format!("{d}/.git/HEAD"), "ref: refs/heads/main\n");
        lab.file(&format!("{d}/.git/config"), "ORIG");
        lab.file(&format!("{d}/.git/hooks/pre-commit.sample"), "ORIG");
        lab.dir(&format!("{d}/.git/objects"));
    }
    // depth 4 has no hooks dir: the missing one must still not be creatable.
    std::fs::remove_dir_all(lab.root.join(depth_dir(4)).join(".git/hooks")).unwrap();
    let script = "for r in . d1/d2/d3/d4; do \
        echo $r:hook=$(w $r/.git/hooks/post-checkout); echo $r:config=$(w $r/.git/config); \
        mkdir -p $r/.git/hooks 2>/dev/null; echo $r:mk=$(w $r/.git/hooks/x); \
        echo $r:obj=$(w $r/.git/objects/o); echo $r:mcp=$(w $r/.mcp.json); \
        mkdir $r/.vscode 2>/dev/null && echo $r:vs=made || echo $r:vs=DENIED; done";
    let o = lab.run(writable_ws(), script);
    for r in [".", "d1/d2/d3/d4"] {
        has(&o, &format!("{r}:hook=DENIED"));
        has(&o, &format!("{r}:config=DENIED"));
        has(&o, &format!("{r}:mk=DENIED"));
        has(&o, &format!("{r}:obj=WROTE"));
        // Missing repository-level names in a repository root at depth 4.
        has(&o, &format!("{r}:mcp=DENIED"));
        has(&o, &format!("{r}:vs=DENIED"));
    }
    // The jail may make an empty hooks directory (git does); nothing in it.
    let hooks = lab.root.join(depth_dir(4)).join(".git/hooks");
    assert_eq!(std::fs::read_dir(&hooks).unwrap().count(), 0);
}

#[test]
fn allow_git_config_opens_config_but_not_hooks() {
    let lab = Lab::new("gitcfg");
    lab.file("ws/.git/HEAD", "ref: refs/heads/main\n");
    lab.file("ws/.git/config", "ORIG");
    lab.dir("ws/.git/hooks");
    let fs = json!({"denyRead": [], "allowWrite": ["."], "denyWrite": [], "allowGitConfig": true});
    let o = lab.run(
        fs,
        "echo config=$(w .git/config); echo hook=$(w .git/hooks/x)",
    );
    has(&o, "config=WROTE");
    has(&o, "hook=DENIED");
}

#[test]
fn missing_protected_paths_cannot_be_created_and_nothing_is_made_for_them() {
    let lab = Lab::new("missing");
    let script = "echo mcp=$(w .mcp.json); mkdir .vscode 2>/dev/null && echo vscode=made || echo vscode=DENIED; \
        mkdir -p .claude/commands 2>/dev/null && echo claude=made || echo claude=DENIED; \
        echo gm=$(w .gitmodules); echo ok=$(w ok.txt)";
    let o = lab.run(writable_ws(), script);
    for line in [
        "mcp=DENIED",
        "vscode=DENIED",
        "claude=DENIED",
        "gm=DENIED",
        "ok=WROTE",
    ] {
        has(&o, line);
    }
    let mut left: Vec<String> = std::fs::read_dir(&lab.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // `.claude` itself is the command's own (empty) directory; nothing
    // else was created, before, during or after the run.
    assert_eq!(left, vec![".claude".to_owned(), "ok.txt".to_owned()]);
    assert_eq!(
        std::fs::read_dir(lab.ws.join(".claude")).unwrap().count(),
        0
    );
}

#[test]
fn missing_shell_files_in_a_writable_home_cannot_be_created() {
    let lab = Lab::new("home");
    let fs = json!({"denyRead": [], "allowWrite": ["~"], "denyWrite": []});
    let o = lab.run(fs, "echo rc=$(w $HOME/.bashrc); echo pr=$(w $HOME/.profile); echo zenv=$(w $HOME/.zshenv); echo ok=$(w $HOME/ok)");
    for line in ["rc=DENIED", "pr=DENIED", "zenv=DENIED", "ok=WROTE"] {
        has(&o, line);
    }
    assert!(!lab.home.join(".bashrc").exists());
}

#[test]
fn protected_paths_cannot_be_renamed_but_can_be_removed_and_their_ancestors_can_move() {
    let lab = Lab::new("rename");
    lab.file("ws/a/b/c/.git/HEAD", "ref: refs/heads/main\n");
    lab.file("ws/a/b/c/.git/config", "ORIG");
    lab.file("ws/a/b/c/.git/hooks/pre-commit", "ORIG");
    lab.file("ws/a/b/c/.vscode/settings.json", "ORIG");
    let script = "for p in a/b/c/.git a/b/c/.git/hooks a/b/c/.vscode a/b/c/.git/config a/b/c/.git/hooks/pre-commit; do \
        mv $p $p.moved 2>/dev/null && echo $p=moved || echo $p=DENIED; done; \
        mv a z && echo a=moved; mkdir -p a/b/c/.vscode 2>/dev/null && echo replant=made || echo replant=DENIED; \
        echo moved=$(w z/b/c/.vscode/settings.json); \
        rm -rf z/b/c/.git/hooks 2>/dev/null; [ -e z/b/c/.git/hooks ] && echo rm=DENIED || echo rm=removed; \
        echo rehook=$(mkdir z/b/c/.git/hooks && w z/b/c/.git/hooks/pre-commit); \
        rm -rf z/b/c/.vscode && echo rmvscode=removed; \
        mkdir z/b/c/.vscode 2>/dev/null && echo revscode=made || echo revscode=DENIED";
    let o = lab.run(writable_ws(), script);
    for p in [
        "a/b/c/.git",
        "a/b/c/.git/hooks",
        "a/b/c/.vscode",
        "a/b/c/.git/config",
        "a/b/c/.git/hooks/pre-commit",
    ] {
        has(&o, &format!("{p}=DENIED"));
    }
    // Removing plants nothing (docs/enforcement.md, "Removals"); making
    // the names again stays refused.
    for line in [
        "a=moved",
        "replant=DENIED",
        "moved=DENIED",
        "rm=removed",
        "rehook=DENIED",
        "rmvscode=removed",
        "revscode=DENIED",
    ] {
        has(&o, line);
    }
    let content = std::fs::read_to_string(lab.root.join("ws/z/b/c/.git/config")).unwrap();
    assert_eq!(content, "ORIG");
    assert!(!lab.root.join("ws/z/b/c/.git/hooks/pre-commit").exists());
}

#[test]
fn replacing_a_protected_dir_parent_with_a_symlink_gains_nothing() {
    let lab = Lab::new("swap");
    lab.file("ws/sub/.vscode/tasks.json", "ORIG");
    lab.dir("ws/decoy/.vscode");
    let script = "mv sub sub.old 2>/dev/null; ln -sfn decoy sub 2>/dev/null; \
        echo t=$(w sub/.vscode/tasks.json); echo old=$(w sub.old/.vscode/tasks.json); \
        echo kept=$(cat sub.old/.vscode/tasks.json); \
        rm -rf sub.old sub && echo rm=removed; ln -s decoy sub && echo again=$(w sub/.vscode/tasks.json)";
    let o = lab.run(writable_ws(), script);
    for line in [
        "t=DENIED",
        "old=DENIED",
        "kept=ORIG",
        "rm=removed",
        "again=DENIED",
    ] {
        has(&o, line);
    }
    assert_eq!(
        std::fs::read_dir(lab.root.join("ws/decoy/.vscode"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn the_settings_file_is_not_writable_from_the_jail() {
    let lab = Lab::new("settings");
    let settings = lab.root.join("ws/policy.json");
    let fs = json!({"network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}});
    std::fs::write(&settings, fs.to_string()).unwrap();
    let o = lab
        .command(&settings, "echo s=$(w policy.json); echo ok=$(w ok.txt)")
        .output()
        .unwrap();
    has(&o, "s=DENIED");
    has(&o, "ok=WROTE");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), fs.to_string());
}

#[test]
fn a_protected_name_that_is_a_symlink_protects_the_link_and_its_target() {
    let lab = Lab::new("rclink");
    lab.file("ws/dotfiles/bashrc", "ORIG");
    std::os::unix::fs::symlink("dotfiles/bashrc", lab.root.join("ws/.bashrc")).unwrap();
    let script = "echo via=$(w .bashrc); echo target=$(w dotfiles/bashrc); \
        ln -sfn dotfiles/other .bashrc 2>/dev/null; echo relink=$(readlink .bashrc); \
        rm -f .bashrc 2>/dev/null; [ -L .bashrc ] || [ -e .bashrc ] && echo link=kept || echo link=gone; \
        echo remade=$(w .bashrc)";
    let o = lab.run(writable_ws(), script);
    for line in [
        "via=DENIED",
        "target=DENIED",
        "relink=dotfiles/bashrc",
        "link=gone",
        "remade=DENIED",
    ] {
        has(&o, line);
    }
    assert_eq!(
        std::fs::read_to_string(lab.root.join("ws/dotfiles/bashrc")).unwrap(),
        "ORIG"
    );
    assert!(!lab.root.join("ws/.bashrc").exists());
}

#[test]
fn the_running_oajail_binary_is_not_writable_from_the_jail() {
    let lab = Lab::new("exe");
    let exe = lab.root.join("ws/bin/oajail");
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    std::fs::copy(OAJAIL, &exe).unwrap();
    let settings = lab.root.join("settings.json");
    let fs = json!({"network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}});
    std::fs::write(&settings, fs.to_string()).unwrap();
    // Writing a running binary fails anyway (ETXTBSY); replacing it must fail too.
    let script = "echo ok=$(w bin/other); mv -f bin/other bin/oajail 2>/dev/null && echo mv=done || echo mv=DENIED; \
        rm -f bin/oajail 2>/dev/null; [ -e bin/oajail ] && echo rm=DENIED || echo rm=done";
    let mut cmd = lab.command(&settings, script);
    cmd.env("PATH", "/usr/bin:/bin");
    // A parallel test's fork can briefly hold the copy's write descriptor
    // (ETXTBSY until its exec); retry as every test harness has to.
    let mut attempts = 0;
    let o = loop {
        let run = std::process::Command::new(&exe)
            .args(cmd.get_args())
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .env_remove("OAJAIL_SETTINGS")
            .current_dir(&lab.ws)
            .output();
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    has(&o, "ok=WROTE");
    has(&o, "mv=DENIED");
    has(&o, "rm=DENIED");
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    assert_eq!(size(&exe), size(std::path::Path::new(OAJAIL)));
}
