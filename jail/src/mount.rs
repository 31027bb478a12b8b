//! The mount layer: builds the jail's root from a [`MountPlan`] inside the
//! child's new mount namespace, and pivots into it.
//!
//! [`prepare`] takes the steps that need no plan (1 and 2 below), and
//! [`Prepared::apply`] the rest, `pivot_root` included: on return the
//! process's root is the new tree, the host's tree is detached, and the cwd
//! is `/`. Both run in the child after the user namespace's id maps are
//! written (they need the namespace's CAP_SYS_ADMIN) and after the pid
//! namespace exists (a fresh `/proc` is mounted for that namespace).
//!
//! How (Linux 5.12+, new mount API):
//! 1. `/` is made private recursively, so nothing propagates to the host;
//! 2. two recursive clones of the host tree are taken (`open_tree`): `host`,
//!    the pristine source of every bind, and `root`, made read-only, nosuid
//!    and nodev recursively (`mount_setattr`), which becomes the new root;
//!    both are attached under a private staging tmpfs;
//! 3. each plan step mounts onto `root`; every source and target is opened
//!    with `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)` and mounted by
//!    file descriptor, so a symlink swapped in after compilation makes the
//!    step fail instead of redirecting it;
//! 4. `pivot_root(".", ".")` from inside `root`, then a lazy detach of the
//!    old root (the host tree, staging and all).
//!
//! Masks are real mounts: the command cannot remove them (no capabilities,
//! and seccomp denies the whole mount API), `rmdir`/`rename` of any mount
//! point fails with EBUSY, and `link()` across mounts fails with EXDEV.

mod alias;
mod dev;
mod secret;
pub mod trust;

use crate::spec::MaskedFileSpec;
use crate::sys::mount::{ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, mount_setattr};
use oajail_policy::compile::mounts::{MountPlan, MountStep, NodeKind, SkeletonEntry};
use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags,
};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// A mount step failed; names the operation and path.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", crate::error::lower_first(&.source.to_string()))]
pub struct MountError {
    /// The operation and path (`bind /home/u/ws`, `pivot_root`…).
    pub what: String,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl From<MountError> for crate::error::Failure {
    fn from(e: MountError) -> Self {
        crate::error::Failure {
            errno: e.source.raw_os_error(),
            msg: e.to_string(),
        }
    }
}

/// Attach context to a rustix or io error.
pub(crate) trait Context<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, MountError>;
}

impl<T, E: Into<io::Error>> Context<T> for Result<T, E> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, MountError> {
        self.map_err(|e| MountError {
            what: what(),
            source: e.into(),
        })
    }
}

/// Directories tried, in order, for the private staging tmpfs. Anything that
/// exists will do: the host tree was cloned before it is covered.
const STAGING: &[&str] = &["/tmp", "/mnt", "/var/tmp", "/opt", "/srv", "/home", "/root"];

/// Steps 1 and 2 of the module docs, which need no plan: pid 1 takes them
/// while the supervisor is still compiling, before the spec arrives.
pub fn prepare() -> Result<Prepared, MountError> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .ctx(|| "make / private".into())?;
    // Read before anything is mounted: the host's mounts, as cloned.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .ctx(|| "read /proc/self/mountinfo".into())?;
    Ok(Prepared {
        mountinfo,
        stage: Stage::new()?,
    })
}

/// How the view is finished where the environment refuses a step
/// (`negotiate::Fallbacks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// A fresh `/proc` (else the container's, which the read-only root
    /// clone already holds, with the host-wide files masked).
    pub fresh_proc: bool,
    /// `pivot_root` (else `move_mount` onto `/` and `chroot`).
    pub pivot: bool,
}

/// The staging area made and the host's mounts read ([`prepare`]).
pub struct Prepared {
    mountinfo: String,
    stage: Stage,
}

impl Prepared {
    /// Steps 3 and 4: build the jail's root from `plan` and pivot into it.
    pub fn apply(
        self,
        plan: &MountPlan,
        masked: &[MaskedFileSpec],
        view: View,
    ) -> Result<(), MountError> {
        let stage = self.stage;
        let shm =
            (plan.shm_size_bytes).unwrap_or(oajail_policy::compile::mounts::DEFAULT_SHM_BYTES);
        for step in &plan.steps {
            match step {
                MountStep::Proc if !view.fresh_proc => dev::container_proc(&stage)?,
                step => stage.apply(step, shm)?,
            }
        }
        let hidden: Vec<std::path::PathBuf> = plan
            .steps
            .iter()
            .filter(|s| matches!(s, MountStep::MaskDir { .. } | MountStep::MaskFile { .. }))
            .map(|s| s.path().into())
            .collect();
        for path in alias::aliases(&self.mountinfo, &hidden) {
            stage.mask_alias(&path.to_string_lossy())?;
        }
        stage.place_sentinels(plan, masked)?;
        if view.pivot {
            stage.pivot()
        } else {
            stage.move_and_chroot()
        }
    }
}

