//! The create-guard: srt's mandatory write denies for names created during
//! the run (a new repository's `.git/hooks`, a new `.claude/agents`, a
//! `.bashrc` in a new directory), which the mount layer cannot mask because
//! they do not exist when the jail starts.
//!
//! How it runs:
//! 1. pid 1 makes a socketpair before forking the command (`Handoff`);
//! 2. the command installs the guard filter (`oajail_bpf::guard`) with a new
//!    listener, just before the deny filter, sends the listener to pid 1 and
//!    closes its own copy (a command holding its listener could answer for
//!    its children);
//! 3. pid 1 polls the listener next to its signalfd; for each name-creating
//!    call it reads the path from the caller's memory (`callers.rs`),
//!    resolves it as the caller would (`resolve.rs`, with the cache of
//!    resolved directories in `dirs.rs`), asks the policy's pure decision
//!    (`oajail_policy::guard`, through `decider.rs`, on pid 1's view of the
//!    filesystem, `probe.rs`) and performs the call itself (`ops.rs`),
//!    injecting an opened file with `SECCOMP_IOCTL_NOTIF_ADDFD`; `serve.rs`
//!    receives and answers. Nothing decided is answered with `CONTINUE`
//!    (only calls sent for a report: a removal no `denyWrite` entry can
//!    refuse, spelled inside a root, and the read watch's opens);
//! 4. on Landlock ABI 1, which refuses every move across directories in a
//!    domain, a process forked before the domain makes those (`mover.rs`).
//!
//! Invariants:
//! - a kernel without user notification (or `WAIT_KILLABLE_RECV`, 5.19)
//!   fails the run at the `guard` step, unless the layer is switched off;
//! - pid 1 has no guard filter of its own (it would notify itself) and keeps
//!   its deny filter (no `process_vm_readv`, `pidfd_getfd`, `ptrace`: it
//!   reads the caller's memory through `/proc/<tid>/mem`);
//! - in a run without namespaces pid 1 is still the command's parent, so
//!   the guard works the same there.

mod callers;
mod decider;
mod decode;
mod dirs;
mod mover;
mod ops;
mod probe;
mod report;
mod resolve;
mod serve;

pub(crate) use mover::Mover;
pub(crate) use serve::Server;

use crate::error::Failure;
use crate::seccomp::SeccompError;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use oajail_policy::guard::GuardPlan;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The guard as the jail receives it: the compiled filter and the plan pid 1
/// decides with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardSpec {
    #[serde(with = "crate::wire::bpf")]
    program: Vec<(u16, u8, u8, u32)>,
    plan: GuardPlan,
    /// Test builds only (`OAJAIL_TEST_PRETEND_MISSING=guard`, read here in
    /// the supervisor: the jail's environment copy is wiped): fail the
    /// install as a kernel without user notification would.
    pretend_missing: bool,
}

impl GuardSpec {
    /// Compile the plan's filter for the running architecture.
    pub fn compile(plan: &GuardPlan) -> Result<Self, SeccompError> {
        let program = oajail_bpf::guard::compile(&plan.filter)
            .map_err(SeccompError::Filter)?
            .into_iter()
            .map(|i| (i.code, i.jt, i.jf, i.k))
            .collect();
        Ok(GuardSpec {
            program,
            plan: plan.clone(),
            pretend_missing: crate::layers::pretend_missing("guard"),
        })
    }

    /// Number of BPF instructions.
    pub fn len(&self) -> usize {
        self.program.len()
    }

    /// Whether the filter is empty (never, for a compiled plan).
    pub fn is_empty(&self) -> bool {
        self.program.is_empty()
    }

    /// The plan pid 1 decides with.
    pub(crate) fn plan(&self) -> &GuardPlan {
        &self.plan
    }

    fn filter(&self) -> Vec<libc::sock_filter> {
        self.program
            .iter()
            .map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
            .collect()
    }
}

/// The socketpair over which the command passes its listener to pid 1.
pub(crate) struct Handoff {
    pid1: OwnedFd,
    command: OwnedFd,
}

impl Handoff {
    /// Made by pid 1 before the fork (its own deny filter forbids unix
    /// sockets afterwards).
    pub(crate) fn new() -> Result<Self, Failure> {
        let (pid1, command) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        Ok(Handoff { pid1, command })
    }

    /// pid 1: wait for the listener. `None` when the command exited before
    /// sending it (its setup failed; it reported why).
    pub(crate) fn receive(self) -> Result<Option<OwnedFd>, Failure> {
        drop(self.command);
        let mut byte = [0u8; 1];
        let (_, fds) = crate::fdpass::recv_with_fds(self.pid1.as_fd(), &mut byte)?;
        Ok(fds.into_iter().next())
    }

    /// The command: install the guard filter and pass its listener to pid 1;
    /// no copy of the listener stays in the command.
    ///
    /// By reference: the command shares pid 1's memory until its execve
    /// (`sys::process::spawn_shared`). pid 1's end, open here too, is
    /// close-on-exec.
    pub(crate) fn install(&self, spec: &GuardSpec) -> Result<(), Failure> {
        let installed = if spec.pretend_missing {
            Err(std::io::Error::from_raw_os_error(libc::EINVAL))
        } else {
            crate::sys::notify::install_with_listener(&spec.filter())
        };
        let listener = installed.map_err(|e| {
            let why = e.raw_os_error().map_or_else(
                || e.to_string(),
                |n| nix::Error::from_raw(n).desc().to_owned(),
            );
            Failure {
                errno: e.raw_os_error(),
                msg: format!(
                    "seccomp user notification with a listener unavailable ({}); linux 5.19 or newer needed",
                    crate::error::lower_first(&why)
                ),
            }
        })?;
        crate::fdpass::send_with_fds(self.command.as_fd(), b"L", &[listener.as_raw_fd()])?;
        drop(listener);
        Ok(())
    }
}
