//! Unit tests of the guard's decision on an in-memory tree.
use super::testfs::{TestFs, Tree};
use super::*;
use std::path::{Path, PathBuf};

fn plan(allow_git_config: bool) -> GuardPlan {
    GuardPlan {
        roots: vec!["/h".into(), "/w".into(), "/tmp/ws".into()],
        private: vec!["/dev".into(), "/tmp".into()],
        deny_write: vec!["/w/locked".into(), "/w/later/out.txt".into()],
        home: "/h".into(),
        config_home: Some("/h/cfg".into()),
        data_home: None,
        state_home: None,
        allow_git_config,
        filter: FilterShape {
            notify: Vec::new(),
            legacy: Vec::new(),
            notify_if_write: Vec::new(),
            notify_if_mode: Vec::new(),
            notify_unless_owner: Vec::new(),
            ids: Ids { uid: 0, gid: 0 },
            notify_if_eq: Vec::new(),
            watch: Vec::new(),
            enosys: Vec::new(),
        },
    }
}

fn tree() -> Tree {
    Tree::new()
        .dirs(&[
            "/h",
            "/w/s/.git/objects",
            "/w/s/.git/refs/heads",
            "/w/s/.git/hooks",
        ])
        .files(&[
            "/w/s/.git/HEAD",
            "/w/s/.git/config",
            "/w/s/.git/hooks/pre-commit",
        ])
        .dirs(&[
            "/w/bare.git/objects",
            "/w/bare.git/refs",
            "/w/bare.git/hooks",
        ])
        .files(&["/w/bare.git/HEAD", "/w/bare.git/config"])
        .dirs(&["/w/nm/a/b/c/d/e/f/g", "/tmp/ws", "/tmp/x"])
        .files(&["/w/nm/a/b/c/d/e/f/g/.bashrc"])
}

fn stat(kind: FileKind) -> Stat {
    Stat {
        kind,
        dev: 1,
        ino: 999,
        nlink: 1,
    }
}

struct T {
    guard: Guard,
    fs: TestFs,
}

impl T {
    fn new() -> Self {
        Self::with(TestFs::new(tree()), false)
    }

    fn with(fs: TestFs, allow_git_config: bool) -> Self {
        T {
            guard: Guard::new(plan(allow_git_config)),
            fs,
        }
    }

    fn ok(&mut self, path: &str, op: Op<'_>) -> bool {
        let path = Path::new(path);
        let existing = self.fs.lstat(path);
        let req = Request { path, op, existing };
        self.guard.decide(&self.fs, &req) == Verdict::Allow
    }
}

use FileKind::{Dir, File, Symlink};
use Op::{Create, Meta, Remove, RenameFrom, Write};

fn rename_to(source: &Path, kind: FileKind) -> Op<'_> {
    Op::RenameTo {
        source,
        stat: stat(kind),
    }
}

fn link(source: &Path, kind: FileKind) -> Op<'_> {
    Op::Link {
        source,
        stat: stat(kind),
    }
}

const SRC: &str = "/w/src-x";

/// Every way of making, changing or moving a path.
fn all_ops(src: &Path) -> Vec<Op<'_>> {
    vec![
        Create(File),
        Create(Dir),
        Create(Symlink),
        link(src, File),
        link(src, Symlink),
        rename_to(src, File),
        rename_to(src, Dir),
        rename_to(src, Symlink),
    ]
}

#[test]
fn ordinary_paths_are_allowed() {
    let mut t = T::new();
    let src = Path::new(SRC);
    for op in all_ops(src) {
        assert!(t.ok("/w/main.rs", op), "{op:?}");
        assert!(t.ok("/w/nm/a/b/c/d/e/f/g/index.js", op), "{op:?}");
    }
    for op in [Write, Meta, Remove, RenameFrom] {
        assert!(t.ok("/w/s/.git/index", op), "{op:?}");
        assert!(t.ok("/w/nm/a/b/c/d/e/f/g", op), "{op:?}");
    }
}

