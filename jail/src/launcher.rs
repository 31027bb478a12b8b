//! The supervisor side: start the jail, hand over the proxy listeners, wait.
//!
//! Usage, in this order (the root binary does it):
//! [`Jail::spawn`] (as early as possible: the kernel builds the namespaces
//! while the supervisor compiles the plans) → [`Jail::send_spec`] →
//! [`Jail::take_listeners`] → start the proxy on them → [`Jail::release`] →
//! [`Jail::wait`]. Until `release` the jail is parked before dropping its
//! privileges, so a proxy that fails to start means the command never runs
//! ([`Jail::abort`], or just dropping the [`Jail`]).

use crate::cgroup::Bounds;
use crate::cpus::Affinity;
use crate::error::{JailError, Step};
use crate::landlock::Prebuilt;
use crate::pty::Relay;
use crate::report::EnforcementReport;
use crate::signals::handled_signals;
use crate::spec::{JailSpec, Layers};
use crate::sync::{self, Channel, ChildMsg, ExitReport, SpecFile};
use crate::sys::process::{Forked, clone_fork};
use nix::sys::signal::{Signal, kill};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use oajail_policy::compile::limits::Resource;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// How the jail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The exit status `oajail` should return (the command's, 128+N on a signal).
    pub code: i32,
    /// True when `--timeout` expired and the jail was killed.
    pub timed_out: bool,
}

/// What [`Jail::wait_until`] saw first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The jail is gone (or was killed at the deadline).
    Exited(Outcome),
    /// One of the descriptors to wake on is readable; the jail runs on.
    Readable,
}

/// What woke the supervisor's wait.
enum Event {
    Signal(Option<Signal>),
    Readable,
    /// pid 1's exit report: the command's code (`None`: no report will come).
    Reported(Option<i32>),
}

/// A running jail, seen from the supervisor.
#[derive(Debug)]
pub struct Jail {
    pid: Pid,
    chan: Channel,
    signals: SignalFd,
    spec_file: SpecFile,
    reaped: Option<WaitStatus>,
    /// The read end of pid 1's exit report, until it is read or closed.
    exit_report: Option<ExitReport>,
    /// The code pid 1 reported: the command is gone, and so is every other
    /// process of the jail; pid 1 is exiting.
    reported: Option<i32>,
    /// The cgroups bounding the whole jail, held until the jail is dropped
    /// (after pid 1 is reaped).
    bounds: Bounds,
    layers: Layers,
    /// The Landlock ruleset built ahead for pid 1 (sent with "go").
    landlock: Option<Prebuilt>,
    /// The run asks pid 1 for a pty of the jail's own (interactive runs).
    terminal: bool,
    /// The relay between that pty and the caller's terminal.
    relay: Option<Relay>,
}

impl Jail {
    /// Block the handled signals, create the channel and clone pid 1 of the
    /// jail into its new namespaces. Must be called while the process is
    /// still single-threaded (before any proxy or runtime thread exists).
    pub fn spawn(layers: Layers) -> Result<Jail, JailError> {
        let set = handled_signals();
        set.thread_block()
            .map_err(|e| JailError::io(Step::Wait, e.into()))?;
        let (mine, theirs) = sync::pair().map_err(|e| JailError::io(Step::Channel, e))?;
        let (report_in, report_out) =
            sync::exit_report().map_err(|e| JailError::io(Step::Channel, e))?;
        let spec_file = SpecFile::new().map_err(|e| JailError::io(Step::Channel, e))?;
        let ids = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let affinity = Affinity::of_caller();
        match clone_fork(layers.clone_flags()).map_err(namespaces_error)? {
            Forked::Child => {
                drop((mine, report_in));
                crate::pid1::run(layers, theirs, &spec_file, ids, affinity, report_out)
            }
            Forked::Parent(pid) => {
                drop((theirs, report_out));
                affinity.separate(Pid::from_raw(pid));
                let signals =
                    SignalFd::new(&set).map_err(|e| JailError::io(Step::Wait, e.into()))?;
                Ok(Jail {
                    pid: Pid::from_raw(pid),
                    chan: mine,
                    signals,
                    spec_file,
                    reaped: None,
                    exit_report: Some(report_in),
                    reported: None,
                    bounds: Bounds::default(),
                    layers,
                    landlock: None,
                    terminal: false,
                    relay: None,
                })
            }
        }
    }