/// The staging area: `host` (pristine clone), `root` (the new root) and an
/// empty mode-000 file cloned for file masks.
struct Stage {
    base: OwnedFd,
    host: OwnedFd,
    root: OwnedFd,
}

impl Stage {
    fn new() -> Result<Stage, MountError> {
        let flags = OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE;
        let host = rustix::mount::open_tree(CWD, "/", flags).ctx(|| "clone host tree".into())?;
        let root = rustix::mount::open_tree(CWD, "/", flags).ctx(|| "clone new root".into())?;
        mount_setattr(&root, true, ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV)
            .ctx(|| "make new root read-only".into())?;
        let staging = new_tmpfs(
            "0700",
            Size::Fixed(1 << 16, 16),
            ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
        )?;
        for dir in ["host", "root", "mask", secret::DIR] {
            rustix::fs::mkdirat(&staging, dir, Mode::from_raw_mode(0o700))
                .ctx(|| format!("staging mkdir {dir}"))?;
        }
        let base = STAGING
            .iter()
            .find(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
            .ok_or_else(|| MountError {
                what: "staging".into(),
                source: io::Error::other("no directory to stage the new root on"),
            })?;
        move_onto(&staging, CWD, base).ctx(|| format!("attach staging on {base}"))?;
        let base = rustix::fs::open(
            *base,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ctx(|| format!("open staging {base}"))?;
        move_onto(&host, &base, "host").ctx(|| "attach host tree".into())?;
        move_onto(&root, &base, "root").ctx(|| "attach new root".into())?;
        move_onto(&mask_source()?, &base, "mask").ctx(|| "attach mask source".into())?;
        let host = open_path(&base, "host", false).ctx(|| "open host tree".into())?;
        let root = open_path(&base, "root", false).ctx(|| "open new root".into())?;
        Ok(Stage { base, host, root })
    }

    /// One step (`shm`: the size of `/dev/shm` for [`MountStep::Dev`]).
    fn apply(&self, step: &MountStep, shm: u64) -> Result<(), MountError> {
        match step {
            // The root clone was made and attached by `Stage::new`.
            MountStep::RootBind => Ok(()),
            MountStep::Proc => dev::proc(self),
            MountStep::Dev => dev::dev(self, shm),
            MountStep::Bind { path, writable, .. } => self.bind(path, *writable),
            MountStep::MaskDir { path, skeleton, .. } => self.mask_dir(path, skeleton),
            MountStep::MaskFile { path, .. } => self.mask_file(path),
            MountStep::Tmpfs {
                path,
                size_bytes,
                skeleton,
            } => {
                let fs = new_tmpfs("1777", Size::Bytes(*size_bytes), ATTR_NOSUID | ATTR_NODEV)?;
                make_skeleton(&fs, skeleton, path)?;
                self.attach(&fs, path, false)
            }
        }
    }

    /// Recursive clone of the host's `path` onto the same path in the new root.
    fn bind(&self, path: &str, writable: bool) -> Result<(), MountError> {
        let what = || format!("bind {path}");
        let src = open_path(&self.host, rel(path), true).ctx(what)?;
        let flags = OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE;
        let tree = rustix::mount::open_tree(&src, "", flags).ctx(what)?;
        let ro = if writable { 0 } else { ATTR_RDONLY };
        mount_setattr(&tree, true, ATTR_NOSUID | ATTR_NODEV | ro).ctx(what)?;
        self.attach(&tree, path, true)
    }

    /// An empty read-only directory: a clone of the staging area's empty
    /// `mask/dir` when nothing is mounted inside it (one cheap bind instead
    /// of a new tmpfs per mask), else a tmpfs holding the skeleton's mount
    /// points.
    fn mask_dir(&self, path: &str, skeleton: &[SkeletonEntry]) -> Result<(), MountError> {
        if skeleton.is_empty() {
            return self.clone_mask(path, "mask/dir");
        }
        // Every skeleton entry may need all its parent directories.
        let nodes: usize = skeleton.iter().map(|e| e.path.split('/').count()).sum();
        let fs = new_tmpfs(
            "0755",
            Size::Fixed(1 << 20, nodes as u64 + 16),
            ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
        )?;
        make_skeleton(&fs, skeleton, path)?;
        mount_setattr(&fs, false, ATTR_RDONLY).ctx(|| format!("mask {path} read-only"))?;
        self.attach(&fs, path, false)
    }

    /// Mask a second mount's view of a masked path ([`alias`]) like the
    /// original: a directory with an empty directory, anything else with
    /// the empty file. A path the new root does not show is left alone.
    fn mask_alias(&self, path: &str) -> Result<(), MountError> {
        let what = || format!("mask second mount {path}");
        let node = match open_path(&self.root, rel(path), true) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).ctx(what),
        };
        let stat = rustix::fs::fstat(&node).ctx(what)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory {
            self.mask_dir(path, &[])
        } else {
            self.mask_file(path)
        }
    }

