//! Reading a blocked caller's path arguments and opening their parent
//! directories the way the kernel would have for the caller.
//!
//! Every /proc file of the caller is opened by its tid and then checked with
//! `SECCOMP_IOCTL_NOTIF_ID_VALID`: if the tid was reused by another process
//! meanwhile, the notification is no longer valid and nothing opened is used.

use crate::sys::notify::{Notification, still_valid};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// `AT_FDCWD` as the kernel sees the 32-bit dirfd argument.
const AT_FDCWD: i32 = -100;
/// Longest path the kernel accepts, terminating NUL included.
const PATH_MAX: usize = 4096;
const PAGE: u64 = 4096;

/// The caller of one notification, with its memory open.
pub(crate) struct Caller<'a> {
    listener: BorrowedFd<'a>,
    pub(crate) n: Notification,
    /// The caller's id in the mounted /proc (its tid, unless /proc belongs
    /// to another pid namespace than pid 1's).
    pub(crate) proc: u32,
    mem: File,
}

/// A resolved parent directory and the final name to create in it.
pub(crate) struct Parent {
    /// The directory, opened `O_PATH`.
    pub(crate) fd: OwnedFd,
    /// Its real path, read back from the open descriptor.
    pub(crate) real: PathBuf,
    /// The final component as given (trailing slashes kept, so the call
    /// pid 1 makes fails or succeeds exactly as the caller's would).
    pub(crate) last: Vec<u8>,
    /// The final component without trailing slashes, for the decision.
    pub(crate) name: String,
}

impl<'a> Caller<'a> {
    /// Open the caller's memory; fails when it cannot be read (a
    /// non-dumpable caller) or the notification went stale.
    pub(crate) fn open(
        listener: BorrowedFd<'a>,
        n: Notification,
        translate: bool,
    ) -> Result<Self, Errno> {
        let proc = if translate { proc_id(n.tid)? } else { n.tid };
        let mem = File::open(format!("/proc/{proc}/mem"))
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::PERM))?;
        let caller = Caller {
            listener,
            n,
            proc,
            mem,
        };
        caller.valid()?;
        Ok(caller)
    }

    fn valid(&self) -> Result<(), Errno> {
        if still_valid(self.listener, self.n.id) {
            Ok(())
        } else {
            Err(Errno::NOENT)
        }
    }

    /// A NUL-terminated string at `addr` in the caller's memory.
    pub(crate) fn string(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        if addr == 0 {
            return Err(Errno::FAULT);
        }
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < PATH_MAX {
            // Read at most to the end of the page: the next may be unmapped.
            let chunk = (PAGE - at % PAGE).min((PATH_MAX - out.len()) as u64) as usize;
            let mut buf = vec![0u8; chunk];
            let got = self.mem.read_at(&mut buf, at).map_err(|_| Errno::FAULT)?;
            if got == 0 {
                return Err(Errno::FAULT);
            }
            if let Some(end) = buf[..got].iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..got]);
            at += got as u64;
        }
        Err(Errno::NAMETOOLONG)
    }

    /// The caller's umask and thread-group id (from /proc/<tid>/status).
    pub(crate) fn status(&self) -> Result<(u32, u32), Errno> {
        // One read into a fixed buffer (the fields wanted are in the first
        // lines): std's read_to_string costs a statx and several reads.
        let mut buf = [0u8; 1024];
        let n = File::open(format!("/proc/{}/status", self.proc))
            .and_then(|mut f| std::io::Read::read(&mut f, &mut buf))
            .map_err(|_| Errno::ACCESS)?;
        self.valid()?;
        let text = String::from_utf8_lossy(&buf[..n]);
        let field = |key: &str, radix: u32| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| u32::from_str_radix(v.trim(), radix).ok())
        };
        match (field("Umask:", 8), field("Tgid:", 10)) {
            (Some(umask), Some(tgid)) => Ok((umask, tgid)),
            _ => Err(Errno::ACCESS),
        }
    }

    /// The caller's descriptor `fd` (or its cwd for `AT_FDCWD`) as a path
    /// pid 1 can open or link from.
    pub(crate) fn fd_path(&self, dirfd: i32) -> String {
        if dirfd == AT_FDCWD {
            format!("/proc/{}/cwd", self.proc)
        } else {
            format!("/proc/{}/fd/{dirfd}", self.proc)
        }
    }

    /// Read the path argument at `addr` (relative to `dirfd`) and open its
    /// parent directory.
    pub(crate) fn parent(&self, dirfd: u64, addr: u64) -> Result<Parent, Errno> {
        let path = self.string(addr)?;
        self.parent_of(dirfd as i32, &path)
    }

    /// Open the parent of `path` (relative to `dirfd`), following symlinks
    /// in the directory part as the kernel would for the caller.
    pub(crate) fn parent_of(&self, dirfd: i32, path: &[u8]) -> Result<Parent, Errno> {
        if path.is_empty() {
            return Err(Errno::NOENT);
        }
        let path = self.rewrite(path);
        let (dir, last) = split(&path);
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = if path.starts_with(b"/") {
            self.open_absolute(dir, dir_flags)?
        } else {
            let base = rustix::fs::open(self.fd_path(dirfd), dir_flags, Mode::empty())
                // No such descriptor in the caller: what the kernel says.
                .map_err(|e| {
                    if e == Errno::NOENT && dirfd != AT_FDCWD {
                        Errno::BADF
                    } else {
                        e
                    }
                })?;
            self.valid()?;
            match dir {
                Some(dir) => rustix::fs::openat(&base, dir, dir_flags, Mode::empty())?,
                None => base,
            }
        };
        let real = real_path(fd.as_fd())?;
        let name = String::from_utf8_lossy(trim_slashes(last)).into_owned();
        Ok(Parent {
            fd,
            real,
            last: last.to_vec(),
            name,
        })
    }

    /// An absolute directory part, resolved in the caller's root (through
    /// its /proc root link, so a caller in a nested mount namespace or
    /// chroot gets its own view, not pid 1's).
    fn open_absolute(&self, dir: Option<&[u8]>, flags: OFlags) -> Result<OwnedFd, Errno> {
        let dir = dir.unwrap_or(b"/");
        let root = rustix::fs::open(format!("/proc/{}/root", self.proc), flags, Mode::empty())?;
        self.valid()?;
        rustix::fs::openat2(&root, dir, flags, Mode::empty(), ResolveFlags::IN_ROOT)
    }

    /// `/proc/self`, `/dev/fd`, `/dev/std*` name the caller, not pid 1: rewrite
    /// these prefixes to the caller's /proc directory.
    fn rewrite(&self, path: &[u8]) -> Vec<u8> {
        let me = format!("/proc/{}", self.proc);
        let table: [(&[u8], String); 6] = [
            (b"/proc/self", me.clone()),
            (b"/proc/thread-self", format!("{me}/task/{}", self.proc)),
            (b"/dev/fd", format!("{me}/fd")),
            (b"/dev/stdin", format!("{me}/fd/0")),
            (b"/dev/stdout", format!("{me}/fd/1")),
            (b"/dev/stderr", format!("{me}/fd/2")),
        ];
        for (prefix, to) in table {
            if let Some(rest) = path.strip_prefix(prefix)
                && (rest.is_empty() || rest.starts_with(b"/"))
            {
                let mut out = to.into_bytes();
                out.extend_from_slice(rest);
                return out;
            }
        }
        path.to_vec()
    }
}