#[test]
fn protected_names_at_any_depth_as_anything() {
    let mut t = T::new();
    let src = Path::new(SRC);
    for name in [
        ".bashrc",
        ".gitconfig",
        ".mcp.json",
        ".zshenv",
        ".gitmodules",
        ".bash_aliases",
    ] {
        let deep = format!("/w/nm/a/b/c/d/e/f/g/h/{name}");
        for op in all_ops(src) {
            assert!(!t.ok(&deep, op), "{name} {op:?}");
        }
    }
    // The existing one at depth 9: no append, truncate, chmod, rename
    // over or rename away; removing it plants nothing.
    let deep = "/w/nm/a/b/c/d/e/f/g/.bashrc";
    for op in [Write, Meta, RenameFrom, rename_to(src, File)] {
        assert!(!t.ok(deep, op), "{op:?}");
    }
    assert!(t.ok(deep, Remove));
}

#[test]
fn outside_roots_and_private_filesystems_are_not_decided() {
    let mut t = T::new();
    assert!(t.ok("/usr/.bashrc", Create(File)));
    assert!(t.ok("/tmp/x/.bashrc", Create(File)));
    assert!(t.ok("/dev/shm/.bashrc", Create(File)));
    // A workspace bound in from the host's /tmp is guarded.
    assert!(!t.ok("/tmp/ws/.bashrc", Create(File)));
    assert!(!t.ok("/tmp/ws/a/b/.bashrc", Write));
}

#[test]
fn editor_and_agent_directories() {
    let mut t = T::new();
    let src = Path::new(SRC);
    for op in all_ops(src) {
        assert!(!t.ok("/w/a/.vscode", op), "{op:?}");
        assert!(!t.ok("/w/a/.vscode/tasks.json", op), "{op:?}");
        assert!(!t.ok("/w/x/.idea/y/z", op), "{op:?}");
        assert!(!t.ok("/w/a/.claude/agents", op), "{op:?}");
        assert!(!t.ok("/w/a/.claude/commands/deep/x.md", op), "{op:?}");
        assert!(!t.ok("/w/a/.claude/settings.json", op), "{op:?}");
        assert!(!t.ok("/w/a/.claude/settings.local.json", op), "{op:?}");
        assert!(!t.ok("/w/a/.claude/hooks/run.sh", op), "{op:?}");
    }
    assert!(t.ok("/w/a/.claude", Create(Dir)));
    assert!(t.ok("/w/a/.claude/notes.md", Create(File)));
    // `.claude` as a link or a directory moved into place: by what arrives.
    assert!(!t.ok("/w/a/.claude", Create(Symlink)));
    assert!(!t.ok("/w/a/.claude", rename_to(src, Symlink)));
    assert!(!t.ok("/w/a/.claude", link(src, Symlink)));
    assert!(!t.ok("/w/a/.claude", rename_to(src, Dir)));
}

#[test]
fn git_directory_only_born_empty_and_never_moved() {
    let mut t = T::new();
    let src = Path::new(SRC);
    assert!(t.ok("/w/new/.git", Create(Dir)));
    for op in [
        Create(File),
        Create(Symlink),
        link(src, File),
        rename_to(src, File),
        rename_to(src, Dir),
        rename_to(src, Symlink),
    ] {
        assert!(!t.ok("/w/new/.git", op), "{op:?}");
    }
    assert!(!t.ok("/w/s/.git", RenameFrom));
    assert!(!t.ok("/w/x", rename_to(Path::new("/w/s/.git"), Dir)));
    // mkdir of an existing .git answers EEXIST, not EACCES (git init again).
    assert!(t.ok("/w/s/.git", Create(Dir)));
}

