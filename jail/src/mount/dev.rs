//! The fresh `/proc` and the minimal `/dev` of the jail.
//!
//! `/dev` is a read-only tmpfs holding only: the device nodes `null zero
//! full random urandom tty` (bind clones of the host's nodes, nosuid and
//! noexec but not nodev), a new devpts instance at `/dev/pts` with
//! `/dev/ptmx` linking to its `ptmx`, a writable tmpfs at `/dev/shm`, and
//! the `fd`, `stdin`, `stdout`, `stderr` links into `/proc/self/fd`. A host
//! device that is missing is left out (that only narrows the jail).

use super::{Context, MountError, Size, Stage, new_tmpfs, open_path};
use crate::sys::mount::{ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, mount_setattr};
use rustix::fs::{Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, OpenTreeFlags};
use std::os::fd::OwnedFd;

/// Device nodes bound from the host.
pub(crate) const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// `/proc` files that are not per pid namespace and show the host: the
/// descriptions of every key the caller's uid can view (its session and
/// user keyrings, kernel keys of its login), and key quotas per uid. They
/// are masked with an empty file; a kernel without keys has neither.
pub(crate) const PROC_MASKS: &[&str] = &["/proc/keys", "/proc/key-users"];

/// A fresh procfs for the jail's pid namespace at `/proc`, with
/// [`PROC_MASKS`] masked.
pub(super) fn proc(stage: &Stage) -> Result<(), MountError> {
    let what = || "mount /proc".to_owned();
    let fs = rustix::mount::fsopen("proc", FsOpenFlags::FSOPEN_CLOEXEC).ctx(what)?;
    rustix::mount::fsconfig_create(&fs).ctx(what)?;
    let attr = MountAttrFlags::from_bits_retain((ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC) as u32);
    let mnt = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attr).ctx(what)?;
    let present = PROC_MASKS.iter().filter(|file| {
        let name = file.trim_start_matches("/proc/");
        rustix::fs::statat(&mnt, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
    });
    let present: Vec<&&str> = present.collect();
    stage.attach(&mnt, "/proc", false)?;
    present
        .into_iter()
        .try_for_each(|file| stage.mask_file(file))
}

/// The container's `/proc` in place of a fresh one (the kernel refuses a
/// new procfs where the container masks parts of its own): the root clone
/// holds it already, read-only, nosuid and nodev, with the container's own
/// masks; [`PROC_MASKS`] are masked on top. The pid namespace is kept, so
/// the jail cannot signal or trace what it sees there; what it can see is
/// the container's process list and command lines (the negotiation names
/// that loss).
pub(super) fn container_proc(stage: &Stage) -> Result<(), MountError> {
    let present = PROC_MASKS.iter().filter(|file| {
        let name = file.trim_start_matches('/');
        open_path(&stage.root, name, true).is_ok()
    });
    let present: Vec<&&str> = present.collect();
    present
        .into_iter()
        .try_for_each(|file| stage.mask_file(file))
}

/// The minimal `/dev`, with a `/dev/shm` of `shm_bytes`.
pub(super) fn dev(stage: &Stage, shm_bytes: u64) -> Result<(), MountError> {
    let fs = new_tmpfs("0755", Size::Fixed(1 << 20, 64), ATTR_NOSUID | ATTR_NOEXEC)?;
    populate(&fs)?;
    mount_setattr(&fs, false, ATTR_RDONLY).ctx(|| "make /dev read-only".into())?;
    stage.attach(&fs, "/dev", false)?;
    for name in DEVICES {
        bind_device(stage, name)?;
    }
    let pts = devpts()?;
    stage.attach(&pts, "/dev/pts", false)?;
    let shm = new_tmpfs("1777", Size::Bytes(shm_bytes), ATTR_NOSUID | ATTR_NODEV)?;
    stage.attach(&shm, "/dev/shm", false)
}

/// Mount points and links inside the `/dev` tmpfs.
fn populate(fs: &OwnedFd) -> Result<(), MountError> {
    let what = || "populate /dev".to_owned();
    for name in DEVICES {
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        drop(rustix::fs::openat(fs, *name, flags, Mode::from_raw_mode(0o666)).ctx(what)?);
    }
    for dir in ["pts", "shm"] {
        rustix::fs::mkdirat(fs, dir, Mode::from_raw_mode(0o755)).ctx(what)?;
    }
    let links = [
        ("pts/ptmx", "ptmx"),
        ("/proc/self/fd", "fd"),
        ("/proc/self/fd/0", "stdin"),
        ("/proc/self/fd/1", "stdout"),
        ("/proc/self/fd/2", "stderr"),
    ];
    for (target, name) in links {
        rustix::fs::symlinkat(target, fs, name).ctx(what)?;
    }
    Ok(())
}

/// Bind the host's device node `name` (skipped when the host has none).
fn bind_device(stage: &Stage, name: &str) -> Result<(), MountError> {
    let what = || format!("bind /dev/{name}");
    let src = match open_path(&stage.host, &format!("dev/{name}"), true) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx(what),
    };
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    let node = rustix::mount::open_tree(&src, "", flags).ctx(what)?;
    mount_setattr(&node, false, ATTR_NOSUID | ATTR_NOEXEC).ctx(what)?;
    stage.attach(&node, &format!("/dev/{name}"), false)
}

/// A new devpts instance (its own pty numbering; no host ptys visible).
fn devpts() -> Result<OwnedFd, MountError> {
    let what = || "mount /dev/pts".to_owned();
    let fs = rustix::mount::fsopen("devpts", FsOpenFlags::FSOPEN_CLOEXEC).ctx(what)?;
    rustix::mount::fsconfig_set_flag(&fs, "newinstance").ctx(what)?;
    rustix::mount::fsconfig_set_string(&fs, "ptmxmode", "0666").ctx(what)?;
    rustix::mount::fsconfig_set_string(&fs, "mode", "0620").ctx(what)?;
    rustix::mount::fsconfig_create(&fs).ctx(what)?;
    let attr = MountAttrFlags::from_bits_retain((ATTR_NOSUID | ATTR_NOEXEC) as u32);
    rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attr).ctx(what)
}