    /// pid 1 of the jail, as seen from the supervisor's pid namespace.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Give the command a pty of the jail's own as its controlling
    /// terminal, relayed to the caller's (see `pty.rs`); call before
    /// [`Jail::send_spec`], for an interactive run ([`crate::pty::wanted`]).
    pub fn use_terminal(&mut self) {
        self.terminal = true;
    }

    /// Hand the jail what it needs for the rest of its setup and the command.
    /// pid 1 joins the cgroups that bound the whole jail first, when the
    /// caller can have them (`limits.processes` and `addressSpaceBytes`: see
    /// cgroup/mod.rs), so the command is counted from its first fork.
    pub fn send_spec(&mut self, spec: &JailSpec) -> Result<(), JailError> {
        let limit = |r: Resource| {
            spec.rlimits
                .iter()
                .find(|e| e.resource == r)
                .map(|e| e.value)
        };
        self.bounds = Bounds::attach(
            self.pid.as_raw(),
            limit(Resource::RlimitNproc),
            limit(Resource::RlimitAs),
        )?;
        // A memory cgroup counts memfd and SysV pages: their filter is
        // left out (a copy only in that case, a root run with a limit).
        let trimmed;
        let spec = if spec.memory_seccomp.is_some() && self.bounds.holds_memory() {
            trimmed = JailSpec {
                memory_seccomp: None,
                ..spec.clone()
            };
            &trimmed
        } else {
            spec
        };
        let byte = if self.terminal {
            sync::SPEC_TERMINAL
        } else {
            sync::SPEC
        };
        // With the ruleset prebuilt here, pid 1 adds only the rules on what
        // it mounts itself, so its copy leaves the others out (the read
        // complement's hundreds would only be parsed on its critical path),
        // unless the guard's mover needs them all: the read rules tell it
        // what is readable (Landlock ABI 1).
        let copy = (self.prebuilds() && !self.layers.mover()).then(|| pid1_copy(spec));
        let written = self.spec_file.write(copy.as_ref().unwrap_or(spec));
        // Without a mount view both sides build the ruleset at once.
        let shared = self.shares_landlock(spec)?;
        let sent = written.and_then(|()| match &shared {
            Some(fd) => self.chan.send_byte_with_fd(byte, fd.as_fd()),
            None => self.chan.send_byte(byte),
        });
        self.sent(sent, Step::Supervisor)?;
        if let (Some(fd), Some(plan)) = (shared, &spec.landlock) {
            let half = crate::landlock::Half::First;
            crate::landlock::add_half(fd.as_fd(), plan, self.layers.landlock_abi, half)
                .map_err(|e| JailError::msg(Step::Landlock, e.to_string()))?;
        }
        self.prebuild_landlock(spec)
    }

    /// Without a mount view: the ruleset both sides build (`landlock::Half`).
    fn shares_landlock(&self, spec: &JailSpec) -> Result<Option<OwnedFd>, JailError> {
        match &spec.landlock {
            Some(plan) if self.layers.landlock && !self.layers.mount_view() => {
                crate::landlock::shared(plan, self.layers.landlock_abi)
                    .map(Some)
                    .map_err(|e| JailError::msg(Step::Landlock, e.to_string()))
            }
            _ => Ok(None),
        }
    }

