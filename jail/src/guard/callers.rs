//! The callers of notifications: each thread's `/proc/<tid>` directory and
//! memory kept open between calls (opening them is most of what a
//! notification would cost), each process's umask, and reading a blocked
//! caller's arguments from its memory ([`Caller`]).
//!
//! An entry is used only while a pidfd of the thread says it has not
//! exited, so a recycled thread id never reads another task's memory.

use super::dirs::Dirs;
use crate::sys::notify::Notification;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// How many callers' files stay open.
const CACHE: usize = 128;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that is not a leader.
const PIDFD_THREAD: u32 = 0o200;
/// How long a thread's open files are used before its pidfd is asked
/// again whether it is still the same thread. A thread id is handed out
/// again only after the kernel went through every other one (at least
/// 32,768 new tasks), which takes far longer.
const RECHECK: Duration = Duration::from_millis(50);
/// Longest path the kernel accepts, terminating NUL included.
const PATH_MAX: usize = 4096;
const PAGE: u64 = 4096;

/// The caller of one notification.
pub(crate) struct Caller<'a> {
    pub(crate) n: Notification,
    /// The caller's id in the mounted /proc.
    pub(crate) proc: u32,
    /// Its process.
    pub(super) tgid: u32,
    /// Its process's umask.
    pub(crate) umask: u32,
    /// Its `/proc/<tid>` directory.
    pub(super) dir: BorrowedFd<'a>,
    /// Reopened when a read fails: after an `execve` the open file still
    /// refers to the address space the thread had before.
    pub(super) mem: RefCell<&'a mut File>,
    pub(super) dirs: &'a RefCell<Dirs>,
    /// Whether its working directory may be kept (`dirs.rs`).
    pub(super) keeps_cwd: bool,
}

impl Caller<'_> {
    /// Read at `addr`, reopening the caller's memory once if the open file
    /// no longer reaches it (the thread executed a new program).
    fn read_mem(&self, buf: &mut [u8], addr: u64) -> Result<usize, Errno> {
        let mut mem = self.mem.borrow_mut();
        match mem.read_at(buf, addr) {
            Ok(n) if n > 0 => return Ok(n),
            _ => {}
        }
        let io = |e: std::io::Error| Errno::from_io_error(&e).unwrap_or(Errno::PERM);
        **mem = open_in(self.dir, "mem").map_err(io)?;
        match mem.read_at(buf, addr) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Errno::FAULT),
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
            let mut buf = [0u8; PAGE as usize];
            let got = self.read_mem(&mut buf[..chunk], at)?;
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
        match self.read_mem(&mut buf, addr) {
            Ok(n) if n == len => Ok(buf),
            _ => Err(Errno::FAULT),
        }
    }

    /// The caller's `/proc/<tid>` directory.
    pub(crate) fn proc_dir(&self) -> BorrowedFd<'_> {
        self.dir
    }
}

/// The open /proc files of one thread.
struct Open {
    /// `/proc/<tid>`: the thread's files are opened relative to it, which
    /// spares a walk from `/proc` each time.
    dir: OwnedFd,
    mem: File,
    /// Its thread group (process).
    tgid: u32,
    /// Readable once the thread has exited.
    alive: OwnedFd,
    checked: Instant,
}

/// Callers seen so far.
pub(crate) struct Callers {
    open: HashMap<u32, Open>,
    /// Each process's umask: read from `/proc/<tid>/status` when a thread
    /// is first seen (that file costs tens of microseconds to read), then
    /// followed through the `umask` calls the filter reports.
    umasks: HashMap<u32, u32>,
    dirs: RefCell<Dirs>,
    /// /proc numbers processes differently from the notifications (the
    /// mount layer is off in a test build: /proc is the host's); working
    /// directories are then not kept.
    translate: bool,
    /// When the threads in a `chdir` were last looked at.
    settle_check: Option<Instant>,
}

impl Callers {
    pub(crate) fn new() -> Self {
        Callers {
            open: HashMap::new(),
            umasks: HashMap::new(),
            dirs: RefCell::default(),
            translate: !proc_matches_our_pid_namespace(),
            settle_check: None,
        }
    }

