//! The rules that protect an open set by default, decided on an in-memory
//! tree: the home's configuration (every dot entry and the XDG
//! directories, opened only by an `allowWrite` entry that names it, with
//! the mandatory entries inside still held), configuration planted above a
//! `denyWrite` directory, and every entry of the catalogue of names at any
//! depth (families included) at depth 1 and at depth 9.
use super::testfs::{TestFs, Tree};
use super::*;
use std::path::Path;

use FileKind::{Dir, File, Symlink};
use Op::{Create, Meta, Remove, RenameFrom, Write};

fn plan(roots: &[&str], deny_write: &[&str]) -> GuardPlan {
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    GuardPlan {
        roots: strings(roots),
        private: vec!["/dev".into(), "/tmp".into()],
        deny_write: strings(deny_write),
        home: "/h".into(),
        config_home: Some("/h/cfg".into()),
        data_home: Some("/data".into()),
        state_home: None,
        allow_git_config: true,
        filter: FilterShape {
            notify: Vec::new(),
            legacy: Vec::new(),
            notify_if_write: Vec::new(),
            notify_if_mode: Vec::new(),
            notify_if_eq: Vec::new(),
            notify_unless_owner: Vec::new(),
            ids: Ids { uid: 0, gid: 0 },
            watch: Vec::new(),
            enosys: Vec::new(),
        },
    }
}

struct T {
    guard: Guard,
    fs: TestFs,
}

impl T {
    fn new(roots: &[&str], deny_write: &[&str], tree: Tree) -> T {
        T {
            guard: Guard::new(plan(roots, deny_write)),
            fs: TestFs::new(tree),
        }
    }

    fn verdict(&mut self, path: &str, op: Op<'_>) -> Verdict {
        let path = Path::new(path);
        let existing = self.fs.lstat(path);
        let req = Request { path, op, existing };
        self.guard.decide(&self.fs, &req)
    }

    fn ok(&mut self, path: &str, op: Op<'_>) -> bool {
        self.verdict(path, op) == Verdict::Allow
    }
}

fn stat(kind: FileKind) -> Stat {
    Stat {
        kind,
        dev: 1,
        ino: 4242,
        nlink: 1,
    }
}

const SRC: &str = "/h/staging";

fn home_tree() -> Tree {
    Tree::new()
        .dirs(&["/h/.npm/_npx", "/h/.cargo/bin", "/h/cfg", "/data", "/w"])
        .files(&["/h/.newrc", "/h/.ssh/known_hosts", "/h/notes.txt", SRC])
}

