//! A pids cgroup that caps the jail's task count when the caller is host
//! root.
//!
//! `limits.processes` compiles to `RLIMIT_NPROC`, which the kernel counts per
//! user (per user namespace since Linux 5.14) and does not enforce at all for
//! the global root user: a fork bomb run by `sudo oajail …` would only be
//! stopped by the host's own limits. For that caller the supervisor puts
//! pid 1 into a fresh pids cgroup with `pids.max` set to the same number
//! before the command exists, so every task of the jail (threads too, as for
//! `RLIMIT_NPROC`) is counted there. An unprivileged caller keeps the rlimit,
//! which the kernel does enforce for it.
//!
//! The cgroup is made directly below the root of the pids hierarchy (v1
//! `pids` or the v2 unified tree), named `oajail-<supervisor pid>-<pid 1>`, and is
//! removed when the jail is gone. A root run that asks for a process limit
//! and cannot get the cgroup stops before the command starts (fail closed).
//! Plain file writes under `/sys/fs/cgroup`: no crate covers this narrow use
//! (cgroups-rs pulls in far more than three files).

use crate::error::{JailError, Step};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A pids cgroup owned by this run; removed on drop.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    /// Create the cgroup with `pids.max = max` and move `pid` into it.
    pub(crate) fn attach(pid: i32, max: u64) -> Result<PidsCgroup, JailError> {
        let root = hierarchy_root(&fs::read_to_string("/proc/self/mountinfo").map_err(fail)?)
            .ok_or_else(|| {
                JailError::msg(
                    Step::PidsCgroup,
                    "no pids cgroup hierarchy is mounted; limits.processes cannot be enforced for root",
                )
            })?;
        enable_v2_controller(&root)?;
        // Named after the supervisor and pid 1: unique even when a degraded
        // retry starts a second jail from the same supervisor.
        let dir = root.join(format!("oajail-{}-{pid}", std::process::id()));
        fs::create_dir(&dir).map_err(fail)?;
        let cgroup = PidsCgroup { dir };
        fs::write(cgroup.dir.join("pids.max"), max.to_string()).map_err(fail)?;
        fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()).map_err(fail)?;
        Ok(cgroup)
    }
}

impl Drop for PidsCgroup {
    /// The kernel refuses the rmdir while exiting tasks are still charged
    /// (they leave shortly after pid 1 is reaped); retry briefly.
    fn drop(&mut self) {
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => return,
            }
        }
    }
}

fn fail(e: std::io::Error) -> JailError {
    JailError::io(Step::PidsCgroup, e)
}

/// On the unified hierarchy the root's `cgroup.subtree_control` must list
/// `pids` for a child to have `pids.max`; v1 needs nothing.
fn enable_v2_controller(root: &Path) -> Result<(), JailError> {
    let control = root.join("cgroup.subtree_control");
    match fs::read_to_string(&control) {
        Ok(on) if on.split_whitespace().any(|c| c == "pids") => Ok(()),
        Ok(_) => fs::write(&control, "+pids").map_err(fail),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(fail(e)),
    }
}

/// The mount point of the pids hierarchy in `mountinfo`: a v1 `cgroup`
/// mount whose super options name `pids`, else a `cgroup2` mount whose
/// `cgroup.controllers` offers `pids`. Only mounts of the hierarchy's root
/// (`/` as the mount's root field) qualify.
fn hierarchy_root(mountinfo: &str) -> Option<PathBuf> {
    let mounts: Vec<(String, String, String, String)> =
        mountinfo.lines().filter_map(parse_line).collect();
    let v1 = mounts.iter().find(|(root, _, fstype, opts)| {
        root == "/" && fstype == "cgroup" && opts.split(',').any(|o| o == "pids")
    });
    if let Some((_, point, _, _)) = v1 {
        return Some(PathBuf::from(point));
    }
    mounts
        .iter()
        .filter(|(root, _, fstype, _)| root == "/" && fstype == "cgroup2")
        .map(|(_, point, _, _)| PathBuf::from(point))
        .find(|point| {
            fs::read_to_string(point.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"))
        })
}

/// `(root, mount point, fs type, super options)` of one mountinfo line.
fn parse_line(line: &str) -> Option<(String, String, String, String)> {
    let (left, right) = line.split_once(" - ")?;
    let fields: Vec<&str> = left.split(' ').collect();
    let mut tail = right.split(' ');
    let fstype = tail.next()?;
    let _source = tail.next()?;
    let opts = tail.next()?;
    Some((
        unescape(fields.get(3)?),
        unescape(fields.get(4)?),
        fstype.to_string(),
        opts.to_string(),
    ))
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(char::from(b));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
31 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
32 25 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
";

    #[test]
    fn v1_pids_mount_is_found() {
        assert_eq!(
            hierarchy_root(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
    }

    #[test]
    fn a_bind_of_a_sub_cgroup_does_not_count() {
        let info = "31 25 0:29 /some/child /mnt/pids rw - cgroup cgroup rw,pids\n";
        assert_eq!(hierarchy_root(info), None);
    }

    #[test]
    fn other_v1_controllers_are_not_pids() {
        let info = "32 25 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,pidsx\n";
        assert_eq!(hierarchy_root(info), None);
    }

    #[test]
    fn mount_points_are_unescaped() {
        let info = "31 25 0:29 / /mnt/my\\040cg rw - cgroup cgroup rw,pids\n";
        assert_eq!(hierarchy_root(info), Some(PathBuf::from("/mnt/my cg")));
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert_eq!(parse_line("garbage without separator"), None);
        assert_eq!(parse_line("1 2 3 - cgroup"), None);
    }
}
