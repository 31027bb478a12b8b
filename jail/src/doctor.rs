//! Kernel feature probes: what `oajail doctor` reports and what the
//! fail-closed check before each run looks at.

use serde::Serialize;

/// Landlock ABI the plans need for their full effect (ABI 6 adds the signal
/// and abstract-unix-socket scopes; ABI 4 TCP port rules).
pub const LANDLOCK_ABI_WANTED: u32 = 6;

/// What the running kernel offers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelFeatures {
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Landlock ABI version, `None` when Landlock is missing or disabled.
    pub landlock_abi: Option<u32>,
    /// seccomp filters with KILL_PROCESS, ERRNO and USER_NOTIF actions.
    pub seccomp: bool,
    /// `user.max_user_namespaces` (0 disables user namespaces).
    pub max_user_namespaces: Option<u64>,
    /// Debian's `kernel.unprivileged_userns_clone` (0 disables them for non-root).
    pub unprivileged_userns_clone: Option<u64>,
    /// Ubuntu's `kernel.apparmor_restrict_unprivileged_userns` (1 restricts them).
    pub apparmor_restrict_unprivileged_userns: Option<u64>,
    /// Result of actually creating a user namespace (`Err` holds the reason).
    pub userns: Result<(), String>,
}

/// A missing or partial layer, as shown in the degraded banner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// Layer name: `user namespaces`, `landlock`, `seccomp`.
    pub layer: &'static str,
    /// Why (one line).
    pub why: String,
}

impl KernelFeatures {
    /// Probe the running kernel (creates and reaps one short-lived process
    /// to test user namespaces).
    pub fn probe() -> Self {
        KernelFeatures {
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            landlock_abi: landlock_abi(),
            seccomp: seccomp_available(),
            max_user_namespaces: sysctl("user/max_user_namespaces"),
            unprivileged_userns_clone: sysctl("kernel/unprivileged_userns_clone"),
            apparmor_restrict_unprivileged_userns: sysctl(
                "kernel/apparmor_restrict_unprivileged_userns",
            ),
            userns: userns_works(),
        }
    }

    /// Every layer the jail would run without, given what the kernel offers.
    pub fn missing(&self) -> Vec<Missing> {
        let mut out = Vec::new();
        if let Err(why) = &self.userns {
            out.push(Missing {
                layer: "user namespaces",
                why: why.clone(),
            });
        }
        match self.landlock_abi {
            None => out.push(Missing {
                layer: "landlock",
                why: "not offered by the kernel (not built or not in the lsm= list)".into(),
            }),
            Some(v) if v < LANDLOCK_ABI_WANTED => out.push(Missing {
                layer: "landlock",
                why: format!("abi {v} < {LANDLOCK_ABI_WANTED}: no signal/abstract-socket scopes"),
            }),
            Some(_) => {}
        }
        if !self.seccomp {
            out.push(Missing {
                layer: "seccomp",
                why: "seccomp filters (kill, errno, user notification) unavailable".into(),
            });
        }
        out
    }
}

/// Landlock ABI, honouring the `test-layers` pretend switch.
pub fn landlock_abi() -> Option<u32> {
    if crate::layers::pretend_missing("landlock") {
        return None;
    }
    crate::sys::probe::landlock_abi()
}

/// Whether seccomp filters work, honouring the `test-layers` pretend switch.
pub fn seccomp_available() -> bool {
    !crate::layers::pretend_missing("seccomp") && crate::sys::probe::seccomp_filter_available()
}

fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Create a user namespace in a throw-away child and map our uid in it: the
/// only reliable test (AppArmor's restriction lets the clone succeed and
/// fails the map or later capability use).
fn userns_works() -> Result<(), String> {
    use crate::sys::process::{Forked, clone_fork, exit_now};
    use nix::sys::wait::{WaitStatus, waitpid};
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    match clone_fork(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) {
        Err(e) => Err(format!(
            "clone(CLONE_NEWUSER): {}",
            crate::error::lower_first(&e.to_string())
        )),
        Ok(Forked::Child) => {
            let ok = crate::ns::write_id_maps(uid, gid).is_ok()
                && nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).is_ok();
            exit_now(if ok { 0 } else { 1 })
        }
        Ok(Forked::Parent(pid)) => match waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(()),
            _ => {
                Err("user namespace created but uid map or capabilities refused (AppArmor?)".into())
            }
        },
    }
}