#[test]
fn a_writable_home_keeps_its_configuration() {
    // `/data` ($XDG_DATA_HOME) lies under a root above it, as the home can.
    let mut t = T::new(&["/h", "/w", "/"], &[], home_tree());
    for p in [
        "/h/.newrc",
        "/h/.gdbinit",
        "/h/.lesskey",
        "/h/.docker/cli-plugins/docker-buildx",
        "/h/.ssh/known_hosts",
        "/h/.config/kitty/kitty.conf",
        "/h/.local/share/x",
        "/h/.local/state/x",
        "/h/.npm/_cacache/index",
        "/h/cfg/alacritty/alacritty.toml",
        "/h/cfg/anything",
        "/data/applications/x.desktop",
        "/data/anything",
    ] {
        assert!(!t.ok(p, Create(File)), "{p}");
        assert!(
            !t.ok(p, Create(Dir)) || t.fs.lstat(Path::new(p)).is_some(),
            "{p}"
        );
    }
    // Every way of changing an existing one.
    let src = Path::new(SRC);
    for op in [
        Write,
        Meta,
        RenameFrom,
        Op::RenameTo {
            source: src,
            stat: stat(File),
        },
        Op::Link {
            source: src,
            stat: stat(File),
        },
    ] {
        assert!(!t.ok("/h/.newrc", op), "{op:?}");
    }
    assert!(!t.ok("/h/.newdir", Create(Symlink)));
    // Removing is allowed (it plants nothing); making it again is not.
    assert!(t.ok("/h/.newrc", Remove));
    t.fs.remove("/h/.newrc");
    assert!(!t.ok("/h/.newrc", Create(File)));
    // The user's visible files stay writable.
    assert!(t.ok("/h/notes.txt", Write));
    assert!(t.ok("/h/projects/a/b.txt", Create(File)));
    assert!(t.ok("/h/projects", Create(Dir)));
    // The message says what to do.
    match t.verdict("/h/.gdbinit", Create(File)) {
        Verdict::Deny(d) => assert_eq!(d.rule, "gdb", "{d}"),
        v => panic!("{v:?}"),
    }
    match t.verdict("/h/.newrc2", Create(File)) {
        Verdict::Deny(d) => {
            assert_eq!(d.rule, DEFAULT_RULE);
            assert!(d.to_string().contains("allowWrite"), "{d}");
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_root_above_the_home_keeps_its_configuration_too() {
    let mut t = T::new(&["/"], &[], home_tree());
    assert!(!t.ok("/h/.newrc", Write));
    assert!(!t.ok("/h/.config/x", Create(File)));
    assert!(t.ok("/h/notes.txt", Write));
}

#[test]
fn an_explicit_entry_opens_what_it_names_and_no_more() {
    let roots = [
        "/h",
        "/h/.myapp",
        "/h/.npm",
        "/h/.cargo",
        "/h/.ssh/known_hosts",
        "/h/cfg/app",
    ];
    let mut t = T::new(&roots, &[], home_tree());
    for p in [
        "/h/.myapp/state.json",
        "/h/.npm/_cacache/index",
        "/h/.cargo/.package-cache",
        "/h/cfg/app/settings",
    ] {
        assert!(t.ok(p, Create(File)), "{p}");
    }
    assert!(t.ok("/h/.ssh/known_hosts", Write));
    // The mandatory protections inside hold.
    for p in [
        "/h/.npm/_npx/x/package.json",
        "/h/.cargo/config.toml",
        "/h/.cargo/config",
        "/h/.cargo/bin/cargo-evil",
        "/h/.cargo/env",
        "/h/.cargo/env.fish",
        "/h/.cargo/registry/src/index/x-1.0/build.rs",
        "/h/.cargo/registry/cache/index/x-1.0.crate",
        "/h/.cargo/git/checkouts/x/build.rs",
        "/h/.ssh/rc",
        "/h/.ssh/authorized_keys",
    ] {
        assert!(!t.ok(p, Create(File)), "{p}");
    }
    assert!(
        !t.ok("/h/.npm/_npx", Create(Symlink)) || t.fs.lstat(Path::new("/h/.npm/_npx")).is_some()
    );
    // Outside what was named, the default holds.
    assert!(!t.ok("/h/.ssh/config2", Create(File)));
    assert!(!t.ok("/h/cfg/other", Create(File)));
    assert!(!t.ok("/h/.myapp2", Create(Dir)));
}

fn project_tree() -> Tree {
    Tree::new()
        .dirs(&["/h/src/safe/src", "/h/src/other", "/h/src/a/b/deep/src"])
        .files(&[
            "/h/src/safe/Cargo.toml",
            "/h/src/safe/package.json",
            "/h/src/a/b/deep/Cargo.toml",
            "/h/src/notes.env",
            "/h/src/README",
            "/h/staging",
        ])
}

#[test]
fn configuration_read_from_above_a_deny_write_directory() {
    let deny = ["/h/src/safe", "/h/src/notes.env", "/h/src/a/b/deep"];
    let mut t = T::new(&["/h/src"], &deny, project_tree());
    for p in [
        "/h/src/.cargo/config.toml",
        "/h/src/.cargo/config",
        "/h/src/.npmrc",
        "/h/src/.yarnrc.yml",
        "/h/src/rust-toolchain",
        "/h/src/rust-toolchain.toml",
        "/h/src/go.work",
        "/h/src/Directory.Build.props",
        "/h/src/Directory.Build.targets",
        "/h/src/NuGet.Config",
        "/h/src/global.json",
        "/h/src/.envrc",
        "/h/src/mise.toml",
        "/h/src/.mise.local.toml",
        "/h/src/.mise/config.toml",
        "/h/src/.config/mise.toml",
        "/h/src/.config/mise/conf.d/x.toml",
        "/h/src/.tool-versions",
        "/h/src/.python-version",
        "/h/src/.mvn/extensions.xml",
        "/h/src/.bazelversion",
        // Manifests that can adopt the directory: it holds its own.
        "/h/src/Cargo.toml",
        "/h/src/package.json",
        "/h/src/pnpm-workspace.yaml",
        // Further up, and between a deeper one and the root.
        "/h/src/a/.npmrc",
        "/h/src/a/b/.cargo/config.toml",
        // git would adopt a repository made above.
        "/h/src/.git",
    ] {
        let kind = if p.ends_with(".git") { Dir } else { File };
        assert!(!t.ok(p, Create(kind)), "{p}");
    }
    match t.verdict("/h/src/.npmrc", Create(File)) {
        Verdict::Deny(d) => assert_eq!(d.rule, ABOVE_RULE, "{d}"),
        v => panic!("{v:?}"),
    }
    // A link or a moved directory in place of a directory holding one.
    let src = Path::new("/h/staging");
    for p in ["/h/src/.cargo", "/h/src/.config"] {
        assert!(!t.ok(p, Create(Symlink)), "{p}");
        let to = Op::RenameTo {
            source: src,
            stat: stat(Dir),
        };
        assert!(!t.ok(p, to), "{p}");
    }
    // What a tool does not read from above for it stays writable: a
    // manifest the directory does not hold, a sibling's configuration, a
    // plain file, the configuration inside another project.
    for p in [
        "/h/src/pyproject.toml",
        "/h/src/README",
        "/h/src/other/.npmrc",
        "/h/src/other/.cargo/config.toml",
        "/h/src/other/Cargo.toml",
        "/h/src/.cargo",
    ] {
        let kind = if p.ends_with(".cargo") { Dir } else { File };
        assert!(t.ok(p, Create(kind)), "{p}");
    }
}

#[test]
fn a_deny_write_file_or_git_directory_reads_nothing_from_above() {
    let tree = project_tree().dirs(&["/h/src/r/.git/hooks"]);
    let deny = ["/h/src/notes.env", "/h/src/r/.git/hooks", "/h/src/missing"];
    let mut t = T::new(&["/h/src"], &deny, tree);
    for p in [
        "/h/src/.npmrc",
        "/h/src/.cargo/config.toml",
        "/h/src/r/.npmrc",
    ] {
        assert!(t.ok(p, Create(File)), "{p}");
    }
}

#[test]
fn a_new_repository_above_matters_only_where_none_is_found() {
    let tree = project_tree().dirs(&["/h/src/safe/.git/objects", "/h/src/safe/.git/refs"]);
    let tree = tree.files(&["/h/src/safe/.git/HEAD"]);
    let mut t = T::new(&["/h/src"], &["/h/src/safe"], tree);
    assert!(t.ok("/h/src/.git", Create(Dir)));
}

#[test]
fn every_name_of_the_catalogue_is_refused_at_depth_one_and_nine() {
    let mut t = T::new(&["/w"], &[], Tree::new().dirs(&["/w"]));
    for e in anywhere::ANYWHERE {
        for ex in e.examples() {
            for depth in [1usize, 9] {
                let dirs: String = (1..depth).map(|i| format!("d{i}/")).collect();
                let p = format!("/w/{dirs}{ex}");
                assert!(!t.ok(&p, Create(File)), "{} ({}): {p}", e.shown(), e.tool);
            }
        }
    }
}

#[test]
fn configuration_linked_from_elsewhere_is_protected_at_its_target() {
    let tree = Tree::new()
        .dirs(&["/h/.config", "/h/dotfiles/app", "/w"])
        .files(&["/h/dotfiles/lesskey", "/h/dotfiles/notes"])
        .link("/h/.lesskey2", "/h/dotfiles/lesskey")
        .link("/h/.config/app", "/h/dotfiles/app");
    let mut t = T::new(&["/h"], &[], tree);
    assert!(!t.ok("/h/dotfiles/lesskey", Write));
    assert!(!t.ok("/h/dotfiles/app/config.toml", Create(File)));
    assert!(t.ok("/h/dotfiles/notes", Write));
}
