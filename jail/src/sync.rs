//! The supervisor/child channel: one `SOCK_SEQPACKET` socketpair, CLOEXEC.
//!
//! Every message is one packet. The child sends typed [`ChildMsg`]s (serde
//! JSON), the listener descriptors ride along as `SCM_RIGHTS`; the supervisor
//! sends single bytes: "spec" once the [`JailSpec`] is in the [`SpecFile`]
//! (a memfd created before the clone, so both sides share it; no size limit),
//! then "go" once the proxy runs. The child's end is
//! close-on-exec and pid 1 closes its copy when setup is over, so end-of-file
//! on the supervisor's side means "the command was executed": nothing needs to
//! be sent on success.

use crate::error::{Failure, Step};
use crate::fdpass::{recv_with_fds, send_with_fds};
use crate::spec::JailSpec;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Messages from the jail to the supervisor.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ChildMsg {
    /// The proxy listener descriptors are attached to this packet.
    Listeners,
    /// What pid 1 enforced (sent just before forking the command).
    Enforced(crate::report::EnforcementReport),
    /// A setup step failed; the jail exits with the setup-failed code.
    StepFailed {
        /// Which step.
        step: Step,
        /// errno of the failing call, if any.
        errno: Option<i32>,
        /// One-line reason.
        msg: String,
    },
    /// `execve` failed for every candidate path.
    ExecFailed {
        /// The program as given.
        program: String,
        /// errno of the decisive attempt.
        errno: i32,
        /// One-line reason.
        msg: String,
    },
    /// The master of the jail's own pty is attached (interactive runs).
    Terminal,
}

/// Supervisor → jail: the spec is in the spec file.
pub(crate) const SPEC: u8 = b'S';
/// Supervisor → jail: the spec is in the spec file, and the run is
/// interactive: open a pty in the jail (`pty.rs`).
pub(crate) const SPEC_TERMINAL: u8 = b'T';
/// Supervisor → jail: the proxy runs, finish setup.
pub(crate) const GO: u8 = b'G';
const MAX_MSG: usize = 8192;

/// One end of the channel.
#[derive(Debug)]
pub(crate) struct Channel {
    fd: OwnedFd,
}

/// A connected pair: (supervisor end, child end).
pub(crate) fn pair() -> io::Result<(Channel, Channel)> {
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    Ok((Channel { fd: a }, Channel { fd: b }))
}

impl Channel {
    /// Send one message, with descriptors attached when `fds` is non-empty.
    pub(crate) fn send(&self, msg: &ChildMsg, fds: &[RawFd]) -> io::Result<()> {
        let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
        send_with_fds(self.fd.as_fd(), &body, fds)
    }

    /// Receive one message; `None` at end-of-file (every child copy closed).
    ///
    /// A peer that exits with a message of ours unread (pid 1 failing a
    /// step just as "go" arrives) resets the connection, and the kernel
    /// reports that once, before the messages still queued for us: pid 1's
    /// report of the failed step. So a reset is read past, once.
    pub(crate) fn recv(&self) -> io::Result<Option<(ChildMsg, Vec<OwnedFd>)>> {
        let mut buf = vec![0u8; MAX_MSG];
        let (len, fds) = match recv_with_fds(self.fd.as_fd(), &mut buf) {
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                recv_with_fds(self.fd.as_fd(), &mut buf)?
            }
            other => other?,
        };
        if len == 0 {
            return Ok(None);
        }
        let parsed = serde_json::from_slice(&buf[..len]).map_err(io::Error::other)?;
        Ok(Some((parsed, fds)))
    }

    /// Supervisor: send one control byte ([`SPEC`] or [`GO`]).
    pub(crate) fn send_byte(&self, byte: u8) -> io::Result<()> {
        send_with_fds(self.fd.as_fd(), &[byte], &[])
    }

    /// Send `byte` with `fd` attached (SCM_RIGHTS).
    pub(crate) fn send_byte_with_fd(&self, byte: u8, fd: BorrowedFd<'_>) -> io::Result<()> {
        send_with_fds(self.fd.as_fd(), &[byte], &[fd.as_raw_fd()])
    }

    /// Child: wait for [`SPEC`] or [`SPEC_TERMINAL`]; true for the latter,
    /// with the descriptor sent along (a Landlock ruleset the supervisor
    /// shares, in the container tier).
    pub(crate) fn wait_spec(&self) -> io::Result<(bool, Option<OwnedFd>)> {
        let mut b = [0u8; 1];
        match recv_with_fds(self.fd.as_fd(), &mut b)? {
            (1, fds) if b[0] == SPEC => Ok((false, fds.into_iter().next())),
            (1, fds) if b[0] == SPEC_TERMINAL => Ok((true, fds.into_iter().next())),
            (0, _) => Err(io::Error::other("supervisor went away")),
            _ => Err(io::Error::other("unexpected message from supervisor")),
        }
    }

    /// Child: block until the supervisor sends `byte` (EOF means it went
    /// away), and return the descriptor sent with it, if any.
    pub(crate) fn wait_byte_with_fd(&self, byte: u8) -> io::Result<Option<OwnedFd>> {
        let mut b = [0u8; 1];
        let (len, fds) = recv_with_fds(self.fd.as_fd(), &mut b)?;
        match (len, b[0]) {
            (1, got) if got == byte => Ok(fds.into_iter().next()),
            (0, _) => Err(io::Error::other("supervisor went away")),
            _ => Err(io::Error::other("unexpected message from supervisor")),
        }
    }

    /// Child: whether the supervisor still holds its end (no hang-up yet).
    pub(crate) fn peer_alive(&self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::empty())];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => true,
            Ok(_) => !fds[0]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
            Err(_) => false,
        }
    }
}

