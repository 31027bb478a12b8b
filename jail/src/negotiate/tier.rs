//! The jail's tier and fallbacks for the steps the environment refuses, and
//! each layer's status from them.
//!
//! - **Namespace tier** (the full jail): user, pid, mount, net and ipc
//!   namespaces and the mount view. Three steps have a fallback:
//!   `sethostname` refused (podman's profile) → no uts namespace, the jail
//!   keeps the container's host name (nothing is lost: no rule rests on
//!   the host name); a fresh `/proc` refused (a container that masks parts
//!   of its `/proc`) → the container's `/proc`, read-only, with the pid
//!   namespace kept (lost: the container's process list and command lines
//!   show); `pivot_root` refused (Docker's profile) → `move_mount` of the
//!   new root onto `/`, then `chroot` (the old root stays mounted beneath,
//!   reachable only through `/proc/<pid>/root` of a process outside the
//!   jail: with a fresh `/proc` there is none, with the container's
//!   `/proc` Landlock's ptrace restriction refuses it; without either the
//!   fallback is not taken).
//! - **Container tier**: where the user namespace (or another step no
//!   fallback replaces) is refused. No namespace, no mount view: Landlock
//!   holds the file system (and a private `TMPDIR`), seccomp limits sockets
//!   to TCP, the guard holds writes, and the connect hand-off makes every
//!   TCP connect end at the proxy.

use super::{Kernel, LayerName, LayerStatus, StepName, off};
use oajail_policy::compile::landlock::MIN_ABI;
use serde::Serialize;

/// The jail's tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Its own namespaces and mount view (with fallbacks where refused).
    Namespaces,
    /// No namespace: Landlock, seccomp, the guard and the connect hand-off.
    Container,
}

impl Tier {
    /// The tier in words.
    pub fn describe(self) -> &'static str {
        match self {
            Tier::Namespaces => "namespaces (the full jail)",
            Tier::Container => {
                "container (no namespaces: landlock, seccomp, the guard and the connect hand-off)"
            }
        }
    }
}

/// The fallbacks the namespace tier takes (all false in the container tier).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fallbacks {
    /// No uts namespace: `sethostname` (or the namespace) is refused.
    pub no_uts: bool,
    /// The container's `/proc`, read-only: a fresh one is refused.
    pub container_proc: bool,
    /// `move_mount` onto `/` and `chroot`: `pivot_root` is refused.
    pub chroot: bool,
}

/// The tier and fallbacks `kernel`'s steps allow.
pub(super) fn choose(kernel: &Kernel) -> (Tier, Fallbacks) {
    let s = &kernel.steps;
    let fallbacks = Fallbacks {
        no_uts: !(s.uts_namespace.works() && s.hostname.works()),
        container_proc: !s.fresh_proc.works(),
        chroot: !s.pivot_root.works(),
    };
    let root = s.pivot_root.works() || s.move_chroot.works();
    // The container's /proc beside a chroot: only Landlock keeps
    // /proc/<pid>/root of the container's processes out of reach.
    let landlock = kernel.landlock_abi.is_some() && s.landlock.works();
    let safe = !(fallbacks.container_proc && fallbacks.chroot) || landlock;
    let mounts = !kernel.mount_api || s.mount_api.works();
    if s.namespaces_usable() && mounts && root && safe {
        (Tier::Namespaces, fallbacks)
    } else {
        (Tier::Container, Fallbacks::default())
    }
}

