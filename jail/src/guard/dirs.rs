//! Directories as pid 1 reaches them: the cache of directories resolved
//! before (by the absolute path they were spelled as), and the real path of
//! an open descriptor read back through pid 1's `/proc/self/fd`.
//!
//! What the cache keeps, and why that stays true between calls, is on
//! [`Dirs`]; everything is forgotten after [`DIRS_LIFETIME`] for changes
//! made outside the jail.

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How many resolved directories are kept, and for how long (a directory
/// renamed outside the jail is seen again after that; the jail's own
/// changes go through pid 1 and forget what they touch at once).
const DIRS: usize = 512;
const DIRS_LIFETIME: Duration = Duration::from_secs(1);

/// Directories resolved before, by their real path, each with an `O_PATH`
/// descriptor. Only a directory whose spelling was its real path is kept
/// (no link on the way): then what can make an entry wrong is a change at
/// that path or above it, and every such change that pid 1 does not make
/// itself (a removal the filter lets through) leaves the name missing until
/// something is made there again, which pid 1 does and reports
/// ([`Dirs::forget_under`]). A directory removed and not made again is
/// harmless to keep: nothing can be made in a deleted directory.
///
/// Each thread's working directory is kept too (by thread id, in pid 1's
/// view), so a relative path costs no `readlink` of `/proc/<tid>/cwd`. It
/// changes only by `chdir` and `fchdir`, which the filter reports: one
/// forgets every kept working directory (threads and processes may share
/// one) and none is kept again until the thread that called it is known to
/// be past it — its next call reaches pid 1, or `/proc/<tid>/syscall` shows
/// it elsewhere or gone ([`Dirs::unsettle`]). A working directory moved or
/// made again by the jail is forgotten with the directories below a path.
#[derive(Default)]
pub(crate) struct Dirs {
    map: BTreeMap<Vec<u8>, Rc<OwnedFd>>,
    since: Option<Instant>,
    cwds: HashMap<u32, Rc<[u8]>>,
    unsettled: HashSet<u32>,
}

impl Dirs {
    /// The directory at this real path, if kept.
    pub(crate) fn get(&self, real: &[u8]) -> Option<Rc<OwnedFd>> {
        self.map.get(real).cloned()
    }

    /// Keep a directory resolved from a spelling that was its real path.
    pub(crate) fn keep(&mut self, real: &Path, fd: Rc<OwnedFd>) {
        self.since.get_or_insert_with(Instant::now);
        self.map.insert(real.as_os_str().as_bytes().to_vec(), fd);
    }

    /// Forget everything.
    pub(crate) fn forget(&mut self) {
        self.map.clear();
        self.cwds.clear();
        self.since = None;
    }

    /// The kept working directory of thread `tid`.
    pub(crate) fn cwd(&self, tid: u32) -> Option<Rc<[u8]>> {
        self.unsettled
            .is_empty()
            .then(|| self.cwds.get(&tid).cloned())
            .flatten()
    }

    /// Keep thread `tid`'s working directory, read just now.
    pub(crate) fn keep_cwd(&mut self, tid: u32, path: &[u8]) {
        if self.unsettled.is_empty() {
            self.since.get_or_insert_with(Instant::now);
            self.cwds.insert(tid, Rc::from(path));
        }
    }

    /// Thread `tid` is (or was) a new thread under this id: nothing kept
    /// for the id before is its own.
    pub(crate) fn drop_cwd(&mut self, tid: u32) {
        self.cwds.remove(&tid);
    }

    /// Thread `tid` is changing its working directory (and maybe others'):
    /// forget them all, keep none until it is past the call.
    pub(crate) fn unsettle(&mut self, tid: u32) {
        self.cwds.clear();
        self.unsettled.insert(tid);
    }

    /// Thread `tid` is past any `chdir` it made.
    pub(crate) fn settle(&mut self, tid: u32) {
        self.unsettled.remove(&tid);
    }

    /// Threads whose `chdir` may still be under way.
    pub(crate) fn unsettled(&self) -> Vec<u32> {
        self.unsettled.iter().copied().collect()
    }

    /// Forget `path` and every directory below it: something was made,
    /// moved or removed there.
    pub(crate) fn forget_under(&mut self, path: &Path) {
        let key = path.as_os_str().as_bytes();
        self.map.remove(key);
        let below = |c: &[u8]| c == key || (c.starts_with(key) && c.get(key.len()) == Some(&b'/'));
        self.cwds.retain(|_, c| !below(c));
        let mut lo = key.to_vec();
        if lo.last() != Some(&b'/') {
            lo.push(b'/');
        }
        let mut hi = lo.clone();
        if let Some(last) = hi.last_mut() {
            // `0` follows `/`: [path/, path0) is exactly what lies below.
            *last = b'0';
        }
        let below: Vec<Vec<u8>> = self.map.range(lo..hi).map(|(k, _)| k.clone()).collect();
        for k in below {
            self.map.remove(&k);
        }
    }

    /// Forget everything when the entries are too old or too many.
    pub(crate) fn expire(&mut self) {
        if self.since.is_some_and(|t| t.elapsed() > DIRS_LIFETIME) || self.map.len() > DIRS {
            self.forget();
        }
    }
}

/// pid 1's `/proc/self/fd`, opened on first use (after init closed every
/// descriptor it does not keep).
pub(crate) fn self_fds() -> Result<BorrowedFd<'static>, Errno> {
    static DIR: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
    if let Some(fd) = DIR.get() {
        return Ok(fd.as_fd());
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open("/proc/self/fd", flags, Mode::empty())?;
    Ok(DIR.get_or_init(|| fd).as_fd())
}

/// The real path of an open descriptor (`readlink /proc/self/fd/N`); an
/// error for objects outside pid 1's root or without a path.
pub(crate) fn real_path(fd: BorrowedFd<'_>) -> Result<PathBuf, Errno> {
    let link = rustix::fs::readlinkat(self_fds()?, fd.as_raw_fd().to_string(), Vec::new())?;
    let bytes = link.into_bytes();
    if !bytes.starts_with(b"/") {
        return Err(Errno::ACCESS);
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}
