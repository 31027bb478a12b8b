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
//! This module owns the plain data ([`GuardPlan`]) and the pure decision
//! ([`Guard`], which sees the filesystem only through [`GuardFs`]): what is
//! protected by name ([`names`]), what git would run (`git`), and the
//! user's `denyWrite` entries.
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

mod decide;
mod git;
mod gitconfig;
mod knowledge;
pub mod names;

pub use decide::{Denial, Guard, Op, Request, Verdict};

use super::FileKind;
use super::rules::{Rules, TMP};
use crate::Policy;
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// The calls always sent to pid 1, on every architecture (kernel names).
const NOTIFY: &[&str] = &[
    "mkdirat",
    "mknodat",
    "linkat",
    "symlinkat",
    "renameat",
    "renameat2",
    "unlinkat",
    "truncate",
    "fchmodat",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
];

/// x86_64-only calls always sent to pid 1.
const LEGACY_NOTIFY: &[&str] = &[
    "creat", "mkdir", "mknod", "link", "symlink", "rename", "unlink", "rmdir", "chmod", "chown",
    "lchown", "utime", "utimes",
];

/// Bits of `open` flags that make an open able to write or create
/// (`O_WRONLY | O_RDWR | O_CREAT | O_TRUNC`, the same on x86_64 and
/// aarch64).
pub const WRITE_FLAGS: u32 = 0o1 | 0o2 | 0o100 | 0o1000;

/// A call sent to pid 1 only when its flags argument has a [`WRITE_FLAGS`] bit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlagsArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its flags argument.
    pub flags_arg: u8,
    /// x86_64 only.
    pub legacy: bool,
}

/// Mode bits that can make a file run or let others change it: set-id and
/// sticky bits, execute bits, group and other write bits.
pub const RISKY_MODE: u32 = 0o7133;

/// A call sent to pid 1 only when its mode argument has a [`RISKY_MODE`]
/// bit: `fchmod` on a descriptor (a read-only one is enough to change the
/// mode, and a mode can make a disabled hook run again; `fchmod(fd, 0644)`,
/// what archivers do for every file, changes nothing that runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its mode argument.
    pub mode_arg: u8,
}

/// A call sent to pid 1 only when a path argument is given (not NULL):
/// `utimensat(fd, NULL, …)` is `futimens`, a call on a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its path argument.
    pub path_arg: u8,
    /// x86_64 only.
    pub legacy: bool,
}

/// A call sent to pid 1 only when an argument equals a value:
/// `socket(AF_UNIX, …)`, when the run reports unix-socket refusals (the
/// supervisor moves that refusal from the deny filter to pid 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgEq {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of the argument.
    pub arg: u8,
    /// The value that notifies.
    pub value: u32,
}

/// The shape of the command's notification filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterShape {
    /// Calls always sent to pid 1 (on every architecture).
    pub notify: Vec<String>,
    /// Calls always sent to pid 1 that exist on x86_64 only.
    pub legacy: Vec<String>,
    /// Calls sent to pid 1 when their flags can write or create.
    pub notify_if_write: Vec<FlagsArg>,
    /// Calls sent to pid 1 when they name a path.
    pub notify_if_path: Vec<PathArg>,
    /// Calls sent to pid 1 when they set a risky mode bit.
    pub notify_if_mode: Vec<ModeArg>,
    /// Calls sent to pid 1 when an argument has one value (none unless
    /// the supervisor adds them; absent from the plan when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify_if_eq: Vec<ArgEq>,
    /// Calls pid 1 only watches and then lets through (`umask`: pid 1
    /// creates files with the caller's mask, and reading it from
    /// `/proc/<pid>/status` at every creation would cost more than the
    /// creation itself). They carry no path, so letting them through
    /// cannot be raced.
    pub watch: Vec<String>,
    /// Calls answered ENOSYS, so libc falls back to an older call the
    /// filter can read: `openat2` (its flags live in a struct), `fchmodat2`,
    /// `setxattrat`, `removexattrat` (Linux 6.6 and 6.13 additions).
    pub enosys: Vec<String>,
}

/// The compiled guard plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardPlan {
    /// Writable roots (absolute, canonical): below them every write-like
    /// call is decided.
    pub roots: Vec<String>,
    /// The jail's private file systems (they die with the jail): not
    /// guarded, except below a root bound into them.
    pub private: Vec<String>,
    /// `denyWrite` entries (resolved; existing or not), the settings file
    /// and the oajail binary.
    pub deny_write: Vec<String>,
    /// The home directory (anchor of [`names::HOME`]).
    pub home: String,
    /// `$XDG_CONFIG_HOME` when set to another place than `~/.config`.
    pub config_home: Option<String>,
    /// `.git/config` may be written (`allowGitConfig`).
    pub allow_git_config: bool,
    /// The notification filter's shape.
    pub filter: FilterShape,
}

/// Build the guard plan from the resolved rules.
pub(crate) fn build(
    policy: &Policy,
    rules: &Rules,
    home: &Path,
    config_home: Option<&Path>,
) -> GuardPlan {
    let strings = |it: &mut dyn Iterator<Item = &std::path::PathBuf>| {
        it.map(|p| p.display().to_string()).collect::<Vec<_>>()
    };
    let roots = strings(&mut rules.allow_write.iter().filter(|p| rules.writable(p)));
    let mut private = vec!["/dev".to_owned()];
    if rules.private.contains(Path::new(TMP)) {
        private.push(TMP.to_owned());
    }
    let config_home = config_home
        .filter(|c| *c != home.join(".config"))
        .map(|c| c.display().to_string());
    let arg = |syscall: &str, flags_arg: u8, legacy: bool| FlagsArg {
        syscall: syscall.into(),
        flags_arg,
        legacy,
    };
    GuardPlan {
        roots,
        private,
        deny_write: strings(&mut rules.deny_write.iter()),
        home: home.display().to_string(),
        config_home,
        allow_git_config: policy.filesystem.allow_git_config,
        filter: FilterShape {
            notify: NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
            legacy: LEGACY_NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
            notify_if_write: vec![arg("openat", 2, false), arg("open", 1, true)],
            notify_if_path: vec![
                PathArg {
                    syscall: "utimensat".into(),
                    path_arg: 1,
                    legacy: false,
                },
                PathArg {
                    syscall: "futimesat".into(),
                    path_arg: 1,
                    legacy: true,
                },
            ],
            notify_if_mode: vec![ModeArg {
                syscall: "fchmod".into(),
                mode_arg: 1,
            }],
            notify_if_eq: Vec::new(),
            watch: vec!["umask".into()],
            enosys: ["openat2", "fchmodat2", "setxattrat", "removexattrat"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        },
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