#[test]
fn inside_a_git_directory() {
    let mut t = T::new();
    let src = Path::new(SRC);
    assert!(!t.ok("/w/s/.git/hooks/pre-commit", Write));
    assert!(!t.ok("/w/s/.git/hooks/pre-commit", Meta));
    assert!(!t.ok("/w/s/.git/hooks/post-checkout", Create(File)));
    assert!(!t.ok("/w/s/.git/hooks/post-checkout", rename_to(src, File)));
    assert!(t.ok("/w/s/.git/hooks/pre-push.sample", Create(File)));
    assert!(t.ok("/w/s/.git/hooks/pre-push.sample", Write));
    assert!(!t.ok("/w/s/.git/hooks/x.sample", Create(Dir)));
    assert!(!t.ok(
        "/w/s/.git/hooks/pre-push",
        rename_to(Path::new("/w/s/.git/hooks/pre-push.sample"), File)
    ));
    assert!(!t.ok("/w/s/.git/hooks", RenameFrom));
    assert!(!t.ok("/w/s/.git/hooks", rename_to(src, Dir)));
    assert!(t.ok("/w/s/.git/hooks", Remove));
    assert!(t.ok("/w/new/.git/hooks", Create(Dir)));
    assert!(t.ok("/w/new/.git/info", Create(Dir)));
    assert!(t.ok("/w/new/.git/info/exclude", Create(File)));
    assert!(!t.ok("/w/new/.git/info/attributes", Create(File)));
    assert!(!t.ok("/w/s/.git/config", Write));
    assert!(!t.ok(
        "/w/s/.git/config",
        rename_to(Path::new("/w/s/.git/config.lock"), File)
    ));
    assert!(t.ok("/w/s/.git/config.lock", Create(File)));
    assert!(!t.ok("/w/s/.git/commondir", Create(File)));
    assert!(!t.ok("/w/s/.git/modules", Create(Symlink)));
    // git init probes for symlinks with a temporary link in .git.
    assert!(t.ok("/w/s/.git/tK4YcIH", Create(Symlink)));
    assert!(!t.ok("/w/s/.git/modules", rename_to(src, Dir)));
    assert!(t.ok("/w/s/.git/rebase-merge", rename_to(src, Dir)));
    for p in [
        "/w/s/.git/refs/heads/config",
        "/w/s/.git/refs/heads/hooks",
        "/w/s/.git/logs/HEAD",
    ] {
        assert!(t.ok(p, Create(File)), "{p}");
    }
    assert!(t.ok("/w/s/.git/HEAD", Write));
    assert!(t.ok(
        "/w/s/.git/HEAD",
        rename_to(Path::new("/w/s/.git/HEAD.lock"), File)
    ));
    // A bare repository is a git directory too.
    assert!(!t.ok("/w/bare.git/hooks/update", Create(File)));
    assert!(!t.ok("/w/bare.git/config", Write));
}

#[test]
fn allow_git_config() {
    let mut t = T::with(TestFs::new(tree()), true);
    assert!(t.ok("/w/s/.git/config", Write));
    assert!(t.ok(
        "/w/s/.git/config",
        rename_to(Path::new("/w/s/.git/config.lock"), File)
    ));
    assert!(!t.ok("/w/s/.git/hooks/pre-push", Create(File)));
    assert!(!t.ok("/w/s/.git/commondir", Create(File)));
}

#[test]
fn no_git_directory_outside_dot_git() {
    let fs = TestFs::new(
        tree()
            .dirs(&["/w/objects", "/w/p/refs"])
            .files(&["/w/p/HEAD", "/w/cfg/config"]),
    );
    let mut t = T::with(fs, false);
    let src = Path::new(SRC);
    // `objects` exists in /w: HEAD would complete a git directory there.
    assert!(!t.ok("/w/HEAD", Create(File)));
    assert!(!t.ok("/w/HEAD", rename_to(src, File)));
    assert!(!t.ok("/w/HEAD", link(src, File)));
    assert!(!t.ok("/w/cfg/HEAD", Create(File)));
    assert!(t.ok("/w/p/refs2", Create(Dir)));
    assert!(!t.ok("/w/p/objects", Create(Dir)));
    assert!(!t.ok("/w/p/objects", rename_to(src, Dir)));
    assert!(!t.ok("/w/p/config", Create(File)));
    assert!(!t.ok("/w/p/commondir", Create(File)));
    // HEAD with refs alone is not a git directory (.git/logs looks so).
    assert!(t.ok("/w/p/refs/x", Create(File)));
    assert!(t.ok("/w/new/HEAD", Create(File)));
    // Inside .git, git's own markers are fine.
    assert!(t.ok("/w/n/.git/HEAD", Create(File)));
    assert!(t.ok("/w/n/.git/objects", Create(Dir)));
}