/// Whether the mounted /proc shows pid 1's own pid namespace (it does not
/// when the mount layer is off in a test build: /proc is then the host's).
pub(crate) fn proc_matches_our_pid_namespace() -> bool {
    let me = nix::unistd::getpid().as_raw().to_string();
    rustix::fs::readlink("/proc/self", Vec::new()).is_ok_and(|l| l.as_bytes() == me.as_bytes())
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that is not a leader.
const PIDFD_THREAD: u32 = 0o200;

/// The caller's id in the mounted /proc, through a pidfd: its fdinfo shows
/// the pid as /proc's pid namespace numbers it.
fn proc_id(tid: u32) -> Result<u32, Errno> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    use std::os::fd::AsRawFd;
    let pid = Pid::from_raw(tid as i32).ok_or(Errno::SRCH)?;
    let fd = pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD))?;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .map_err(|_| Errno::ACCESS)?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Errno::ACCESS)
}

/// The real path of an open directory (`readlink /proc/self/fd/N`).
fn real_path(fd: BorrowedFd<'_>) -> Result<PathBuf, Errno> {
    use std::os::fd::AsRawFd;
    let link = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())?;
    let bytes = link.into_bytes();
    if !bytes.starts_with(b"/") {
        // Not reachable from our root (another mount namespace): refuse.
        return Err(Errno::ACCESS);
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

fn trim_slashes(p: &[u8]) -> &[u8] {
    let end = p.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    &p[..end]
}

/// Split into the directory part (`None`: the base itself) and the final
/// component with its trailing slashes. `/` alone gives `(Some("/"), ".")`.
pub(crate) fn split(path: &[u8]) -> (Option<&[u8]>, &[u8]) {
    let trimmed = trim_slashes(path);
    if trimmed.is_empty() {
        return (Some(b"/"), b".");
    }
    match trimmed.iter().rposition(|b| *b == b'/') {
        None => (None, path),
        Some(0) => (Some(b"/"), &path[1..]),
        Some(i) => (Some(&path[..i]), &path[i + 1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_trailing_slashes_on_the_last_component() {
        assert_eq!(split(b"a"), (None, &b"a"[..]));
        assert_eq!(split(b"a/"), (None, &b"a/"[..]));
        assert_eq!(split(b"a/b"), (Some(&b"a"[..]), &b"b"[..]));
        assert_eq!(split(b"a/b//"), (Some(&b"a"[..]), &b"b//"[..]));
        assert_eq!(split(b"/x"), (Some(&b"/"[..]), &b"x"[..]));
        assert_eq!(split(b"/"), (Some(&b"/"[..]), &b"."[..]));
        assert_eq!(split(b"/a/b/.."), (Some(&b"/a/b"[..]), &b".."[..]));
    }

    #[test]
    fn trim() {
        assert_eq!(trim_slashes(b"x//"), b"x");
        assert_eq!(trim_slashes(b"//"), b"");
    }
}
