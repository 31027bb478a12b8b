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
use super::decider::{Decider, LOUD_DENIALS};
use super::decode::{Call, decode};
use super::mover::Mover;
use super::ops::{self, Answer};
use crate::connect::{self, ConnectSpec, Connector};
use crate::sys::notify::{answer, answer_fd};
use oajail_policy::guard::GuardPlan;
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

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
            decider: Decider::new(plan, prime, mover),
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
            Some(Call::Chdir) => {
                // Forget the kept working directories until this one is
                // known to have moved (callers.rs); its path is never used.
                self.callers.chdir(n);
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
        fds.extend(self.decider.mover().map(Mover::raw_fd));
        fds
    }

    /// At exit: the total, when more denials happened than were printed.
    pub(crate) fn report_total(&self) {
        let denied = self.decider.denied();
        if denied > LOUD_DENIALS {
            eprintln!("oajail: guard: {denied} calls denied in total");
        }
        if let Some(connect) = &self.connect {
            connect.report_total();
        }
    }
}