    /// What a failed send to pid 1 means (`at`: the step the send was
    /// for). pid 1 may have failed a step and exited already (refused
    /// namespaces fail right after the clone, a bad mount before "go"):
    /// its report is then still queued on the channel, and names the step.
    fn sent(&mut self, sent: std::io::Result<()>, at: Step) -> Result<(), JailError> {
        sent.map_err(|e| match self.chan.recv() {
            Ok(Some(msg)) => self.fail(Some(msg), at),
            _ => JailError::io(Step::Supervisor, e),
        })
    }

    /// Whether the supervisor builds the Landlock ruleset's host-side part:
    /// only with the mount view (without it pid 1 builds the whole ruleset).
    fn prebuilds(&self) -> bool {
        self.layers.mount_view() && self.layers.landlock
    }

    /// While pid 1 builds its namespaces and mounts, build the Landlock
    /// ruleset's host-side part here (see `landlock::prebuild`).
    fn prebuild_landlock(&mut self, spec: &JailSpec) -> Result<(), JailError> {
        if !self.prebuilds() {
            return Ok(());
        }
        if let (Some(plan), Some(mounts)) = (&spec.landlock, &spec.mounts) {
            let built = crate::landlock::prebuild(plan, mounts, self.layers.landlock_abi)
                .map_err(|e| JailError::msg(Step::Landlock, e.to_string()))?;
            self.landlock = Some(built);
        }
        Ok(())
    }

    /// Receive the proxy listener(s) bound inside the jail's netns.
    pub fn take_listeners(&mut self) -> Result<Vec<TcpListener>, JailError> {
        match self
            .chan
            .recv()
            .map_err(|e| JailError::io(Step::ProxyListener, e))?
        {
            Some((ChildMsg::Listeners, fds)) => {
                Ok(fds.into_iter().map(TcpListener::from).collect())
            }
            other => Err(self.fail(other, Step::ProxyListener)),
        }
    }

    /// Let the jail finish its setup and execute the command; returns what
    /// it enforces once the command has been executed (channel EOF), or the
    /// failed step.
    pub fn release(&mut self) -> Result<EnforcementReport, JailError> {
        let go = match self.landlock.take() {
            Some(ruleset) => self.chan.send_byte_with_fd(sync::GO, ruleset.fd()),
            None => self.chan.send_byte(sync::GO),
        };
        self.sent(go, Step::Exec)?;
        let mut master = None;
        let report = loop {
            match self.chan.recv().map_err(|e| JailError::io(Step::Exec, e))? {
                Some((ChildMsg::Enforced(report), _)) => break report,
                Some((ChildMsg::Terminal, fds)) if self.terminal => {
                    master = fds.into_iter().next();
                }
                other => return Err(self.fail(other, Step::Exec)),
            }
        };
        match self.chan.recv().map_err(|e| JailError::io(Step::Exec, e))? {
            None => {}
            other => return Err(self.fail(other, Step::Exec)),
        }
        if let Some(master) = master {
            let relay = crate::pty::start(master).map_err(|e| JailError::io(Step::Terminal, e))?;
            self.relay = Some(relay);
        }
        Ok(report)
    }

    /// Kill the jail (the whole pid namespace) and reap pid 1.
    pub fn abort(mut self) {
        let _ = kill(self.pid, Signal::SIGKILL);
        self.reap_blocking();
    }

