//! Refusals seen inside the jail, sent to the supervisor as they happen.
//!
//! pid 1 sees every write-like call of the command (the guard's filter
//! sends them all to it, inside the writable roots or not) and, with the
//! read watch on, every open: when it refuses one (the guard's own rules)
//! or the kernel refuses the call pid 1 made for the command (the
//! read-only mounts, Landlock), it sends one [`Refusal`] to the supervisor
//! over a `SOCK_SEQPACKET` socketpair made before the clone. The
//! supervisor explains it with the policy (which rule, which settings
//! entry would allow it), prints it, logs it and counts it; pid 1 knows
//! the call and the path, not the policy.
//!
//! pid 1 never waits on this channel except for an [`Ask`] it sends (the
//! user is asked; the command's call waits for the answer, other calls go
//! on): a refusal that does not fit the socket's buffer is counted, and
//! the count rides on the next one that does, so a refusal is either
//! printed or counted in the total printed at exit.
//!
//! The socket is close-on-exec: the command never holds an end.

use crate::fdpass::{recv_with_fds, send_with_fds};
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, socketpair};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// What kind of access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// A write-like call refused by the mounts or Landlock (outside the
    /// writable roots, or on a path the policy hides).
    Write,
    /// A write-like call refused by the guard (mandatory protections,
    /// `denyWrite`, the settings file, the oajail binary).
    Guard,
    /// An open for reading of a path the policy hides (read watch).
    Read,
    /// A unix socket the policy refuses.
    UnixSocket,
}

impl RefusalKind {
    /// The word used in messages and counts (`write`, `read` …).
    pub fn word(self) -> &'static str {
        match self {
            RefusalKind::Write => "write",
            RefusalKind::Guard => "protected write",
            RefusalKind::Read => "read",
            RefusalKind::UnixSocket => "unix socket",
        }
    }
}

/// One refused call, as pid 1 saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// What kind of access.
    pub kind: RefusalKind,
    /// The operation in words: `create`, `mkdir`, `write`, `remove`,
    /// `rename`, `link`, `symlink`, `chmod`, `open`, `socket` …
    pub op: String,
    /// The absolute path acted on (its directory resolved through links,
    /// as the jail sees it; the same path on the host, except inside the
    /// jail's private `/tmp`), or the socket's address.
    pub path: String,
    /// What the command's call returned (errno).
    pub errno: i32,
    /// The guard's rule, for [`RefusalKind::Guard`].
    pub rule: Option<String>,
    /// The calling thread, as the jail numbers it.
    pub pid: u32,
}

/// A refused call the supervisor may turn into an allowed one (`--ask`):
/// pid 1 holds the call until the answer comes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// Ties the answer to the question.
    pub id: u64,
    /// The call.
    pub refusal: Refusal,
}

/// pid 1 → supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JailEvent {
    /// A refusal; `lost` refusals before it did not fit the channel.
    Refusal {
        /// The refusal.
        refusal: Refusal,
        /// Refusals dropped since the last one sent.
        lost: u64,
    },
    /// pid 1 asks whether to let a refused call through.
    Ask(Ask),
    /// The command is gone; nothing more comes. `lost`: refusals dropped
    /// since the last one sent.
    End {
        /// Refusals dropped since the last one sent.
        lost: u64,
    },
}

/// Supervisor → pid 1: the answer to an [`Ask`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The question's id.
    pub id: u64,
    /// How the call ends.
    pub verdict: Verdict,
}

/// How an asked call ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Refused as the policy says (the call gets its errno).
    Deny,
    /// The supervisor made the call on the host; a descriptor rides along
    /// for an open (injected into the caller), else the call returns 0.
    Done,
    /// The supervisor's call failed with this errno.
    Failed(i32),
}

/// The largest message (a path is at most 4096 bytes; JSON escapes can
/// grow it).
const MAX_MSG: usize = 64 * 1024;

/// pid 1's end.
#[derive(Debug)]
pub(crate) struct Sender {
    fd: OwnedFd,
    lost: u64,
}

/// The supervisor's end.
#[derive(Debug)]
pub struct Stream {
    fd: OwnedFd,
}

