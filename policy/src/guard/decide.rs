//! The guard's decision: may this write-like call go ahead?
//!
//! pid 1 resolves every write-like call of the command to the real object it
//! acts on (the parent directory's real path and the final name, or the real
//! path of an existing file) and asks [`Guard::decide`]. The decision looks
//! at the path's names ([`super::names`]), at the git directories and
//! repositories around it ([`super::git`], through the [`GuardFs`] probe), at
//! the user's `denyWrite` entries, and at what the call does ([`Op`]).
//!
//! Memory: what the probe answered about directories (is it a git directory,
//! which repository holds it, what its configuration protects) is kept
//! (`knowledge.rs`), so a call in a directory seen before costs no extra
//! system call. pid 1 reports every call it performed ([`Guard::performed`]);
//! what a call could change (a marker name or a `.git` in a directory, a
//! moved or removed directory, a written git configuration) is forgotten or
//! read again, and pid 1 empties everything on a timer ([`Guard::forget`])
//! for changes made outside the jail.

use super::git::{self, Inside};
use super::knowledge::Knowledge;
use super::names::{self, Entry};
use super::{FileKind, GuardFs, GuardPlan, Stat};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What a guarded call does to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// Creates a new entry of this kind (`open(O_CREAT)`, `mkdir`,
    /// `mknod`, `symlink`); the path may already exist (`open(O_CREAT)`
    /// then opens it).
    Create(FileKind),
    /// Gives an existing file (`source`, whose `lstat` is `stat`) a new name.
    Link {
        /// The existing name.
        source: &'a Path,
        /// What it is.
        stat: Stat,
    },
    /// The target of a rename: `source` arrives under the path.
    RenameTo {
        /// The entry that moves.
        source: &'a Path,
        /// What it is.
        stat: Stat,
    },
    /// The source of a rename: the entry leaves the path.
    RenameFrom,
    /// `unlink`, `rmdir`.
    Remove,
    /// Opens an existing file for writing, or truncates it.
    Write,
    /// Changes metadata: mode, owner, times, extended attributes.
    Meta,
}

/// One guarded call, resolved.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The real path acted on (absolute, no symlink but possibly the last
    /// component when the call does not follow it).
    pub path: &'a Path,
    /// What the call does.
    pub op: Op<'a>,
    /// `lstat` of the path before the call (`None`: it does not exist).
    pub existing: Option<Stat>,
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    /// The rule, as shown to the user.
    pub rule: &'static str,
}

/// The guard's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Perform the call.
    Allow,
    /// Refuse it with EACCES.
    Deny(Denial),
}

fn deny(rule: &'static str) -> Verdict {
    Verdict::Deny(Denial { rule })
}

/// What protects a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    why: &'static str,
    inside: Option<Inside>,
}

impl Hit {
    fn plain(why: &'static str) -> Self {
        Hit { why, inside: None }
    }
}

/// Entries of a git directory a link or a moved directory must not replace.
const GIT_SHIELDED: &[&str] = &[
    "hooks",
    "info",
    "modules",
    "worktrees",
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
];

/// The decision function with its memo (owned by pid 1, one per jail).
#[derive(Debug)]
pub struct Guard {
    plan: GuardPlan,
    roots: Vec<PathBuf>,
    private: Vec<PathBuf>,
    deny_write: Vec<PathBuf>,
    home: PathBuf,
    config_home: Option<PathBuf>,
    anywhere: HashMap<&'static str, &'static Entry>,
    home_table: HashMap<&'static str, &'static Entry>,
    /// Every strict prefix of a [`names::HOME`] entry (`.config`, `.ssh`…).
    home_prefixes: HashSet<String>,
    know: Knowledge,
}

impl Guard {
    /// A guard for `plan`, with an empty memo.
    pub fn new(plan: GuardPlan) -> Self {
        let paths = |v: &[String]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        let mut home_prefixes = HashSet::new();
        for e in names::HOME {
            let mut prefix = String::new();
            for part in e
                .path
                .split('/')
                .collect::<Vec<_>>()
                .iter()
                .rev()
                .skip(1)
                .rev()
            {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                home_prefixes.insert(prefix.clone());
            }
        }
        Guard {
            roots: paths(&plan.roots),
            private: paths(&plan.private),
            deny_write: paths(&plan.deny_write),
            home: PathBuf::from(&plan.home),
            config_home: plan.config_home.as_ref().map(PathBuf::from),
            anywhere: names::ANYWHERE.iter().map(|e| (e.path, e)).collect(),
            home_table: names::HOME.iter().map(|e| (e.path, e)).collect(),
            home_prefixes,
            know: Knowledge::new(
                PathBuf::from(&plan.home),
                plan.config_home.as_ref().map(PathBuf::from),
            ),
            plan,
        }
    }

