//! Git directories and repositories, found the way git finds them, so the
//! guard protects what git will run rather than a list of names.
//!
//! - A **git directory** is a directory named `.git`, or one that holds
//!   `HEAD` and `objects` (or `commondir`, or `config`, to err on the safe
//!   side of a half-made one): git accepts such a directory as a bare
//!   repository, a separate git dir (`gitdir:` files point there) or a
//!   submodule's or worktree's git dir (`.git/modules/*`, `.git/worktrees/*`).
//!   Inside one, `config`, `commondir`, `gitdir`, `hooks/` and `info/` are
//!   protected ([`inside`]).
//! - The **markers** rule keeps new git directories from appearing outside a
//!   `.git`: no directory other than a `.git` may come to hold `HEAD` together
//!   with `objects`, `commondir`, `config` or `gitdir` ([`completes`]). So a
//!   corrupted `.git/HEAD` cannot make git fall back to an implicit bare
//!   repository planted in the worktree.
//! - A **repository** is what git's discovery finds for a directory: the
//!   nearest ancestor with a `.git` directory or `gitdir:` file, or a bare git
//!   directory. Its configuration files (and the files they include) name
//!   hook directories and programs, which are protected too ([`Repo`]).

use super::gitconfig::{self, ConfigFacts};
use super::{FileKind, GuardFs};
use crate::paths::lexical_join;
use std::path::{Path, PathBuf};

/// Entries whose combination makes a directory a git directory.
pub(crate) const MARKERS: &[&str] = &["HEAD", "objects", "refs", "commondir", "config", "gitdir"];

/// With `HEAD`, any of these completes a git directory (`refs` alone does
/// not: `.git/logs` holds `HEAD` and `refs`).
const COMPLETING: &[&str] = &["objects", "commondir", "config", "gitdir"];

/// Whether `dir` is a git directory (see the module docs).
pub(crate) fn is_git_dir(fs: &dyn GuardFs, dir: &Path) -> bool {
    if dir.file_name().is_some_and(|n| n == ".git") {
        return true;
    }
    fs.lstat(&dir.join("HEAD")).is_some()
        && ["objects", "commondir", "config"]
            .iter()
            .any(|m| fs.lstat(&dir.join(m)).is_some())
}

/// Whether giving the directory `dir` (not a `.git`) an entry `name` would
/// make it a git directory.
pub(crate) fn completes(fs: &dyn GuardFs, dir: &Path, name: &str) -> bool {
    if !MARKERS.contains(&name) || dir.file_name().is_some_and(|n| n == ".git") {
        return false;
    }
    let has = |m: &str| m == name || fs.lstat(&dir.join(m)).is_some();
    has("HEAD") && COMPLETING.iter().any(|m| has(m))
}

/// What a path inside a git directory is, relative to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inside {
    /// Git's own data (`objects/`, `refs/`, `index`, `HEAD`…): not protected.
    Data,
    /// `config`, `config.worktree`: protected unless `allowGitConfig`.
    Config,
    /// `commondir`, `gitdir`: redirect the repository elsewhere.
    Redirect,
    /// `hooks` or `info` itself: may be created empty, removed when empty.
    TemplateDir,
    /// A file git copies from its templates when it creates a repository
    /// (`hooks/*.sample`, `info/exclude`): may be created new.
    Template {
        /// A `*.sample` hook: never run, so it may also be written,
        /// renamed onto and removed.
        sample: bool,
    },
    /// Anything else in `hooks/` or `info/`.
    Protected,
}

/// Classify `rel`, a path relative to a git directory.
pub(crate) fn inside(rel: &Path) -> Inside {
    let mut parts = rel.iter().map(|c| c.to_str().unwrap_or(""));
    let first = parts.next().unwrap_or("");
    let second = parts.next();
    let deeper = parts.next().is_some();
    match (first, second) {
        ("config" | "config.worktree", None) => Inside::Config,
        ("commondir" | "gitdir", None) => Inside::Redirect,
        ("hooks" | "info", None) => Inside::TemplateDir,
        ("hooks", Some(name)) if !deeper && name.ends_with(".sample") => {
            Inside::Template { sample: true }
        }
        ("info", Some("exclude")) if !deeper => Inside::Template { sample: false },
        ("hooks" | "info", Some(_)) => Inside::Protected,
        _ => Inside::Data,
    }
}

