//! What the supervisor hands to the jail. [`Layers`] are fixed at the clone;
//! the [`JailSpec`] is compiled while the new namespaces come up and reaches
//! the jail through a memfd, so the child only applies plain data.

use crate::connect::ConnectSpec;
use crate::guard::GuardSpec;
use crate::seccomp::SeccompProgram;
use oajail_policy::compile::landlock::LandlockPlan;
use oajail_policy::compile::limits::RlimitEntry;
use oajail_policy::compile::mounts::MountPlan;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::path::PathBuf;

/// Which kernel layers this run enforces, as negotiated for this kernel
/// (`negotiate::Negotiation::layers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// User, mount, pid, net, ipc and uts namespaces.
    pub namespaces: bool,
    /// The mount plan (needs namespaces).
    pub mounts: bool,
    /// Landlock.
    pub landlock: bool,
    /// The Landlock ABI whose rights and scopes the ruleset handles (the
    /// kernel's, up to the plan's minimum; enforced fully at that level).
    pub landlock_abi: u8,
    /// The seccomp filter.
    pub seccomp: bool,
    /// The network namespace (only a `test-layers` build turns this off).
    pub netns: bool,
    /// Dropping capabilities (only a `test-layers` build turns this off).
    pub caps: bool,
    /// The create-guard (seccomp user notification served by pid 1; only a
    /// `test-layers` build turns this off).
    pub guard: bool,
    /// A uts namespace with the jail's host name (off: `sethostname` is
    /// refused here, the jail keeps the container's host name).
    pub uts: bool,
    /// A fresh `/proc` (off: the container's, read-only).
    pub fresh_proc: bool,
    /// `pivot_root` into the new root (off: `move_mount` onto `/` and
    /// `chroot`).
    pub pivot: bool,
    /// The container tier's connect hand-off (`crate::connect`).
    pub connect: bool,
}

impl Layers {
    /// The namespaces to clone into (see `ns::CLONE_FLAGS`).
    pub(crate) fn clone_flags(&self) -> libc::c_int {
        if self.namespaces {
            crate::ns::CLONE_FLAGS
        } else {
            0
        }
    }

    /// Whether the jail gets its own mount view (the mount plan is applied):
    /// it needs the mount namespace as well as the mounts layer.
    pub fn mount_view(&self) -> bool {
        self.namespaces && self.mounts
    }

    /// Whether pid 1 starts the guard's mover: Landlock ABI 1 beside the
    /// mount view, with the guard (`guard/mover.rs`).
    pub(crate) fn mover(&self) -> bool {
        self.landlock && self.landlock_abi == 1 && self.guard && self.mount_view()
    }

    /// The namespaces pid 1 unshares itself (see `ns::UNSHARE_FLAGS`).
    pub(crate) fn unshare_flags(&self) -> libc::c_int {
        let mut flags = crate::ns::UNSHARE_FLAGS;
        if !self.netns {
            flags &= !libc::CLONE_NEWNET;
        }
        if !self.uts {
            flags &= !libc::CLONE_NEWUTS;
        }
        if self.namespaces { flags } else { 0 }
    }

    /// Every layer on.
    pub const ALL: Layers = Layers {
        namespaces: true,
        mounts: true,
        landlock: true,
        landlock_abi: oajail_policy::compile::landlock::MIN_ABI,
        seccomp: true,
        netns: true,
        caps: true,
        guard: true,
        uts: true,
        fresh_proc: true,
        pivot: true,
        connect: false,
    };
}

/// Everything needed to start one jailed command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JailSpec {
    /// The command: `argv[0]` is a path, or a name searched in the `PATH` of `env`.
    #[serde(with = "crate::wire::cstrings")]
    pub argv: Vec<CString>,
    /// The command's complete environment (`NAME=value`).
    #[serde(with = "crate::wire::cstrings")]
    pub env: Vec<CString>,
    /// Working directory inside the jail.
    pub cwd: PathBuf,
    /// The seccomp filter, compiled in the supervisor.
    pub seccomp: Option<SeccompProgram>,
    /// A second filter stacked on `seccomp` when no cgroup holds the
    /// jail's memory: the calls that make memory `RLIMIT_AS` does not count
    /// answered ENOSYS (`limits::SharedMemory`). The supervisor drops it
    /// from the spec it sends when a memory cgroup holds the jail.
    pub memory_seccomp: Option<SeccompProgram>,
    /// The create-guard's filter and plan, compiled in the supervisor.
    pub guard: Option<GuardSpec>,
    /// rlimits for the command.
    pub rlimits: Vec<RlimitEntry>,
    /// The mount plan.
    pub mounts: Option<MountPlan>,
    /// The Landlock plan.
    pub landlock: Option<LandlockPlan>,
    /// The oajail binary that `GIT_SSH_COMMAND` runs as ssh's ProxyCommand.
    /// If the policy hides it inside the jail, `GIT_SSH_COMMAND` is removed
    /// and a warning printed (ssh would fail obscurely otherwise).
    pub ssh_helper: Option<PathBuf>,
    /// The trust bundle (system roots + the run's TLS-termination CA
    /// certificate, PEM) that pid 1 installs at
    /// [`crate::mount::trust::BUNDLE_PATH`]; `None` when nothing is terminated.
    pub trust_bundle: Option<String>,
    /// Masked credential files: the mount layer shows each path as a
    /// read-only file holding its sentinel (the real file stays masked).
    pub masked_files: Vec<MaskedFileSpec>,
    /// The container tier's connect hand-off (`None` in the full jail).
    pub connect: Option<ConnectSpec>,
    /// The command adds a Landlock layer of its own with the signal scope
    /// (the container tier on Landlock ABI 6): pid 1, which is no init
    /// there, is then out of its reach, while pid 1 still signals it.
    pub scope_command: bool,
}

/// One masked credential file as the jail shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MaskedFileSpec {
    /// Absolute jail path (the host path, symlink-free); the mount plan
    /// masks it with an empty file first.
    pub path: String,
    /// What the jail reads there: the sentinel and the real file's line ending.
    pub content: String,
}

impl JailSpec {
    /// A spec with every layer on.
    pub fn new(argv: Vec<CString>, env: Vec<CString>, cwd: PathBuf) -> Self {
        JailSpec {
            argv,
            env,
            cwd,
            seccomp: None,
            memory_seccomp: None,
            guard: None,
            rlimits: Vec::new(),
            mounts: None,
            landlock: None,
            ssh_helper: None,
            trust_bundle: None,
            masked_files: Vec::new(),
            connect: None,
            scope_command: false,
        }
    }
}