    /// The plan this guard decides with.
    pub fn plan(&self) -> &GuardPlan {
        &self.plan
    }

    /// Whether the guard decides anything for `path`: it is below a writable
    /// root and not in one of the jail's private file systems (a root bound
    /// into one, such as a workspace under the host's `/tmp`, is guarded).
    pub fn guarded(&self, path: &Path) -> bool {
        let root = self.roots.iter().filter(|r| path.starts_with(r)).max();
        let Some(root) = root else { return false };
        !self
            .private
            .iter()
            .any(|p| path.starts_with(p) && !root.starts_with(p))
    }

    /// Empty the memo (changes made outside the jail are seen again).
    pub fn forget(&mut self) {
        self.know.forget();
    }

    /// Learn about these directories ahead of the first call (the working
    /// directory, the writable roots): their repositories' hook directories
    /// and programs may lie outside them, and a protected name there that
    /// is a link (a dotfiles checkout) protects its target.
    pub fn prime(&mut self, fs: &dyn GuardFs, dirs: &[PathBuf]) {
        self.know.set_anchors(dirs);
        self.know.load(fs);
    }

    /// Decide one call.
    pub fn decide(&mut self, fs: &dyn GuardFs, req: &Request<'_>) -> Verdict {
        let p = req.path;
        let Some(name) = p.file_name().and_then(OsStr::to_str) else {
            return Verdict::Allow;
        };
        if !self.guarded(p) {
            return Verdict::Allow;
        }
        if let Some(v) = self.user_denied(req) {
            return v;
        }
        if req.op == Op::Remove {
            return removable();
        }
        let dotgit_file = name == ".git" && req.existing.is_some_and(|s| s.kind != FileKind::Dir);
        let hit = match dotgit_file {
            // A `.git` file or link redirects git to another directory.
            true => Some(Hit::plain("a .git file or link (gitdir: redirect)")),
            false => self.classify(fs, p),
        };
        match req.op {
            Op::Write | Op::Meta => self.change(fs, req, hit),
            Op::Remove => removable(),
            Op::RenameFrom => movable(name, hit),
            Op::Create(kind) => self.create(fs, p, name, kind, req.existing, hit),
            Op::Link { source, stat } => self.link(fs, req, name, source, stat, hit),
            Op::RenameTo { source, stat } => self.arrive(fs, req, name, source, stat, hit),
        }
    }

    /// Tell the guard a call was performed, so what it knows of the tree
    /// follows (see `knowledge.rs`: the facts the call may have changed are
    /// forgotten, a changed configuration is read again at once).
    pub fn performed(&mut self, fs: &dyn GuardFs, req: &Request<'_>) {
        let tree = match req.op {
            Op::Create(kind) => kind != FileKind::File,
            Op::RenameTo { stat, .. } => stat.kind != FileKind::File,
            Op::RenameFrom | Op::Remove => req.existing.is_none_or(|s| s.kind != FileKind::File),
            Op::Link { .. } | Op::Write | Op::Meta => false,
        };
        self.know.changed(fs, req.path, tree);
    }

    fn user_denied(&self, req: &Request<'_>) -> Option<Verdict> {
        let p = req.path;
        if self.deny_write.iter().any(|d| p.starts_with(d)) {
            return Some(deny("denyWrite"));
        }
        let ancestor = self.deny_write.iter().any(|d| d.starts_with(p));
        let moves_away = matches!(req.op, Op::RenameFrom);
        (ancestor && moves_away).then(|| deny("moves a denyWrite path"))
    }

    /// What protects `p` itself, if anything.
    fn classify(&mut self, fs: &dyn GuardFs, p: &Path) -> Option<Hit> {
        if let Some(hit) = self.by_name(p).or_else(|| self.by_home(p)) {
            return Some(hit);
        }
        if let Some(hit) = self.in_git_dir(fs, p) {
            return Some(hit);
        }
        let parent = p.parent().unwrap_or(Path::new("/"));
        self.know.repo_for(fs, parent);
        let known = &self.know.known();
        let covered =
            known.dirs.iter().any(|d| p.starts_with(d)) || known.files.iter().any(|f| f == p);
        covered.then(|| Hit::plain("a hook directory, included configuration or program git runs"))
    }