    /// Forward signals to pid 1 until it exits; kill the jail after `timeout`.
    pub fn wait(mut self, timeout: Option<Duration>) -> Result<Outcome, JailError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Waited::Exited(outcome) = self.wait_until(deadline, &[])? {
                return Ok(outcome);
            }
        }
    }

    /// [`Jail::wait`] until `deadline`, or until one of `wake` is readable
    /// (a connection waits on a proxy listener): then the jail runs on and
    /// this returns [`Waited::Readable`].
    pub fn wait_until(
        &mut self,
        deadline: Option<Instant>,
        wake: &[BorrowedFd<'_>],
    ) -> Result<Waited, JailError> {
        loop {
            if let Some(status) = self.try_reap()? {
                self.drain_terminal();
                return Ok(Waited::Exited(Outcome {
                    code: crate::exit_code::of_status(status),
                    timed_out: false,
                }));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                let _ = kill(self.pid, Signal::SIGKILL);
                self.reap_blocking();
                self.drain_terminal();
                return Ok(Waited::Exited(Outcome {
                    code: crate::exit_code::TIMEOUT,
                    timed_out: true,
                }));
            }
            // pid 1 blocks forwarded signals and passes them on to the command;
            // with a pty of its own the jail learns a new size from the pty.
            match (self.next_event(left, wake)?, &self.relay) {
                (Event::Readable, _) => return Ok(Waited::Readable),
                (Event::Reported(Some(code)), _) => {
                    self.reported = Some(code);
                    if let Some(outcome) = self.left_early() {
                        return Ok(Waited::Exited(outcome));
                    }
                }
                (Event::Reported(None), _) => {}
                (Event::Signal(None | Some(Signal::SIGCHLD)), _) => {}
                (Event::Signal(Some(Signal::SIGWINCH)), Some(relay)) => relay.resize(),
                (Event::Signal(Some(sig)), _) => {
                    let _ = kill(self.pid, sig);
                }
            }
        }
    }

    /// The outcome pid 1 reported, when nothing more needs its exit: every
    /// other process of the jail is gone already (`init.rs`), and only the
    /// kernel's teardown of the namespaces is left. An interactive run still
    /// waits (the pty's last output drains when pid 1 closes it), and so
    /// does a run with cgroups (they are removed once empty).
    fn left_early(&self) -> Option<Outcome> {
        let code = self.reported?;
        (self.relay.is_none() && self.bounds.is_empty()).then_some(Outcome {
            code,
            timed_out: false,
        })
    }

    /// The jail is gone: let its last output reach the caller's terminal
    /// (bounded: a process outside the jail could hold the slave open).
    fn drain_terminal(&self) {
        if let Some(relay) = &self.relay {
            relay.drain(Duration::from_millis(500));
        }
    }

    fn next_event(
        &mut self,
        left: Option<Duration>,
        wake: &[BorrowedFd<'_>],
    ) -> Result<Event, JailError> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let ms = left.map_or(PollTimeout::NONE, |d| {
            PollTimeout::try_from(d.as_millis().clamp(1, i32::MAX as u128) as i32)
                .unwrap_or(PollTimeout::MAX)
        });
        let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
        fds.extend(
            self.exit_report
                .as_ref()
                .map(|r| PollFd::new(r.as_fd(), PollFlags::POLLIN)),
        );
        let wakes = fds.len();
        fds.extend(wake.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)));
        match poll(&mut fds, ms) {
            Ok(0) | Err(nix::Error::EINTR) => return Ok(Event::Signal(None)),
            Ok(_) => {}
            Err(e) => return Err(JailError::io(Step::Wait, e.into())),
        }
        let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
        let (signal, report) = (ready(&fds[0]), wakes == 2 && ready(&fds[1]));
        let woken = fds[wakes..].iter().any(ready);
        drop(fds);
        if report {
            // Read once: a code, or end-of-file (no report will come).
            let code = self.exit_report.take().and_then(|r| r.recv());
            return Ok(Event::Reported(code));
        }
        if !signal {
            return Ok(if woken {
                Event::Readable
            } else {
                Event::Signal(None)
            });
        }
        match self.signals.read_signal() {
            Ok(Some(info)) => Ok(Event::Signal(Signal::try_from(info.ssi_signo as i32).ok())),
            Ok(None) => Ok(Event::Signal(None)),
            Err(e) => Err(JailError::io(Step::Wait, e.into())),
        }
    }

    fn try_reap(&mut self) -> Result<Option<WaitStatus>, JailError> {
        if let Some(s) = self.reaped {
            return Ok(Some(s));
        }
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::StillAlive) => Ok(None),
            Ok(s @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => {
                self.reaped = Some(s);
                Ok(Some(s))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(JailError::io(Step::Wait, e.into())),
        }
    }

    fn reap_blocking(&mut self) {
        while self.reaped.is_none() {
            match waitpid(self.pid, Some(WaitPidFlag::__WALL)) {
                Ok(s @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => {
                    self.reaped = Some(s)
                }
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(_) => break,
            }
        }
    }

    /// Turn an unexpected channel event into the error to report, reaping
    /// pid 1 (which exits right after reporting).
    fn fail(&mut self, got: Option<(ChildMsg, Vec<std::os::fd::OwnedFd>)>, at: Step) -> JailError {
        let err = match got {
            // A pty master sent just before a later step failed: that
            // step's report follows it.
            Some((ChildMsg::Terminal, _)) => {
                let next = self.chan.recv().ok().flatten();
                return self.fail(next, at);
            }
            Some((ChildMsg::StepFailed { step, errno, msg }, _)) => {
                JailError::Step { step, errno, msg }
            }
            Some((
                ChildMsg::ExecFailed {
                    program,
                    errno,
                    msg,
                },
                _,
            )) => JailError::Exec {
                program,
                errno,
                msg,
            },
            Some((ChildMsg::Listeners | ChildMsg::Enforced(_), _)) => {
                JailError::msg(at, "unexpected message from the jail")
            }
            None => {
                self.reap_blocking();
                let how = self.reaped.map_or(-1, crate::exit_code::of_status);
                return JailError::msg(at, format!("jail exited during setup (status {how})"));
            }
        };
        let _ = kill(self.pid, Signal::SIGKILL);
        self.reap_blocking();
        err
    }
}

