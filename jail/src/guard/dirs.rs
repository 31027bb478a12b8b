//! Directories as pid 1 reaches them: the cache of directories resolved
//! before (by the absolute path they were spelled as), and the real path of
//! an open descriptor read back through pid 1's `/proc/self/fd`.
//!
//! The cache is emptied by every call that could change what a spelled
//! path resolves to (a rename, a removed directory or link: they all pass
//! through pid 1), and after [`DIRS_LIFETIME`] for changes made outside
//! the jail.

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How many resolved directories are kept, and for how long (a directory
/// renamed outside the jail is seen again after that; the jail's own
/// renames go through pid 1 and empty the cache at once).
const DIRS: usize = 512;
const DIRS_LIFETIME: Duration = Duration::from_secs(1);

/// Directories resolved before, by the absolute path they were named by
/// (symlinks not yet followed): its real path and an `O_PATH` descriptor.
#[derive(Default)]
pub(crate) struct Dirs {
    pub(super) map: HashMap<Vec<u8>, (Rc<OwnedFd>, PathBuf)>,
    pub(super) since: Option<Instant>,
}

impl Dirs {
    /// Forget everything: a rename or removal may have changed what a
    /// spelled path resolves to.
    pub(crate) fn forget(&mut self) {
        self.map.clear();
        self.since = None;
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