    /// An empty, mode-000, read-only file over a file, socket or symlink.
    fn mask_file(&self, path: &str) -> Result<(), MountError> {
        self.clone_mask(path, "mask/empty")
    }

    /// Bind the staging area's empty `source` read-only over `path`.
    fn clone_mask(&self, path: &str, source: &str) -> Result<(), MountError> {
        let what = || format!("mask {path}");
        let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
        // A clone keeps the source mount's read-only, nosuid, nodev, noexec.
        let file = rustix::mount::open_tree(&self.base, source, flags).ctx(what)?;
        self.attach(&file, path, false)
    }

    /// Mount the detached `tree` on `path` of the new root, by fd.
    fn attach(&self, tree: &OwnedFd, path: &str, _bind: bool) -> Result<(), MountError> {
        let what = || format!("mount on {path}");
        let target = open_path(&self.root, rel(path), true).ctx(what)?;
        rustix::mount::move_mount(
            tree,
            "",
            &target,
            "",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )
        .ctx(what)
    }

    /// Switch the process root to the new tree and detach the old one.
    fn pivot(self) -> Result<(), MountError> {
        rustix::process::fchdir(&self.root).ctx(|| "chdir to new root".into())?;
        rustix::process::pivot_root(".", ".").ctx(|| "pivot_root".into())?;
        rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)
            .ctx(|| "detach old root".into())?;
        rustix::process::chdir("/").ctx(|| "chdir /".into())?;
        Ok(())
    }
}

impl Stage {
    /// `pivot_root`'s fallback (as runc's `no_pivot_root`): detach the
    /// pristine host clone, move the new root onto `/` and `chroot` into
    /// it. The container's tree stays mounted beneath the new root; no
    /// path leads there from inside (`..` stops at the root), pid 1 keeps
    /// no descriptor to it, and capabilities are dropped before the
    /// command exists (`chroot` again, `mount` or `setns` are refused, by
    /// the lack of them and by seccomp). What is left is
    /// `/proc/<pid>/root` of a process outside the jail: there is none in
    /// a fresh `/proc`, and beside the container's `/proc` Landlock's
    /// ptrace restriction refuses it (the negotiation takes this fallback
    /// there only with Landlock).
    fn move_and_chroot(self) -> Result<(), MountError> {
        let host = format!("/proc/self/fd/{}/host", self.base.as_raw_fd());
        rustix::mount::unmount(host.as_str(), rustix::mount::UnmountFlags::DETACH)
            .ctx(|| "detach the host clone".into())?;
        rustix::process::fchdir(&self.root).ctx(|| "chdir to new root".into())?;
        rustix::mount::move_mount(
            &self.root,
            "",
            CWD,
            "/",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .ctx(|| "move the new root onto /".into())?;
        rustix::process::chroot(".").ctx(|| "chroot".into())?;
        rustix::process::chdir("/").ctx(|| "chdir /".into())?;
        Ok(())
    }
}

/// The sources every mask is cloned from: a read-only, nosuid, nodev, noexec
/// tmpfs holding an empty directory `dir` (0755) and an empty file `empty`
/// (mode 000).
fn mask_source() -> Result<OwnedFd, MountError> {
    let what = || "mask source".to_owned();
    let fs = new_tmpfs(
        "0755",
        Size::Fixed(1 << 16, 16),
        ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
    )?;
    rustix::fs::mkdirat(&fs, "dir", Mode::from_raw_mode(0o755)).ctx(what)?;
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    drop(rustix::fs::openat(&fs, "empty", flags, Mode::empty()).ctx(what)?);
    mount_setattr(&fs, false, ATTR_RDONLY).ctx(what)?;
    Ok(fs)
}

/// A path of the plan relative to a tree root (`/` is `.`).
fn rel(path: &str) -> &str {
    let r = path.trim_start_matches('/');
    if r.is_empty() { "." } else { r }
}

/// `openat2(O_PATH)` beneath `dir` without following any symlink; with
/// `keep_last_link` a trailing symlink is opened itself (for masking it).
fn open_path(dir: impl AsFd, path: &str, keep_last_link: bool) -> io::Result<OwnedFd> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if keep_last_link {
        flags |= OFlags::NOFOLLOW;
    }
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH;
    let path = if path.starts_with('/') {
        rel(path)
    } else {
        path
    };
    Ok(rustix::fs::openat2(
        dir,
        path,
        flags,
        Mode::empty(),
        resolve,
    )?)
}

