//! Unit tests of the create-guard decision and plan.
use super::*;
use crate::compile::{HostFacts, MemFs};
use Creation::*;

fn plan(allow_git_config: bool) -> GuardPlan {
    GuardPlan {
        roots: vec!["/w".into(), "/h/.cache".into()],
        exempt: vec!["/dev".into(), "/tmp".into()],
        allow_git_config,
        notify: Vec::new(),
        legacy: Vec::new(),
        notify_if_creat: Vec::new(),
        enosys: Vec::new(),
    }
}

fn check(p: &GuardPlan, parent: &str, name: &str, what: Creation) -> bool {
    decide(p, Path::new(parent), name, what) == Verdict::Allow
}

fn allowed(parent: &str, name: &str, what: Creation) -> bool {
    check(&plan(false), parent, name, what)
}

const ALL: [Creation; 6] = [
    File,
    Dir,
    Symlink,
    HardLink,
    RenameTarget { dir: false },
    RenameTarget { dir: true },
];

#[test]
fn ordinary_names_are_allowed() {
    for what in ALL {
        assert!(allowed("/w", "main.rs", what));
        assert!(allowed("/w/src/deep/er", "x", what));
        assert!(allowed("/w/.git", "index.lock", what) || what == RenameTarget { dir: true });
    }
}

#[test]
fn protected_files_are_denied_as_anything() {
    for name in [
        ".bashrc",
        ".gitconfig",
        ".mcp.json",
        ".zshrc",
        ".gitmodules",
    ] {
        for what in ALL {
            assert!(!allowed("/w/new/dir", name, what), "{name} {what:?}");
        }
    }
}

#[test]
fn outside_the_roots_and_in_private_filesystems_nothing_is_checked() {
    assert!(allowed("/tmp", ".bashrc", File));
    assert!(allowed("/tmp/x/.git", "config", File));
    assert!(allowed("/dev/shm", ".bashrc", File));
    assert!(allowed("/usr", ".bashrc", File));
    assert!(!allowed("/h/.cache/x", ".bashrc", File));
}

#[test]
fn editor_directories_at_and_below() {
    for what in ALL {
        assert!(!allowed("/w/a", ".vscode", what));
        assert!(!allowed("/w/a/.vscode", "settings.json", what));
        assert!(!allowed("/w/.idea/x/y", "z", what));
    }
}

#[test]
fn claude_directory_entries() {
    assert!(allowed("/w/a/b", ".claude", Dir));
    assert!(allowed("/w/a/b", ".claude", File));
    assert!(!allowed("/w/a/b", ".claude", Symlink));
    assert!(!allowed("/w/a/b", ".claude", RenameTarget { dir: true }));
    for what in ALL {
        assert!(!allowed("/w/a/.claude", "agents", what));
        assert!(!allowed("/w/a/.claude", "commands", what));
        assert!(!allowed("/w/a/.claude", "settings.json", what));
        assert!(!allowed("/w/a/.claude", "settings.local.json", what));
        assert!(!allowed("/w/a/.claude/agents", "x.md", what));
        assert!(!allowed("/w/a/.claude/commands/deep", "x.md", what));
    }
    assert!(allowed("/w/a/.claude", "notes.md", File));
    assert!(allowed("/w/a/.claude", "projects", Dir));
}

#[test]
fn git_directory_may_only_be_born_empty() {
    assert!(allowed("/w/sub", ".git", Dir));
    for what in [
        File,
        Symlink,
        HardLink,
        RenameTarget { dir: false },
        RenameTarget { dir: true },
    ] {
        assert!(!allowed("/w/sub", ".git", what), "{what:?}");
    }
}

#[test]
fn git_hooks() {
    assert!(allowed("/w/s/.git", "hooks", Dir));
    for what in [File, Symlink, HardLink, RenameTarget { dir: false }] {
        assert!(!allowed("/w/s/.git", "hooks", what), "{what:?}");
        assert!(!allowed("/w/s/.git/hooks", "pre-commit", what), "{what:?}");
    }
    assert!(allowed("/w/s/.git/hooks", "pre-commit.sample", File));
    assert!(allowed(
        "/w/s/.git/hooks",
        "pre-commit.sample",
        RenameTarget { dir: false }
    ));
    assert!(!allowed("/w/s/.git/hooks", "x.sample", Dir));
    assert!(!allowed("/w/s/.git/hooks/x.sample", "y.sample", File));
    // Submodule and worktree git dirs have hooks too.
    assert!(!allowed("/w/s/.git/modules/m/hooks", "post-checkout", File));
    assert!(allowed("/w/s/.git/modules/m", "hooks", Dir));
}

#[test]
fn git_config_follows_allow_git_config() {
    for what in [File, HardLink, Symlink, RenameTarget { dir: false }] {
        assert!(!check(&plan(false), "/w/s/.git", "config", what));
        assert!(check(&plan(true), "/w/s/.git", "config", what));
    }
    assert!(allowed("/w/s/.git", "config.lock", File));
    assert!(!allowed(
        "/w/s/.git/modules/m",
        "config",
        RenameTarget { dir: false }
    ));
    assert!(!check(&plan(true), "/w/s/.git/hooks", "pre-push", File));
}

#[test]
fn git_commondir_and_directories_moved_in() {
    for what in ALL {
        assert!(!allowed("/w/s/.git", "commondir", what));
    }
    assert!(!allowed(
        "/w/s/.git/modules",
        "m",
        RenameTarget { dir: true }
    ));
    assert!(!allowed("/w/s/.git", "x", RenameTarget { dir: true }));
    assert!(allowed("/w/s/.git/modules", "m", Dir));
}

#[test]
fn git_data_directories_may_hold_any_name() {
    assert!(allowed("/w/s/.git/refs/heads", "config", File));
    assert!(allowed("/w/s/.git/refs/heads/hooks", "x", File));
    assert!(allowed("/w/s/.git/logs/refs/heads", "hooks", File));
    assert!(allowed("/w/s/.git/objects/ab", "tmp_obj_x", HardLink));
}

#[test]
fn names_that_create_nothing_pass() {
    for name in ["", ".", ".."] {
        assert!(allowed("/w/s/.git/hooks", name, File));
    }
}

#[test]
fn plan_roots_are_the_creatable_landlock_paths_minus_private_ones() {
    let fs = MemFs::new().dirs(&["/h/w", "/usr"]);
    let facts = HostFacts {
        home: "/h".into(),
        cwd: "/h/w".into(),
        uid: 1,
        gid: 1,
        exe: "/x".into(),
        settings_path: None,
        ssh_auth_sock: None,
        mem_total_bytes: None,
    };
    let mut policy = Policy::builtin_default();
    policy.filesystem.allow_git_config = true;
    policy.filesystem.allow_write = vec![crate::PathEntry {
        path: ".".into(),
        literal: false,
    }];
    let compiled = crate::compile::compile(&policy, &facts, &fs).unwrap();
    let g = &compiled.guard;
    assert!(g.roots.iter().any(|r| r == "/h/w"), "{:?}", g.roots);
    assert!(
        !g.roots
            .iter()
            .any(|r| r.starts_with("/tmp") || r.starts_with("/dev"))
    );
    assert!(g.exempt.contains(&"/tmp".to_owned()));
    assert!(g.allow_git_config);
    assert_eq!(g.enosys, vec!["openat2".to_owned()]);
    assert!(g.notify.contains(&"renameat2".to_owned()));
}