#[test]
fn separate_git_dir_hooks_path_includes_and_programs() {
    let fs = TestFs::new(tree().dirs(&["/w/sep/objects", "/w/sep/hooks", "/w/wt", "/w/r/.git/objects"]))
        .with("/w/sep/HEAD", "ref: refs/heads/main\n")
        .with("/w/wt/.git", "gitdir: ../sep\n")
        .with("/w/r/.git/HEAD", "ref: refs/heads/main\n")
        .with(
            "/w/r/.git/config",
            "[core]\n\thooksPath = tools/hooks\n\tfsmonitor = ./scripts/fsmon.sh\n[include]\n\tpath = ../shared.cfg\n",
        )
        .with("/h/.gitconfig", "[core]\n\thooksPath = ~/.githooks\n");
    let mut t = T::with(fs, false);
    // The separate git dir named by a `gitdir:` file is a git directory.
    assert!(!t.ok("/w/sep/hooks/pre-commit", Create(File)));
    assert!(!t.ok("/w/sep/config", Create(File)));
    // core.hooksPath, a program and an included file of the repository.
    assert!(!t.ok("/w/r/tools/hooks/pre-commit", Create(File)));
    assert!(!t.ok("/w/r/scripts/fsmon.sh", Create(File)));
    assert!(!t.ok("/w/r/shared.cfg", Write));
    assert!(t.ok("/w/r/other", Create(File)));
    // A link or a directory moved in above a hook directory.
    assert!(!t.ok("/w/r/tools", Create(Symlink)));
    assert!(!t.ok("/w/r/tools", rename_to(Path::new(SRC), Dir)));
    // The global configuration's hook directory.
    assert!(!t.ok("/h/.githooks/pre-push", Create(File)));
}

#[test]
fn home_twins_and_config_home() {
    let mut t = T::new();
    let src = Path::new(SRC);
    for p in [
        "/h/.config/git/config",
        "/h/.config/fish/conf.d/x.fish",
        "/h/.config/autostart/x.desktop",
        "/h/.ssh/rc",
        "/h/.ssh/authorized_keys",
        "/h/.bashrc.d/x.sh",
        "/h/.local/bin/git",
        "/h/.cargo/registry/src/x/build.rs",
        "/h/.pam_environment",
        "/h/cfg/git/config",
        "/h/cfg/fish/config.fish",
    ] {
        assert!(!t.ok(p, Create(File)), "{p}");
    }
    // The rest of the home's configuration: protected by default (the
    // home is a writable root; `defaults_tests.rs` opens it explicitly).
    assert!(!t.ok("/h/.ssh/known_hosts", Create(File)));
    assert!(!t.ok("/h/.config/other/x", Create(File)));
    assert!(!t.ok("/h/.local/share/x", Create(File)));
    assert!(t.ok("/h/notes.txt", Create(File)));
    for p in [
        "/h/.config",
        "/h/.ssh",
        "/h/.local",
        "/h/cfg",
        "/h/cfg/systemd",
    ] {
        assert!(!t.ok(p, Create(Symlink)), "{p}");
        assert!(!t.ok(p, rename_to(src, Dir)), "{p}");
    }
}