/// A connected pair: (supervisor's end, pid 1's end), both close-on-exec.
pub(crate) fn pair() -> io::Result<(Stream, Sender)> {
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    Ok((Stream { fd: a }, Sender { fd: b, lost: 0 }))
}

impl Sender {
    /// Send `refusal` without waiting; counted as lost when the channel is
    /// full or gone.
    pub(crate) fn refused(&mut self, refusal: Refusal) {
        let event = JailEvent::Refusal {
            refusal,
            lost: self.lost,
        };
        match self.send_now(&event) {
            Ok(()) => self.lost = 0,
            Err(_) => self.lost += 1,
        }
    }

    /// The last message: the command is gone.
    pub(crate) fn end(&mut self) {
        let _ = self.send_now(&JailEvent::End { lost: self.lost });
    }

    fn send_now(&self, event: &JailEvent) -> io::Result<()> {
        let body = serde_json::to_vec(event).map_err(io::Error::other)?;
        nix::sys::socket::send(self.fd.as_raw_fd(), &body, MsgFlags::MSG_DONTWAIT)?;
        Ok(())
    }
}

impl AsFd for Sender {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Stream {
    /// Wait for the next event; `None` once pid 1 is gone.
    pub fn recv(&self) -> io::Result<Option<JailEvent>> {
        let mut buf = vec![0u8; MAX_MSG];
        let (len, _) = recv_with_fds(self.fd.as_fd(), &mut buf)?;
        if len == 0 {
            return Ok(None);
        }
        serde_json::from_slice(&buf[..len])
            .map(Some)
            .map_err(io::Error::other)
    }

    /// Answer an [`Ask`]; `fd`: the descriptor the supervisor opened for
    /// the caller (an open that was allowed).
    pub fn answer(&self, answer: &Answer, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let body = serde_json::to_vec(answer).map_err(io::Error::other)?;
        let fds: Vec<_> = fd.iter().map(AsRawFd::as_raw_fd).collect();
        send_with_fds(self.fd.as_fd(), &body, &fds)
    }

    /// A second handle on the same end (one thread reads, another answers).
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(Stream {
            fd: self.fd.try_clone()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(path: &str) -> Refusal {
        Refusal {
            kind: RefusalKind::Write,
            op: "mkdir".into(),
            path: path.into(),
            errno: libc::EROFS,
            rule: None,
            pid: 2,
        }
    }

    #[test]
    fn refusals_arrive_in_order_then_the_end() {
        let (stream, mut sender) = pair().unwrap();
        sender.refused(refusal("/h/.npm"));
        sender.refused(refusal("/h/.cache/x"));
        sender.end();
        drop(sender);
        let mut got = Vec::new();
        while let Some(e) = stream.recv().unwrap() {
            got.push(e);
        }
        assert_eq!(
            got,
            vec![
                JailEvent::Refusal {
                    refusal: refusal("/h/.npm"),
                    lost: 0
                },
                JailEvent::Refusal {
                    refusal: refusal("/h/.cache/x"),
                    lost: 0
                },
                JailEvent::End { lost: 0 },
            ]
        );
    }

    #[test]
    fn a_full_channel_counts_what_it_drops() {
        let (stream, mut sender) = pair().unwrap();
        let long = format!("/h/{}", "x".repeat(4000));
        // Fill the socket's buffer: nothing reads meanwhile.
        let mut sent = 0u64;
        while sender.lost == 0 {
            sender.refused(refusal(&long));
            sent += 1;
            assert!(sent < 100_000, "the buffer never filled");
        }
        let lost_before = sender.lost;
        // Drain, then one more goes through carrying the count.
        let mut seen = 0u64;
        for _ in 0..(sent - lost_before) {
            assert!(matches!(
                stream.recv().unwrap(),
                Some(JailEvent::Refusal { .. })
            ));
            seen += 1;
        }
        sender.refused(refusal("/h/after"));
        match stream.recv().unwrap() {
            Some(JailEvent::Refusal { refusal: r, lost }) => {
                assert_eq!(r.path, "/h/after");
                assert_eq!(lost, lost_before);
                assert_eq!(seen + lost, sent);
            }
            other => panic!("{other:?}"),
        }
    }
}
