//! A cgroup v2 subtree delegated to the caller, for an unprivileged run.
//!
//! systemd delegates `user@UID.service` (and the slices and scopes the user
//! manager starts below it: a desktop terminal's scope, `systemd-run
//! --user --scope`) to the user: the directories and their `cgroup.procs`
//! belong to the user, and `cgroup.subtree_control` enables `memory` and
//! `pids` for their children. A process running there may create a child
//! cgroup in the nearest such ancestor and move its own children into it
//! (the kernel asks for write access to `cgroup.procs` of the common
//! ancestor of the two cgroups, which is that ancestor).
//!
//! A login over ssh runs in `session-N.scope`, which belongs to root: no
//! ancestor qualifies and the run keeps the per-process rlimits (said by
//! `oajail doctor` and `oajail explain`). oajail does not ask systemd for a
//! scope over D-Bus: that would need the user manager and a bus client in
//! the supervisor for a bound the rlimits already give per process.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The delegated cgroup below which this run's cgroup goes, if the caller
/// has one with every controller of `want` enabled for its children.
pub(crate) fn parent(want: &[&str]) -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = unified_mount(&info)?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    find(&mount, own, nix::unistd::geteuid().as_raw(), want)
}

/// The mount point of the unified (v2) hierarchy's root.
fn unified_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo
        .lines()
        .filter_map(super::parse_line)
        .find(|(root, _, fstype, _)| root == "/" && fstype == "cgroup2")
        .map(|(_, point, _, _)| PathBuf::from(point))
}

/// Walk up from the cgroup at `own` (a `/proc/self/cgroup` path below
/// `mount`) while each directory belongs to `uid`; the first one whose
/// `cgroup.procs` is `uid`'s too and whose `cgroup.subtree_control`
/// enables every controller of `want` is the answer. The process's own
/// cgroup never is: it holds processes, so its children cannot have
/// domain controllers.
fn find(mount: &Path, own: &str, uid: u32, want: &[&str]) -> Option<PathBuf> {
    let owned = |p: &Path| fs::metadata(p).is_ok_and(|m| m.uid() == uid);
    let mut dir = mount.join(own.trim_start_matches('/'));
    while dir.pop() && dir.starts_with(mount) && dir != mount {
        if !owned(&dir) {
            return None;
        }
        let on = fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        let enabled = want.iter().all(|c| on.split_whitespace().any(|x| x == *c));
        if enabled && owned(&dir.join("cgroup.procs")) {
            return Some(dir);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake hierarchy: `mnt/user/app/term/shell`, the process in `shell`.
    fn tree(tag: &str, enabled: &[(&str, &str)]) -> PathBuf {
        let mnt = std::env::temp_dir().join(format!("oajail-cg-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&mnt);
        fs::create_dir_all(mnt.join("user/app/term/shell")).unwrap();
        for (dir, controllers) in enabled {
            fs::write(mnt.join(dir).join("cgroup.subtree_control"), controllers).unwrap();
            fs::write(mnt.join(dir).join("cgroup.procs"), "").unwrap();
        }
        mnt
    }

    fn me() -> u32 {
        fs::metadata("/proc/self").unwrap().uid()
    }

    #[test]
    fn the_nearest_owned_ancestor_with_the_controllers_is_used() {
        let mnt = tree(
            "near",
            &[
                ("user", "memory pids"),
                ("user/app/term", "cpu memory pids"),
            ],
        );
        let got = find(&mnt, "/user/app/term/shell", me(), &["memory", "pids"]);
        assert_eq!(got, Some(mnt.join("user/app/term")));
        fs::remove_dir_all(&mnt).unwrap();
    }

    #[test]
    fn an_ancestor_without_a_controller_is_passed_over() {
        let mnt = tree(
            "skip",
            &[("user", "memory pids"), ("user/app/term", "memory")],
        );
        let got = find(&mnt, "/user/app/term/shell", me(), &["memory", "pids"]);
        assert_eq!(got, Some(mnt.join("user")));
        assert_eq!(
            find(&mnt, "/user/app/term/shell", me(), &["memory"]),
            Some(mnt.join("user/app/term"))
        );
        fs::remove_dir_all(&mnt).unwrap();
    }

    #[test]
    fn another_owner_or_the_hierarchy_root_ends_the_walk() {
        let mnt = tree("owner", &[("user", "memory pids")]);
        let other = me().wrapping_add(1);
        assert_eq!(find(&mnt, "/user/app/term/shell", other, &["pids"]), None);
        // The process at the root, or in a cgroup right below it.
        assert_eq!(find(&mnt, "/", me(), &["pids"]), None);
        assert_eq!(find(&mnt, "/user", me(), &["pids"]), None);
        fs::remove_dir_all(&mnt).unwrap();
    }

    #[test]
    fn the_unified_mount_is_found_in_mountinfo() {
        let info = "\
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw
31 25 0:29 / /sys/fs/cgroup/pids rw,nosuid shared:15 - cgroup cgroup rw,pids
";
        assert_eq!(
            unified_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            unified_mount("31 25 0:29 / /x rw - cgroup cgroup rw,pids\n"),
            None
        );
    }
}
