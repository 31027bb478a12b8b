//! The Landlock plan: an allow-only second layer under the mount namespace,
//! applied by `oajail_jail::landlock::restrict` in the command process just
//! before seccomp, so that escaping the mount layout alone widens nothing.
//!
//! - Read (read_file, read_dir, execute) is granted where host content is
//!   visible. A `denyRead` region is expressed by granting read on its
//!   complement: each ancestor of a denied path gets only `read_dir` (its
//!   names stay listable) and each sibling along the way gets full read,
//!   enumerated through the [`FsView`] at compile time. Entries created
//!   later directly in such an ancestor are therefore not readable.
//! - Write rights are granted only on writable roots, the private `/tmp`,
//!   `/dev/shm`, the new devpts and the harmless device nodes. Landlock cannot
//!   take rights away below a rule, so write denies inside a writable root
//!   (`denyWrite`, mandatory denies) are held by the mount layer alone.
//! - TCP: connect only to the proxy port, bind nowhere, unless
//!   `allowLocalBinding` (then TCP is not restricted: Landlock cannot filter
//!   by address; the network namespace holds only loopback).
//! - Scopes (ABI 6): signals and abstract unix sockets stay inside the domain.

use super::rules::{Rules, TMP};
use super::{CompileError, FileKind, FsView};
use crate::Policy;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The Landlock ABI this plan is written for (Linux 6.12+).
pub const TARGET_ABI: u8 = 7;
/// The lowest ABI that enforces every part of the plan (scopes need 6).
pub const MIN_ABI: u8 = 6;
/// The port of the proxy listener inside the jail's network namespace.
pub const PROXY_PORT: u16 = 3128;
/// The most rules one plan may hold (each costs an open at restrict time).
pub const RULE_BUDGET: usize = 20_000;

/// One filesystem access right (Landlock `LANDLOCK_ACCESS_FS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    /// Execute a file.
    Execute,
    /// Open a file for writing.
    WriteFile,
    /// Open a file for reading.
    ReadFile,
    /// List a directory.
    ReadDir,
    /// Remove a directory.
    RemoveDir,
    /// Remove a file.
    RemoveFile,
    /// Create a character device.
    MakeChar,
    /// Create a directory.
    MakeDir,
    /// Create a regular file.
    MakeReg,
    /// Create a unix socket.
    MakeSock,
    /// Create a fifo.
    MakeFifo,
    /// Create a block device.
    MakeBlock,
    /// Create a symlink.
    MakeSym,
    /// Link or rename across directories (ABI 2).
    Refer,
    /// Truncate (ABI 3).
    Truncate,
    /// ioctl on device files (ABI 5).
    IoctlDev,
}

/// Rights granted for reading.
pub const READ: &[FsAccess] = &[FsAccess::Execute, FsAccess::ReadFile, FsAccess::ReadDir];
/// Read rights of a file (Landlock has no `read_dir` on files).
const READ_FILE: &[FsAccess] = &[FsAccess::Execute, FsAccess::ReadFile];
/// Rights granted on writable roots (device creation is never granted).
pub const WRITE: &[FsAccess] = &[
    FsAccess::WriteFile,
    FsAccess::RemoveDir,
    FsAccess::RemoveFile,
    FsAccess::MakeDir,
    FsAccess::MakeReg,
    FsAccess::MakeSock,
    FsAccess::MakeFifo,
    FsAccess::MakeSym,
    FsAccess::Refer,
    FsAccess::Truncate,
    FsAccess::IoctlDev,
];
/// Rights on device nodes that may be read and written.
pub const DEVICE_RW: &[FsAccess] = &[
    FsAccess::ReadFile,
    FsAccess::WriteFile,
    FsAccess::Truncate,
    FsAccess::IoctlDev,
];

/// A Landlock scope (ABI 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// No signals to processes outside the domain.
    Signal,
    /// No connecting to abstract unix sockets created outside the domain.
    AbstractUnixSocket,
}

/// One path-beneath rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsRule {
    /// Absolute jail path; a missing path is skipped at restrict time
    /// (that only narrows access).
    pub path: String,
    /// Rights granted beneath it (directory-only rights are dropped for files).
    pub access: BTreeSet<FsAccess>,
}

