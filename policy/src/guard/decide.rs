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

use super::above::Above;
use super::git::{self, Inside};
use super::knowledge::Knowledge;
use super::names::{self, XdgDirs};
use super::{FileKind, GuardFs, GuardPlan, Stat, anywhere};
use std::collections::HashSet;
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
    /// The rule, as shown to the user (for a catalogue entry: the tool).
    pub rule: &'static str,
    /// What the protected path does, when the rule alone does not say it
    /// (a catalogue entry's `runs`).
    pub detail: Option<&'static str>,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.detail {
            Some(d) => write!(f, "{}: {d}", self.rule),
            None => f.write_str(self.rule),
        }
    }
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
    Verdict::Deny(Denial { rule, detail: None })
}

/// What protects a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    why: Denial,
    inside: Option<Inside>,
}

impl Hit {
    fn plain(rule: &'static str) -> Self {
        Hit::detailed(rule, None)
    }

    fn detailed(rule: &'static str, detail: Option<&'static str>) -> Self {
        Hit {
            why: Denial { rule, detail },
            inside: None,
        }
    }

    fn entry(e: &'static super::pattern::Entry) -> Self {
        Hit::detailed(e.tool, Some(e.runs))
    }

    fn verdict(self) -> Verdict {
        Verdict::Deny(self.why)
    }
}

/// The rule shown when the default protection of the home's configuration
/// refuses a call.
pub const DEFAULT_RULE: &str = "the home's configuration, protected by default";
/// What to do about it.
pub const DEFAULT_HINT: &str = "name it (or a path inside it) in allowWrite to make it writable";
/// The rule shown for configuration planted above a protected directory.
pub const ABOVE_RULE: &str = "read from above by a denyWrite directory";

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
    xdg: XdgDirs,
    /// Every strict prefix of a [`names::HOME`] entry (`.config`, `.ssh`…),
    /// and the first component of every multi-component entry of
    /// [`anywhere::ANYWHERE`] (`.claude`, `.hg`, `.jj`).
    home_prefixes: HashSet<String>,
    shield_names: HashSet<&'static str>,
    above: Above,
    know: Knowledge,
}

impl Guard {
    /// A guard for `plan`, with an empty memo.
    pub fn new(plan: GuardPlan) -> Self {
        let paths = |v: &[String]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        let mut home_prefixes = HashSet::new();
        for e in names::HOME {
            let mut prefix = String::new();
            for part in e.leading() {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                home_prefixes.insert(prefix.clone());
            }
        }
        let shield_names = (anywhere::ANYWHERE.iter())
            .filter(|e| e.path.contains('/'))
            .filter_map(|e| e.leading().next())
            .collect();
        let roots = paths(&plan.roots);
        let deny_write = paths(&plan.deny_write);
        let xdg = plan.xdg();
        Guard {
            above: Above::new(&deny_write, &roots),
            roots,
            private: paths(&plan.private),
            deny_write,
            home: PathBuf::from(&plan.home),
            home_prefixes,
            shield_names,
            know: Knowledge::new(PathBuf::from(&plan.home), xdg.clone()),
            xdg,
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
        self.above.forget();
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
        if covered {
            return Some(Hit::plain(
                "a hook directory, included configuration or program git runs",
            ));
        }
        self.by_default(p).or_else(|| self.read_from_above(fs, p))
    }

    /// [`anywhere::ANYWHERE`], at any depth.
    fn by_name(&self, p: &Path) -> Option<Hit> {
        let parts: Vec<&str> = p.iter().skip(1).map(|c| c.to_str().unwrap_or("")).collect();
        anywhere::index().find(&parts).map(|(e, _)| Hit::entry(e))
    }

    /// [`names::HOME`], relative to the home directory (and the XDG
    /// directories set elsewhere).
    fn by_home(&self, p: &Path) -> Option<Hit> {
        names::mandatory_at(p, &self.home, &self.xdg).map(Hit::entry)
    }

    /// The home's configuration ([`names::default_area`]), unless the
    /// writable root nearest to `p` names it explicitly.
    fn by_default(&self, p: &Path) -> Option<Hit> {
        let area = names::default_area(p, &self.home, &self.xdg)?;
        if names::explicitly_writable(&area, p, &self.roots) {
            return None;
        }
        Some(Hit::detailed(DEFAULT_RULE, Some(DEFAULT_HINT)))
    }

    /// Configuration a `denyWrite` directory below `p` reads from above
    /// (`above.rs`).
    fn read_from_above(&mut self, fs: &dyn GuardFs, p: &Path) -> Option<Hit> {
        let know = &mut self.know;
        let mut no_repo = |d: &Path| know.repo_for(fs, d).is_none();
        let e = self.above.hit(fs, p, &mut no_repo)?;
        Some(Hit::detailed(ABOVE_RULE, Some(e.runs)))
    }

    /// Inside a git directory: its configuration, hooks, info and redirects.
    fn in_git_dir(&mut self, fs: &dyn GuardFs, p: &Path) -> Option<Hit> {
        let git_dir = p
            .ancestors()
            .skip(1)
            .find(|a| self.know.is_git_dir(fs, a))?;
        let rel = p.strip_prefix(git_dir).ok()?;
        let inside = git::inside(rel);
        let rule = match inside {
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
            inside: Some(inside),
            ..Hit::plain(rule)
        })
    }

    /// Whether replacing `p` by a symlink or a moved directory would change
    /// what a protected path below it resolves to.
    fn shields(&mut self, fs: &dyn GuardFs, p: &Path, name: &str) -> bool {
        if matches!(name, ".git") || self.shield_names.contains(name) {
            return true;
        }
        let strictly_above = |q: &Path| q != p && q.starts_with(p);
        if let Ok(rel) = p.strip_prefix(&self.home)
            && rel.to_str().is_some_and(|r| self.home_prefixes.contains(r))
        {
            return true;
        }
        for (anchor, prefix) in self.xdg.anchors() {
            let twin = p.strip_prefix(anchor).ok().and_then(Path::to_str);
            if anchor.starts_with(p)
                || twin.is_some_and(|r| self.home_prefixes.contains(&format!("{prefix}{r}")))
            {
                return true;
            }
        }
        if self.above.shields(fs, p) {
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
                return hit.verdict();
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
                if let Some(h) = hit {
                    return h.verdict();
                }
                if name == ".git" {
                    return deny("a .git that is not a new directory");
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
            Some(h) => return h.verdict(),
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
        Some(h) if h.inside != Some(Inside::Template { sample: true }) => h.verdict(),
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
