//! Kernel feature probes: what `oajail doctor` reports (the cheap probes the
//! layer negotiation reads before each run are in `crate::layers`; the
//! steps of a run, tried in throw-away children, in `crate::envprobe`).

use crate::negotiate::Kernel;
use oajail_policy::compile::limits::{Resource, RlimitEntry};
use serde::Serialize;

/// What the running kernel offers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelFeatures {
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The features the negotiation reads, with every step of a run tried.
    pub features: Kernel,
    /// `user.max_user_namespaces` (0 disables user namespaces).
    pub max_user_namespaces: Option<u64>,
    /// Debian's `kernel.unprivileged_userns_clone` (0 disables them for non-root).
    pub unprivileged_userns_clone: Option<u64>,
    /// Ubuntu's `kernel.apparmor_restrict_unprivileged_userns` (1 restricts them).
    pub apparmor_restrict_unprivileged_userns: Option<u64>,
}

impl KernelFeatures {
    /// Probe the running kernel and try every step of a run (creates and
    /// reaps two short-lived processes; the caller must be single-threaded).
    pub fn probe() -> Self {
        KernelFeatures {
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            features: Kernel {
                steps: crate::envprobe::steps(),
                ..Kernel::probe()
            },
            max_user_namespaces: sysctl("user/max_user_namespaces"),
            unprivileged_userns_clone: sysctl("kernel/unprivileged_userns_clone"),
            apparmor_restrict_unprivileged_userns: sysctl(
                "kernel/apparmor_restrict_unprivileged_userns",
            ),
        }
    }
}

/// Where Ubuntu's AppArmor restriction of unprivileged user namespaces is on
/// (`kernel.apparmor_restrict_unprivileged_userns=1`, Ubuntu 23.10+): the
/// one line saying how to let oajail use them. The restriction lets
/// `clone(CLONE_NEWUSER)` succeed and moves the process into a profile
/// without capabilities, so the first privileged step in the namespace
/// fails with `EPERM`; only a profile granting `userns` to the binary's
/// path lifts it (`packaging/apparmor/oajail`, installed by the Debian
/// package).
pub fn apparmor_userns_hint() -> Option<String> {
    if sysctl("kernel/apparmor_restrict_unprivileged_userns") != Some(1) {
        return None;
    }
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/usr/bin/oajail".into());
    Some(format!(
        "apparmor restricts unprivileged user namespaces \
         (kernel.apparmor_restrict_unprivileged_userns=1) and no profile allows {exe}: \
         install packaging/apparmor/oajail as /etc/apparmor.d/oajail with the path {exe} \
         and run `sudo apparmor_parser -r /etc/apparmor.d/oajail` (the Debian package \
         installs and loads it for /usr/bin/oajail)"
    ))
}

/// One line on how the jail's memory and task count are bounded for this
/// caller and these rlimits (`oajail doctor` and `oajail explain` print
/// it): a memory and a pids cgroup for the whole jail when oajail runs as
/// host root (`cgroup.rs`), the per-process rlimits otherwise.
pub fn whole_jail_bounds(rlimits: &[RlimitEntry]) -> String {
    let find = |r: Resource| rlimits.iter().find(|e| e.resource == r).map(|e| e.value);
    let (mem, procs) = (find(Resource::RlimitAs), find(Resource::RlimitNproc));
    if mem.is_none() && procs.is_none() {
        return "memory and pids: not limited (limits.addressSpaceBytes and limits.processes are not set)".into();
    }
    let show = |v: Option<u64>| v.map_or("not set".to_owned(), |v| v.to_string());
    let numbers = format!("addressSpaceBytes {}, processes {}", show(mem), show(procs));
    if !nix::unistd::geteuid().is_root() {
        let mut want = Vec::new();
        want.extend(procs.map(|_| "pids"));
        want.extend(mem.map(|_| "memory"));
        return match crate::cgroup::delegated_parent(&want) {
            Some(parent) => format!(
                "memory and pids: bounded for the whole jail ({numbers}; a cgroup below the \
                 delegated {}, memory without swap)",
                parent.display()
            ),
            None => format!(
                "memory and pids: bounded per process only ({numbers}; RLIMIT_AS, RLIMIT_NPROC){}; \
                 the whole jail gets cgroups as root or inside a cgroup v2 subtree delegated to \
                 the user (a systemd user session), and there is none here",
                shared_memory(mem)
            ),
        };
    }
    let missing: Vec<&str> = [("memory", mem), ("pids", procs)]
        .into_iter()
        .filter(|(c, v)| v.is_some() && !crate::cgroup::hierarchy_mounted(c))
        .map(|(c, _)| c)
        .collect();
    if missing.is_empty() {
        format!(
            "memory and pids: bounded for the whole jail ({numbers}; memory cgroup without swap, pids cgroup), as root"
        )
    } else {
        let shared = if missing.contains(&"memory") {
            shared_memory(mem)
        } else {
            String::new()
        };
        format!(
            "memory and pids: no {} cgroup hierarchy is mounted: {numbers} bounded per process only{shared}",
            missing.join(" or ")
        )
    }
}

/// How shared memory is bounded when no cgroup holds the jail's memory
/// (`limits::SharedMemory`), for a run with `addressSpaceBytes`.
fn shared_memory(mem: Option<u64>) -> String {
    let Some(bytes) = mem else {
        return String::new();
    };
    let shm = bytes.min(oajail_policy::compile::mounts::DEFAULT_SHM_BYTES);
    let calls = oajail_policy::compile::limits::UNCOUNTED_MEMORY_CALLS.join(" and ");
    format!(
        ", and shared memory, which RLIMIT_AS does not count, by the jail itself: /dev/shm holds \
         at most {shm} bytes, /tmp its tmpSizeBytes (by default at most addressSpaceBytes), \
         {calls} are refused (ENOSYS: programs fall back to /dev/shm); page-cache pages stay \
         uncounted"
    )
}

fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}