/// A repository as git's discovery finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repo {
    /// Where hooks and command-valued keys run (the worktree's top level,
    /// or the git directory of a bare repository).
    pub(crate) top: PathBuf,
    /// Its git directory.
    pub(crate) git_dir: PathBuf,
}

/// The repository rooted exactly at `dir`, if any: `dir/.git` (a directory
/// or a `gitdir:` file), or `dir` itself when it is a bare git directory.
pub(crate) fn repo_at(fs: &dyn GuardFs, dir: &Path) -> Option<Repo> {
    let dotgit = dir.join(".git");
    match fs.lstat(&dotgit).map(|s| s.kind) {
        Some(FileKind::Dir) => Some(Repo {
            top: dir.to_path_buf(),
            git_dir: dotgit,
        }),
        Some(FileKind::File) => {
            let text = fs.read_file(&dotgit, 4096)?;
            let text = String::from_utf8_lossy(&text);
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            Some(Repo {
                top: dir.to_path_buf(),
                git_dir: lexical_join(dir, Path::new(target)),
            })
        }
        _ => is_git_dir(fs, dir).then(|| Repo {
            top: dir.to_path_buf(),
            git_dir: dir.to_path_buf(),
        }),
    }
}

/// Paths a repository's configuration makes executable or configuration:
/// hook directories, included files, programs of command-valued keys, and
/// the configuration files themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Protects {
    /// Directories: everything below is protected.
    pub(crate) dirs: Vec<PathBuf>,
    /// Single files.
    pub(crate) files: Vec<PathBuf>,
}

impl Protects {
    /// Add `other`'s paths that are not here yet.
    pub(crate) fn extend(&mut self, other: Protects) {
        for d in other.dirs {
            if !self.dirs.contains(&d) {
                self.dirs.push(d);
            }
        }
        for f in other.files {
            if !self.files.contains(&f) {
                self.files.push(f);
            }
        }
    }
}

/// The most configuration files followed through `include.path` from one
/// starting file (git's own limit is 10 levels).
const MAX_INCLUDES: usize = 32;

/// Read `config` (and what it includes) of a repository whose hooks run in
/// `top`; `home` expands `~/`. Every file looked at (read or missing) is
/// added to `read`, so a later change to one of them can be noticed.
pub(crate) fn config_protects(
    fs: &dyn GuardFs,
    config: &Path,
    top: &Path,
    home: &Path,
    read: &mut Vec<PathBuf>,
) -> Protects {
    let mut out = Protects::default();
    let mut todo = vec![config.to_path_buf()];
    let mut seen = Vec::new();
    while let Some(file) = todo.pop() {
        if seen.contains(&file) || seen.len() >= MAX_INCLUDES {
            continue;
        }
        seen.push(file.clone());
        read.push(file.clone());
        let Some(text) = fs.read_file(&file, 1 << 20) else {
            continue;
        };
        let facts: ConfigFacts = gitconfig::parse(&String::from_utf8_lossy(&text));
        let here = file.parent().unwrap_or(Path::new("/"));
        for hp in facts.hooks_paths {
            out.dirs.push(expand(&hp, top, home));
        }
        for prog in facts.programs {
            out.files.push(expand(&prog, top, home));
        }
        for inc in facts.includes {
            let path = expand(&inc, here, home);
            out.files.push(path.clone());
            todo.push(path);
        }
    }
    out
}

/// A configured path: `~/` is the home directory, a relative one is
/// relative to `base`.
fn expand(value: &str, base: &Path, home: &Path) -> PathBuf {
    if value == "~" {
        return home.to_path_buf();
    }
    match value.strip_prefix("~/") {
        Some(rest) => lexical_join(home, Path::new(rest)),
        None => lexical_join(base, Path::new(value)),
    }
}
