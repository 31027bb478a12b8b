//! The mount plan: how the jail's root is built (applied by
//! `oajail_jail::mount::Prepared::apply` in the child, inside its new mount namespace).
//!
//! Layout, in order:
//! 1. [`MountStep::RootBind`]: a recursive read-only, nosuid, nodev clone of
//!    the host's `/` becomes the new root;
//! 2. [`MountStep::Proc`], [`MountStep::Dev`]: a fresh procfs and a minimal
//!    `/dev`;
//! 3. the policy steps, shallow to deep (so a more specific rule is mounted
//!    later, on top, and wins): [`MountStep::Bind`] (a clone of the host path,
//!    writable or not), [`MountStep::MaskDir`] / [`MountStep::MaskFile`]
//!    (empty, read-only: reads find nothing and writes fail),
//!    [`MountStep::Tmpfs`] (the private `/tmp`). Masks and the tmpfs carry a
//!    `skeleton`: the mount points that deeper steps need inside them.
//!
//! A step exists only where the state (visible, writable) changes from its
//! parent, plus "pins": every directory between a writable root and a
//! protected path is bound onto itself, so renaming it fails with EBUSY.

use super::rules::{Rules, TMP};
use super::{CompileError, FileKind, FsView, HostFacts};
use crate::Policy;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Default size of the private `/tmp`: 1 GiB, or a quarter of RAM when less
/// (and at most `limits.addressSpaceBytes` when that is set).
pub const DEFAULT_TMP_BYTES: u64 = 1 << 30;

/// Default size of the jail's `/dev/shm` (at most `limits.addressSpaceBytes`
/// when that is set).
pub const DEFAULT_SHM_BYTES: u64 = 256 << 20;

/// The mount plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountPlan {
    /// Steps, applied in order.
    pub steps: Vec<MountStep>,
    /// Notes about entries that were dropped or narrowed.
    pub warnings: Vec<String>,
    /// Size of `/dev/shm` when `limits.addressSpaceBytes` lowers it below
    /// [`DEFAULT_SHM_BYTES`] (absent: the default): tmpfs pages are not
    /// counted by `RLIMIT_AS` (`limits::SharedMemory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size_bytes: Option<u64>,
}

/// What kind of node a mount point is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    /// A directory.
    Dir,
    /// Anything mounted as a file (regular file, socket, device…).
    File,
    /// A symbolic link (masked without following it).
    Symlink,
}

/// A mount point created inside a mask or tmpfs for a deeper step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkeletonEntry {
    /// Path relative to the mask (no leading `/`).
    pub path: String,
    /// Directory or file mount point.
    pub kind: NodeKind,
}

/// One mount step; paths are absolute jail paths (= host paths).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "op")]
pub enum MountStep {
    /// Recursive read-only, nosuid, nodev clone of the host `/` as the new root.
    RootBind,
    /// A fresh procfs (nosuid, nodev, noexec) at `/proc`.
    Proc,
    /// A minimal `/dev`: null zero full random urandom tty, a new devpts with
    /// ptmx, a tmpfs at `/dev/shm`, the fd/stdin/stdout/stderr links.
    Dev,
    /// Recursive clone of the host path onto the same jail path.
    Bind {
        /// The path.
        path: String,
        /// Writable (else recursively read-only); always nosuid, nodev.
        writable: bool,
        /// Why: `allowWrite`, `protect`, `pin`, `reallow`…
        why: String,
    },
    /// Empty read-only tmpfs over a directory.
    MaskDir {
        /// The directory.
        path: String,
        /// Mount points for deeper steps.
        skeleton: Vec<SkeletonEntry>,
        /// Why: `denyRead`, `hostSockets`.
        why: String,
    },
    /// Empty, mode 000, read-only file over a file (or a symlink).
    MaskFile {
        /// The file.
        path: String,
        /// Why: `denyRead`, `hostSockets`.
        why: String,
    },
    /// Private writable tmpfs (mode 1777, nosuid, nodev).
    Tmpfs {
        /// Where (`/tmp`).
        path: String,
        /// Size limit in bytes.
        size_bytes: u64,
        /// Mount points for deeper steps.
        skeleton: Vec<SkeletonEntry>,
    },
}

impl MountStep {
    /// The path the step mounts on (`/` for the root).
    pub fn path(&self) -> &str {
        match self {
            MountStep::RootBind => "/",
            MountStep::Proc => "/proc",
            MountStep::Dev => "/dev",
            MountStep::Bind { path, .. }
            | MountStep::MaskDir { path, .. }
            | MountStep::MaskFile { path, .. }
            | MountStep::Tmpfs { path, .. } => path,
        }
    }
}

/// Build the mount plan from resolved rules.
pub(crate) fn build(
    rules: &Rules,
    policy: &Policy,
    facts: &HostFacts,
    fs: &dyn FsView,
) -> Result<MountPlan, CompileError> {
    let mut warnings = rules.warnings.clone();
    let pins = pins(rules);
    // One bulk collect (sorted runs merged) rather than per-element inserts.
    let points: BTreeSet<PathBuf> = rules
        .read_points()
        .into_iter()
        .chain(rules.deny_write.iter().cloned())
        .chain(pins.iter().cloned())
        .collect();
    let mut steps = Vec::new();
    for point in sorted_shallow_first(points) {
        if point.starts_with("/proc") || point.starts_with("/dev") {
            warnings.push(format!(
                "{}: rules under /proc and /dev are not applied",
                point.display()
            ));
            continue;
        }
        if point == Path::new(TMP) && rules.private.contains(&point) {
            steps.push(MountStep::Tmpfs {
                path: TMP.to_owned(),
                size_bytes: tmp_size(policy, facts),
                skeleton: Vec::new(),
            });
        } else if let Some(step) = step_for(rules, fs, &point, pins.contains(&point)) {
            steps.push(step);
        }
    }
    fill_skeletons(&mut steps, rules, fs);
    let mut all = vec![MountStep::RootBind, MountStep::Proc, MountStep::Dev];
    all.extend(steps);
    let shm_size_bytes =
        (policy.oajail.limits.address_space_bytes).filter(|bytes| *bytes < DEFAULT_SHM_BYTES);
    Ok(MountPlan {
        steps: all,
        warnings,
        shm_size_bytes,
    })
}