impl Drop for Jail {
    /// Kill and reap pid 1, except after its exit report: pid 1 is then
    /// the jail's last process and already exiting, and waiting for it
    /// would only wait for the kernel's teardown of the namespaces. It
    /// stays a zombie until this process exits (the `oajail` binary does
    /// right after) and is then reaped by the caller's reaper.
    fn drop(&mut self) {
        if self.reaped.is_none() {
            let _ = kill(self.pid, Signal::SIGKILL);
            if self.reported.is_none() {
                self.reap_blocking();
            }
        }
    }
}

fn namespaces_error(e: std::io::Error) -> JailError {
    let hint = if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::ENOSPC) {
        " (user namespaces unavailable: see `oajail doctor`)"
    } else {
        ""
    };
    JailError::msg(
        Step::Namespaces,
        format!("clone: {}{hint}", crate::error::lower_first(&e.to_string())),
    )
}

/// The spec as pid 1 gets it when the supervisor prebuilds the ruleset:
/// only the jail-side Landlock rules ([`crate::landlock::jail_side_only`]).
/// Built field by field: cloning the whole spec first would copy the
/// hundreds of rules it leaves out. The destructuring is exhaustive, so a
/// new field cannot be forgotten.
fn pid1_copy(spec: &JailSpec) -> JailSpec {
    let JailSpec {
        argv,
        env,
        cwd,
        seccomp,
        memory_seccomp,
        guard,
        rlimits,
        mounts,
        landlock,
        ssh_helper,
        trust_bundle,
        masked_files,
        connect,
        scope_command,
    } = spec;
    let landlock = match (landlock, mounts) {
        (Some(plan), Some(mounts)) => Some(crate::landlock::jail_side_only(plan, mounts)),
        _ => landlock.clone(),
    };
    JailSpec {
        argv: argv.clone(),
        env: env.clone(),
        cwd: cwd.clone(),
        seccomp: seccomp.clone(),
        memory_seccomp: memory_seccomp.clone(),
        guard: guard.clone(),
        rlimits: rlimits.clone(),
        mounts: mounts.clone(),
        landlock,
        ssh_helper: ssh_helper.clone(),
        trust_bundle: trust_bundle.clone(),
        masked_files: masked_files.clone(),
        connect: connect.clone(),
        scope_command: *scope_command,
    }
}
