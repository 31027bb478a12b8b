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
use super::decider::Decider;
use super::decode::{Call, decode};
use super::mover::Mover;
use super::ops::{self, Answer};
use super::report::Reads;
use crate::connect::{self, ConnectSpec, Connector};
use crate::events::Sender;
use crate::sys::notify::{Notification, answer, answer_fd};
use oajail_policy::guard::{GuardPlan, WRITE_FLAGS};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

/// pid 1's guard state: the listener, the decision and the callers.
pub(crate) struct Server {
    pub(crate) listener: OwnedFd,
    decider: Decider,
    callers: Callers,
    /// The writable roots (a write refused outside them is the policy's).
    roots: Vec<PathBuf>,
    /// The read watch, when the run asked for it.
    reads: Option<Reads>,
    /// The container tier's connect hand-off (its calls come through the
    /// same listener: a filter chain has one).
    connect: Option<Connector>,
    /// No `denyWrite` entry lies below a root, so the guard refuses no
    /// removal: the filter sends only those named from the working
    /// directory or by absolute path, for their report
    /// (`policy/src/compile/guard.rs`).
    removals_reported: bool,
}

impl Server {
    /// `prime`: directories whose repositories are learnt first (the
    /// command's working directory and the writable roots); `hidden`: the
    /// masks whose opens the read watch reports (none: off).
    pub(crate) fn new(
        listener: OwnedFd,
        plan: GuardPlan,
        (prime, hidden): (Vec<PathBuf>, Vec<PathBuf>),
        mover: Option<Mover>,
        connect: Option<ConnectSpec>,
    ) -> Self {
        crate::sys::notify::sync_wake_up(listener.as_fd());
        Server {
            listener,
            roots: plan.roots.iter().map(PathBuf::from).collect(),
            removals_reported: !plan.decides_removals(),
            reads: Reads::new(hidden),
            decider: Decider::new(plan, prime, mover),
            callers: Callers::new(),
            connect: connect.map(Connector::new),
        }
    }

    /// Receive and answer one notification, reporting a refusal to
    /// `events`. An error means the listener itself failed (every waiting
    /// call then fails; the caller drops it).
    pub(crate) fn serve_one(&mut self, events: &mut Sender) -> std::io::Result<()> {
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
        self.decider.seen().clear();
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
            Some(Call::Socket { domain, kind }) => {
                // Sent here only for AF_UNIX, which the policy refuses
                // (the supervisor took it off the deny filter to see it).
                events.refused(super::report::socket(domain, kind, n.tid));
                return answer(self.listener.as_fd(), n.id, Err(libc::EPERM));
            }
            Some(Call::SocketPair { domain, kind }) => {
                // Sent here only for AF_UNIX: a connection-mode pair cannot
                // address anyone else, a datagram pair's end can `sendto`
                // any socket path in view.
                let connected = [libc::SOCK_STREAM, libc::SOCK_SEQPACKET];
                if connected.contains(&(kind as i32 & 0xf)) {
                    return crate::sys::notify::answer_continue(self.listener.as_fd(), n.id);
                }
                let mut refusal = super::report::socket(domain, kind, n.tid);
                refusal.op = "socketpair".into();
                events.refused(refusal);
                return answer(self.listener.as_fd(), n.id, Err(libc::EPERM));
            }
            Some(Call::Open {
                dir, path, flags, ..
            }) if flags as u32 & WRITE_FLAGS == 0 => {
                // Only the read watch sends these: it decides nothing, the
                // kernel's layers do, so the open goes on as the caller's.
                self.watch_read(n, dir, path, events);
                return crate::sys::notify::answer_continue(self.listener.as_fd(), n.id);
            }
            Some(call @ Call::Unlink { dir, path, .. }) if self.removals_reported => {
                match self.callers.get(n) {
                    // Spelled inside a root: let the caller remove it
                    // itself. `CONTINUE` is safe here only because nothing
                    // is decided: no denyWrite entry lies below a root, and
                    // the mounts and Landlock hold the writable roots by
                    // themselves whatever path the kernel then reads. It
                    // saves pid 1 the removal (what `git checkout` makes
                    // per changed file).
                    Ok(caller) => match caller.spelled_within(dir, path, &self.roots) {
                        Ok(true) => {
                            let listener = self.listener.as_fd();
                            return crate::sys::notify::answer_continue(listener, n.id);
                        }
                        // Outside (or through a link): pid 1 performs it,
                        // so the kernel's refusal, if any, is reported.
                        _ => ops::perform(&mut self.decider, &caller, call),
                    },
                    Err(e) => Err(e),
                }
            }
            Some(call) => match self.callers.get(n) {
                Ok(caller) => ops::perform(&mut self.decider, &caller, call),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = &result
            && let Some(refusal) = self.decider.seen().refusal(*e, n.tid, &self.roots)
        {
            events.refused(refusal);
        }
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

    /// An open for reading (read watch): report it when a mask hides it.
    fn watch_read(&mut self, n: Notification, dir: u64, path: u64, events: &mut Sender) {
        let (Some(reads), Ok(caller)) = (&self.reads, self.callers.get(n)) else {
            return;
        };
        let Ok(name) = caller.string(path) else {
            return;
        };
        let base = || {
            let link = if dir as i32 == super::resolve::AT_FDCWD {
                "cwd".to_owned()
            } else {
                format!("fd/{}", dir as i32)
            };
            let target = rustix::fs::readlinkat(caller.proc_dir(), link, Vec::new()).ok()?;
            let bytes: std::ffi::OsString =
                std::os::unix::ffi::OsStringExt::from_vec(target.into_bytes());
            Some(PathBuf::from(bytes))
        };
        reads.opened(events, n.tid, &name, base);
    }

    /// At exit: the container tier's connect hand-off's total, when more
    /// of its refusals happened than it printed (the guard's own go to the
    /// supervisor as they happen).
    pub(crate) fn report_total(&self) {
        if let Some(connect) = &self.connect {
            connect.report_total();
        }
    }
}
