//! The audit's fake files at a policy's absolute paths, shown through
//! overlays in the lab's own mount namespace (the host is only read).

use anyhow::{Context, Result};
use oajail_audit::labspec::LabConfig;

/// The audit's canaries at a policy's absolute paths: each host directory
/// in `overlays` is covered, in this mount namespace only, by an overlay
/// whose upper layer (`<lab>/abs/<i>/upper`) holds the fake files; the
/// host's directory is only read. In a user namespace overlayfs needs
/// `userxattr` (Linux 5.11+); a kernel without it fails the lab, naming
/// the directory, rather than auditing without the canary.
pub fn policy_paths(config: &LabConfig, in_userns: bool) -> Result<()> {
    use nix::mount::{MsFlags, mount};
    for (i, dir) in config.overlays.iter().enumerate() {
        let layer = config.dir.join(format!("abs/{i}"));
        let data = format!(
            "lowerdir={},upperdir={},workdir={}",
            dir.display(),
            layer.join("upper").display(),
            layer.join("work").display()
        );
        let mut tried = mount(
            Some("oajail-lab"),
            dir,
            Some("overlay"),
            MsFlags::empty(),
            Some(format!("{data},userxattr").as_str()),
        );
        if tried.is_err() && !in_userns {
            tried = mount(
                Some("oajail-lab"),
                dir,
                Some("overlay"),
                MsFlags::empty(),
                Some(data.as_str()),
            );
        }
        tried.with_context(|| format!("overlay {} with the policy's canaries", dir.display()))?;
    }
    Ok(())
}