/// Attach a detached mount `tree` at `dir`/`path`.
fn move_onto(tree: &OwnedFd, dir: impl AsFd, path: &str) -> io::Result<()> {
    Ok(rustix::mount::move_mount(
        tree,
        "",
        dir,
        path,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?)
}

/// Bytes of tmpfs per inode allowed: an empty file costs no page but about
/// 1 KiB of kernel slab (inode, dentry), which no size limit counts, so a
/// writable tmpfs gets `size / INODE_BYTES` inodes (a 1 GiB `/tmp`: 65,536;
/// the security suite's 16 MiB `/tmp`: 1,024) and at most [`MAX_INODES`].
pub const INODE_BYTES: u64 = 16 << 10;
/// Upper bound of a tmpfs's inodes (about 80 MiB of slab when all are used).
pub const MAX_INODES: u64 = 65_536;

/// The size and inode limits of a new tmpfs.
pub(super) enum Size {
    /// Writable: `nr_inodes` follows the size ([`INODE_BYTES`]).
    Bytes(u64),
    /// Filled by oajail itself: bytes and an exact inode count.
    Fixed(u64, u64),
}

/// The `nr_inodes` of a writable tmpfs of `size` bytes.
pub fn tmpfs_inodes(size: u64) -> u64 {
    (size / INODE_BYTES).clamp(64, MAX_INODES)
}

/// A new detached tmpfs with the given root mode, limits and mount
/// attributes. Every tmpfs the jail mounts has both a size and an inode
/// limit (the kernel's default `nr_inodes` is half the RAM's pages).
fn new_tmpfs(mode: &str, size: Size, attrs: u64) -> Result<OwnedFd, MountError> {
    let what = || "create tmpfs".to_owned();
    let (bytes, inodes) = match size {
        Size::Bytes(b) => (b, tmpfs_inodes(b)),
        Size::Fixed(b, i) => (b, i),
    };
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).ctx(what)?;
    rustix::mount::fsconfig_set_string(&fs, "mode", mode).ctx(what)?;
    rustix::mount::fsconfig_set_string(&fs, "size", bytes.to_string()).ctx(what)?;
    rustix::mount::fsconfig_set_string(&fs, "nr_inodes", inodes.to_string()).ctx(what)?;
    rustix::mount::fsconfig_create(&fs).ctx(what)?;
    let attr = MountAttrFlags::from_bits_retain(attrs as u32);
    rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attr).ctx(what)
}

/// Create the mount points deeper steps need inside a fresh tmpfs.
fn make_skeleton(fs: &OwnedFd, skeleton: &[SkeletonEntry], at: &str) -> Result<(), MountError> {
    for entry in skeleton {
        let what = || format!("mount point {at}/{}", entry.path);
        let parts: Vec<&str> = entry.path.split('/').filter(|p| !p.is_empty()).collect();
        for i in 1..parts.len() {
            mkdir_if_missing(fs, &parts[..i].join("/")).ctx(what)?;
        }
        match entry.kind {
            NodeKind::Dir => mkdir_if_missing(fs, &entry.path).ctx(what)?,
            NodeKind::File | NodeKind::Symlink => {
                let flags = OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
                drop(
                    rustix::fs::openat(fs, entry.path.as_str(), flags, Mode::from_raw_mode(0o644))
                        .ctx(what)?,
                );
            }
        }
    }
    Ok(())
}

fn mkdir_if_missing(fs: &OwnedFd, path: &str) -> io::Result<()> {
    match rustix::fs::mkdirat(fs, path, Mode::from_raw_mode(0o755)) {
        Err(rustix::io::Errno::EXIST) => Ok(()),
        other => Ok(other?),
    }
}
