//! The guard: every write-like system call of the command is decided, at the
//! moment it is made, by the jail's pid 1 — srt's mandatory write denies
//! and more, held without scanning, masking or creating anything on the host.
//!
//! How it runs (the jail's `guard` module): a seccomp user-notification
//! filter in the command sends every call that can create, write, remove,
//! rename or change the metadata of a file to pid 1 ([`GuardPlan::filter`]).
//! pid 1 resolves the call to the real object (the parent directory's real
//! path and the final name, or the real path of an existing file), asks
//! [`Guard::decide`], and performs the call itself (never `CONTINUE`: a
//! path checked in another process can be rewritten by a racing thread).
//! Since every call that changes a name goes through pid 1, one call at a
//! time, nothing in the jail can change the tree between a decision and the
//! call it decides.
//!
//! This module owns the plain data ([`GuardPlan`], built by
//! `compile::guard` from the resolved rules) and the pure decision
//! ([`Guard`], which sees the filesystem only through [`GuardFs`]): what is
//! protected by name at any depth ([`anywhere`]) and in the home
//! ([`names`], with the default protection of the home's configuration),
//! what tools read from above a `denyWrite` directory (`above.rs`), what git would run (`git`, `gitconfig`),
//! what the decision has learnt about the tree (`knowledge`), and the
//! user's `denyWrite` entries. It depends on nothing in `compile`.
//!
//! Invariants:
//! - guarded = below a writable root and not in the jail's private file
//!   systems (`/tmp`, `/dev`); a writable root bound into one (a workspace
//!   under the host's `/tmp`) is guarded like any other;
//! - a protected path stays protected whatever name or link reaches it: the
//!   decision is made on the real path of the object acted on, and for a
//!   file with several hard links on its inode as well;
//! - nothing is decided from a walk of the tree: start-up costs the same for
//!   an empty workspace and for a million files.

mod above;
pub mod anywhere;
mod decide;
mod git;
mod gitconfig;
pub mod held;
mod knowledge;
pub mod names;
pub mod pattern;
mod plan;

pub use crate::stat::{FileKind, Stat};
pub use above::{ABOVE, AboveEntry, Needs};
pub use decide::{ABOVE_RULE, DEFAULT_HINT, DEFAULT_RULE, Denial, Guard, Op, Request, Verdict};
pub use plan::{
    ArgEq, FilterShape, FlagsArg, GuardPlan, Ids, ModeArg, OwnerArgs, RISKY_MODE, WRITE_FLAGS,
    removals_decided,
};

use std::path::Path;

/// The filesystem as the guard may examine it (in the jail: pid 1's view,
/// which is the command's).
pub trait GuardFs {
    /// `lstat(path)`, `None` when missing or unreadable.
    fn lstat(&self, path: &Path) -> Option<Stat>;
    /// At most `limit` bytes of a file (symlinks followed).
    fn read_file(&self, path: &Path, limit: usize) -> Option<Vec<u8>>;
    /// The names in a directory.
    fn read_dir(&self, path: &Path) -> Option<Vec<String>>;
    /// The real path of `path`, every link followed (`None` when it cannot
    /// be resolved).
    fn canonical(&self, path: &Path) -> Option<std::path::PathBuf>;
}

#[cfg(test)]
mod defaults_tests;
#[cfg(test)]
mod knowledge_tests;
#[cfg(test)]
mod testfs;
#[cfg(test)]
mod tests;
