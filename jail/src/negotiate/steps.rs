//! The steps of a run that an environment (a container engine's seccomp
//! profile, its masked `/proc`, a sysctl, AppArmor) can refuse, and what
//! each one did when tried.
//!
//! `oajail doctor` tries every one of them in a throw-away child
//! (`crate::envprobe`), and so does a run that finds itself in a container
//! (or whose first attempt failed at one of them): the negotiation then
//! decides on what was seen, not on what was hoped for. On a host with no
//! sign of a container the run does not spend a process on it: the steps
//! are [`Outcome::Assumed`], and a refusal during the run is probed and
//! negotiated again before anything of the command exists.

use serde::Serialize;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Outcome {
    /// Not tried before the run (a host with no sign of a container).
    Assumed,
    /// Tried, and it worked.
    Works,
    /// Tried, and refused with this errno.
    Refused {
        /// The errno.
        errno: i32,
    },
    /// Not tried: a step it needs was refused, or it is only a fallback
    /// and the step it stands in for worked.
    Untried,
}

impl Outcome {
    /// Worked, or is assumed to.
    pub fn works(self) -> bool {
        matches!(self, Outcome::Assumed | Outcome::Works)
    }

    /// Tried and refused.
    pub fn refused(self) -> bool {
        matches!(self, Outcome::Refused { .. })
    }

    /// From a step's result.
    pub fn of<T, E: Into<std::io::Error>>(r: Result<T, E>) -> Outcome {
        match r {
            Ok(_) => Outcome::Works,
            Err(e) => Outcome::Refused {
                errno: e.into().raw_os_error().unwrap_or(libc::EPERM),
            },
        }
    }

    /// In words, for `doctor`.
    pub fn describe(self) -> String {
        match self {
            Outcome::Assumed => "not tried (assumed to work)".into(),
            Outcome::Works => "works".into(),
            Outcome::Refused { errno } => {
                format!("refused ({})", crate::error::errno_name(errno))
            }
            Outcome::Untried => "not tried".into(),
        }
    }
}

/// One step, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepName {
    /// `clone(CLONE_NEWUSER | CLONE_NEWPID)`: the user and pid namespaces.
    UserNamespace,
    /// Writing `uid_map`, `setgroups` and `gid_map`.
    IdMaps,
    /// `unshare(CLONE_NEWNS)` and making `/` private.
    MountNamespace,
    /// `unshare(CLONE_NEWNET)`.
    NetNamespace,
    /// Bringing `lo` up in it.
    Loopback,
    /// `unshare(CLONE_NEWIPC)`.
    IpcNamespace,
    /// `unshare(CLONE_NEWUTS)`.
    UtsNamespace,
    /// `sethostname` in it.
    Hostname,
    /// `open_tree`, `mount_setattr`, `fsopen`/`fsmount` and `move_mount`.
    MountApi,
    /// A new procfs for the jail's pid namespace.
    FreshProc,
    /// `pivot_root` into the new root.
    PivotRoot,
    /// The fallback for `pivot_root`: `move_mount` onto `/`, then `chroot`.
    MoveChroot,
    /// `landlock_restrict_self`.
    Landlock,
    /// A seccomp filter with a user-notification listener.
    SeccompListener,
}

impl StepName {
    /// The step in words.
    pub fn describe(self) -> &'static str {
        match self {
            StepName::UserNamespace => "user and pid namespaces (clone)",
            StepName::IdMaps => "uid and gid maps",
            StepName::MountNamespace => "mount namespace",
            StepName::NetNamespace => "network namespace",
            StepName::Loopback => "loopback up in it",
            StepName::IpcNamespace => "ipc namespace",
            StepName::UtsNamespace => "uts namespace",
            StepName::Hostname => "sethostname",
            StepName::MountApi => "mount api (open_tree, fsmount, move_mount, mount_setattr)",
            StepName::FreshProc => "a fresh /proc for the jail's pid namespace",
            StepName::PivotRoot => "pivot_root",
            StepName::MoveChroot => "move_mount onto / and chroot (pivot_root's fallback)",
            StepName::Landlock => "landlock_restrict_self",
            StepName::SeccompListener => "seccomp filter with a user-notification listener",
        }
    }
}

