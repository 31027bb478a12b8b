//! Renames and links across directories on Landlock ABI 1.
//!
//! ABI 1 has no `refer` right: a process in any Landlock domain gets `EXDEV`
//! for every rename or link whose source and target directories differ,
//! inside writable roots too (git, package managers, `os.rename`). The
//! guard already receives every such call and performs it in pid 1, which
//! is in the domain, so it gets the same `EXDEV`. The mover is the one
//! process of the jail outside the domain: pid 1 forks it after dropping
//! capabilities and setting no_new_privs, just before applying Landlock,
//! and hands it each cross-directory rename or link that the kernel
//! refused with `EXDEV`, with the two directory descriptors pid 1 resolved.
//!
//! What ABI 2's `refer` right would check, pid 1 checks first, from inside
//! the domain: a move must not make readable what was not, so a denied
//! file cannot be read under a new name (attacks A13–A15 and their
//! renames). Either what moves is readable where it is (a regular file is
//! opened for reading there; a directory must lie under a path the plan
//! grants `read_file` on, which Landlock's read complement never grants
//! above a denied path), or nothing grants reading where it goes.
//! Everything else (writable roots, read-only binds, masks) the mount view
//! still holds for the mover, whose file system is the jail's own.
//!
//! Only with the mount view: without it the mounts hold nothing, and a
//! process outside Landlock would hold no file-system rule at all.

use crate::fdpass::{recv_with_fds, send_with_fds};
use crate::sys::process::{Forked, exit_now, fork};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, setsockopt, socketpair, sockopt};
use oajail_policy::guard::FileKind;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// How long pid 1 waits for one move (a slow network file system included).
const ANSWER_WITHIN_SECS: i64 = 10;

/// The longest final component a request carries (`NAME_MAX` and room for
/// trailing slashes the caller wrote).
const NAME_ROOM: usize = 1024;

/// What the mover is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// `renameat2` with these flags.
    Rename(RenameFlags),
    /// `linkat` with these flags (only `AT_SYMLINK_FOLLOW` matters).
    Link(AtFlags),
}

/// pid 1's end of the mover, and the paths whose subtrees the plan lets the
/// command read whole.
pub(crate) struct Mover {
    sock: OwnedFd,
    readable: Vec<PathBuf>,
    /// An exchange failed or timed out: a late answer would be taken for the
    /// next request's, so the mover is not asked again.
    broken: Cell<bool>,
}

