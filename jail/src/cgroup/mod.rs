//! Cgroups that bound the jail as a whole: a pids cgroup for its task
//! count and a memory cgroup for its memory, when the caller can have them.
//!
//! `limits.processes` compiles to `RLIMIT_NPROC`, which the kernel counts per
//! user (per user namespace since Linux 5.14) and does not enforce at all for
//! the global root user: a fork bomb run by `sudo oajail …` would only be
//! stopped by the host's own limits. `limits.addressSpaceBytes` is
//! `RLIMIT_AS`, per process: memfd, tmpfs and page-cache pages are not
//! counted at all. So pid 1 joins cgroups with `pids.max` and `memory.max`
//! (no swap) set to the same numbers before the command exists, so every
//! task and page of the jail is counted there ([`Bounds::attach`]):
//!
//! - host root: below the root of each hierarchy (v1 `pids` and `memory`,
//!   or one cgroup on the unified v2 tree holding both). A root run that
//!   asks for a process limit and cannot get the pids cgroup stops before
//!   the command starts (fail closed); without a memory cgroup it goes on
//!   with the per-process bound and says so on stderr.
//! - an unprivileged caller: one v2 cgroup below the nearest ancestor
//!   delegated to the caller with both controllers enabled (`delegated.rs`:
//!   systemd's user manager), when there is one; otherwise, or when it
//!   cannot be made, the per-process rlimits, which the kernel does enforce
//!   for this caller (`oajail doctor` and `explain` say which applies; a
//!   failure is said on stderr).
//!
//! Each cgroup is named `oajail-<supervisor pid>-<pid 1>` and removed when
//! the jail is gone. A supervisor killed with SIGKILL leaves its empty
//! cgroups behind; the next run (same caller, same parent) removes every
//! `oajail-<pid>-…` whose supervisor is gone, and systemd removes a
//! delegated one with the unit that holds it. Plain file writes under
//! `/sys/fs/cgroup`: no crate covers this narrow use (cgroups-rs pulls in
//! far more than a few files).

use crate::error::{JailError, Step};
use crate::mountinfo::unescape;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod delegated;

/// The cgroups holding the jail; removed (after pid 1 is reaped) on drop.
#[derive(Debug, Default)]
pub(crate) struct Bounds {
    /// Held for their drop, which removes them.
    _groups: Vec<Cgroup>,
    /// One of them holds the jail's memory (`memory.max` set).
    memory: bool,
}

impl Bounds {
    /// No cgroup bounds the jail (none asked for, or none available).
    pub(crate) fn is_empty(&self) -> bool {
        self._groups.is_empty()
    }

    /// A cgroup holds the jail's memory: memfd, SysV and tmpfs pages are
    /// counted there (else the jail bounds them itself:
    /// `limits::SharedMemory`).
    pub(crate) fn holds_memory(&self) -> bool {
        self.memory
    }

    /// Put `pid` (pid 1 of the jail) under `pids.max = nproc` and
    /// `memory.max = memory` as this caller can (see the module docs).
    /// `Err` only for host root without a pids cgroup.
    pub(crate) fn attach(
        pid: i32,
        nproc: Option<u64>,
        memory: Option<u64>,
    ) -> Result<Bounds, JailError> {
        if nproc.is_none() && memory.is_none() {
            return Ok(Bounds::default());
        }
        if nix::unistd::geteuid().is_root() {
            return Bounds::as_root(pid, nproc, memory);
        }
        let mut want = Vec::new();
        want.extend(nproc.map(|_| "pids"));
        want.extend(memory.map(|_| "memory"));
        let Some(parent) = delegated::parent(&want) else {
            return Ok(Bounds::default());
        };
        match Cgroup::unified(&parent, pid, nproc, memory) {
            Ok((cg, None)) => Ok(Bounds {
                _groups: vec![cg],
                memory: memory.is_some(),
            }),
            Ok((_, Some(e))) | Err(e) => {
                eprintln!("oajail: note: memory and pids bounded per process only: {e}");
                Ok(Bounds::default())
            }
        }
    }

    fn as_root(pid: i32, nproc: Option<u64>, memory: Option<u64>) -> Result<Bounds, JailError> {
        let info = fs::read_to_string("/proc/self/mountinfo").map_err(fail)?;
        let (pids_root, mem_root) = (
            hierarchy_root(&info, "pids"),
            hierarchy_root(&info, "memory"),
        );
        if let (Some(p), Some(m)) = (&pids_root, &mem_root)
            && p == m
            && p.join("cgroup.controllers").exists()
        {
            // The unified tree: a process is in one cgroup only, so one
            // cgroup holds both bounds.
            enable_v2_controller(p, "pids")?;
            if memory.is_some() {
                enable_v2_controller(p, "memory")?;
            }
            let (cg, memory_failed) = Cgroup::unified(p, pid, nproc, memory)?;
            let held = memory.is_some() && memory_failed.is_none();
            if let Some(e) = memory_failed {
                eprintln!("oajail: note: memory bounded per process only: {e}");
            }
            return Ok(Bounds {
                _groups: vec![cg],
                memory: held,
            });
        }
        let mut groups = Vec::new();
        if let Some(max) = nproc {
            groups.push(Cgroup::attach(pid, max)?);
        }
        let mut held = false;
        if let Some(bytes) = memory {
            match Cgroup::attach_memory(pid, bytes) {
                Ok(cg) => {
                    groups.push(cg);
                    held = true;
                }
                Err(e) => eprintln!("oajail: note: memory bounded per process only: {e}"),
            }
        }
        Ok(Bounds {
            _groups: groups,
            memory: held,
        })
    }
}

/// Whether an unprivileged caller has a delegated cgroup for `want`
/// (for `oajail doctor`): its path.
pub(crate) fn delegated_parent(want: &[&str]) -> Option<PathBuf> {
    delegated::parent(want)
}

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

    /// One cgroup on the unified hierarchy below `parent` (whose
    /// `cgroup.subtree_control` enables the controllers) with `pids.max`
    /// and `memory.max` (no swap), then `pid` moved in. A memory failure is
    /// returned beside the cgroup (the pids bound still holds); any other
    /// failure removes the cgroup again.
    fn unified(
        parent: &Path,
        pid: i32,
        nproc: Option<u64>,
        memory: Option<u64>,
    ) -> Result<(Cgroup, Option<JailError>), JailError> {
        let cgroup = Cgroup::create(parent, pid, Step::PidsCgroup)?;
        if let Some(max) = nproc {
            fs::write(cgroup.dir.join("pids.max"), max.to_string()).map_err(fail)?;
        }
        let memory_failed = memory.and_then(|bytes| cgroup.limit_memory(bytes).err());
        match (memory_failed, nproc) {
            // Nothing left to bound.
            (Some(e), None) => Err(e),
            (memory_failed, _) => {
                fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()).map_err(fail)?;
                Ok((cgroup, memory_failed))
            }
        }
    }

    /// v2 `memory.max = bytes` and `memory.swap.max = 0` (no swap file
    /// without swap accounting: then nothing can swap out).
    fn limit_memory(&self, bytes: u64) -> Result<(), JailError> {
        fs::write(self.dir.join("memory.max"), bytes.to_string()).map_err(mem_fail)?;
        match fs::write(self.dir.join("memory.swap.max"), "0") {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(mem_fail(e)),
            _ => Ok(()),
        }
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
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert_eq!(parse_line("garbage without separator"), None);
        assert_eq!(parse_line("1 2 3 - cgroup"), None);
    }
}