/// The Landlock plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LandlockPlan {
    /// ABI the plan is written for.
    pub target_abi: u8,
    /// Lowest ABI that enforces all of it (a lower kernel is "partial").
    pub min_abi: u8,
    /// Filesystem rules; every right of [`FsAccess`] is handled.
    pub fs_rules: Vec<FsRule>,
    /// Whether TCP bind/connect are restricted.
    pub restrict_tcp: bool,
    /// Ports `connect()` may reach when restricted.
    pub tcp_connect: Vec<u16>,
    /// Ports `bind()` may use when restricted.
    pub tcp_bind: Vec<u16>,
    /// Scopes.
    pub scopes: Vec<Scope>,
}

/// Build the Landlock plan from resolved rules.
pub(crate) fn build(
    rules: &Rules,
    policy: &Policy,
    fs: &dyn FsView,
) -> Result<LandlockPlan, CompileError> {
    let mut acc = Grants::new();
    let points = rules.read_points();
    let parts = split(&points);
    read_rules(rules, fs, &parts, 0, Path::new("/"), &mut acc)?;
    for root in &rules.allow_write {
        if rules.writable(root) {
            grant(&mut acc, root, READ);
            grant(&mut acc, root, WRITE);
        }
    }
    jail_filesystems(&mut acc);
    let merged = merge(acc);
    check_budget(merged.len(), Path::new("/"))?;
    let local = policy.network.allow_local_binding;
    Ok(LandlockPlan {
        target_abi: TARGET_ABI,
        min_abi: MIN_ABI,
        fs_rules: merged
            .into_iter()
            .map(|(path, access)| FsRule {
                path: path.display().to_string(),
                access,
            })
            .collect(),
        restrict_tcp: !local,
        tcp_connect: if local { Vec::new() } else { vec![PROXY_PORT] },
        tcp_bind: Vec::new(),
        scopes: vec![Scope::Signal, Scope::AbstractUnixSocket],
    })
}

/// Rights on what the jail itself mounts: `/tmp`, `/proc`, `/dev`.
fn jail_filesystems(acc: &mut Grants) {
    grant(acc, Path::new(TMP), READ);
    grant(acc, Path::new(TMP), WRITE);
    grant(acc, Path::new("/proc"), READ);
    grant(acc, Path::new("/dev"), READ);
    grant(acc, Path::new("/dev/shm"), WRITE);
    let devices = ["null", "zero", "full", "tty", "random", "urandom", "pts"];
    for dev in devices {
        grant(acc, &Path::new("/dev").join(dev), DEVICE_RW);
    }
}

fn check_budget(rules: usize, at: &Path) -> Result<(), CompileError> {
    if rules > RULE_BUDGET {
        return Err(CompileError::WalkBudget {
            what: "the Landlock read complement".into(),
            root: at.display().to_string(),
            budget: RULE_BUDGET,
        });
    }
    Ok(())
}