/// Ancestors between each existing protected path and its writable root
/// (a missing one has nothing to move; the guard holds it).
fn pins(rules: &Rules) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for protected in rules.deny_write.iter().filter(|p| rules.kind(p).is_some()) {
        let Some(parent) = protected.parent() else {
            continue;
        };
        if !rules.writable(parent) {
            continue;
        }
        for ancestor in parent.ancestors() {
            if rules.allow_write.contains(ancestor) || !rules.writable(ancestor) {
                break;
            }
            out.insert(ancestor.to_path_buf());
        }
    }
    out
}

fn sorted_shallow_first(points: BTreeSet<PathBuf>) -> Vec<PathBuf> {
    // The input is already in path order, so a stable sort by depth alone
    // gives (depth, path) order; each depth is counted once, not per compare.
    let mut v: Vec<(usize, PathBuf)> = points
        .into_iter()
        .filter(|p| p != Path::new("/"))
        .map(|p| (p.components().count(), p))
        .collect();
    v.sort_by_key(|(depth, _)| *depth);
    v.into_iter().map(|(_, p)| p).collect()
}

/// The step that gives `point` its state, if its parent's state differs.
fn step_for(rules: &Rules, fs: &dyn FsView, point: &Path, pin: bool) -> Option<MountStep> {
    // Nothing to mount on a missing path: asked first, it spares the
    // visibility questions for the (many) rules naming missing paths.
    let kind = rules.kind(point).or_else(|| fs.kind(point))?;
    let path = point.display().to_string();
    let parent = point.parent().unwrap_or(Path::new("/"));
    let (vis, pvis) = (rules.visible(point), rules.visible(parent));
    let (w, pw) = (rules.writable(point), rules.writable(parent));
    if !vis {
        let why = if rules.masks.contains(point) {
            "hostSockets"
        } else {
            "denyRead"
        };
        return pvis.then(|| mask(path, kind, why));
    }
    let why = if !pvis {
        "reallow"
    } else if w != pw {
        if w { "allowWrite" } else { "protect" }
    } else if pin {
        "pin"
    } else {
        return None;
    };
    if kind == FileKind::Symlink {
        // A protected name that is a symlink: replace the link itself.
        return Some(mask(path, kind, "protectSymlink"));
    }
    Some(MountStep::Bind {
        path,
        writable: w,
        why: why.to_owned(),
    })
}

fn mask(path: String, kind: FileKind, why: &str) -> MountStep {
    let why = why.to_owned();
    match kind {
        FileKind::Dir => MountStep::MaskDir {
            path,
            skeleton: Vec::new(),
            why,
        },
        _ => MountStep::MaskFile { path, why },
    }
}

/// `limits.tmpSizeBytes`, else the default, lowered to a quarter of RAM
/// and to `limits.addressSpaceBytes` (tmpfs pages are not counted by
/// `RLIMIT_AS`; with a memory cgroup they could not exceed it anyway).
fn tmp_size(policy: &Policy, facts: &HostFacts) -> u64 {
    let limits = &policy.oajail.limits;
    limits.tmp_size_bytes.unwrap_or_else(|| {
        let by_ram = facts
            .mem_total_bytes
            .map_or(DEFAULT_TMP_BYTES, |mem| DEFAULT_TMP_BYTES.min(mem / 4));
        by_ram.min(limits.address_space_bytes.unwrap_or(u64::MAX))
    })
}

fn node_kind(kind: FileKind) -> NodeKind {
    match kind {
        FileKind::Dir => NodeKind::Dir,
        FileKind::Symlink => NodeKind::Symlink,
        FileKind::File | FileKind::Other => NodeKind::File,
    }
}

/// Give every mask/tmpfs the mount points of the steps directly beneath it.
fn fill_skeletons(steps: &mut [MountStep], rules: &Rules, fs: &dyn FsView) {
    let paths: Vec<PathBuf> = steps.iter().map(|s| PathBuf::from(s.path())).collect();
    let index: BTreeMap<&Path, usize> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_path(), i))
        .collect();
    let mut found: BTreeMap<usize, Vec<SkeletonEntry>> = BTreeMap::new();
    for path in &paths {
        // The nearest ancestor that has a step (steps are unique per path and
        // ordered shallow first, so it is an earlier step).
        let owner = path.ancestors().skip(1).find_map(|a| index.get(a).copied());
        let Some(owner) = owner else { continue };
        if !matches!(
            steps[owner],
            MountStep::MaskDir { .. } | MountStep::Tmpfs { .. }
        ) {
            continue;
        }
        let Ok(rel) = path.strip_prefix(&paths[owner]) else {
            continue;
        };
        let kind = rules
            .kind(path)
            .or_else(|| fs.kind(path))
            .unwrap_or(FileKind::Dir);
        found.entry(owner).or_default().push(SkeletonEntry {
            path: rel.display().to_string(),
            kind: node_kind(kind),
        });
    }
    for (owner, entries) in found {
        match &mut steps[owner] {
            MountStep::MaskDir { skeleton, .. } | MountStep::Tmpfs { skeleton, .. } => {
                *skeleton = entries
            }
            _ => {}
        }
    }
}
