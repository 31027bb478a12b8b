//! The read-only view of the host filesystem that compilation sees.
//!
//! Compilation never calls the kernel itself: it asks an [`FsView`]. The jail
//! crate implements it on the real filesystem; [`MemFs`] is an in-memory
//! tree for snapshot tests and for `oajail explain` on a fixed layout.
//!
//! Canonicalisation is done here, on top of `lstat`/`readlink`, rather than by
//! the implementation, so a fake and the real filesystem resolve symlinks
//! with exactly the same rules (absolute and relative targets, `..`, a
//! 40-link limit, and a missing tail kept lexically).

use crate::stat::FileKind;
use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Read-only questions compilation asks about the host filesystem.
pub trait FsView {
    /// `lstat(path)`: the kind, or `None` when nothing is there (or it
    /// cannot be examined, which compilation treats the same way).
    fn kind(&self, path: &Path) -> Option<FileKind>;
    /// The entries of a directory (names and `lstat` kinds), sorted by name.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>>;
    /// The target of a symbolic link, as stored.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The number of hard links of a file (`st_nlink`), when known; used only
    /// to warn that a denied file has other, readable names.
    fn link_count(&self, _path: &Path) -> Option<u64> {
        None
    }
}

/// The most symlinks followed while resolving one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Resolve every symlink in `path` (absolute); a missing tail is appended
/// lexically. Errors only on a symlink loop or an unreadable link.
pub(crate) fn canonicalize(fs: &dyn FsView, path: &Path) -> io::Result<PathBuf> {
    let mut todo: Vec<PathBuf> = components_rev(path);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    let mut missing = false;
    while let Some(part) = todo.pop() {
        if part.as_os_str() == ".." {
            out.pop();
            continue;
        }
        // Extended in place (one buffer, not a new path per component) and
        // shortened again when the component turns out to be a link.
        out.push(&part);
        if missing {
            continue;
        }
        match fs.kind(&out) {
            Some(FileKind::Symlink) => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = fs.read_link(&out)?;
                out.pop();
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                todo.extend(components_rev(&target));
            }
            Some(_) => {}
            None => missing = true,
        }
    }
    Ok(out)
}

/// Normal and `..` components of `path`, last first (a stack).
fn components_rev(path: &Path) -> Vec<PathBuf> {
    let mut parts: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    parts.reverse();
    parts
}

/// True when some component of `path` (absolute, lexically clean) is a symlink.
pub(crate) fn has_symlink(fs: &dyn FsView, path: &Path) -> bool {
    path.ancestors()
        .any(|p| p != Path::new("/") && fs.kind(p) == Some(FileKind::Symlink))
}

/// An in-memory filesystem tree: the fake [`FsView`] used by tests and
/// examples. Parents are created implicitly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemFs {
    nodes: BTreeMap<PathBuf, Node>,
    links: BTreeMap<PathBuf, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File,
    Other,
    Link(PathBuf),
}

impl MemFs {
    /// An empty tree (only `/`).
    pub fn new() -> MemFs {
        let mut fs = MemFs::default();
        fs.nodes.insert(PathBuf::from("/"), Node::Dir);
        fs
    }

    /// Add directories (and their parents).
    pub fn dirs(mut self, paths: &[&str]) -> MemFs {
        for p in paths {
            self.insert(Path::new(p), Node::Dir);
        }
        self
    }

    /// Add regular files (and their parent directories).
    pub fn files(mut self, paths: &[&str]) -> MemFs {
        for p in paths {
            self.insert(Path::new(p), Node::File);
        }
        self
    }

    /// Add sockets or other special files.
    pub fn others(mut self, paths: &[&str]) -> MemFs {
        for p in paths {
            self.insert(Path::new(p), Node::Other);
        }
        self
    }

    /// Give existing files a hard-link count.
    pub fn link_counts(mut self, counts: &[(&str, u64)]) -> MemFs {
        for (p, n) in counts {
            self.links.insert(PathBuf::from(p), *n);
        }
        self
    }

    /// Add a symlink `path -> target`.
    pub fn link(mut self, path: &str, target: &str) -> MemFs {
        self.insert(Path::new(path), Node::Link(PathBuf::from(target)));
        self
    }

    fn insert(&mut self, path: &Path, node: Node) {
        for parent in path.ancestors().skip(1) {
            self.nodes.entry(parent.to_path_buf()).or_insert(Node::Dir);
        }
        self.nodes.insert(path.to_path_buf(), node);
    }
}

/// The guard probes the same fake tree (inode numbers are made up from the
/// path; file contents are empty).
impl crate::guard::GuardFs for MemFs {
    fn lstat(&self, path: &Path) -> Option<crate::guard::Stat> {
        let kind = self.kind(path)?;
        let ino = path
            .to_string_lossy()
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let nlink = self.links.get(path).copied().unwrap_or(1);
        Some(crate::guard::Stat {
            kind,
            dev: 1,
            ino,
            nlink,
        })
    }

    fn read_file(&self, _path: &Path, _limit: usize) -> Option<Vec<u8>> {
        None
    }

