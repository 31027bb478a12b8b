//! The create-guard plan: srt's mandatory write denies for names that appear
//! during the run.
//!
//! The mount layer protects what exists when the jail starts (and
//! placeholders for a few missing names); a repository, `.claude` directory
//! or `.bashrc` created later is not there to be masked. The guard closes
//! that gap: the command's name-creating system calls (`open`/`openat` with
//! `O_CREAT`, `creat`, `mkdir*`, `mknod*`, `link*`, `symlink*`, `rename*`)
//! are sent to the jail's pid 1 by a seccomp user-notification filter, and
//! pid 1 resolves the parent directory, asks [`decide`] and performs the call
//! itself (never `CONTINUE`: a path string checked in another process can be
//! rewritten by a racing thread).
//!
//! This module owns two pieces of plain data:
//! - the filter's shape ([`GuardPlan::notify`], [`GuardPlan::notify_if_creat`],
//!   [`GuardPlan::enosys`]), compiled to BPF by the jail;
//! - [`decide`]: parent directory (real path) + final name + what is created
//!   → allow or deny with a reason. It is pure and does not touch the disk.
//!
//! Invariants:
//! - guarded = below a root where Landlock grants creation, except the
//!   jail's private filesystems ([`GuardPlan::exempt`]: `/tmp`, `/dev`);
//!   outside the roots nothing can be created anyway;
//! - the name lists are the mandatory-deny module's, so the static and the
//!   dynamic layer protect the same names;
//! - a `.git` or `.claude` directory can only come into being empty (by
//!   `mkdir`), so everything later put inside it passes through [`decide`].

use super::landlock::{FsAccess, LandlockPlan};
use super::mandatory::{PROTECTED_CLAUDE, PROTECTED_DIRS, PROTECTED_FILES};
use super::mounts::{MountPlan, MountStep};
use crate::Policy;
use serde::{Deserialize, Serialize};
use std::path::{Component, Path};

/// The calls always sent to pid 1 (kernel names). The legacy ones exist
/// only on x86_64; [`GuardPlan::legacy`] lists them separately.
const NOTIFY: &[&str] = &[
    "mkdirat",
    "mknodat",
    "linkat",
    "symlinkat",
    "renameat",
    "renameat2",
];
/// x86_64-only calls always sent to pid 1.
const LEGACY_NOTIFY: &[&str] = &["creat", "mkdir", "mknod", "link", "symlink", "rename"];

/// Bits of `open` flags that make it a creation (`O_CREAT`, the same value
/// on x86_64 and aarch64).
pub const O_CREAT: u32 = 0o100;

/// A call sent to pid 1 only when its flags argument has [`O_CREAT`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its flags argument.
    pub flags_arg: u8,
    /// x86_64 only.
    pub legacy: bool,
}

/// The compiled guard plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardPlan {
    /// Directories below which creations are checked (absolute jail paths).
    pub roots: Vec<String>,
    /// The jail's private filesystems, never checked (they die with the jail).
    pub exempt: Vec<String>,
    /// `.git/config` may be written (`allowGitConfig`).
    pub allow_git_config: bool,
    /// Calls always sent to pid 1 (on every architecture).
    pub notify: Vec<String>,
    /// Calls always sent to pid 1 that exist on x86_64 only.
    pub legacy: Vec<String>,
    /// Calls sent to pid 1 when their flags hold `O_CREAT`.
    pub notify_if_creat: Vec<CreatArg>,
    /// Calls answered ENOSYS (`openat2`: its flags live in a struct a filter
    /// cannot read; libc falls back to `openat`).
    pub enosys: Vec<String>,
}

/// Build the guard plan from the filesystem plans.
pub fn build(policy: &Policy, mounts: &MountPlan, landlock: &LandlockPlan) -> GuardPlan {
    let mut exempt: Vec<String> = mounts
        .steps
        .iter()
        .filter(|s| matches!(s, MountStep::Tmpfs { .. } | MountStep::Dev))
        .map(|s| s.path().to_owned())
        .collect();
    for private in [super::rules::TMP, "/dev"] {
        if !exempt.iter().any(|e| e == private) {
            exempt.push(private.to_owned());
        }
    }
    exempt.sort();
    let roots = landlock
        .fs_rules
        .iter()
        .filter(|r| r.access.contains(&FsAccess::MakeReg) || r.access.contains(&FsAccess::MakeDir))
        .map(|r| r.path.clone())
        .filter(|p| !under_any(Path::new(p), &exempt))
        .collect();
    let creat = |syscall: &str, flags_arg: u8, legacy: bool| CreatArg {
        syscall: syscall.into(),
        flags_arg,
        legacy,
    };
    GuardPlan {
        roots,
        exempt,
        allow_git_config: policy.filesystem.allow_git_config,
        notify: NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
        legacy: LEGACY_NOTIFY.iter().map(|s| (*s).to_owned()).collect(),
        notify_if_creat: vec![creat("openat", 2, false), creat("open", 1, true)],
        enosys: vec!["openat2".into()],
    }
}

