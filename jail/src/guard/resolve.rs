//! Reading a blocked caller's arguments and resolving its paths the way the
//! kernel would have for the caller.
//!
//! The caller's `/proc/<tid>/mem` and `/status` stay open between calls
//! ([`Callers`]): opening them is most of what a notification would cost.
//! An entry is used only while a pidfd of the thread says it has not
//! exited, so a recycled thread id never reads another task's memory.
//!
//! Paths are resolved in pid 1's own root, which is the caller's: the
//! command cannot `chroot` or make a mount namespace (no capability, and
//! seccomp refuses `unshare` and the mount API). A relative path starts at
//! the caller's cwd or descriptor through its `/proc` magic link.
//! Nothing here needs to check that the notification is still valid: pid 1
//! decides on the object it will act on itself, so a caller that died (and
//! whose thread id was reused) can only make pid 1 do something the policy
//! allows anyway.

use super::probe::stat_of;
use crate::sys::notify::Notification;
use oajail_policy::compile::FileKind;
use oajail_policy::compile::guard::Stat;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// `AT_FDCWD` as the kernel sees the 32-bit dirfd argument.
pub(crate) const AT_FDCWD: i32 = -100;
/// Longest path the kernel accepts, terminating NUL included.
const PATH_MAX: usize = 4096;
const PAGE: u64 = 4096;
/// How many callers' files stay open.
const CACHE: usize = 128;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that is not a leader.
const PIDFD_THREAD: u32 = 0o200;

/// The open /proc files of one thread.
struct Open {
    mem: File,
    status: File,
    /// Readable once the thread has exited. Without it (a non-leader thread
    /// on a kernel before 6.9) the entry is not kept.
    alive: OwnedFd,
}

/// Callers seen so far.
pub(crate) struct Callers {
    open: HashMap<u32, Open>,
    /// /proc numbers processes differently from the notifications (the
    /// mount layer is off in a test build: /proc is the host's).
    translate: bool,
}

impl Callers {
    pub(crate) fn new() -> Self {
        Callers {
            open: HashMap::new(),
            translate: !proc_matches_our_pid_namespace(),
        }
    }

    /// The caller of `n`, with its memory open.
    pub(crate) fn get(&mut self, n: Notification) -> Result<Caller<'_>, Errno> {
        let proc = if self.translate {
            proc_id(n.tid)?
        } else {
            n.tid
        };
        let fresh = match self.open.get(&n.tid) {
            Some(o) => exited(o.alive.as_fd()),
            None => true,
        };
        if fresh {
            self.open.remove(&n.tid);
            let opened = open_proc(n.tid, proc)?;
            if self.open.len() >= CACHE {
                self.open.clear();
            }
            self.open.insert(n.tid, opened);
        }
        let o = self.open.get(&n.tid).ok_or(Errno::SRCH)?;
        Ok(Caller {
            n,
            proc,
            mem: &o.mem,
            status: &o.status,
        })
    }
}

fn open_proc(tid: u32, proc: u32) -> Result<Open, Errno> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let io = |e: std::io::Error| Errno::from_io_error(&e).unwrap_or(Errno::PERM);
    let pid = Pid::from_raw(tid as i32).ok_or(Errno::SRCH)?;
    let alive = pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD))
        .or_else(|_| pidfd_open(pid, PidfdFlags::empty()))?;
    Ok(Open {
        mem: File::open(format!("/proc/{proc}/mem")).map_err(io)?,
        status: File::open(format!("/proc/{proc}/status")).map_err(io)?,
        alive,
    })
}

/// Whether the thread behind a pidfd has exited (its pidfd is readable).
fn exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).map_or(true, |n| n > 0)
}

/// The caller of one notification.
pub(crate) struct Caller<'a> {
    pub(crate) n: Notification,
    /// The caller's id in the mounted /proc.
    pub(crate) proc: u32,
    mem: &'a File,
    status: &'a File,
}

/// A path resolved to its parent directory and final name.
pub(crate) struct At {
    /// The parent directory, opened `O_PATH`.
    pub(crate) fd: OwnedFd,
    /// Its real path, read back from the descriptor.
    pub(crate) real: PathBuf,
    /// The final component as given (trailing slashes kept, so the call
    /// pid 1 makes fails or succeeds exactly as the caller's would).
    pub(crate) last: Vec<u8>,
    /// The final component without trailing slashes.
    pub(crate) name: String,
    /// `lstat` of the final component, `None` when missing.
    pub(crate) stat: Option<Stat>,
    /// The path as the caller spelled it (from the real path of the
    /// directory it started at), when that spelling goes through a link
    /// and names something that may be protected: `.vscode/tasks.json`
    /// through a `.vscode` link is protected under that name too.
    pub(crate) lexical: Option<PathBuf>,
}

