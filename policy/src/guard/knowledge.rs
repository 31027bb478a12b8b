//! What the guard learns about the filesystem around the paths it decides
//! — which directories are git directories, which repository git finds for
//! a directory and what its configuration (and the user's global one)
//! protects, the targets of protected names that are links, the inodes of
//! protected files — kept so a call in a directory seen before costs no
//! system call.
//!
//! Every fact is kept until something that could change it is performed
//! through the guard ([`Knowledge::changed`]): a marker name or a `.git`
//! made, moved or removed in a directory forgets what is known of that
//! directory and below it (which repository git finds there); a directory
//! moved or removed forgets its subtree; a configuration file that was read
//! (or looked for) being written, made, moved or removed reloads what it
//! protects at once. Facts may be kept a little longer than true, never
//! shorter: a removal pid 1 does not see (one made outside the jail) can
//! only leave a fact that protects more than needed, because every
//! repository enclosing a directory is loaded with it, so a `.git` removed
//! below one cannot make git find a repository the guard has not read. [`Knowledge::forget`] empties everything (pid 1
//! calls it on a timer, for changes made outside the jail).

use super::git::{self, Protects, Repo};
use super::names::{self, XdgDirs};
use super::{FileKind, GuardFs, Stat};
use super::{anywhere, pattern::Form};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Where a set of protected paths comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Source {
    /// The user's global git configuration.
    Globals,
    /// The targets of protected names that are links.
    LinkTargets,
    /// A repository's configuration, by its git directory and the top its
    /// hooks run in (a git directory reached from inside is its own top).
    Repo(PathBuf, PathBuf),
}

/// The guard's memo and what it is anchored at.
#[derive(Debug)]
pub(super) struct Knowledge {
    home: PathBuf,
    xdg: XdgDirs,
    /// Directories whose protected names are looked at as links: the
    /// writable roots and the command's working directory.
    anchors: Vec<PathBuf>,
    memo: Memo,
}

/// Facts keyed by path bytes, so a subtree is one range (see [`below`]).
type ByPath<T> = BTreeMap<OsString, T>;

#[derive(Debug, Default)]
struct Memo {
    git_dir: ByPath<bool>,
    repo: ByPath<Option<Rc<Repo>>>,
    /// What each loaded source protects.
    sources: BTreeMap<Source, Protects>,
    /// Repositories loaded, by git directory and top.
    repos: HashMap<(PathBuf, PathBuf), Rc<Repo>>,
    /// Every configuration file a source read or looked for (and the
    /// target of one that is a link), and the sources that read it.
    configs: HashMap<OsString, Vec<Source>>,
    /// The union of `sources`.
    known: Protects,
    globals_loaded: bool,
    home_ids: Option<HashSet<(u64, u64)>>,
}

impl Knowledge {
    pub(super) fn new(home: PathBuf, xdg: XdgDirs) -> Self {
        Knowledge {
            home,
            xdg,
            anchors: Vec::new(),
            memo: Memo::default(),
        }
    }

    pub(super) fn set_anchors(&mut self, dirs: &[PathBuf]) {
        self.anchors = dirs.to_vec();
    }

    /// Empty the memo.
    pub(super) fn forget(&mut self) {
        self.memo = Memo::default();
    }

    /// Hook directories, included configuration files and programs known so
    /// far (from every repository learnt and the global configuration).
    pub(super) fn known(&self) -> &Protects {
        &self.memo.known
    }

    pub(super) fn is_git_dir(&mut self, fs: &dyn GuardFs, dir: &Path) -> bool {
        if let Some(v) = self.memo.git_dir.get(dir.as_os_str()) {
            return *v;
        }
        let v = git::is_git_dir(fs, dir);
        self.memo.git_dir.insert(dir.as_os_str().to_owned(), v);
        v
    }

    /// What the memo learns once: the global git configuration, the
    /// anchors' repositories, and the targets of protected names that are
    /// links in the anchors and the home directory.
    pub(super) fn load(&mut self, fs: &dyn GuardFs) {
        if self.memo.globals_loaded {
            return;
        }
        self.memo.globals_loaded = true;
        self.load_globals(fs);
        for dir in self.anchors.clone() {
            self.repo_for(fs, &dir);
        }
        self.load_link_targets(fs);
    }

