//! A pids cgroup that caps the jail's task count, and a memory cgroup that
//! bounds the jail's memory as a whole, when the caller is host root.
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
//! Memory: `limits.addressSpaceBytes` is `RLIMIT_AS`, per process, and
//! memfd, tmpfs and page-cache pages are not counted at all. For host root
//! the jail also gets a memory cgroup with the same number as its total and
//! no swap ([`Cgroup::attach_memory`]); when none can be had the run
//! goes on with the per-process bound and says so on stderr (another layer
//! still holds each process). An unprivileged caller has the per-process
//! bound only (`docs/threat-model.md`, "Holding the host").
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

/// A cgroup (pids or memory) owned by this run; removed on drop.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Create the cgroup with `pids.max = max` and move `pid` into it.
    pub(crate) fn attach(pid: i32, max: u64) -> Result<Cgroup, JailError> {
        let root = hierarchy_root(
            &fs::read_to_string("/proc/self/mountinfo").map_err(fail)?,
            "pids",
        )
        .ok_or_else(|| {
            JailError::msg(
                Step::PidsCgroup,
                "no pids cgroup hierarchy is mounted; limits.processes cannot be enforced for root",
            )
        })?;
        enable_v2_controller(&root, "pids")?;
        let cgroup = Cgroup::create(&root, pid, Step::PidsCgroup)?;
        fs::write(cgroup.dir.join("pids.max"), max.to_string()).map_err(fail)?;
        fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()).map_err(fail)?;
        Ok(cgroup)
    }

    /// A memory cgroup for the whole jail, for host root: `RLIMIT_AS` is per
    /// process and does not count memfd, tmpfs or page-cache pages, so the
    /// jail as a whole gets `bytes` of memory (the same number as
    /// `limits.addressSpaceBytes`) and no swap: v2 `memory.max` and
    /// `memory.swap.max = 0`, v1 `memory.limit_in_bytes` and
    /// `memory.memsw.limit_in_bytes` (when swap accounting exists). The
    /// error says why none could be had; the caller then runs with the
    /// per-process bound only and says so.
    pub(crate) fn attach_memory(pid: i32, bytes: u64) -> Result<Cgroup, JailError> {
        let info = fs::read_to_string("/proc/self/mountinfo").map_err(mem_fail)?;
        let root = hierarchy_root(&info, "memory").ok_or_else(|| {
            JailError::msg(Step::MemoryCgroup, "no memory cgroup hierarchy is mounted")
        })?;
        enable_v2_controller(&root, "memory")?;
        let cgroup = Cgroup::create(&root, pid, Step::MemoryCgroup)?;
        let v2 = cgroup.dir.join("memory.max").exists();
        let (max, swap, swap_value) = if v2 {
            ("memory.max", "memory.swap.max", "0".to_owned())
        } else {
            (
                "memory.limit_in_bytes",
                "memory.memsw.limit_in_bytes",
                bytes.to_string(),
            )
        };
        fs::write(cgroup.dir.join(max), bytes.to_string()).map_err(mem_fail)?;
        // No swap file without swap accounting: then nothing can swap out.
        match fs::write(cgroup.dir.join(swap), swap_value) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(mem_fail(e)),
            _ => {}
        }
        fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()).map_err(mem_fail)?;
        Ok(cgroup)
    }

    /// `oajail-<supervisor pid>-<pid 1>` below `root`: unique even when a
    /// degraded retry starts a second jail from the same supervisor.
    fn create(root: &Path, pid: i32, step: Step) -> Result<Cgroup, JailError> {
        remove_stale(root);
        let dir = root.join(format!("oajail-{}-{pid}", std::process::id()));
        fs::create_dir(&dir).map_err(|e| JailError::io(step, e))?;
        Ok(Cgroup { dir })
    }
}

impl Drop for Cgroup {
    /// The kernel refuses the rmdir while exiting tasks are still charged
    /// (they leave shortly after pid 1 is reaped); retry briefly.
    fn drop(&mut self) {
        // Up to 1 s: tasks the memory cgroup's OOM killer ended can take
        // longer than exiting ones to leave it on a loaded machine.
        for _ in 0..250 {
            match fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(4));
                }
                _ => return,
            }
        }
    }
}

/// A supervisor killed with SIGKILL cannot remove its cgroups; the next run
/// as root removes every `oajail-<pid>-…` whose supervisor is gone (an
/// rmdir only succeeds once the cgroup is empty, so a live jail is never
/// touched).
fn remove_stale(root: &Path) {
    for entry in fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix("oajail-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if owner.parse::<u32>().is_ok() && !Path::new("/proc").join(owner).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

fn fail(e: std::io::Error) -> JailError {
    JailError::io(Step::PidsCgroup, e)
}

fn mem_fail(e: std::io::Error) -> JailError {
    JailError::io(Step::MemoryCgroup, e)
}

/// On the unified hierarchy the root's `cgroup.subtree_control` must list
/// the controller for a child to have its files; v1 needs nothing.
fn enable_v2_controller(root: &Path, controller: &str) -> Result<(), JailError> {
    let step = if controller == "memory" {
        Step::MemoryCgroup
    } else {
        Step::PidsCgroup
    };
    let fail = |e| JailError::io(step, e);
    let control = root.join("cgroup.subtree_control");
    match fs::read_to_string(&control) {
        Ok(on) if on.split_whitespace().any(|c| c == controller) => Ok(()),
        Ok(_) => fs::write(&control, format!("+{controller}")).map_err(fail),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(fail(e)),
    }
}

/// The mount point of `controller`'s hierarchy in `mountinfo`: a v1
/// `cgroup` mount whose super options name it, else a `cgroup2` mount
/// whose `cgroup.controllers` offers it. Only mounts of the hierarchy's
/// root (`/` as the mount's root field) qualify.
fn hierarchy_root(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    let mounts: Vec<(String, String, String, String)> =
        mountinfo.lines().filter_map(parse_line).collect();
    let v1 = mounts.iter().find(|(root, _, fstype, opts)| {
        root == "/" && fstype == "cgroup" && opts.split(',').any(|o| o == controller)
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
                .is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
        })
}

/// Whether `controller`'s hierarchy is mounted (for `oajail doctor`).
pub(crate) fn hierarchy_mounted(controller: &str) -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| hierarchy_root(&info, controller).is_some())
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
            hierarchy_root(HYBRID, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
    }

    #[test]
    fn a_bind_of_a_sub_cgroup_does_not_count() {
        let info = "31 25 0:29 /some/child /mnt/pids rw - cgroup cgroup rw,pids\n";
        assert_eq!(hierarchy_root(info, "pids"), None);
    }

    #[test]
    fn other_v1_controllers_are_not_pids() {
        let info = "32 25 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,pidsx\n";
        assert_eq!(hierarchy_root(info, "pids"), None);
    }

    #[test]
    fn mount_points_are_unescaped() {
        let info = "31 25 0:29 / /mnt/my\\040cg rw - cgroup cgroup rw,pids\n";
        assert_eq!(
            hierarchy_root(info, "pids"),
            Some(PathBuf::from("/mnt/my cg"))
        );
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert_eq!(parse_line("garbage without separator"), None);
        assert_eq!(parse_line("1 2 3 - cgroup"), None);
    }
}
