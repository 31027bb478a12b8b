//! Second mounts of a file system that holds a denied path.
//!
//! A mask hides a path, not the file system under it: when the same file
//! system (or a directory of it) is mounted a second time elsewhere — `/home`
//! bound to `/mnt/home`, a bind of `~/.ssh` into a container tree — the
//! denied files are reachable under the other mount point, which the plan
//! (compiled from paths) knows nothing about. Before the new root is built,
//! the jail's copy of the host's `mountinfo` is searched: for every masked
//! path, the mount that holds it gives its device and its path inside that
//! file system; every other mount of the same device whose root contains
//! that path shows it again, and is masked there too.

use crate::mountinfo::unescape;
use std::path::{Path, PathBuf};

/// One mountinfo line: device, root inside the file system, mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    dev: String,
    root: PathBuf,
    point: PathBuf,
}

fn parse(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            Some(Mount {
                dev: (*fields.get(2)?).to_owned(),
                root: PathBuf::from(unescape(fields.get(3)?)),
                point: PathBuf::from(unescape(fields.get(4)?)),
            })
        })
        .collect()
}

/// The mount `path` lies on: the deepest mount point above it, the last
/// one listed when several stack on one point (it hides the others).
fn holder<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.components().count())
        .and_then(|deepest| mounts.iter().rev().find(|m| m.point == deepest.point))
}

/// Every other path at which `masked` (each a path of the host tree) is
/// visible through a second mount of its file system, excluding paths
/// inside a masked path (already hidden there).
pub(super) fn aliases(mountinfo: &str, masked: &[PathBuf]) -> Vec<PathBuf> {
    let mounts = parse(mountinfo);
    let mut out = Vec::new();
    for path in masked {
        let Some(home) = holder(&mounts, path) else {
            continue;
        };
        let Ok(below) = path.strip_prefix(&home.point) else {
            continue;
        };
        let inner = home.root.join(below);
        for other in mounts
            .iter()
            .filter(|m| m.dev == home.dev && m.point != home.point)
        {
            let alias = if let Ok(rest) = inner.strip_prefix(&other.root) {
                other.point.join(rest)
            } else if other.root.starts_with(&inner) {
                // The whole second mount is a piece of the denied tree.
                other.point.clone()
            } else {
                continue;
            };
            // Only where that mount is the one seen at the alias.
            let seen = holder(&mounts, &alias).is_some_and(|h| h == other);
            if seen && !masked.iter().any(|m| alias.starts_with(m)) && !out.contains(&alias) {
                out.push(alias);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
23 22 8:2 / /home rw - ext4 /dev/sda2 rw
40 22 8:2 / /mnt/home rw - ext4 /dev/sda2 rw
41 22 8:2 /u/.ssh /srv/keys rw - ext4 /dev/sda2 rw
42 22 8:2 /other /srv/other rw - ext4 /dev/sda2 rw
43 22 0:50 / /tmp rw - tmpfs tmpfs rw";

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn second_mounts_of_a_denied_path_are_found() {
        let got = aliases(INFO, &[p("/home/u/.ssh")]);
        assert_eq!(got, vec![p("/mnt/home/u/.ssh"), p("/srv/keys")]);
    }

    #[test]
    fn mounts_of_other_directories_and_devices_are_left_alone() {
        assert!(aliases(INFO, &[p("/tmp/x")]).is_empty());
        // The root file system is mounted once.
        assert!(aliases(INFO, &[p("/etc/shadow")]).is_empty());
        let got = aliases(INFO, &[p("/home/u")]);
        assert_eq!(got, vec![p("/mnt/home/u"), p("/srv/keys")]);
    }

    #[test]
    fn aliases_inside_a_masked_path_are_skipped() {
        let got = aliases(INFO, &[p("/home/u/.ssh"), p("/mnt")]);
        assert_eq!(got, vec![p("/srv/keys")]);
    }
}
