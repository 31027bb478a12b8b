//! Errors of the jail crate.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A named setup step; the name appears in `oajail: <step>: <reason>` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Step {
    /// Checking that the kernel offers every layer the policy needs.
    Probe,
    /// Creating the supervisor/child channel.
    Channel,
    /// `clone` into new user, mount, pid, net, ipc and uts namespaces.
    Namespaces,
    /// Writing uid_map, setgroups and gid_map.
    IdMaps,
    /// `PR_SET_PDEATHSIG` and checking the supervisor is still alive.
    ParentDeath,
    /// Making pid 1 non-dumpable and wiping its argv/environ copy.
    InitHardening,
    /// Setting the jail's host name.
    Hostname,
    /// Bringing up the loopback interface.
    Loopback,
    /// Binding the proxy listener(s) in the jail netns and passing them out.
    ProxyListener,
    /// Building the jail's filesystem view.
    Mounts,
    /// Changing to the working directory inside the jail.
    Chdir,
    /// Waiting for the supervisor to start the proxy.
    Supervisor,
    /// Dropping every capability set.
    Capabilities,
    /// Setting no_new_privs.
    NoNewPrivs,
    /// Applying the Landlock ruleset.
    Landlock,
    /// Starting the command process.
    Fork,
    /// New session for the command.
    Setsid,
    /// Resource limits.
    Rlimits,
    /// The pids cgroup that caps a host-root jail's task count.
    PidsCgroup,
    /// Closing inherited descriptors.
    CloseFds,
    /// Installing the create-guard filter and passing its listener to pid 1.
    Guard,
    /// Installing the seccomp filter.
    Seccomp,
    /// Executing the command.
    Exec,
    /// Waiting for the jail and forwarding signals.
    Wait,
    /// The memory cgroup that bounds a host-root jail's memory as a whole.
    MemoryCgroup,
    /// The jail's own pseudo-terminal (interactive runs).
    Terminal,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_value(self).ok();
        let name = text.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown");
        f.write_str(name)
    }
}

/// Why running a jail failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// A setup step failed (in the supervisor or inside the jail).
    #[error("{step}: {msg}")]
    Step {
        /// The failing step.
        step: Step,
        /// The errno, when the failure came from a system call.
        errno: Option<i32>,
        /// One-line reason.
        msg: String,
    },
    /// The command could not be executed.
    #[error("exec {program}: {msg}")]
    Exec {
        /// The program as given on the command line.
        program: String,
        /// The errno of the last `execve` attempt.
        errno: i32,
        /// One-line reason.
        msg: String,
    },
    /// A required kernel layer is missing.
    #[error("{0} (use --allow-degraded to run without it)")]
    Missing(String),
}

impl JailError {
    /// A step error from an `io::Error`.
    pub(crate) fn io(step: Step, err: std::io::Error) -> Self {
        JailError::Step {
            step,
            errno: err.raw_os_error(),
            msg: lower_first(&err.to_string()),
        }
    }

    /// A step error with a plain message.
    pub(crate) fn msg(step: Step, msg: impl Into<String>) -> Self {
        JailError::Step {
            step,
            errno: None,
            msg: msg.into(),
        }
    }

    /// Whether this failure may be the environment refusing a step of the
    /// full jail (user namespaces disabled by sysctl, AppArmor's
    /// `apparmor_restrict_unprivileged_userns` refusing the id maps or the
    /// namespace's capabilities, a container's seccomp profile, its masked
    /// `/proc`): the run then tries the steps (`crate::envprobe`) and
    /// negotiates again on what they did.
    pub fn namespaces_refused(&self) -> bool {
        let JailError::Step { step, errno, .. } = self else {
            return false;
        };
        let denied = matches!(
            *errno,
            Some(libc::EPERM | libc::EACCES | libc::ENOSPC | libc::EINVAL)
        );
        match step {
            Step::Namespaces => true,
            Step::IdMaps | Step::Hostname | Step::Loopback | Step::Mounts => denied,
            _ => false,
        }
    }

    /// The exit status `oajail` uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            JailError::Exec { errno, .. } if *errno == libc::ENOENT => crate::exit_code::NOT_FOUND,
            JailError::Exec { .. } => crate::exit_code::NOT_EXECUTABLE,
            _ => crate::exit_code::SETUP_FAILED,
        }
    }
}

/// An errno as `EPERM` (its symbolic name), for one-line messages.
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

/// Error texts from std start with a capital ("No such file…"); oajail's
/// lines are lower case throughout.
pub(crate) fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Why one step inside the jail failed (turned into [`JailError::Step`]).
#[derive(Debug)]
pub(crate) struct Failure {
    /// The errno, when a system call failed.
    pub(crate) errno: Option<i32>,
    /// One-line, lower-case reason.
    pub(crate) msg: String,
}

impl Failure {
    /// A failure without an errno.
    pub(crate) fn msg(msg: impl Into<String>) -> Self {
        Failure {
            errno: None,
            msg: msg.into(),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure {
            errno: e.raw_os_error(),
            msg: lower_first(&e.to_string()),
        }
    }
}

impl From<nix::Error> for Failure {
    fn from(e: nix::Error) -> Self {
        Failure {
            errno: Some(e as i32),
            msg: lower_first(e.desc()),
        }
    }
}