    fn read_dir(&self, path: &Path) -> Option<Vec<String>> {
        let entries = FsView::read_dir(self, path).ok()?;
        Some(entries.into_iter().map(|(n, _)| n).collect())
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        canonicalize(self, path).ok()
    }
}

impl FsView for MemFs {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        self.nodes.get(path).map(|node| match node {
            Node::Dir => FileKind::Dir,
            Node::File => FileKind::File,
            Node::Other => FileKind::Other,
            Node::Link(_) => FileKind::Symlink,
        })
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
        if self.kind(path) != Some(FileKind::Dir) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let mut out = Vec::new();
        for (child, _) in self.nodes.range(path.to_path_buf()..) {
            if child == path {
                continue;
            }
            if !child.starts_with(path) {
                break;
            }
            if child.parent() == Some(path) {
                let name = child.file_name().map(|n| n.to_string_lossy().into_owned());
                if let (Some(name), Some(kind)) = (name, self.kind(child)) {
                    out.push((name, kind));
                }
            }
        }
        Ok(out)
    }

    fn link_count(&self, path: &Path) -> Option<u64> {
        match self.nodes.get(path) {
            Some(Node::File) => Some(self.links.get(path).copied().unwrap_or(1)),
            _ => None,
        }
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        match self.nodes.get(path) {
            Some(Node::Link(target)) => Ok(target.clone()),
            _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        }
    }
}

/// An [`FsView`] that remembers every `lstat` answer: compilation asks about
/// the same directories many times (each component of each rule path), and
/// one answer per path also keeps the plan consistent if the host changes
/// while compiling.
pub(crate) struct Cached<'a> {
    inner: &'a dyn FsView,
    /// Keyed by the path's bytes: much cheaper to hash than `Path`'s
    /// component-wise hash; paths here are built by `join` from clean
    /// components, so one path has one spelling.
    kinds: std::cell::RefCell<std::collections::HashMap<std::ffi::OsString, Option<FileKind>>>,
}

impl<'a> Cached<'a> {
    pub(crate) fn new(inner: &'a dyn FsView) -> Cached<'a> {
        Cached {
            inner,
            kinds: Default::default(),
        }
    }
}

impl FsView for Cached<'_> {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        let kinds = self.kinds.borrow();
        if let Some(kind) = kinds.get(path.as_os_str()) {
            return *kind;
        }
        // Below a path known to be missing, a file or a special file nothing
        // exists: no need to ask (most of the default credential paths, as
        // `~/.config/gcloud`, lie in directories a given home lacks). A
        // symlink or an unknown parent is asked about as before.
        let parent = path.parent().and_then(|p| kinds.get(p.as_os_str()));
        let under_nothing = matches!(parent, Some(None | Some(FileKind::File | FileKind::Other)));
        drop(kinds);
        let kind = if under_nothing {
            None
        } else {
            self.inner.kind(path)
        };
        self.kinds
            .borrow_mut()
            .insert(path.as_os_str().to_owned(), kind);
        kind
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
        let entries = self.inner.read_dir(path)?;
        let mut kinds = self.kinds.borrow_mut();
        for (name, kind) in &entries {
            kinds
                .entry(path.join(name).into_os_string())
                .or_insert(Some(*kind));
        }
        Ok(entries)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.read_link(path)
    }

    fn link_count(&self, path: &Path) -> Option<u64> {
        self.inner.link_count(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A view that records every path it is asked the kind of.
    struct Counting {
        inner: MemFs,
        asked: RefCell<Vec<PathBuf>>,
    }

    impl FsView for Counting {
        fn kind(&self, path: &Path) -> Option<FileKind> {
            self.asked.borrow_mut().push(path.to_owned());
            self.inner.kind(path)
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
            FsView::read_dir(&self.inner, path)
        }
        fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
            self.inner.read_link(path)
        }
    }

    #[test]
    fn nothing_is_asked_below_a_missing_path_or_a_file() {
        let fs = Counting {
            inner: MemFs::new()
                .dirs(&["/home/u/.config"])
                .files(&["/home/u/.netrc"])
                .link("/home/u/cfg", "/home/u/.config"),
            asked: RefCell::default(),
        };
        let cached = Cached::new(&fs);
        let kinds = [
            "/home/u/.aws",
            "/home/u/.aws/credentials",
            "/home/u/.netrc",
            "/home/u/.netrc/x",
            "/home/u/cfg",
            "/home/u/cfg/gh",
            "/home/u/.config",
            "/home/u/.config/gh",
        ]
        .map(|p| cached.kind(Path::new(p)));
        assert_eq!(
            kinds,
            [
                None,
                None,
                Some(FileKind::File),
                None,
                Some(FileKind::Symlink),
                None,
                Some(FileKind::Dir),
                None
            ]
        );
        // Below the missing `.aws` and the file `.netrc` the answer is
        // known; below the symlink and the directory the view is asked.
        let asked: Vec<_> = fs
            .asked
            .borrow()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            asked,
            [
                "/home/u/.aws",
                "/home/u/.netrc",
                "/home/u/cfg",
                "/home/u/cfg/gh",
                "/home/u/.config",
                "/home/u/.config/gh"
            ]
        );
    }
}