impl At {
    /// The real path of the final component.
    pub(crate) fn path(&self) -> PathBuf {
        self.real.join(&self.name)
    }

    /// Open the final component `O_PATH`, following it when it is a link.
    pub(crate) fn follow(&self) -> Result<Object, Errno> {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        Object::from_fd(rustix::fs::openat(
            &self.fd,
            self.last.as_slice(),
            flags,
            Mode::empty(),
        )?)
    }

    /// Open the final component itself `O_PATH` (a link is not followed).
    pub(crate) fn itself(&self) -> Result<Object, Errno> {
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Object::from_fd(rustix::fs::openat(
            &self.fd,
            self.last.as_slice(),
            flags,
            Mode::empty(),
        )?)
    }
}

/// An existing object, opened `O_PATH`.
pub(crate) struct Object {
    pub(crate) fd: OwnedFd,
    /// Its real path; `None` for objects without one (pipes, sockets,
    /// anonymous or deleted files), which name nothing the guard protects.
    pub(crate) real: Option<PathBuf>,
    pub(crate) stat: Stat,
}

impl Object {
    fn from_fd(fd: OwnedFd) -> Result<Object, Errno> {
        let stat = stat_of(&rustix::fs::fstat(&fd)?);
        let real = real_path(fd.as_fd()).ok().filter(|p| {
            let b = p.as_os_str().as_bytes();
            !b.ends_with(b" (deleted)")
        });
        Ok(Object { fd, real, stat })
    }

    /// A path that reaches the object from pid 1 (`/proc/self/fd/N`).
    pub(crate) fn magic(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

impl Caller<'_> {
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
            let mut buf = [0u8; PAGE as usize];
            let got = self
                .mem
                .read_at(&mut buf[..chunk], at)
                .map_err(|_| Errno::FAULT)?;
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

    /// `len` bytes at `addr` in the caller's memory.
    pub(crate) fn bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        if len == 0 {
            return Ok(buf);
        }
        if addr == 0 {
            return Err(Errno::FAULT);
        }
        match self.mem.read_at(&mut buf, addr) {
            Ok(n) if n == len => Ok(buf),
            _ => Err(Errno::FAULT),
        }
    }

