//! The audit's fake files at a policy's absolute paths, shown through
//! overlays in the lab's own mount namespace (the host is only read).
//!
//! An overlay's lower layer must be a directory with no mount under it
//! that this mount namespace may not reveal: in a mount namespace of a
//! user namespace other than the host's, every mount inherited from the
//! host is locked to the one above it, and the kernel refuses such a lower
//! layer (`EINVAL`: overlayfs "failed to clone lowerpath"). `/run` with
//! `/run/user/<uid>` (every desktop session) or `/run/netns` (`ip netns
//! add`), `/home` with an encrypted home are such directories. There the
//! lab builds the same view another way: a tmpfs with a bind mount of
//! every host entry of the directory (binding one entry, recursively,
//! reveals nothing the entry hides), the upper layer's fake files beside
//! them (and merged into the host's subdirectories they belong in), made
//! read-only and moved over the directory.

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use oajail_audit::labspec::LabConfig;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The audit's canaries at a policy's absolute paths: each host directory
/// in `overlays` is covered, in this mount namespace only, by an overlay
/// whose upper layer (`<lab>/abs/<i>/upper`) holds the fake files; the
/// host's directory is only read. In a user namespace overlayfs needs
/// `userxattr` (Linux 5.11+); a kernel without it fails the lab, naming
/// the directory, rather than auditing without the canary.
pub fn policy_paths(config: &LabConfig, in_userns: bool) -> Result<()> {
    for (i, dir) in config.overlays.iter().enumerate() {
        let layer = config.dir.join(format!("abs/{i}"));
        match overlay(dir, &layer, in_userns) {
            Ok(()) => {}
            Err(Errno::EINVAL) => merged_view(dir, &layer)
                .with_context(|| format!("show the policy's canaries in {}", dir.display()))?,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("overlay {} with the policy's canaries", dir.display())
                });
            }
        }
    }
    Ok(())
}

fn overlay(dir: &Path, layer: &Path, in_userns: bool) -> Result<(), Errno> {
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        dir.display(),
        layer.join("upper").display(),
        layer.join("work").display()
    );
    let mount_with = |data: &str| {
        mount(
            Some("oajail-lab"),
            dir,
            Some("overlay"),
            MsFlags::empty(),
            Some(data),
        )
    };
    let tried = mount_with(&format!("{data},userxattr"));
    match tried {
        Err(_) if !in_userns => mount_with(&data),
        other => other,
    }
}

/// The overlay's view without an overlay (see the module's comment):
/// `<layer>/view`, a read-only tmpfs moved over `dir`.
fn merged_view(dir: &Path, layer: &Path) -> Result<()> {
    let view = layer.join("view");
    fs::create_dir_all(&view)?;
    mount(
        Some("oajail-lab"),
        &view,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("mode=0755"),
    )
    .context("tmpfs for the view")?;
    populate(dir, &layer.join("upper"), &view)?;
    // As the host's directory: nothing new can be made in it (the lab's
    // own tmpfs belongs to the lab's user, the host's directory does not).
    mount(
        None::<&str>,
        &view,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .context("make the view read-only")?;
    mount(
        Some(&view),
        dir,
        None::<&str>,
        MsFlags::MS_MOVE,
        None::<&str>,
    )
    .context("move the view over the directory")
}

/// `view` (a directory of the lab's tmpfs) as `host` with `upper` on top:
/// every host entry bound in (or merged, when `upper` has a directory of
/// the same name), every other entry of `upper` copied.
fn populate(host: &Path, upper: &Path, view: &Path) -> Result<()> {
    let mode = fs::metadata(host)?.permissions().mode() & 0o7777;
    fs::set_permissions(view, fs::Permissions::from_mode(mode))?;
    for entry in fs::read_dir(host).with_context(|| format!("list {}", host.display()))? {
        let entry = entry?;
        let (src, dst, up) = (
            entry.path(),
            view.join(entry.file_name()),
            upper.join(entry.file_name()),
        );
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() && up.is_dir() {
            fs::create_dir(&dst)?;
            populate(&src, &up, &dst)?;
        } else {
            if kind.is_dir() {
                fs::create_dir(&dst)?;
            } else {
                fs::File::create(&dst)?;
            }
            mount(
                Some(&src),
                &dst,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .with_context(|| format!("bind {}", src.display()))?;
        }
    }
    for entry in fs::read_dir(upper).into_iter().flatten() {
        let entry = entry?;
        let dst = view.join(entry.file_name());
        if fs::symlink_metadata(&dst).is_err() {
            copy(&entry.path(), &dst)?;
        }
    }
    Ok(())
}

/// Copy a fake file or directory of the upper layer into the view.
fn copy(src: &Path, dst: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(src)?;
    if meta.is_dir() {
        fs::create_dir(dst)?;
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            copy(&entry.path(), &dst.join(entry.file_name()))?;
        }
    } else if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(src)?, dst)?;
    } else if meta.is_file() {
        fs::copy(src, dst)?;
    } else {
        bail!("{}: not a file, directory or symlink", src.display());
    }
    if !meta.file_type().is_symlink() {
        fs::set_permissions(dst, meta.permissions())?;
    }
    Ok(())
}
