//! Masked credential files (srt `credentials.files[]` with `mode: "mask"`):
//! each path reads, inside the jail, as a read-only file holding the run's
//! sentinel, while the real file stays hidden under the plan's empty mask.
//!
//! The contents come from the spec (the supervisor read the real file and
//! made the sentinel); they are written into one small tmpfs of this mount
//! namespace, made read-only, attached in the staging area, and each file
//! is bind-cloned over its path in the new root before the pivot. Nothing
//! is written to the host, and the tmpfs disappears with the namespace (a
//! `kill -9` included). The sentinel is stacked on the plan's `MaskFile`
//! mount, so unmounting it (which the command cannot do: no capability,
//! seccomp denies the mount API) would still show the empty mask; second
//! mounts of the same file keep the empty mask ([`super::alias`]).

use super::{Context, MountError, Size, Stage, new_tmpfs, open_path, rel};
use crate::spec::MaskedFileSpec;
use crate::sys::mount::{ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, mount_setattr};
use oajail_policy::compile::mounts::{MountPlan, MountStep};
use rustix::fs::{Mode, OFlags};
use rustix::mount::{MoveMountFlags, OpenTreeFlags};
use std::io::{self, Write};

/// The staging directory the sentinels' tmpfs is attached on.
pub(super) const DIR: &str = "secret";

/// Headroom over the contents for the tmpfs (tmpfs rounds to pages).
const SLACK: u64 = 64 * 1024;

impl Stage {
    /// Write each sentinel file and bind it over its path in the new root.
    /// Refused when the plan does not mask the path with an empty file:
    /// the real file must stay hidden beneath, and the mount point must be
    /// a file.
    pub(super) fn place_sentinels(
        &self,
        plan: &MountPlan,
        files: &[MaskedFileSpec],
    ) -> Result<(), MountError> {
        if files.is_empty() {
            return Ok(());
        }
        for f in files {
            let masked = (plan.steps.iter())
                .any(|s| matches!(s, MountStep::MaskFile { path, .. } if *path == f.path));
            if !masked {
                return Err(MountError {
                    what: format!("masked file {}", f.path),
                    source: io::Error::other("the mount plan does not mask it with a file"),
                });
            }
        }
        let fs = sentinel_fs(files)?;
        super::move_onto(&fs, &self.base, DIR).ctx(|| "attach masked files".into())?;
        for (i, f) in files.iter().enumerate() {
            let what = || format!("masked file {}", f.path);
            let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
            let source = format!("{DIR}/{i}");
            let tree = rustix::mount::open_tree(&self.base, source.as_str(), flags).ctx(what)?;
            let target = open_path(&self.root, rel(&f.path), true).ctx(what)?;
            rustix::mount::move_mount(
                &tree,
                "",
                &target,
                "",
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
            )
            .ctx(what)?;
        }
        Ok(())
    }
}

/// A read-only tmpfs holding file `i` (mode 0444) for each entry.
fn sentinel_fs(files: &[MaskedFileSpec]) -> Result<rustix::fd::OwnedFd, MountError> {
    let bytes: u64 = files.iter().map(|f| f.content.len() as u64).sum();
    let fs = new_tmpfs(
        "0755",
        Size::Fixed(bytes + SLACK, files.len() as u64 + 16),
        ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
    )?;
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    for (i, f) in files.iter().enumerate() {
        let what = || format!("masked file {}", f.path);
        let file =
            rustix::fs::openat(&fs, i.to_string(), flags, Mode::from_raw_mode(0o444)).ctx(what)?;
        std::fs::File::from(file)
            .write_all(f.content.as_bytes())
            .ctx(what)?;
    }
    mount_setattr(&fs, false, ATTR_RDONLY).ctx(|| "masked files read-only".into())?;
    Ok(fs)
}
