//! The decision's memory (`knowledge.rs`) follows what the command changes
//! through the guard: each kept fact, changed the way a command in the jail
//! changes it (pid 1 then reports the call with [`Guard::performed`]), is
//! seen by the next decision; a removal pid 1 never hears of (the filter
//! lets removals through when nothing can refuse them) leaves the guard
//! protecting more, never less; and a fact kept costs no probe.

use super::testfs::{TestFs, Tree};
use super::*;
use std::path::Path;

struct J {
    guard: Guard,
    fs: TestFs,
}

fn plan(allow_git_config: bool) -> GuardPlan {
    GuardPlan {
        roots: vec!["/w".into()],
        private: vec!["/dev".into()],
        deny_write: Vec::new(),
        home: "/h".into(),
        config_home: None,
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

impl J {
    fn new(fs: TestFs, allow_git_config: bool) -> J {
        J {
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

    /// How many times deciding `op` at `path` asks the probe.
    fn probes(&mut self, path: &str, op: Op<'_>) -> u64 {
        let p = Path::new(path);
        let existing = self.fs.lstat(p);
        let before = self.fs.probes.get();
        let req = Request {
            path: p,
            op,
            existing,
        };
        self.guard.decide(&self.fs, &req);
        self.fs.probes.get() - before
    }

    /// Decide `op` at `path`; when allowed, make `change` and report it
    /// as pid 1 does after performing a call.
    fn did(&mut self, path: &str, op: Op<'_>, change: impl FnOnce(&TestFs)) -> bool {
        let p = Path::new(path);
        let existing = self.fs.lstat(p);
        let req = Request {
            path: p,
            op,
            existing,
        };
        if self.guard.decide(&self.fs, &req) != Verdict::Allow {
            return false;
        }
        change(&self.fs);
        self.guard.performed(&self.fs, &req);
        true
    }

    /// A file written the way git writes its configuration: a lock file
    /// made, then renamed over the file.
    fn git_write(&mut self, path: &str, text: &str) -> bool {
        let lock = format!("{path}.lock");
        let made = self.did(&lock, Op::Create(FileKind::File), |fs| {
            fs.write(&lock, text)
        });
        let stat = self.fs.lstat(Path::new(&lock));
        let (Some(stat), true) = (stat, made) else {
            return false;
        };
        let from = self.did(&lock, Op::RenameFrom, |_| {});
        let source = PathBuf::from(&lock);
        let to = Op::RenameTo {
            source: &source,
            stat,
        };
        from && self.did(path, to, |fs| fs.rename(&lock, path))
    }
}

use FileKind::{Dir, File};
use Op::{Create, RenameFrom, RenameTo};
use std::path::PathBuf;

fn dir_stat() -> Stat {
    Stat {
        kind: Dir,
        dev: 1,
        ino: 5,
        nlink: 2,
    }
}

#[test]
fn a_new_git_directory_is_seen() {
    let fs = TestFs::new(Tree::new().dirs(&["/w/p/hk", "/h"]));
    let mut j = J::new(fs, true);
    assert!(j.ok("/w/p/hk/pre-commit", Create(File)));
    assert!(j.did("/w/p/.git", Create(Dir), |fs| fs.add_dirs(&["/w/p/.git"])));
    for d in ["objects", "refs"] {
        let path = format!("/w/p/.git/{d}");
        assert!(j.did(&path, Create(Dir), |fs| fs.add_dirs(&[path.as_str()])));
    }
    assert!(j.did("/w/p/.git/HEAD", Create(File), |fs| {
        fs.write("/w/p/.git/HEAD", "ref: refs/heads/main\n")
    }));
    assert!(j.git_write("/w/p/.git/config", "[core]\n\thooksPath = hk\n"));
    assert!(!j.ok("/w/p/hk/pre-commit", Create(File)));
    assert!(j.ok("/w/p/other/pre-commit", Create(File)));
}

#[test]
fn a_changed_hooks_path_is_seen() {
    let fs = TestFs::new(Tree::new().dirs(&["/w/r/.git/objects", "/w/r/one", "/w/r/two", "/h"]))
        .with("/w/r/.git/HEAD", "ref: refs/heads/main\n")
        .with("/w/r/.git/config", "[core]\n\thooksPath = one\n");
    let mut j = J::new(fs, true);
    assert!(!j.ok("/w/r/one/pre-commit", Create(File)));
    assert!(j.ok("/w/r/two/pre-commit", Create(File)));
    assert!(j.git_write("/w/r/.git/config", "[core]\n\thooksPath = two\n"));
    assert!(!j.ok("/w/r/two/pre-commit", Create(File)));
    assert!(j.ok("/w/r/one/pre-commit", Create(File)));
    // A file it now includes is configuration too.
    assert!(j.ok("/w/r/inc.cfg", Create(File)));
    assert!(j.git_write("/w/r/.git/config", "[include]\n\tpath = ../inc.cfg\n"));
    assert!(!j.ok("/w/r/inc.cfg", Create(File)));
    assert!(j.ok("/w/r/two/pre-commit", Create(File)));
}

#[test]
fn a_renamed_parent_is_seen() {
    let fs = TestFs::new(Tree::new().dirs(&["/w/p/r/.git/objects", "/w/p/r/hk", "/h"]))
        .with("/w/p/r/.git/HEAD", "ref: refs/heads/main\n")
        .with("/w/p/r/.git/config", "[core]\n\thooksPath = hk\n");
    let mut j = J::new(fs, false);
    assert!(!j.ok("/w/p/r/hk/pre-commit", Create(File)));
    assert!(j.ok("/w/q/r/hk/pre-commit", Create(File)));
    let source = PathBuf::from("/w/p");
    assert!(j.did("/w/p", RenameFrom, |_| {}));
    let to = RenameTo {
        source: &source,
        stat: dir_stat(),
    };
    assert!(j.did("/w/q", to, |fs| fs.rename("/w/p", "/w/q")));
    assert!(!j.ok("/w/q/r/hk/pre-commit", Create(File)));
    assert!(!j.ok("/w/q/r/.git/hooks/pre-commit", Create(File)));
}

#[test]
fn a_removal_pid_one_never_hears_of_protects_more() {
    let fs = TestFs::new(Tree::new().dirs(&[
        "/w/outer/.git/objects",
        "/w/outer/inner/.git/objects",
        "/w/outer/inner/src",
        "/h",
    ]))
    .with("/w/outer/.git/HEAD", "ref: refs/heads/main\n")
    .with("/w/outer/.git/config", "[core]\n\thooksPath = inner/hk\n")
    .with("/w/outer/inner/.git/HEAD", "ref: refs/heads/main\n");
    let mut j = J::new(fs, false);
    // Only the inner repository is around this call, but the outer one is
    // read with it: git finds it once the inner `.git` is gone.
    assert!(j.ok("/w/outer/inner/src/x", Create(File)));
    j.fs.remove("/w/outer/inner/.git");
    assert!(!j.ok("/w/outer/inner/hk/pre-commit", Create(File)));
}

#[test]
fn kept_facts_cost_no_probe() {
    let fs = TestFs::new(Tree::new().dirs(&["/w/r/.git/objects", "/w/r/src/deep", "/h"]))
        .with("/w/r/.git/HEAD", "ref: refs/heads/main\n");
    let mut j = J::new(fs, false);
    assert!(j.ok("/w/r/src/deep/a.rs", Create(File)));
    for name in ["b.rs", "c.rs", "d.rs"] {
        let path = format!("/w/r/src/deep/{name}");
        assert_eq!(j.probes(&path, Create(File)), 0, "{name}");
    }
    assert_eq!(j.probes("/w/r/src/deep", Create(Dir)), 0);
    // A removal decides nothing and looks at nothing.
    assert_eq!(j.probes("/w/r/.git/hooks/pre-commit", Op::Remove), 0);
}
