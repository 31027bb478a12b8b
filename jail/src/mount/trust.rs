//! The run's trust bundle: the host's system roots plus the TLS-termination
//! CA's certificate (never its key), so clients inside the jail verify the
//! proxy's per-host leaves through the variables srt sets (`SSL_CERT_FILE`…).
//!
//! The supervisor passes the PEM bytes in the spec; pid 1 writes them into a
//! small tmpfs of its own, made read-only, and attaches it at [`BUNDLE_DIR`]
//! inside the jail's private `/tmp`, after the pivot and before the command
//! exists. Nothing is written to the host: the tmpfs lives only in the jail's
//! mount namespace and disappears with it (a `kill -9` of the supervisor
//! included). The command cannot change the bundle: the mount is read-only,
//! it holds no capability to unmount or remount it, seccomp denies the mount
//! API, and `rename`/`rmdir` of a mount point fail with EBUSY.

use super::{Context, MountError, Size, new_tmpfs};
use crate::sys::mount::{ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, mount_setattr};
use oajail_policy::compile::mounts::{MountPlan, MountStep};
use rustix::fs::{CWD, Mode, OFlags};
use rustix::mount::MoveMountFlags;
use std::io::{self, Write};

/// Where the bundle's tmpfs is attached inside the jail.
pub const BUNDLE_DIR: &str = "/tmp/.oajail-trust";

/// The bundle's path inside the jail (what the CA variables name).
pub const BUNDLE_PATH: &str = "/tmp/.oajail-trust/ca-bundle.pem";

/// Headroom over the bundle's size for the tmpfs (tmpfs rounds to pages).
const SLACK: u64 = 64 * 1024;

/// Write `pem` into a read-only tmpfs at [`BUNDLE_DIR`]. Runs in pid 1 after
/// `mount::Prepared::apply` (the process root is the jail's) while it still holds the
/// namespace's capabilities. Refuses when the plan shares `/tmp` with the
/// host: the mount point would then be created on the host.
pub fn install(plan: &MountPlan, pem: &[u8]) -> Result<(), MountError> {
    let private_tmp = plan
        .steps
        .iter()
        .any(|s| matches!(s, MountStep::Tmpfs { path, .. } if path == "/tmp"));
    if !private_tmp {
        return Err(MountError {
            what: "trust bundle".into(),
            source: io::Error::other(
                "/tmp is shared with the host, so the run's ca bundle has no private place \
                 (drop /tmp from allowWrite, or give tlsTerminate a caCertPath the host trusts)",
            ),
        });
    }
    let what = || format!("trust bundle {BUNDLE_PATH}");
    let size = pem.len() as u64 + SLACK;
    let fs = new_tmpfs(
        "0755",
        Size::Fixed(size, 16),
        ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
    )?;
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    let file =
        rustix::fs::openat(&fs, "ca-bundle.pem", flags, Mode::from_raw_mode(0o444)).ctx(what)?;
    std::fs::File::from(file).write_all(pem).ctx(what)?;
    mount_setattr(&fs, false, ATTR_RDONLY).ctx(what)?;
    rustix::fs::mkdirat(CWD, BUNDLE_DIR, Mode::from_raw_mode(0o755)).ctx(what)?;
    rustix::mount::move_mount(
        &fs,
        "",
        CWD,
        BUNDLE_DIR,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .ctx(what)
}