    /// The caller's umask and thread-group id (from /proc/<tid>/status).
    pub(crate) fn status(&self) -> Result<(u32, u32), Errno> {
        // One read into a fixed buffer: the fields wanted are in the first
        // lines.
        let mut buf = [0u8; 1024];
        let n = self.status.read_at(&mut buf, 0).map_err(|_| Errno::SRCH)?;
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
    /// pid 1 can open.
    fn fd_path(&self, dirfd: i32) -> String {
        if dirfd == AT_FDCWD {
            format!("/proc/{}/cwd", self.proc)
        } else {
            format!("/proc/{}/fd/{dirfd}", self.proc)
        }
    }

    /// The object behind the caller's descriptor `fd`.
    pub(crate) fn fd_object(&self, fd: i32) -> Result<Object, Errno> {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let opened = rustix::fs::open(self.fd_path(fd), flags, Mode::empty())
            .map_err(|e| if e == Errno::NOENT { Errno::BADF } else { e })?;
        let object = Object::from_fd(opened)?;
        self.not_another_process(object.real.as_deref())?;
        Ok(object)
    }

    /// Read the path at `addr` (relative to `dirfd`) and resolve its parent.
    pub(crate) fn at(&self, dirfd: u64, addr: u64) -> Result<At, Errno> {
        let path = self.string(addr)?;
        self.at_path(dirfd as i32, &path)
    }

    /// Resolve the parent of `path` (relative to `dirfd`), following
    /// symlinks in the directory part as the kernel would for the caller,
    /// and `lstat` the final component.
    pub(crate) fn at_path(&self, dirfd: i32, path: &[u8]) -> Result<At, Errno> {
        if path.is_empty() {
            return Err(Errno::NOENT);
        }
        let path = self.rewrite(path);
        let (dir, last) = split(&path);
        let mut full: Vec<u8> = match dir {
            Some(d) if d.starts_with(b"/") => d.to_vec(),
            Some(d) => [self.fd_path(dirfd).as_bytes(), b"/", d].concat(),
            None if path.starts_with(b"/") => b"/".to_vec(),
            None => self.fd_path(dirfd).into_bytes(),
        };
        full.push(0);
        let full = std::ffi::CStr::from_bytes_with_nul(&full).map_err(|_| Errno::INVAL)?;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(full, flags, Mode::empty()).map_err(|e| {
            // No such descriptor in the caller: what the kernel says.
            let bad_fd = dirfd != AT_FDCWD && !path.starts_with(b"/");
            if e == Errno::NOENT && bad_fd && !self.has_fd(dirfd) {
                Errno::BADF
            } else {
                e
            }
        })?;
        let real = real_path(fd.as_fd())?;
        self.not_another_process(Some(&real))?;
        let name = String::from_utf8_lossy(trim_slashes(last)).into_owned();
        let stat = match rustix::fs::statat(&fd, trim_slashes(last), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(stat_of(&st)),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(e),
        };
        let lexical = match dir {
            Some(d) if mentions_protected(d) => self.spelled(dirfd, &path, d, &real)?,
            _ => None,
        };
        Ok(At {
            fd,
            real,
            last: last.to_vec(),
            name,
            stat,
            lexical,
        })
    }

    /// The directory part `dir` of `path` spelled from the real path of its
    /// base, when that differs from the directory's real path `real`.
    fn spelled(
        &self,
        dirfd: i32,
        path: &[u8],
        dir: &[u8],
        real: &std::path::Path,
    ) -> Result<Option<PathBuf>, Errno> {
        let base = if path.starts_with(b"/") {
            PathBuf::from("/")
        } else {
            let link = rustix::fs::readlink(self.fd_path(dirfd), Vec::new())?;
            PathBuf::from(std::ffi::OsStr::from_bytes(link.as_bytes()))
        };
        let mut out = PathBuf::from("/");
        for c in base.join(std::ffi::OsStr::from_bytes(dir)).components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::Normal(n) => out.push(n),
                _ => {}
            }
        }
        let (_, last) = split(path);
        let name = std::ffi::OsStr::from_bytes(trim_slashes(last));
        Ok((out != real).then(|| out.join(name)))
    }

    /// Resolve the object a call acts on: the path's final component,
    /// followed when `follow` and it is a link.
    pub(crate) fn object(&self, at: &At, follow: bool) -> Result<Object, Errno> {
        let linked = at.stat.is_some_and(|s| s.kind == FileKind::Symlink);
        let object = if follow && linked {
            at.follow()?
        } else {
            at.itself()?
        };
        self.not_another_process(object.real.as_deref())?;
        Ok(object)
    }

    fn has_fd(&self, fd: i32) -> bool {
        rustix::fs::lstat(format!("/proc/{}/fd/{fd}", self.proc)).is_ok()
    }

    /// pid 1 acts with its own /proc entries at hand: a path into another
    /// process's `/proc/<pid>` (pid 1's own above all: its descriptors, its
    /// memory) is refused, so pid 1 never does for the command what the
    /// command could not do itself.
    fn not_another_process(&self, real: Option<&std::path::Path>) -> Result<(), Errno> {
        let Some(rest) = real.and_then(|r| r.strip_prefix("/proc").ok()) else {
            return Ok(());
        };
        let Some(first) = rest.iter().next().and_then(|c| c.to_str()) else {
            return Ok(());
        };
        let Ok(id) = first.parse::<u32>() else {
            return Ok(());
        };
        let (_, tgid) = self.status()?;
        if id == self.proc || id == tgid || (self.proc == self.n.tid && id == self.n.tid) {
            Ok(())
        } else {
            Err(Errno::ACCESS)
        }
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
fn proc_matches_our_pid_namespace() -> bool {
    let me = nix::unistd::getpid().as_raw().to_string();
    rustix::fs::readlink("/proc/self", Vec::new()).is_ok_and(|l| l.as_bytes() == me.as_bytes())
}

/// The caller's id in the mounted /proc, through a pidfd: its fdinfo shows
/// the pid as /proc's pid namespace numbers it.
fn proc_id(tid: u32) -> Result<u32, Errno> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let pid = Pid::from_raw(tid as i32).ok_or(Errno::SRCH)?;
    let fd = pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD))?;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .map_err(|_| Errno::ACCESS)?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Errno::ACCESS)
}

/// The real path of an open descriptor (`readlink /proc/self/fd/N`); an
/// error for objects outside pid 1's root or without a path.
fn real_path(fd: BorrowedFd<'_>) -> Result<PathBuf, Errno> {
    let link = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())?;
    let bytes = link.into_bytes();
    if !bytes.starts_with(b"/") {
        return Err(Errno::ACCESS);
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// Whether some component of a directory part may take part in a
/// protected path (only then is its spelling worth a look).
fn mentions_protected(dir: &[u8]) -> bool {
    dir.split(|b| *b == b'/')
        .filter_map(|c| std::str::from_utf8(c).ok())
        .any(oajail_policy::compile::guard::names::may_matter)
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