/// What every step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Steps {
    /// See [`StepName::UserNamespace`].
    pub user_namespace: Outcome,
    /// See [`StepName::IdMaps`].
    pub id_maps: Outcome,
    /// See [`StepName::MountNamespace`].
    pub mount_namespace: Outcome,
    /// See [`StepName::NetNamespace`].
    pub net_namespace: Outcome,
    /// See [`StepName::Loopback`].
    pub loopback: Outcome,
    /// See [`StepName::IpcNamespace`].
    pub ipc_namespace: Outcome,
    /// See [`StepName::UtsNamespace`].
    pub uts_namespace: Outcome,
    /// See [`StepName::Hostname`].
    pub hostname: Outcome,
    /// See [`StepName::MountApi`].
    pub mount_api: Outcome,
    /// See [`StepName::FreshProc`].
    pub fresh_proc: Outcome,
    /// See [`StepName::PivotRoot`].
    pub pivot_root: Outcome,
    /// See [`StepName::MoveChroot`].
    pub move_chroot: Outcome,
    /// See [`StepName::Landlock`].
    pub landlock: Outcome,
    /// See [`StepName::SeccompListener`].
    pub seccomp_listener: Outcome,
}

impl Steps {
    /// Nothing tried: a host with no sign of a container.
    pub const ASSUMED: Steps = Steps {
        user_namespace: Outcome::Assumed,
        id_maps: Outcome::Assumed,
        mount_namespace: Outcome::Assumed,
        net_namespace: Outcome::Assumed,
        loopback: Outcome::Assumed,
        ipc_namespace: Outcome::Assumed,
        uts_namespace: Outcome::Assumed,
        hostname: Outcome::Assumed,
        mount_api: Outcome::Assumed,
        fresh_proc: Outcome::Assumed,
        pivot_root: Outcome::Assumed,
        move_chroot: Outcome::Untried,
        landlock: Outcome::Assumed,
        seccomp_listener: Outcome::Assumed,
    };

    /// Every step that needs a user namespace refused or untried, as when
    /// `clone(CLONE_NEWUSER)` fails with `errno` (Docker's default profile).
    pub fn without_user_namespace(errno: i32) -> Steps {
        Steps {
            user_namespace: Outcome::Refused { errno },
            ..Steps::ASSUMED.namespace_steps(Outcome::Untried)
        }
    }

    /// `self` with every namespace and mount step set to `to`.
    pub fn namespace_steps(self, to: Outcome) -> Steps {
        Steps {
            user_namespace: to,
            id_maps: to,
            mount_namespace: to,
            net_namespace: to,
            loopback: to,
            ipc_namespace: to,
            uts_namespace: to,
            hostname: to,
            mount_api: to,
            fresh_proc: to,
            pivot_root: to,
            move_chroot: Outcome::Untried,
            ..self
        }
    }

    /// Every step with its name, in the order a run takes them.
    pub fn each(&self) -> [(StepName, Outcome); 14] {
        [
            (StepName::UserNamespace, self.user_namespace),
            (StepName::IdMaps, self.id_maps),
            (StepName::MountNamespace, self.mount_namespace),
            (StepName::NetNamespace, self.net_namespace),
            (StepName::Loopback, self.loopback),
            (StepName::IpcNamespace, self.ipc_namespace),
            (StepName::UtsNamespace, self.uts_namespace),
            (StepName::Hostname, self.hostname),
            (StepName::MountApi, self.mount_api),
            (StepName::FreshProc, self.fresh_proc),
            (StepName::PivotRoot, self.pivot_root),
            (StepName::MoveChroot, self.move_chroot),
            (StepName::Landlock, self.landlock),
            (StepName::SeccompListener, self.seccomp_listener),
        ]
    }

    /// Whether anything was tried (not only assumed).
    pub fn probed(&self) -> bool {
        self.each().iter().any(|(_, o)| *o != Outcome::Assumed)
    }

    /// The steps a jail with its own namespaces cannot do without (no
    /// fallback stands in for them).
    pub fn namespaces_usable(&self) -> bool {
        [
            self.user_namespace,
            self.id_maps,
            self.mount_namespace,
            self.net_namespace,
            self.loopback,
            self.ipc_namespace,
        ]
        .iter()
        .all(|o| o.works())
    }

    /// The first refused step of the namespace set, if any.
    pub fn first_refused(&self) -> Option<(StepName, i32)> {
        self.each().into_iter().find_map(|(name, o)| match o {
            Outcome::Refused { errno } if name != StepName::MoveChroot => Some((name, errno)),
            _ => None,
        })
    }
}
