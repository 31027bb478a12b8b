//! oajail-jail: runs one command inside a jail built from compiled policy plans.
//!
//! This is the only crate of the workspace that changes kernel state, and the
//! only one allowed `unsafe`, all of it in the private `sys` module
//! (`#[allow(unsafe_code)] mod sys;` below is the single exemption).
//!
//! Process model: the supervisor (the `oajail` binary) calls
//! [`Jail::spawn`], which clones pid 1 of a new user, mount, pid, net, ipc and
//! uts namespace set. pid 1 runs the flat step list of `pid1.rs`: it passes
//! the proxy listener(s) it bound inside the jail's netns back to the
//! supervisor, reads the [`JailSpec`] the supervisor compiled meanwhile (from
//! a memfd, [`Jail::send_spec`]), builds its filesystem view, waits for the
//! go-ahead ([`Jail::release`], sent once the proxy is prepared; its
//! runtime starts at the jail's first connection, [`Jail::wait_until`]),
//! drops its privileges, starts the command in its own memory until
//! `execve` (`sys::process::spawn_shared`; it installs the guard's filter
//! last and executes)
//! and then serves as init (`init.rs`). The order and its reasons are in
//! `docs/enforcement-order.md`.
//!
//! Where the environment refuses steps of that (a container engine's
//! seccomp profile, its masked `/proc`), the negotiation takes a fallback
//! per step (no uts namespace; the container's `/proc`; move-mount and
//! `chroot` for `pivot_root`) or the *container tier*: no namespace, pid 1
//! a plain child and subreaper, Landlock and the guard holding the file
//! system with a private `TMPDIR` (`tmpdir`), seccomp limiting sockets to
//! TCP, and pid 1 making every `connect`, `bind` and `listen` of the
//! command (`connect`), so TCP still ends at the proxy. `envprobe` tries
//! the steps in throw-away children (`oajail doctor`, and a run where
//! something may refuse them).
//!
//! Module sides: code that runs inside the jail (`pid1`, `init`, `command`
//! and the steps they call) never imports the supervisor's modules
//! (`launcher`, `cgroup`, `negotiate`, `doctor`, `envprobe`, `hostfs`,
//! `tmpdir`); what both sides
//! need lives in shared modules (`report`: what pid 1 enforced, `signals`:
//! the handled signals, `exit_code`, `sync`: the channel, `fdpass`, `cpus`:
//! where pid 1 runs during set-up, `spec`, the layers' plans). The
//! top-level modules form no import cycle;
//! `.ci/module-imports.py` checks both rules from the source.
//!
//! The hand-written BPF programs (the seccomp prefix, the guard's filter)
//! come from `oajail-bpf`, which is pure; this crate installs them.
//!
//! Test strategy: pure parts are unit-tested here (the seccomp program runs
//! through a classic-BPF interpreter, PATH search, /proc parsing); everything
//! that needs the kernel is tested through the real `oajail` binary by the
//! root package's `tests/jail_*.rs` (as root and as an unprivileged user) and
//! the filesystem helper's `tests/fs_*.rs`. The `test-layers` feature
//! ([`layers`]) lets the security suite switch single layers off.
//!
//! Which layers run, at which level, is decided in one place:
//! [`negotiate::Negotiation`] (from the probed kernel features and the
//! policy) gives each layer a status, lists which layers hold each rule
//! class, refuses a run that leaves a rule without a holder, produces the
//! banner and builds the [`JailSpec`]; the binary keeps no layer decisions.
//!
//! Invariants:
//! - every layer the negotiation decided on is applied or the run fails with
//!   `oajail: <step>: <reason>` and [`exit_code::SETUP_FAILED`]; nothing
//!   is skipped silently (a layer is off only when the negotiation says so:
//!   another layer holds its rules, or the user accepted the rules nothing
//!   holds);
//! - nothing of the command runs before every step succeeded;
//! - pid 1 exits when the command exits, and its exit kills every other
//!   process of the jail;
//! - the command's exit status passes through (128+N for signal N);
//! - a run is never less confined than its banner says: a step that was
//!   tried and then fails in the jail stops the run at that step; one that
//!   was only assumed is tried, and negotiated again, before anything of
//!   the command exists.
#![deny(missing_docs)]

mod caps;
mod cgroup;
mod command;
mod connect;
mod cpus;
pub mod doctor;
pub mod envprobe;
pub mod error;
pub mod events;
pub mod exit_code;
mod fdpass;
pub mod guard;
mod hostfs;
mod init;
pub mod landlock;
mod launcher;
pub mod layers;
pub mod mount;
mod mountinfo;
pub mod negotiate;
pub mod net;
mod ns;
mod pid1;
pub mod prompt;
pub mod pty;
mod report;
mod rlimit;
mod screen;
pub mod seccomp;
mod signals;
mod spec;
mod sync;
#[allow(unsafe_code)]
mod sys;
pub mod terminal;
pub mod tmpdir;
mod wire;

pub use connect::ConnectSpec;
pub use error::{JailError, Step};
pub use hostfs::HostFs;
pub use launcher::{Jail, Outcome, Waited};
pub use report::{EnforcementReport, LandlockEnforced};
pub use screen::say;
pub use signals::FORWARDED_SIGNALS;
pub use spec::{JailSpec, Layers, MaskedFileSpec};

/// The caller's real uid and gid (mapped to themselves inside the jail).
pub fn caller_ids() -> (u32, u32) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    )
}
