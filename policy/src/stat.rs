//! What `lstat` says about a path: the few facts both compilation (through
//! [`crate::compile::FsView`]) and the guard's decision (through
//! [`crate::guard::GuardFs`]) ask of the filesystem. A leaf module: it
//! depends on nothing in the crate, so neither side depends on the other
//! for it.

/// What `lstat` says a path is (symlinks are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A socket, fifo or device node.
    Other,
}

/// What `lstat` says about a path, as far as the guard needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The kind (symlinks not followed).
    pub kind: FileKind,
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Hard-link count.
    pub nlink: u64,
}