    /// A protected name that is a link makes its target protected: tools
    /// read the target through it (`~/.bashrc -> dotfiles/bashrc`).
    fn load_link_targets(&mut self, fs: &dyn GuardFs) {
        // Families have no one name to look at: their exact spellings only.
        let exact = |e: &&super::pattern::Entry| e.form == Form::Exact;
        let mut names: Vec<PathBuf> = Vec::new();
        let local: Vec<PathBuf> = (anywhere::ANYWHERE.iter().filter(exact))
            .map(|e| PathBuf::from(e.path))
            .collect();
        for anchor in self.anchors.iter().chain([&self.home]) {
            names.extend(local.iter().map(|n| anchor.join(n)));
        }
        let home_entries = || names::HOME.iter().filter(exact);
        names.extend(home_entries().map(|e| self.home.join(e.path)));
        for (anchor, prefix) in self.xdg.anchors() {
            names.extend(
                home_entries()
                    .filter_map(|e| e.path.strip_prefix(prefix).map(|rest| anchor.join(rest))),
            );
        }
        names.extend(self.configuration_entries(fs));
        let mut found = Protects::default();
        for name in names {
            if fs.lstat(&name).is_some_and(|s| s.kind == FileKind::Symlink)
                && let Some(target) = fs.canonical(&name)
            {
                match fs.lstat(&target).map(|s| s.kind) {
                    Some(FileKind::Dir) => found.dirs.push(target),
                    _ => found.files.push(target),
                }
            }
        }
        self.set_source(Source::LinkTargets, found);
    }

