//! What the guard learns about the filesystem around the paths it decides
//! — which directories are git directories, which repository git finds for
//! a directory and what its configuration (and the user's global one)
//! protects, the targets of protected names that are links, the inodes of
//! protected files — kept in a memo so a call in a directory seen before
//! costs no system call. [`Knowledge::forget`] empties it (pid 1 calls it
//! after calls that could change the answers, and on a timer).

use super::git::{self, Protects, Repo};
use super::names;
use super::{FileKind, GuardFs, Stat};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The guard's memo and what it is anchored at.
#[derive(Debug)]
pub(super) struct Knowledge {
    home: PathBuf,
    config_home: Option<PathBuf>,
    /// Directories whose protected names are looked at as links: the
    /// writable roots and the command's working directory.
    anchors: Vec<PathBuf>,
    memo: Memo,
}

#[derive(Debug, Default)]
struct Memo {
    git_dir: HashMap<OsString, bool>,
    repo: HashMap<OsString, Option<Rc<Repo>>>,
    loaded: HashSet<PathBuf>,
    known: Protects,
    globals_loaded: bool,
    home_ids: Option<HashSet<(u64, u64)>>,
}

impl Knowledge {
    pub(super) fn new(home: PathBuf, config_home: Option<PathBuf>) -> Self {
        Knowledge {
            home,
            config_home,
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

    /// The repository git finds for `dir`; learning it adds what its
    /// configuration protects to the memo.
    /// What the memo learns once: the global git configuration, the
    /// anchors' repositories, and the targets of protected names that are
    /// links in the anchors and the home directory.
    pub(super) fn load(&mut self, fs: &dyn GuardFs) {
        if self.memo.globals_loaded {
            return;
        }
        self.memo.globals_loaded = true;
        let home = self.home.clone();
        self.load_globals(fs, &home);
        for dir in self.anchors.clone() {
            self.repo_for(fs, &dir);
        }
        self.load_link_targets(fs);
    }

    /// A protected name that is a link makes its target protected: tools
    /// read the target through it (`~/.bashrc -> dotfiles/bashrc`).
    fn load_link_targets(&mut self, fs: &dyn GuardFs) {
        let mut names: Vec<PathBuf> = Vec::new();
        let everywhere = names::ANYWHERE.iter().map(|e| PathBuf::from(e.path));
        let claude = names::CLAUDE
            .iter()
            .map(|e| Path::new(".claude").join(e.path));
        let local: Vec<PathBuf> = everywhere.chain(claude).collect();
        for anchor in self.anchors.iter().chain([&self.home]) {
            names.extend(local.iter().map(|n| anchor.join(n)));
        }
        names.extend(names::HOME.iter().map(|e| self.home.join(e.path)));
        if let Some(ch) = &self.config_home {
            names.extend(names::HOME.iter().filter_map(|e| {
                e.path
                    .strip_prefix(names::CONFIG_PREFIX)
                    .map(|rest| ch.join(rest))
            }));
        }
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
        self.add_known(found);
    }

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
            && self.memo.loaded.insert(repo.git_dir.clone())
        {
            self.load_repo(fs, repo);
        }
        found
    }

    /// The user's global git configuration, whose hooks and programs apply
    /// to every repository.
    fn load_globals(&mut self, fs: &dyn GuardFs, top: &Path) {
        for config in self.global_configs() {
            let p = git::config_protects(fs, &config, top, &self.home);
            self.add_known(p);
        }
    }

    fn global_configs(&self) -> Vec<PathBuf> {
        let xdg = self
            .config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"));
        vec![
            self.home.join(".gitconfig"),
            xdg.join("git/config"),
            PathBuf::from("/etc/gitconfig"),
        ]
    }

    fn load_repo(&mut self, fs: &dyn GuardFs, repo: &Repo) {
        let mut configs = vec![
            repo.git_dir.join("config"),
            repo.git_dir.join("config.worktree"),
        ];
        if let Some(common) = fs.read_file(&repo.git_dir.join("commondir"), 4096) {
            let common = String::from_utf8_lossy(&common);
            let common = crate::paths::lexical_join(&repo.git_dir, Path::new(common.trim()));
            configs.push(common.join("config"));
        }
        configs.extend(self.global_configs());
        for config in configs {
            let p = git::config_protects(fs, &config, &repo.top, &self.home);
            self.add_known(p);
        }
    }

    fn add_known(&mut self, p: Protects) {
        let known = &mut self.memo.known;
        for d in p.dirs {
            if !known.dirs.contains(&d) {
                known.dirs.push(d);
            }
        }
        for f in p.files {
            if !known.files.contains(&f) {
                known.files.push(f);
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
            let files = names::ANYWHERE
                .iter()
                .chain(names::HOME)
                .filter(|e| !e.dir)
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