    /// [`names::ANYWHERE`] and [`names::CLAUDE`], at any depth.
    fn by_name(&self, p: &Path) -> Option<Hit> {
        let parts: Vec<&str> = p.iter().skip(1).map(|c| c.to_str().unwrap_or("")).collect();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            if let Some(e) = self.anywhere.get(part)
                && (e.dir || last)
            {
                return Some(Hit::plain(e.why));
            }
            if *part == ".claude"
                && let Some(next) = parts.get(i + 1)
                && let Some(e) = names::find(names::CLAUDE, next)
                && (e.dir || i + 2 == parts.len())
            {
                return Some(Hit::plain(e.why));
            }
        }
        None
    }

    /// [`names::HOME`], relative to the home directory (and `.config/`
    /// entries relative to `$XDG_CONFIG_HOME`).
    fn by_home(&self, p: &Path) -> Option<Hit> {
        let mut found = None;
        if let Ok(rel) = p.strip_prefix(&self.home) {
            found = self.home_entry(rel, "");
        }
        if found.is_none()
            && let Some(ch) = &self.config_home
            && let Ok(rel) = p.strip_prefix(ch)
        {
            found = self.home_entry(rel, names::CONFIG_PREFIX);
        }
        found.map(|e| Hit::plain(e.why))
    }

    fn home_entry(&self, rel: &Path, prefix: &str) -> Option<&'static Entry> {
        let mut key = prefix.trim_end_matches('/').to_owned();
        let parts: Vec<&OsStr> = rel.iter().collect();
        for (i, part) in parts.iter().enumerate() {
            if !key.is_empty() {
                key.push('/');
            }
            key.push_str(part.to_str()?);
            if let Some(e) = self.home_table.get(key.as_str())
                && (e.dir || i + 1 == parts.len())
            {
                return Some(e);
            }
        }
        None
    }

    /// Inside a git directory: its configuration, hooks, info and redirects.
    fn in_git_dir(&mut self, fs: &dyn GuardFs, p: &Path) -> Option<Hit> {
        let git_dir = p
            .ancestors()
            .skip(1)
            .find(|a| self.know.is_git_dir(fs, a))?;
        let rel = p.strip_prefix(git_dir).ok()?;
        let inside = git::inside(rel);
        let why = match inside {
            Inside::Data => return None,
            Inside::Config if self.plan.allow_git_config => return None,
            Inside::Config => "a git directory's config (allowGitConfig is off)",
            Inside::Redirect => {
                "a git directory's commondir or gitdir (git worktree add and submodules: run them outside the jail)"
            }
            Inside::TemplateDir | Inside::Template { .. } | Inside::Protected => {
                "a git directory's hooks or info"
            }
        };
        Some(Hit {
            why,
            inside: Some(inside),
        })
    }

    /// Whether replacing `p` by a symlink or a moved directory would change
    /// what a protected path below it resolves to.
    fn shields(&mut self, fs: &dyn GuardFs, p: &Path, name: &str) -> bool {
        if matches!(name, ".git" | ".claude") {
            return true;
        }
        let strictly_above = |q: &Path| q != p && q.starts_with(p);
        if let Ok(rel) = p.strip_prefix(&self.home)
            && rel.to_str().is_some_and(|r| self.home_prefixes.contains(r))
        {
            return true;
        }
        if let Some(ch) = &self.config_home
            && (ch.starts_with(p)
                || p.strip_prefix(ch)
                    .ok()
                    .and_then(Path::to_str)
                    .is_some_and(|r| {
                        self.home_prefixes
                            .contains(&format!("{}{r}", names::CONFIG_PREFIX))
                    }))
        {
            return true;
        }
        let known = &self.know.known();
        if self.deny_write.iter().any(|d| strictly_above(d))
            || known.dirs.iter().any(|d| strictly_above(d))
            || known.files.iter().any(|f| strictly_above(f))
        {
            return true;
        }
        // Inside a git directory, the entries that lead to what git runs or
        // reads as configuration (git itself makes a test link there).
        let parent = p.parent().unwrap_or(Path::new("/"));
        GIT_SHIELDED.contains(&name) && self.know.is_git_dir(fs, parent)
    }

    fn create(
        &mut self,
        fs: &dyn GuardFs,
        p: &Path,
        name: &str,
        kind: FileKind,
        existing: Option<Stat>,
        hit: Option<Hit>,
    ) -> Verdict {
        if existing.is_some() && kind != FileKind::File {
            // Nothing is created: the kernel answers EEXIST.
            return Verdict::Allow;
        }
        if name == ".git" && kind != FileKind::Dir {
            return deny(
                "a .git that is not a new directory (git worktree add and submodules: run them outside the jail)",
            );
        }
        if let Some(hit) = hit {
            let fresh = existing.is_none();
            let template = match hit.inside {
                Some(Inside::TemplateDir) => kind == FileKind::Dir,
                Some(Inside::Template { .. }) => kind == FileKind::File && fresh,
                _ => false,
            };
            if !template {
                return deny(hit.why);
            }
        }
        if kind == FileKind::Symlink && self.shields(fs, p, name) {
            return deny("a symlink in place of a directory that holds protected paths");
        }
        let parent = p.parent().unwrap_or(Path::new("/"));
        if git::completes(fs, parent, name) {
            return deny("would make a git directory outside .git (HEAD with objects or config)");
        }
        Verdict::Allow
    }

    fn link(
        &mut self,
        fs: &dyn GuardFs,
        req: &Request<'_>,
        name: &str,
        source: &Path,
        stat: Stat,
        hit: Option<Hit>,
    ) -> Verdict {
        let kind = if stat.kind == FileKind::Symlink {
            FileKind::Symlink
        } else {
            FileKind::File
        };
        let v = self.create(fs, req.path, name, kind, req.existing, hit);
        if v != Verdict::Allow {
            return v;
        }
        if self.guarded(source) && self.classify(fs, source).is_some() {
            return deny("a new name for a protected file");
        }
        if stat.kind == FileKind::File
            && stat.nlink > 1
            && self.know.is_protected_id(fs, source, stat)
        {
            return deny("a new name for a hard link of a protected file");
        }
        Verdict::Allow
    }

    /// The target of a rename, judged by what arrives there.
    fn arrive(
        &mut self,
        fs: &dyn GuardFs,
        req: &Request<'_>,
        name: &str,
        source: &Path,
        stat: Stat,
        hit: Option<Hit>,
    ) -> Verdict {
        if source.file_name().is_some_and(|n| n == ".git") {
            return deny("moves a .git directory");
        }
        match stat.kind {
            FileKind::Dir => {
                if name == ".git" || hit.is_some() {
                    return deny(hit.map_or("a .git that is not a new directory", |h| h.why));
                }
                if self.shields(fs, req.path, name) {
                    return deny("a directory moved in place of one that holds protected paths");
                }
                let parent = req.path.parent().unwrap_or(Path::new("/"));
                if git::completes(fs, parent, name) {
                    return deny(
                        "would make a git directory outside .git (HEAD with objects or config)",
                    );
                }
                Verdict::Allow
            }
            FileKind::Symlink => self.create(fs, req.path, name, FileKind::Symlink, None, hit),
            _ => {
                let sample =
                    hit.is_some_and(|h| h.inside == Some(Inside::Template { sample: true }));
                if sample {
                    return Verdict::Allow;
                }
                // A rename may replace an existing file: judged as a new one.
                self.create(fs, req.path, name, FileKind::File, None, hit)
            }
        }
    }

    /// Write, truncate or change the metadata of an existing entry.
    fn change(&mut self, fs: &dyn GuardFs, req: &Request<'_>, hit: Option<Hit>) -> Verdict {
        match hit {
            Some(h) if h.inside == Some(Inside::Template { sample: true }) => {}
            Some(h) => return deny(h.why),
            None => {}
        }
        if let Some(stat) = req.existing
            && stat.kind == FileKind::File
            && stat.nlink > 1
            && self.know.is_protected_id(fs, req.path, stat)
        {
            return deny("a hard link of a protected file");
        }
        Verdict::Allow
    }
}

/// The source of a rename: protected entries stay where they are.
fn movable(name: &str, hit: Option<Hit>) -> Verdict {
    if name == ".git" {
        return deny("moves a .git directory");
    }
    match hit {
        Some(h) if h.inside != Some(Inside::Template { sample: true }) => deny(h.why),
        _ => Verdict::Allow,
    }
}

/// `unlink`/`rmdir` are allowed whatever they remove (only `denyWrite`,
/// checked first, refuses them): the guard keeps the user's tools from
/// running what the command planted, and a removal plants nothing. What
/// runs in place of a removed file (git finding an enclosing repository
/// once a `.git` is gone, bash reading `.profile` once `.bash_profile` is
/// gone) was there before the run or passed the guard when it was made,
/// since making, writing and moving into protected names stay refused.
/// So a clone, a `node_modules` with nested repositories or a build
/// directory can be cleaned up in the jail.
fn removable() -> Verdict {
    Verdict::Allow
}