/// Rights granted so far, in the order they were granted; a path may appear
/// more than once (read, then write on a writable root) until [`merge`].
/// Appending and sorting once is much cheaper than a map insert per rule
/// (the read complement is generated in path order already).
type Grants = Vec<(PathBuf, &'static [FsAccess])>;

fn grant(acc: &mut Grants, path: &Path, rights: &'static [FsAccess]) {
    acc.push((path.to_path_buf(), rights));
}

/// The grants in path order (as a map keyed by path would list them), with
/// the rights of each path united.
fn merge(mut acc: Grants) -> Vec<(PathBuf, BTreeSet<FsAccess>)> {
    acc.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(PathBuf, BTreeSet<FsAccess>)> = Vec::with_capacity(acc.len());
    for (path, rights) in acc {
        match out.last_mut() {
            Some((last, set)) if *last == path => set.extend(rights.iter().copied()),
            _ => out.push((path, rights.iter().copied().collect())),
        }
    }
    out
}

/// Grant read where host content is visible, splitting around denied paths.
///
/// A child that no rule path names or leads through has no rule of its own,
/// so its visibility is its parent's: only the children leading towards rule
/// paths are examined one by one, and an invisible directory is not even
/// listed (its other entries would get no rule anyway).
///
/// `below` holds the rule points strictly below `dir` (at `depth`
/// components from `/`), in path order, split into components.
fn read_rules(
    rules: &Rules,
    fs: &dyn FsView,
    below: &[Parts<'_>],
    depth: usize,
    dir: &Path,
    acc: &mut Grants,
) -> Result<(), CompileError> {
    let leading = leading_names(below, depth);
    let visible = rules.visible(dir);
    if leading.is_empty() {
        if visible {
            grant(acc, dir, READ);
        }
        return Ok(());
    }
    if visible {
        grant(acc, dir, &[FsAccess::ReadDir]);
    }
    // No path is granted twice while the complement is built, so the
    // count is the number of rules so far.
    check_budget(acc.len(), dir)?;
    for (name, kind) in children(fs, &leading, dir, visible) {
        if kind == FileKind::Symlink {
            // Access through a link is checked on its target; a rule on the
            // link's path would grant the target instead.
            continue;
        }
        let child = dir.join(&name);
        let Some(group) = leading.get(OsStr::new(&name)) else {
            if visible {
                grant(acc, &child, read_rights(kind));
            }
            continue;
        };
        if kind == FileKind::Dir {
            // The point naming the child itself sorts first; the rest is
            // strictly below it.
            let skip = group.iter().take_while(|p| p.len() == depth + 1).count();
            read_rules(rules, fs, &group[skip..], depth + 1, &child, acc)?;
        } else if rules.visible(&child) {
            grant(acc, &child, read_rights(kind));
        }
    }
    Ok(())
}

/// The read rights for a sibling of the kind its directory listing gave.
/// A file gets no `read_dir`: the kernel refuses directory-only rights on
/// a file, and the jail would otherwise try each file rule twice (most of
/// the read complement's rules are files, such as the entries of `/etc`).
/// A file replaced by a directory before the run only loses the listing.
fn read_rights(kind: FileKind) -> &'static [FsAccess] {
    match kind {
        FileKind::Dir => READ,
        FileKind::File | FileKind::Other | FileKind::Symlink => READ_FILE,
    }
}

/// A rule point's components below `/`, each path split once: walking the
/// tree then costs one comparison per point and level, not a path prefix
/// test and strip per point and level.
type Parts<'a> = Vec<&'a OsStr>;

fn split(points: &BTreeSet<PathBuf>) -> Vec<Parts<'_>> {
    points
        .iter()
        .map(|p| {
            p.components()
                .filter(|c| !matches!(c, Component::RootDir))
                .map(|c| c.as_os_str())
                .collect::<Parts<'_>>()
        })
        .filter(|parts| !parts.is_empty())
        .collect()
}

/// The next component (at `depth`) of the points in `below`, each with its
/// points. Paths order component-wise, so each group is contiguous.
fn leading_names<'a, 'p>(
    below: &'a [Parts<'p>],
    depth: usize,
) -> BTreeMap<&'p OsStr, &'a [Parts<'p>]> {
    let mut out = BTreeMap::new();
    let mut start = 0;
    while start < below.len() {
        let name = below[start][depth];
        let len = below[start..]
            .iter()
            .take_while(|p| p[depth] == name)
            .count();
        out.insert(name, &below[start..start + len]);
        start += len;
    }
    out
}

/// The entries of `dir` (when `listed`), plus every leading name: a
/// directory the compiler may not list (`/home` at mode 0711) is still
/// descended towards the rule paths; only its other entries get no rule.
fn children(
    fs: &dyn FsView,
    leading: &BTreeMap<&OsStr, &[Parts<'_>]>,
    dir: &Path,
    listed: bool,
) -> Vec<(String, FileKind)> {
    let mut out: BTreeMap<String, FileKind> = if listed {
        fs.read_dir(dir).unwrap_or_default().into_iter().collect()
    } else {
        BTreeMap::new()
    };
    for first in leading.keys() {
        let name = first.to_string_lossy().into_owned();
        if !out.contains_key(&name)
            && let Some(kind) = fs.kind(&dir.join(&name))
        {
            out.insert(name, kind);
        }
    }
    out.into_iter().collect()
}
