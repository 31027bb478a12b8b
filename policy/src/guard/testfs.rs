//! An in-memory tree for the decision's unit tests: directories, files
//! with contents, symlinks and hard links, changed between decisions the
//! way a command in the jail would change them. The guard's own fake, so
//! its tests need nothing from `compile`.

use super::{FileKind, GuardFs, Stat};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(String),
    Link(PathBuf),
}

/// A tree of absolute paths (every ancestor of an entry is a directory).
#[derive(Debug, Clone, Default)]
pub(super) struct Tree {
    nodes: BTreeMap<PathBuf, Node>,
}

impl Tree {
    pub(super) fn new() -> Self {
        let mut t = Tree::default();
        t.nodes.insert(PathBuf::from("/"), Node::Dir);
        t
    }

    /// Add directories (and their ancestors).
    pub(super) fn dirs(mut self, dirs: &[&str]) -> Self {
        for d in dirs {
            self.insert(Path::new(d), Node::Dir);
        }
        self
    }

    /// Add empty files.
    pub(super) fn files(mut self, files: &[&str]) -> Self {
        for f in files {
            self.insert(Path::new(f), Node::File(String::new()));
        }
        self
    }

    /// Add a symlink `path -> target`.
    pub(super) fn link(mut self, path: &str, target: &str) -> Self {
        self.insert(Path::new(path), Node::Link(PathBuf::from(target)));
        self
    }

    fn insert(&mut self, path: &Path, node: Node) {
        for parent in path.ancestors().skip(1) {
            self.nodes.entry(parent.to_path_buf()).or_insert(Node::Dir);
        }
        self.nodes.insert(path.to_path_buf(), node);
    }

    /// Remove `path` and everything below it.
    fn remove(&mut self, path: &Path) {
        self.nodes.retain(|p, _| !p.starts_with(path));
    }

    /// Move `from` (and everything below it) to `to`.
    fn rename(&mut self, from: &Path, to: &Path) {
        self.remove(to);
        let moved: Vec<(PathBuf, Node)> = (self.nodes.iter())
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect();
        self.remove(from);
        for (p, n) in moved {
            let rel = p.strip_prefix(from).unwrap_or(Path::new(""));
            self.insert(&to.join(rel), n);
        }
    }

    fn kind(&self, path: &Path) -> Option<FileKind> {
        self.nodes.get(path).map(|n| match n {
            Node::Dir => FileKind::Dir,
            Node::File(_) => FileKind::File,
            Node::Link(_) => FileKind::Symlink,
        })
    }

    /// Every link followed, as the kernel would (40 links at most).
    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        let mut todo: Vec<PathBuf> = vec![path.to_path_buf()];
        for _ in 0..40 {
            let p = todo.pop()?;
            let mut out = PathBuf::from("/");
            let mut parts = p.components().peekable();
            let mut relinked = None;
            while let Some(c) = parts.next() {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => {
                        out.push(n);
                        if let Some(Node::Link(target)) = self.nodes.get(&out) {
                            let base = out.parent().unwrap_or(Path::new("/")).join(target);
                            let rest: PathBuf = parts.by_ref().collect();
                            relinked = Some(base.join(rest));
                            break;
                        }
                    }
                    _ => {}
                }
            }
            match relinked {
                Some(next) => todo.push(next),
                None => return self.nodes.contains_key(&out).then_some(out),
            }
        }
        None
    }
}

/// A [`GuardFs`] over a [`Tree`], with hard links and a count of the
/// probe's calls (what a cache must spare).
pub(super) struct TestFs {
    pub(super) tree: RefCell<Tree>,
    /// Paths sharing an inode with another path.
    same_inode: HashMap<PathBuf, PathBuf>,
    /// How many times the probe was asked anything.
    pub(super) probes: std::cell::Cell<u64>,
}

impl TestFs {
    pub(super) fn new(tree: Tree) -> Self {
        TestFs {
            tree: RefCell::new(tree),
            same_inode: HashMap::new(),
            probes: std::cell::Cell::new(0),
        }
    }

    /// A file with this text.
    pub(super) fn with(self, path: &str, text: &str) -> Self {
        self.write(path, text);
        self
    }

    /// Two paths that are one inode.
    pub(super) fn hardlink(mut self, a: &str, b: &str) -> Self {
        self.same_inode.insert(a.into(), b.into());
        self.same_inode.insert(b.into(), a.into());
        self
    }

    /// Create directories now.
    pub(super) fn add_dirs(&self, dirs: &[&str]) {
        let t = self.tree.take().dirs(dirs);
        self.tree.replace(t);
    }

    /// Create or overwrite a file now.
    pub(super) fn write(&self, path: &str, text: &str) {
        self.tree
            .borrow_mut()
            .insert(Path::new(path), Node::File(text.to_owned()));
    }

    /// Remove a path (and what is below it) now.
    pub(super) fn remove(&self, path: &str) {
        self.tree.borrow_mut().remove(Path::new(path));
    }

    /// Rename now.
    pub(super) fn rename(&self, from: &str, to: &str) {
        (self.tree.borrow_mut()).rename(Path::new(from), Path::new(to));
    }

    fn id(&self, path: &Path) -> u64 {
        let key = match self.same_inode.get(path) {
            Some(other) if other < &path.to_path_buf() => other.clone(),
            _ => path.to_path_buf(),
        };
        key.to_string_lossy()
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
    }

    fn probed(&self) {
        self.probes.set(self.probes.get() + 1);
    }
}

impl GuardFs for TestFs {
    fn lstat(&self, path: &Path) -> Option<Stat> {
        self.probed();
        let kind = self.tree.borrow().kind(path)?;
        Some(Stat {
            kind,
            dev: 1,
            ino: self.id(path),
            nlink: if self.same_inode.contains_key(path) {
                2
            } else {
                1
            },
        })
    }

    fn read_file(&self, path: &Path, _limit: usize) -> Option<Vec<u8>> {
        self.probed();
        let tree = self.tree.borrow();
        let real = tree.canonical(path)?;
        match tree.nodes.get(&real) {
            Some(Node::File(text)) => Some(text.clone().into_bytes()),
            _ => None,
        }
    }

    fn read_dir(&self, path: &Path) -> Option<Vec<String>> {
        self.probed();
        let tree = self.tree.borrow();
        if tree.kind(path) != Some(FileKind::Dir) {
            return None;
        }
        let names = tree
            .nodes
            .keys()
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        Some(names)
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        self.probed();
        self.tree.borrow().canonical(path)
    }
}