#[test]
fn deny_write_entries_existing_or_not() {
    let mut t = T::new();
    let src = Path::new(SRC);
    assert!(!t.ok("/w/locked", Create(File)));
    assert!(!t.ok("/w/locked/x", Create(File)));
    assert!(!t.ok("/w/later/out.txt", Create(File)));
    // A link or a moved directory above a denied path would redirect it.
    assert!(!t.ok("/w/later", Create(Symlink)));
    assert!(!t.ok("/w/later", rename_to(src, Dir)));
    t.fs.add_dirs(&["/w/later"]);
    assert!(!t.ok("/w/later", RenameFrom));
    assert!(t.ok("/w/later/other.txt", Create(File)));
}

#[test]
fn hard_links_of_protected_files() {
    let fs = TestFs::new(
        tree()
            .dirs(&["/w/d"])
            .files(&["/h/.bashrc", "/w/d/twin", "/w/d/plain"]),
    )
    .hardlink("/h/.bashrc", "/w/d/twin");
    let mut t = T::with(fs, false);
    assert!(!t.ok("/w/d/twin", Write));
    assert!(!t.ok("/w/d/twin", Meta));
    assert!(t.ok("/w/d/plain", Write));
    let twin = Stat {
        nlink: 2,
        ..t.fs.lstat(Path::new("/w/d/twin")).unwrap()
    };
    let op = Op::Link {
        source: Path::new("/w/d/twin"),
        stat: twin,
    };
    assert!(!t.ok("/w/d/third", op));
    // A new name for a protected file.
    assert!(!t.ok(
        "/w/d/x",
        link(Path::new("/w/s/.git/hooks/pre-commit"), File)
    ));
}

#[test]
fn removals_are_refused_only_by_deny_write() {
    let mut t = T::new();
    for path in [
        "/w/s/.git/hooks/pre-commit",
        "/w/s/.git/info/exclude",
        "/w/s/.git/config",
        "/w/s/.git/HEAD",
        "/w/s/.git",
        "/w/wt/.git",
        "/w/a/.vscode/tasks.json",
        "/w/a/.claude/settings.json",
        "/h/.bashrc",
        "/h/.ssh/config",
    ] {
        assert!(t.ok(path, Remove), "{path}");
    }
    assert!(!t.ok("/w/locked", Remove));
    assert!(!t.ok("/w/locked/x", Remove));
}

#[test]
fn the_memo_forgets() {
    let fs = TestFs::new(tree().dirs(&["/w/late"]));
    let mut t = T::with(fs, false);
    assert!(t.ok("/w/late/hooks/x", Create(File)));
    // A bare repository appears (made outside the jail).
    t.fs.add_dirs(&["/w/late/objects", "/w/late/hooks"]);
    t.fs.write("/w/late/HEAD", "");
    t.guard.forget();
    assert!(!t.ok("/w/late/hooks/x", Create(File)));
}

#[test]
fn targets_of_protected_links_in_anchors_are_protected() {
    let fs = TestFs::new(
        tree()
            .dirs(&["/w/dot", "/h/dots/git"])
            .files(&["/w/dot/bashrc"])
            .link("/w/.bashrc", "dot/bashrc")
            .link("/h/.config/git", "/h/dots/git"),
    );
    let mut t = T::with(fs, false);
    t.guard.prime(&t.fs, &[PathBuf::from("/w")]);
    assert!(!t.ok("/w/dot/bashrc", Write));
    assert!(!t.ok("/h/dots/git/config", Create(File)));
    assert!(!t.ok("/h/dots", Create(Symlink)) || t.fs.lstat(Path::new("/h/dots")).is_some());
    assert!(t.ok("/w/dot/other", Create(File)));
}

#[test]
fn names_that_may_matter() {
    for c in [
        ".vscode", ".git", "hooks", ".config", "fish", ".ssh", ".bashrc", ".claude",
    ] {
        assert!(names::may_matter(c), "{c}");
    }
    for c in ["src", "node_modules", "index.js", "a"] {
        assert!(!names::may_matter(c), "{c}");
    }
}