    /// The caller of `n`, with its memory open.
    pub(crate) fn get(&mut self, n: Notification) -> Result<Caller<'_>, Errno> {
        self.settle_quiet();
        let proc = if self.translate {
            proc_id(n.tid)?
        } else {
            n.tid
        };
        let fresh = match self.open.get_mut(&n.tid) {
            Some(o) if o.checked.elapsed() < RECHECK => false,
            Some(o) => {
                o.checked = Instant::now();
                exited(o.alive.as_fd())
            }
            None => true,
        };
        {
            let mut dirs = self.dirs.borrow_mut();
            dirs.expire();
            // A call from this thread: any chdir it made has returned.
            dirs.settle(n.tid);
        }
        if fresh {
            self.dirs.borrow_mut().drop_cwd(n.tid);
            self.open.remove(&n.tid);
            let (opened, umask) = open_proc(n.tid, proc)?;
            if self.open.len() >= CACHE {
                self.open.clear();
                self.umasks.clear();
            }
            self.umasks.insert(opened.tgid, umask);
            self.open.insert(n.tid, opened);
        }
        let o = self.open.get_mut(&n.tid).ok_or(Errno::SRCH)?;
        let umask = self.umasks.get(&o.tgid).copied().unwrap_or(0o022);
        Ok(Caller {
            n,
            proc,
            tgid: o.tgid,
            umask,
            dir: o.dir.as_fd(),
            mem: RefCell::new(&mut o.mem),
            dirs: &self.dirs,
            keeps_cwd: !self.translate,
        })
    }

    /// The caller changes its working directory (the call is then let
    /// through). While it may still be under way, no working directory is
    /// kept; threads that made one and went quiet are looked at, at most
    /// every [`RECHECK`], through `/proc/<tid>/syscall`.
    pub(crate) fn chdir(&mut self, n: Notification) {
        if self.translate || self.get(n).is_err() {
            // Not kept at all, or the caller is gone: nothing to wait for.
            self.dirs.borrow_mut().unsettle(n.tid);
            self.dirs.borrow_mut().settle(n.tid);
            return;
        }
        self.dirs.borrow_mut().unsettle(n.tid);
        self.settle_check = Some(Instant::now());
    }

    /// Settle the threads whose `chdir` has returned, though they made no
    /// guarded call since: gone, or blocked in another call.
    fn settle_quiet(&mut self) {
        let due = self.settle_check.is_some_and(|t| t.elapsed() >= RECHECK);
        if !due {
            return;
        }
        let waiting = self.dirs.borrow().unsettled();
        self.settle_check = (!waiting.is_empty()).then(Instant::now);
        for tid in waiting {
            let past = match self.open.get(&tid) {
                Some(o) => past_chdir(o.dir.as_fd()),
                None => true,
            };
            if past {
                self.dirs.borrow_mut().settle(tid);
            }
        }
    }

    /// The caller's process changes its umask (the call is then let through).
    pub(crate) fn set_umask(&mut self, n: Notification, mask: u64) -> Result<(), Errno> {
        let tgid = self.get(n)?.tgid;
        self.umasks.insert(tgid, mask as u32 & 0o777);
        Ok(())
    }
}

/// Open a newly seen thread's memory and read its process and umask.
fn open_proc(tid: u32, proc: u32) -> Result<(Open, u32), Errno> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let io = |e: std::io::Error| Errno::from_io_error(&e).unwrap_or(Errno::PERM);
    let pid = Pid::from_raw(tid as i32).ok_or(Errno::SRCH)?;
    let alive = pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD))
        .or_else(|_| pidfd_open(pid, PidfdFlags::empty()))?;
    let dir = rustix::fs::open(
        format!("/proc/{proc}"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let (umask, tgid) = status(dir.as_fd())?;
    let open = Open {
        mem: open_in(dir.as_fd(), "mem").map_err(io)?,
        dir,
        tgid,
        alive,
        checked: Instant::now(),
    };
    Ok((open, umask))
}

/// Open a file of a `/proc/<tid>` directory for reading.
pub(super) fn open_in(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::empty(),
    )?))
}

/// A thread's umask and thread-group id, from `/proc/<tid>/status`.
fn status(dir: BorrowedFd<'_>) -> Result<(u32, u32), Errno> {
    // One read into a fixed buffer: the fields wanted are in the first lines.
    let mut buf = [0u8; 1024];
    let n = open_in(dir, "status")
        .and_then(|f| f.read_at(&mut buf, 0))
        .map_err(|_| Errno::SRCH)?;
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

/// Whether a thread is past a `chdir`: `/proc/<tid>/syscall` names another
/// call (or `running`, or none), or cannot be read (the thread is gone).
fn past_chdir(dir: BorrowedFd<'_>) -> bool {
    let mut buf = [0u8; 32];
    let Ok(n) = open_in(dir, "syscall").and_then(|f| f.read_at(&mut buf, 0)) else {
        return true;
    };
    let first = buf[..n].split(|b| *b == b' ' || *b == b'\n').next();
    let nr = first
        .and_then(|w| std::str::from_utf8(w).ok())
        .and_then(|w| w.parse::<i64>().ok());
    !matches!(nr, Some(libc::SYS_chdir | libc::SYS_fchdir))
}

/// Whether the thread behind a pidfd has exited (its pidfd is readable).
fn exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).map_or(true, |n| n > 0)
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