/// Each layer's status for `kernel` in `tier`.
pub(super) fn statuses(
    kernel: &Kernel,
    tier: Tier,
    fallbacks: Fallbacks,
) -> Vec<(LayerName, LayerStatus)> {
    let refused = || {
        let (step, errno) = kernel
            .steps
            .first_refused()
            .unwrap_or((StepName::UserNamespace, libc::EPERM));
        off(&format!(
            "{} refused ({}): {}",
            step.describe(),
            crate::error::errno_name(errno),
            kernel.place.blocked_by(step, errno)
        ))
    };
    let guard = guard_status(kernel);
    let namespaces = tier == Tier::Namespaces;
    let mounts = match (namespaces, kernel.mount_api) {
        (false, _) => refused(),
        (true, false) => off("no mount api (open_tree, move_mount, mount_setattr: linux 5.12)"),
        (true, true) => mount_fallbacks(fallbacks),
    };
    let mounts_run = !matches!(mounts, LayerStatus::Off { .. });
    let ns = match (namespaces, fallbacks.no_uts) {
        (false, _) => refused(),
        (true, false) => LayerStatus::Full,
        (true, true) => LayerStatus::Fallback {
            instead: "no uts namespace (sethostname is refused): the jail keeps the \
                      container's host name; no rule rests on it"
                .into(),
        },
    };
    let connect = match (namespaces, &guard, kernel.seccomp) {
        (true, _, _) => off("not needed: the network namespace holds only loopback"),
        (false, LayerStatus::Full, true) => LayerStatus::Full,
        (false, _, _) => off("needs the guard's listener and seccomp"),
    };
    let landlock = landlock_status(kernel, mounts_run, guard == LayerStatus::Full);
    vec![
        (LayerName::Namespaces, ns),
        (LayerName::Mounts, mounts),
        (
            LayerName::NetNamespace,
            if namespaces {
                LayerStatus::Full
            } else {
                refused()
            },
        ),
        (LayerName::Landlock, landlock),
        (
            LayerName::Seccomp,
            if kernel.seccomp {
                LayerStatus::Full
            } else {
                off("no seccomp filters (kill, errno)")
            },
        ),
        (LayerName::Guard, guard),
        (LayerName::Connect, connect),
    ]
}

fn guard_status(kernel: &Kernel) -> LayerStatus {
    match (kernel.seccomp, kernel.user_notif) {
        (false, _) => off("no seccomp filters"),
        (true, false) => off("no seccomp user notification with addfd (linux 5.9)"),
        (true, true) if kernel.steps.seccomp_listener.refused() => {
            off("a seccomp filter with a listener is refused here")
        }
        (true, true) => LayerStatus::Full,
    }
}

fn mount_fallbacks(f: Fallbacks) -> LayerStatus {
    let mut instead = Vec::new();
    if f.container_proc {
        instead.push(
            "the container's /proc, read-only, with the pid namespace kept (a fresh /proc is \
             refused): the container's process list and command lines show",
        );
    }
    if f.chroot {
        instead.push(
            "move_mount onto / and chroot instead of pivot_root (refused), capabilities \
             dropped: the old root stays mounted beneath, out of the jail's reach",
        );
    }
    if instead.is_empty() {
        LayerStatus::Full
    } else {
        LayerStatus::Fallback {
            instead: instead.join("; "),
        }
    }
}

/// Landlock at the kernel's best ABI up to the plan's. ABI 1 has no
/// `refer` right: any Landlock domain there refuses every rename or link
/// across directories (`EXDEV`), which would break `mv`, git and package
/// managers in writable roots. Beside the mounts and the guard, pid 1's
/// mover makes those moves outside the domain after checking what ABI 2
/// would (`guard/mover.rs`), so ABI 1 runs. Without the guard no call
/// reaches the mover, so it stays off there (the mounts then hold read
/// deny only in part: `rules::design`); without the mounts it is applied,
/// as the only holder of the filesystem rules, and renames across
/// directories fail.
fn landlock_status(kernel: &Kernel, mounts_run: bool, guard_runs: bool) -> LayerStatus {
    if kernel.steps.landlock.refused() && kernel.landlock_abi.is_some() {
        return off("landlock_restrict_self is refused here");
    }
    match kernel.landlock_abi {
        None => off("not offered by the kernel (not built, or not in the lsm= list)"),
        Some(1) if mounts_run && !guard_runs => off(
            "abi 1 refuses every cross-directory rename and link (no refer right), \
             and without the guard nothing makes them in its place",
        ),
        Some(1) => {
            let moves = if mounts_run {
                "pid 1's mover makes the moves across directories"
            } else {
                "moves across directories fail"
            };
            LayerStatus::Partial {
                abi: 1,
                lacks: format!("{}; {moves}", landlock_lacks(1)),
            }
        }
        Some(v) if v >= MIN_ABI => LayerStatus::Full,
        Some(v) => LayerStatus::Partial {
            abi: v,
            lacks: landlock_lacks(v),
        },
    }
}

/// What Landlock at ABI `v` lacks compared with the plan's ABI.
fn landlock_lacks(v: u8) -> String {
    let parts = [
        (2, "refer"),
        (3, "truncate"),
        (4, "tcp port rules"),
        (5, "device ioctls"),
        (6, "signal and abstract-socket scopes"),
    ];
    let missing: Vec<String> = parts
        .iter()
        .filter(|(abi, _)| *abi > v && *abi <= MIN_ABI)
        .map(|(abi, what)| format!("{what} (abi {abi})"))
        .collect();
    format!("no {}", missing.join(", "))
}