/// pid 1 → supervisor: the command's exit code, sent once pid 1 is the
/// jail's last process (`init.rs`). A pipe made before the clone,
/// close-on-exec, so the command never holds its write end. With the code in
/// hand the supervisor need not wait for pid 1's own exit, where the kernel
/// tears down the jail's namespaces (its mounts, network, IPC): that
/// finishes after `oajail` returns, as it does after bwrap's.
#[derive(Debug)]
pub(crate) struct ExitReport {
    fd: OwnedFd,
}

/// (supervisor's read end, pid 1's write end).
pub(crate) fn exit_report() -> io::Result<(ExitReport, ExitReport)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((ExitReport { fd: read }, ExitReport { fd: write }))
}

impl ExitReport {
    /// pid 1: send `code`. Best effort: without it the supervisor learns
    /// the code when it reaps pid 1, as before.
    pub(crate) fn send(&self, code: i32) {
        let _ = nix::unistd::write(&self.fd, &code.to_le_bytes());
    }

    /// Supervisor: the code, or `None` when pid 1 closed its end without
    /// one (it died otherwise: the reap tells how). Four bytes are below
    /// `PIPE_BUF`, so the write is atomic and one read gets all or nothing.
    pub(crate) fn recv(&self) -> Option<i32> {
        let mut b = [0u8; 4];
        match nix::unistd::read(&self.fd, &mut b) {
            Ok(4) => Some(i32::from_le_bytes(b)),
            _ => None,
        }
    }
}

impl AsFd for ExitReport {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Send `StepFailed` and exit with the setup-failed code.
pub(crate) fn report(chan: &Channel, step: Step, f: Failure) -> ! {
    let _ = chan.send(
        &ChildMsg::StepFailed {
            step,
            errno: f.errno,
            msg: f.msg,
        },
        &[],
    );
    // _exit: no atexit handlers or buffered output of the supervisor's copy.
    crate::sys::process::exit_now(crate::exit_code::SETUP_FAILED)
}

/// The memfd that carries the serialized [`JailSpec`] into the jail.
#[derive(Debug)]
pub(crate) struct SpecFile {
    file: std::fs::File,
}

impl SpecFile {
    /// Create it (before the clone, so the jail inherits it; CLOEXEC, and
    /// pid 1 closes it before the command exists).
    pub(crate) fn new() -> io::Result<Self> {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        let fd = memfd_create(c"oajail-spec", MFdFlags::MFD_CLOEXEC)?;
        Ok(SpecFile {
            file: std::fs::File::from(fd),
        })
    }

    /// Supervisor: store the spec.
    pub(crate) fn write(&self, spec: &JailSpec) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let body = serde_json::to_vec(spec).map_err(io::Error::other)?;
        self.file.set_len(0)?;
        self.file.write_all_at(&body, 0)
    }

    /// Child: load the spec.
    pub(crate) fn read(&self) -> io::Result<JailSpec> {
        use std::os::unix::fs::FileExt;
        let len = usize::try_from(self.file.metadata()?.len()).map_err(io::Error::other)?;
        let mut body = vec![0u8; len];
        self.file.read_exact_at(&mut body, 0)?;
        serde_json::from_slice(&body).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pid 1 reports a failed step and exits just as "go" reaches it: the
    /// report still comes through, not the reset its exit causes.
    #[test]
    fn a_report_queued_behind_a_reset_is_read() {
        let (supervisor, child) = pair().unwrap();
        let failed = ChildMsg::StepFailed {
            step: Step::Mounts,
            errno: None,
            msg: "trust bundle".into(),
        };
        child.send(&failed, &[]).unwrap();
        supervisor.send_byte(GO).unwrap();
        drop(child); // exits with "go" unread
        match supervisor.recv().unwrap() {
            Some((ChildMsg::StepFailed { step, .. }, _)) => assert_eq!(step, Step::Mounts),
            other => panic!("got {other:?}"),
        }
        assert!(supervisor.recv().unwrap().is_none());
    }
}
