//! pid 1's side of the guard: receive one notification, resolve the call to
//! the object it acts on, decide, and when allowed perform the call itself
//! (`ops.rs`), so what was checked is what is done.
//!
//! pid 1 shares the command's uid, mount namespace and Landlock domain and
//! holds no capability, so a call it makes has exactly the command's
//! filesystem rights. It never answers `CONTINUE`. The one exception, on
//! Landlock ABI 1 only, is a move across directories, which that ABI
//! refuses in any domain: the mover makes it after pid 1's check
//! (`mover.rs`).

use super::callers::Callers;
use super::decode::{Call, decode};
use super::mover::Mover;
use super::ops;
use super::probe::Probe;
use crate::connect::{self, ConnectSpec, Connector};
use crate::sys::notify::{answer, answer_fd};
use oajail_policy::compile::guard::{Guard, GuardPlan, Request, Verdict};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How many denials are printed one by one before only counting.
const LOUD_DENIALS: u32 = 5;

/// How long the decision's memo may trust what it saw: changes made
/// outside the jail (a repository created by the user meanwhile) are seen
/// after this.
const MEMO_LIFETIME: Duration = Duration::from_secs(1);

/// What the caller gets back.
pub(crate) enum Answer {
    Value(i64),
    Fd(OwnedFd, bool),
}

/// The decision with its bookkeeping: the denial count, pid 1's umask.
pub(crate) struct Decider {
    guard: Guard,
    denied: u32,
    memo_since: Instant,
    primed: Option<Vec<PathBuf>>,
    umask: Option<u32>,
    /// Landlock ABI 1 only: the process that makes moves across directories.
    mover: Option<Mover>,
}

impl Decider {
    /// Decide `req`, saying why on stderr when it is refused.
    pub(crate) fn check(&mut self, verb: &str, req: &Request<'_>) -> Result<(), Errno> {
        if self.memo_since.elapsed() > MEMO_LIFETIME {
            self.guard.forget();
            self.memo_since = Instant::now();
        }
        if let Some(dirs) = self.primed.take() {
            self.guard.prime(&Probe, &dirs);
        }
        match self.guard.decide(&Probe, req) {
            Verdict::Allow => Ok(()),
            Verdict::Deny(d) => {
                self.denied += 1;
                if self.denied <= LOUD_DENIALS {
                    eprintln!(
                        "oajail: guard: denied {verb} {} ({})",
                        req.path.display(),
                        d.rule
                    );
                }
                Err(Errno::ACCESS)
            }
        }
    }

    /// Decide `op` on the name `at` resolved to, under its real path and,
    /// when it differs, under the caller's spelling (through a link).
    pub(crate) fn check_at(
        &mut self,
        verb: &str,
        at: &super::resolve::At,
        op: oajail_policy::compile::guard::Op<'_>,
    ) -> Result<(), Errno> {
        let path = at.path();
        self.check(
            verb,
            &Request {
                path: &path,
                op,
                existing: at.stat,
            },
        )?;
        match &at.lexical {
            Some(lexical) => self.check(
                verb,
                &Request {
                    path: lexical,
                    op,
                    existing: at.stat,
                },
            ),
            None => Ok(()),
        }
    }

    /// The mover, on Landlock ABI 1 beside the mount view.
    pub(crate) fn mover(&self) -> Option<&Mover> {
        self.mover.as_ref()
    }

    /// The call behind `req` was performed.
    pub(crate) fn done(&mut self, req: &Request<'_>) {
        self.guard.performed(req);
    }

    /// Set pid 1's umask to the caller's (pid 1 is single-threaded, so its
    /// own umask per call is race-free); only a change costs a call.
    pub(crate) fn umask(&mut self, umask: u32) {
        let umask = umask & 0o777;
        if self.umask != Some(umask) {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(umask));
            self.umask = Some(umask);
        }
    }
}

/// pid 1's guard state: the listener, the decision and the callers.
pub(crate) struct Server {
    pub(crate) listener: OwnedFd,
    decider: Decider,
    callers: Callers,
    /// The container tier's connect hand-off (its calls come through the
    /// same listener: a filter chain has one).
    connect: Option<Connector>,
}

impl Server {
    /// `prime`: directories whose repositories are learnt first (the
    /// command's working directory and the writable roots).
    pub(crate) fn new(
        listener: OwnedFd,
        plan: GuardPlan,
        prime: Vec<PathBuf>,
        mover: Option<Mover>,
        connect: Option<ConnectSpec>,
    ) -> Self {
        crate::sys::notify::sync_wake_up(listener.as_fd());
        Server {
            listener,
            decider: Decider {
                guard: Guard::new(plan),
                denied: 0,
                memo_since: Instant::now(),
                primed: Some(prime),
                umask: None,
                mover,
            },
            callers: Callers::new(),
            connect: connect.map(Connector::new),
        }
    }

    /// Receive and answer one notification. An error means the listener
    /// itself failed (every waiting call then fails; the caller drops it).
    pub(crate) fn serve_one(&mut self) -> std::io::Result<()> {
        let n = match crate::sys::notify::receive(self.listener.as_fd()) {
            Ok(n) => n,
            // The caller was killed between poll and receive.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(connect) = self.connect.as_mut().filter(|_| Connector::handles(n.nr)) {
            let reply = self.callers.get(n).and_then(|caller| {
                let read = |addr, len| caller.bytes(addr, len);
                connect.perform(&connect::Call {
                    nr: n.nr,
                    args: n.args,
                    proc_dir: caller.proc_dir(),
                    read: &read,
                })
            });
            return crate::connect::answer(self.listener.as_fd(), n.id, reply);
        }
        // Not a guarded call (the filter and this table disagree): refuse.
        let result = match decode(n.nr, n.args) {
            None => Err(Errno::NOSYS),
            Some(Call::Umask { mask }) => {
                // Learn the new mask; the call itself has no path to race.
                let _ = self.callers.set_umask(n, mask);
                return crate::sys::notify::answer_continue(self.listener.as_fd(), n.id);
            }
            Some(call) => match self.callers.get(n) {
                Ok(caller) => ops::perform(&mut self.decider, &caller, call),
                Err(e) => Err(e),
            },
        };
        let listener = self.listener.as_fd();
        match result {
            Ok(Answer::Value(v)) => answer(listener, n.id, Ok(v)),
            Ok(Answer::Fd(fd, cloexec)) => answer_fd(listener, n.id, fd.as_fd(), cloexec),
            Err(e) => answer(listener, n.id, Err(e.raw_os_error())),
        }
    }

    /// The descriptors pid 1 keeps open for the guard: the listener and
    /// the mover's socket.
    pub(crate) fn descriptors(&self) -> Vec<RawFd> {
        let mut fds = vec![self.listener.as_raw_fd()];
        fds.extend(self.decider.mover.as_ref().map(Mover::raw_fd));
        fds
    }

    /// At exit: the total, when more denials happened than were printed.
    pub(crate) fn report_total(&self) {
        let denied = self.decider.denied;
        if denied > LOUD_DENIALS {
            eprintln!("oajail: guard: {denied} calls denied in total");
        }
        if let Some(connect) = &self.connect {
            connect.report_total();
        }
    }
}