impl Mover {
    /// Fork the mover. Call after no_new_privs and before Landlock.
    /// `readable`: the plan's rule paths that grant `read_file`.
    pub(crate) fn start(readable: Vec<PathBuf>) -> std::io::Result<Mover> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        match fork()? {
            Forked::Child => {
                drop(ours);
                serve(theirs)
            }
            Forked::Parent(_) => {
                // The command shares the mover's uid and, before ABI 6, may
                // stop it with a signal: pid 1 must not wait for it forever.
                let limit = nix::sys::time::TimeVal::new(ANSWER_WITHIN_SECS, 0);
                setsockopt(&ours, sockopt::ReceiveTimeout, &limit)?;
                Ok(Mover {
                    sock: ours,
                    readable,
                    broken: Cell::new(false),
                })
            }
        }
    }

    /// Its socket, which pid 1 keeps when it closes the rest.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Whether moving `name` in `dir` (real path `path`, of `kind`) into
    /// the directory `to` makes nothing readable that was not: what moves
    /// is readable where it is (checked in pid 1's domain), or nothing
    /// above `to` grants reading. `follow`: a link is linked as its target
    /// (`AT_SYMLINK_FOLLOW`).
    pub(crate) fn may_move(
        &self,
        (dir, name): (BorrowedFd<'_>, &str),
        path: &Path,
        kind: FileKind,
        follow: bool,
        to: &Path,
    ) -> bool {
        let readable = |follow: bool| {
            let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            if !follow {
                flags |= OFlags::NOFOLLOW;
            }
            rustix::fs::openat(dir, name, flags, Mode::empty()).is_ok()
        };
        let here = match kind {
            FileKind::Dir => self.grants_read(path),
            FileKind::File => readable(false),
            FileKind::Symlink if follow => readable(true),
            // A link itself, a fifo, a socket: no content to read.
            _ => true,
        };
        here || !self.grants_read(to)
    }

    /// Whether the plan grants `read_file` on `path` (a rule at it or above).
    fn grants_read(&self, path: &Path) -> bool {
        self.readable.iter().any(|r| path.starts_with(r))
    }

    /// Have the mover perform `what` from `old` in `old_dir` to `new` in
    /// `new_dir`; its result is the call's.
    pub(crate) fn perform(
        &self,
        what: Move,
        (old_dir, old): (BorrowedFd<'_>, &[u8]),
        (new_dir, new): (BorrowedFd<'_>, &[u8]),
    ) -> Result<(), Errno> {
        let body = request(what, old, new)?;
        let fds = [old_dir.as_raw_fd(), new_dir.as_raw_fd()];
        let mut answer = [0u8; 4];
        let exchanged = !self.broken.get()
            && send_with_fds(self.sock.as_fd(), &body, &fds).is_ok()
            && matches!(recv_with_fds(self.sock.as_fd(), &mut answer), Ok((4, _)));
        if !exchanged {
            self.broken.set(true);
            return Err(Errno::IO);
        }
        match i32::from_le_bytes(answer) {
            0 => Ok(()),
            e => Err(Errno::from_raw_os_error(e)),
        }
    }
}

/// A request: the call, its flags, the length of the old name, both names.
fn request(what: Move, old: &[u8], new: &[u8]) -> Result<Vec<u8>, Errno> {
    if old.len() + new.len() > NAME_ROOM {
        return Err(Errno::NAMETOOLONG);
    }
    let (tag, flags) = match what {
        Move::Rename(f) => (b'r', f.bits()),
        Move::Link(f) => (b'l', f.bits()),
    };
    let mut body = vec![tag];
    body.extend_from_slice(&flags.to_le_bytes());
    body.extend_from_slice(&(old.len() as u16).to_le_bytes());
    body.extend_from_slice(old);
    body.extend_from_slice(new);
    Ok(body)
}

/// The mover's loop: one request, one answer, until pid 1 goes away.
fn serve(sock: OwnedFd) -> ! {
    // Nothing of pid 1's but this socket: above all not the supervisor's
    // channel, whose end-of-file says the command has started.
    let fd = sock.as_raw_fd() as u32;
    if crate::sys::fd::close_between(0, fd.saturating_sub(1)).is_err()
        || crate::sys::fd::close_between(fd + 1, u32::MAX).is_err()
    {
        exit_now(1);
    }
    let mut buf = [0u8; NAME_ROOM + 16];
    loop {
        let (n, fds) = match recv_with_fds(sock.as_fd(), &mut buf) {
            Ok((n, fds)) if n > 0 => (n, fds),
            _ => exit_now(0),
        };
        let code = match act(&buf[..n], &fds) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error(),
        };
        if send_with_fds(sock.as_fd(), &code.to_le_bytes(), &[]).is_err() {
            exit_now(0);
        }
    }
}

/// Decode one request and make the call.
fn act(body: &[u8], fds: &[OwnedFd]) -> Result<(), Errno> {
    let [old_dir, new_dir] = fds else {
        return Err(Errno::INVAL);
    };
    if body.len() < 7 {
        return Err(Errno::INVAL);
    }
    let flags = u32::from_le_bytes([body[1], body[2], body[3], body[4]]);
    let old_len = u16::from_le_bytes([body[5], body[6]]) as usize;
    let (old, new) = body[7..].split_at_checked(old_len).ok_or(Errno::INVAL)?;
    match body[0] {
        b'r' => rustix::fs::renameat_with(
            old_dir,
            old,
            new_dir,
            new,
            RenameFlags::from_bits_retain(flags),
        ),
        b'l' => {
            let follow = AtFlags::from_bits_retain(flags) & AtFlags::SYMLINK_FOLLOW;
            rustix::fs::linkat(old_dir, old, new_dir, new, follow)
        }
        _ => Err(Errno::INVAL),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oajail-mover-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        dir
    }

    fn dir_fd(path: &Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn requests_decode_to_the_calls_they_name() {
        let dir = scratch("act");
        std::fs::write(dir.join("a/f"), "x").unwrap();
        let fds = [dir_fd(&dir.join("a")), dir_fd(&dir.join("b"))];
        let link = request(Move::Link(AtFlags::empty()), b"f", b"l").unwrap();
        act(&link, &fds).unwrap();
        let rename = request(Move::Rename(RenameFlags::NOREPLACE), b"f", b"l").unwrap();
        assert_eq!(act(&rename, &fds), Err(Errno::EXIST));
        let rename = request(Move::Rename(RenameFlags::empty()), b"f", b"g").unwrap();
        act(&rename, &fds).unwrap();
        assert!(dir.join("b/g").is_file() && dir.join("b/l").is_file());
        assert!(!dir.join("a/f").exists());
        assert_eq!(act(&rename[..5], &fds), Err(Errno::INVAL));
        assert_eq!(act(&rename, &fds[..1]), Err(Errno::INVAL));
        let long = vec![b'n'; NAME_ROOM];
        let too_long = request(Move::Rename(RenameFlags::empty()), &long, b"x");
        assert_eq!(too_long, Err(Errno::NAMETOOLONG));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_move_may_not_make_readable_what_was_not() {
        let dir = scratch("may");
        std::fs::write(dir.join("a/f"), "x").unwrap();
        std::os::unix::fs::symlink("/nowhere", dir.join("a/l")).unwrap();
        let (sock, _) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let mover = Mover {
            sock,
            readable: vec![dir.join("b")],
            broken: Cell::new(false),
        };
        let a = dir_fd(&dir.join("a"));
        let may = |name: &str, kind, follow, to: &str| {
            let path = dir.join("a").join(name);
            mover.may_move((a.as_fd(), name), &path, kind, follow, &dir.join(to))
        };
        // A directory outside every read grant: only where nothing grants it.
        assert!(!may("d", FileKind::Dir, false, "b"));
        assert!(may("d", FileKind::Dir, false, "a"));
        // A file is asked of the kernel: readable here, or missing.
        assert!(may("f", FileKind::File, false, "b"));
        assert!(!may("gone", FileKind::File, false, "b"));
        // A link itself carries nothing; followed, its target must be readable.
        assert!(may("l", FileKind::Symlink, false, "b"));
        assert!(!may("l", FileKind::Symlink, true, "b"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