    /// The home's configuration is protected by default under any name, so
    /// its dot entries and the entries of its XDG directories that are links
    /// (a dotfiles checkout linked with stow: `~/.lesskey ->
    /// dotfiles/less/.lesskey`) protect their targets too. One listing of
    /// the home and of each XDG directory, per memo lifetime.
    fn configuration_entries(&self, fs: &dyn GuardFs) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = (fs.read_dir(&self.home).unwrap_or_default())
            .into_iter()
            .filter(|n| n.starts_with('.') && n != "." && n != "..")
            .map(|n| self.home.join(n))
            .collect();
        let usual = [".config", ".local/share", ".local/state"].map(|d| self.home.join(d));
        let set = self.xdg.anchors().into_iter().map(|(d, _)| d.to_path_buf());
        for dir in usual.into_iter().chain(set) {
            for n in fs.read_dir(&dir).unwrap_or_default() {
                out.push(dir.join(n));
            }
        }
        out
    }

    /// The repository git finds for `dir`; learning it loads what its
    /// configuration protects, and what every repository enclosing it
    /// protects (git finds one of those if this one's `.git` goes).
    pub(super) fn repo_for(&mut self, fs: &dyn GuardFs, dir: &Path) -> Option<Rc<Repo>> {
        self.load(fs);
        let mut walked = Vec::new();
        let mut found = None;
        for a in dir.ancestors() {
            if let Some(r) = self.memo.repo.get(a.as_os_str()) {
                found = r.clone();
                break;
            }
            walked.push(a.as_os_str().to_owned());
            if let Some(repo) = git::repo_at(fs, a) {
                found = Some(Rc::new(repo));
                break;
            }
        }
        for w in walked {
            self.memo.repo.insert(w, found.clone());
        }
        if let Some(repo) = &found
            && !self.memo.repos.contains_key(&key(repo))
        {
            self.load_repo(fs, repo.clone());
            if let Some(up) = repo.top.parent() {
                self.repo_for(fs, up);
            }
        }
        found
    }

    /// The user's global git configuration, whose hooks and programs apply
    /// to every repository (a relative hook path is relative to the
    /// repository; the home directory stands for it here).
    fn load_globals(&mut self, fs: &dyn GuardFs) {
        let mut all = Protects::default();
        let mut read = Vec::new();
        for config in self.global_configs() {
            let p = git::config_protects(fs, &config, &self.home, &self.home, &mut read);
            all.extend(p);
        }
        self.note_configs(fs, &read, &Source::Globals);
        self.set_source(Source::Globals, all);
    }

    fn global_configs(&self) -> Vec<PathBuf> {
        let xdg = self
            .xdg
            .config
            .clone()
            .unwrap_or_else(|| self.home.join(".config"));
        vec![
            self.home.join(".gitconfig"),
            xdg.join("git/config"),
            PathBuf::from("/etc/gitconfig"),
        ]
    }

    fn load_repo(&mut self, fs: &dyn GuardFs, repo: Rc<Repo>) {
        let mut configs = vec![
            repo.git_dir.join("config"),
            repo.git_dir.join("config.worktree"),
        ];
        let commondir = repo.git_dir.join("commondir");
        let mut read = vec![commondir.clone()];
        if let Some(common) = fs.read_file(&commondir, 4096) {
            let common = String::from_utf8_lossy(&common);
            let common = crate::paths::lexical_join(&repo.git_dir, Path::new(common.trim()));
            configs.push(common.join("config"));
        }
        configs.extend(self.global_configs());
        let mut all = Protects::default();
        for config in configs {
            all.extend(git::config_protects(
                fs, &config, &repo.top, &self.home, &mut read,
            ));
        }
        let source = Source::Repo(repo.git_dir.clone(), repo.top.clone());
        self.note_configs(fs, &read, &source);
        self.set_source(source, all);
        self.memo.repos.insert(key(&repo), repo);
    }

    /// Remember which source read these files (and the targets of those
    /// that are links: a write through the target changes them too).
    fn note_configs(&mut self, fs: &dyn GuardFs, read: &[PathBuf], source: &Source) {
        for file in read {
            let mut paths = vec![file.clone()];
            if fs.lstat(file).is_some_and(|s| s.kind == FileKind::Symlink)
                && let Some(target) = fs.canonical(file)
            {
                paths.push(target);
            }
            for p in paths {
                let owners = self.memo.configs.entry(p.into_os_string()).or_default();
                if !owners.contains(source) {
                    owners.push(source.clone());
                }
            }
        }
    }

    fn set_source(&mut self, source: Source, protects: Protects) {
        self.memo.sources.insert(source, protects);
        let mut known = Protects::default();
        for p in self.memo.sources.values() {
            known.extend(p.clone());
        }
        self.memo.known = known;
    }

    /// A call was performed at `path`; `tree`: a directory or link was
    /// made, moved or removed there. Forget what it may have changed;
    /// reload at once what a changed configuration file protects.
    pub(super) fn changed(&mut self, fs: &dyn GuardFs, path: &Path, tree: bool) {
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
        let parent = path.parent().unwrap_or(Path::new("/"));
        if git::MARKERS.contains(&name) || name == ".git" {
            // What the directory is, and which repository git finds there
            // and below.
            self.memo.git_dir.remove(parent.as_os_str());
            forget_below(&mut self.memo.repo, parent);
        }
        if tree {
            forget_below(&mut self.memo.git_dir, path);
            forget_below(&mut self.memo.repo, path);
        }
        let owners = (self.memo.configs.get(path.as_os_str()))
            .cloned()
            .unwrap_or_default();
        for source in owners {
            match source {
                Source::Globals => self.load_globals(fs),
                Source::LinkTargets => self.load_link_targets(fs),
                Source::Repo(git_dir, top) => {
                    if let Some(repo) = self.memo.repos.get(&(git_dir, top)).cloned() {
                        self.load_repo(fs, repo);
                    }
                }
            }
        }
    }

    /// Whether the inode `stat` (found at `path`, with other names) is a
    /// protected file's: the home directory's protected files, and the
    /// configuration and hooks of the repository around `path`.
    pub(super) fn is_protected_id(&mut self, fs: &dyn GuardFs, path: &Path, stat: Stat) -> bool {
        let id = (stat.dev, stat.ino);
        if self.home_ids(fs).contains(&id) {
            return true;
        }
        let parent = path.parent().unwrap_or(Path::new("/"));
        let mut candidates: Vec<PathBuf> = self.memo.known.files.clone();
        if let Some(repo) = self.repo_for(fs, parent) {
            candidates.push(repo.git_dir.join("config"));
            for sub in ["hooks", "info"] {
                let dir = repo.git_dir.join(sub);
                for entry in fs.read_dir(&dir).unwrap_or_default() {
                    candidates.push(dir.join(entry));
                }
            }
        }
        candidates
            .iter()
            .filter_map(|c| fs.lstat(c))
            .any(|s| (s.dev, s.ino) == id)
    }

    fn home_ids(&mut self, fs: &dyn GuardFs) -> &HashSet<(u64, u64)> {
        if self.memo.home_ids.is_none() {
            let files = anywhere::ANYWHERE
                .iter()
                .chain(names::HOME)
                .filter(|e| !e.dir && e.form == Form::Exact)
                .map(|e| self.home.join(e.path));
            let ids = files
                .filter_map(|f| fs.lstat(&f))
                .filter(|s| s.kind == FileKind::File)
                .map(|s| (s.dev, s.ino))
                .collect();
            self.memo.home_ids = Some(ids);
        }
        self.memo.home_ids.get_or_insert_with(HashSet::new)
    }
}

fn key(repo: &Repo) -> (PathBuf, PathBuf) {
    (repo.git_dir.clone(), repo.top.clone())
}

/// Remove `path` and every path below it from `map`: the keys from
/// `path/` up to `path0` (`0` follows `/` in byte order) are exactly the
/// paths below it.
fn forget_below<T>(map: &mut ByPath<T>, path: &Path) {
    map.remove(path.as_os_str());
    let (lo, hi) = below(path);
    let keys: Vec<OsString> = map.range(lo..hi).map(|(k, _)| k.clone()).collect();
    for k in keys {
        map.remove(&k);
    }
}

/// The key range of the paths strictly below `path`.
fn below(path: &Path) -> (OsString, OsString) {
    let mut lo = path.as_os_str().as_bytes().to_vec();
    if lo.last() != Some(&b'/') {
        lo.push(b'/');
    }
    let mut hi = lo.clone();
    if let Some(last) = hi.last_mut() {
        *last = b'0';
    }
    (OsString::from_vec(lo), OsString::from_vec(hi))
}