fn under_any(path: &Path, dirs: &[String]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

/// What a guarded call would create under its final name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    /// A regular file, fifo, socket or device node (`open`, `creat`, `mknod`).
    File,
    /// A directory (`mkdir`).
    Dir,
    /// A symbolic link (`symlink`).
    Symlink,
    /// A new name for an existing file (`link`).
    HardLink,
    /// The target of a rename (or either side of an exchange); `dir` when the
    /// entry moved there is a directory.
    RenameTarget {
        /// The moved entry is a directory.
        dir: bool,
    },
}

/// The guard's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Perform the call.
    Allow,
    /// Refuse it with EACCES; the reason names the rule.
    Deny(&'static str),
}

/// Decide whether `name` may be created in the directory whose real path is
/// `parent` (absolute, no symlinks: pid 1 reads it back from the opened
/// directory).
pub fn decide(plan: &GuardPlan, parent: &Path, name: &str, what: Creation) -> Verdict {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        // Nothing is created under these names (the kernel answers EEXIST,
        // EISDIR or EBUSY); a slash never reaches here.
        return Verdict::Allow;
    }
    if under_any(parent, &plan.exempt) || !under_any(parent, &plan.roots) {
        return Verdict::Allow;
    }
    let comps: Vec<&str> = parent
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let checks = [protected_name, editor_dirs, claude, git];
    for check in checks {
        if let Some(reason) = check(plan, &comps, name, what) {
            return Verdict::Deny(reason);
        }
    }
    Verdict::Allow
}

type Reason = Option<&'static str>;

/// `.bashrc`, `.gitconfig`, `.mcp.json`… as anything at all.
fn protected_name(_: &GuardPlan, _: &[&str], name: &str, _: Creation) -> Reason {
    PROTECTED_FILES
        .contains(&name)
        .then_some("protected file name")
}

/// `.vscode` and `.idea`, and anything below one.
fn editor_dirs(_: &GuardPlan, comps: &[&str], name: &str, _: Creation) -> Reason {
    let hit = PROTECTED_DIRS.contains(&name) || comps.iter().any(|c| PROTECTED_DIRS.contains(c));
    hit.then_some("protected editor directory")
}

/// `.claude/{agents,commands}` and below, `.claude/settings*.json`; a
/// `.claude` that is a symlink or a directory moved into place.
fn claude(_: &GuardPlan, comps: &[&str], name: &str, what: Creation) -> Reason {
    if name == ".claude" {
        return match what {
            Creation::Symlink => Some("a .claude symlink"),
            Creation::RenameTarget { dir: true } => Some("a directory renamed onto .claude"),
            _ => None,
        };
    }
    let dirs: Vec<&str> = PROTECTED_CLAUDE
        .iter()
        .filter(|(_, k)| *k == super::FileKind::Dir)
        .map(|(n, _)| *n)
        .collect();
    let below = comps
        .windows(2)
        .any(|w| w[0] == ".claude" && dirs.contains(&w[1]));
    if below {
        return Some("inside .claude/agents or .claude/commands");
    }
    if comps.last() == Some(&".claude")
        && (dirs.contains(&name) || (name.starts_with("settings") && name.ends_with(".json")))
    {
        return Some("protected .claude entry");
    }
    None
}

/// Names inside a git directory whose meaning is not git's own data.
const GIT_DATA: &[&str] = &["refs", "logs", "objects", "lfs", "rr-cache", "info"];

/// `.git` only as a new (empty) directory; inside it: empty `hooks`,
/// `*.sample` hooks, no `config` (unless allowed), no `commondir`, no
/// directory moved in.
fn git(plan: &GuardPlan, comps: &[&str], name: &str, what: Creation) -> Reason {
    if name == ".git" {
        return (what != Creation::Dir).then_some("a .git that is not a new directory");
    }
    let at = comps.iter().rposition(|c| *c == ".git")?;
    if what == (Creation::RenameTarget { dir: true }) {
        return Some("a directory renamed into a .git directory");
    }
    let inner = &comps[at + 1..];
    if inner.iter().any(|c| GIT_DATA.contains(c)) {
        return None;
    }
    if let Some(h) = inner.iter().position(|c| *c == "hooks") {
        let direct = h + 1 == inner.len();
        let sample = name.ends_with(".sample") && what != Creation::Dir;
        return (!(direct && sample)).then_some("inside .git/hooks");
    }
    match name {
        "hooks" => (what != Creation::Dir).then_some(".git/hooks that is not a new directory"),
        "config" => (!plan.allow_git_config).then_some(".git/config (allowGitConfig is off)"),
        "commondir" => Some(".git/commondir"),
        _ => None,
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
