//! Resolving a blocked caller's paths the way the kernel would have for
//! the caller: to the parent directory (opened `O_PATH`, with its real
//! path) and the final name ([`At`]), or to the object itself ([`Object`]).
//!
//! Paths are resolved in pid 1's own root, which is the caller's: the
//! command cannot `chroot` or make a mount namespace (no capability, and
//! seccomp refuses `unshare` and the mount API). A relative path starts at
//! the caller's cwd or descriptor through its `/proc` magic link.
//! Nothing here needs to check that the notification is still valid: pid 1
//! decides on the object it will act on itself, so a caller that died (and
//! whose thread id was reused) can only make pid 1 do something the policy
//! allows anyway.

use super::callers::Caller;
use super::dirs::real_path;
use super::probe::stat_of;
use oajail_policy::guard::{FileKind, Stat};
use oajail_policy::paths::lexical_join;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// `AT_FDCWD` as the kernel sees the 32-bit dirfd argument.
pub(crate) const AT_FDCWD: i32 = -100;
/// The most links followed for one path (the kernel's limit).
const MAX_LINKS: usize = 40;
/// A path resolved to its parent directory and final name.
pub(crate) struct At {
    /// The parent directory, opened `O_PATH`.
    pub(crate) fd: Rc<OwnedFd>,
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

    /// `lstat` the final component now (for an `At` resolved without).
    pub(crate) fn look(&mut self) -> Result<(), Errno> {
        self.stat = match rustix::fs::statat(
            &*self.fd,
            trim_slashes(&self.last),
            AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Some(stat_of(&st)),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(e),
        };
        Ok(())
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

    /// The same, as a name in [`self_fds`](super::dirs::self_fds) (one
    /// lookup instead of four).
    pub(crate) fn magic_name(&self) -> String {
        self.fd.as_raw_fd().to_string()
    }
}

impl Caller<'_> {
    /// The caller's descriptor `fd` (or its cwd for `AT_FDCWD`) as a path
    /// pid 1 can open.
    fn fd_path(&self, dirfd: i32) -> String {
        if dirfd == AT_FDCWD {
            "cwd".to_owned()
        } else {
            format!("fd/{dirfd}")
        }
    }

    /// The object behind the caller's descriptor `fd`.
    pub(crate) fn fd_object(&self, fd: i32) -> Result<Object, Errno> {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let opened = rustix::fs::openat(self.dir, self.fd_path(fd), flags, Mode::empty())
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

    /// [`Caller::at`] without the `lstat` of the final component, for a
    /// call that fails by itself when it exists (`O_CREAT | O_EXCL`).
    pub(crate) fn at_new(&self, dirfd: u64, addr: u64) -> Result<At, Errno> {
        let path = self.string(addr)?;
        self.resolve(dirfd as i32, &path, false)
    }

    /// Resolve the parent of `path` (relative to `dirfd`), following
    /// symlinks in the directory part as the kernel would for the caller,
    /// and `lstat` the final component.
    pub(crate) fn at_path(&self, dirfd: i32, path: &[u8]) -> Result<At, Errno> {
        self.resolve(dirfd, path, true)
    }

    fn resolve(&self, dirfd: i32, path: &[u8], stat: bool) -> Result<At, Errno> {
        if path.is_empty() {
            return Err(Errno::NOENT);
        }
        let path = self.rewrite(path);
        let (dir, last) = split(&path);
        let (fd, real, spelled) = self.parent(dirfd, &path, dir)?;
        self.not_another_process(Some(&real))?;
        let name = String::from_utf8_lossy(trim_slashes(last)).into_owned();
        let stat = match stat {
            false => None,
            true => match rustix::fs::statat(&*fd, trim_slashes(last), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => Some(stat_of(&st)),
                Err(Errno::NOENT) => None,
                Err(e) => return Err(e),
            },
        };
        let lexical = spelled
            .filter(|s| *s != real && dir.is_some_and(mentions_protected))
            .map(|s| s.join(&name));
        Ok(At {
            fd,
            real,
            last: last.to_vec(),
            name,
            stat,
            lexical,
        })
    }

    /// The directory a path's final component is in: its descriptor, its
    /// real path, and the absolute path it was spelled as (when known).
    /// A directory part without `..` is spelled from the real path of its
    /// base and looked up in the cache of resolved directories; one with
    /// `..` is resolved by the kernel from the caller's base, as it would
    /// be for the caller (`..` after a link is not lexical).
    fn parent(
        &self,
        dirfd: i32,
        path: &[u8],
        dir: Option<&[u8]>,
    ) -> Result<(Rc<OwnedFd>, PathBuf, Option<PathBuf>), Errno> {
        let dotdot = dir.is_some_and(|d| d.split(|b| *b == b'/').any(|c| c == b".."));
        let spelled = if dotdot {
            None
        } else if path.starts_with(b"/") {
            Some(lexical(b"/", dir.unwrap_or(b"/")))
        } else {
            self.base(dirfd)?
                .map(|base| lexical(&base, dir.unwrap_or(b".")))
        };
        // /proc entries belong to processes that come and go: never kept.
        let key = spelled
            .as_ref()
            .map(|s| s.as_os_str().as_bytes())
            .filter(|k| !k.starts_with(b"/proc/"));
        if let Some(k) = key
            && let Some(fd) = self.dirs.borrow().get(k)
        {
            let real = spelled.clone().unwrap_or_default();
            return Ok((fd, real, spelled));
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match &spelled {
            Some(s) => rustix::fs::open(s.as_path(), flags, Mode::empty())?,
            None => {
                let full = match dir {
                    Some(d) if d.starts_with(b"/") => d.to_vec(),
                    Some(d) => [self.fd_path(dirfd).as_bytes(), b"/", d].concat(),
                    None => self.fd_path(dirfd).into_bytes(),
                };
                rustix::fs::openat(self.dir, full.as_slice(), flags, Mode::empty())?
            }
        };
        let fd = Rc::new(fd);
        let real = real_path(fd.as_fd())?;
        if key.is_some() && spelled.as_ref() == Some(&real) {
            self.dirs.borrow_mut().keep(&real, fd.clone());
        }
        Ok((fd, real, spelled))
    }

    /// The real path of the caller's base directory (its cwd or `dirfd`),
    /// `None` when it has no usable path (deleted, or outside our root).
    /// The cwd is kept between calls (`dirs.rs`).
    fn base(&self, dirfd: i32) -> Result<Option<Rc<[u8]>>, Errno> {
        let cwd = dirfd == AT_FDCWD && self.keeps_cwd;
        if cwd && let Some(kept) = self.dirs.borrow().cwd(self.n.tid) {
            return Ok(Some(kept));
        }
        match rustix::fs::readlinkat(self.dir, self.fd_path(dirfd), Vec::new()) {
            Ok(link) => {
                let b = link.into_bytes();
                let usable = b.starts_with(b"/") && !b.ends_with(b" (deleted)");
                if usable && cwd {
                    self.dirs.borrow_mut().keep_cwd(self.n.tid, &b);
                }
                Ok(usable.then(|| Rc::from(b)))
            }
            // No such descriptor in the caller: what the kernel says.
            Err(Errno::NOENT) if dirfd != AT_FDCWD => Err(Errno::BADF),
            Err(e) => Err(e),
        }
    }

    /// Whether the path at `addr` (relative to `dirfd`), as spelled with
    /// `.` and `..` folded and no link followed, lies below one of `roots`.
    /// Only a report depends on it (`serve.rs`, removals), never a
    /// decision: a link on the way can make it wrong either way.
    pub(crate) fn spelled_within(
        &self,
        dirfd: u64,
        addr: u64,
        roots: &[PathBuf],
    ) -> Result<bool, Errno> {
        let path = self.rewrite(&self.string(addr)?);
        let full = if path.starts_with(b"/") {
            lexical(b"/", &path)
        } else {
            match self.base(dirfd as i32)? {
                Some(base) => lexical(&base, &path),
                None => return Ok(false),
            }
        };
        Ok(roots.iter().any(|r| full.starts_with(r)))
    }

    /// Forget the resolved directories at and below `path` (something was
    /// made, moved or removed there).
    pub(crate) fn forget_dirs(&self, path: &Path) {
        self.dirs.borrow_mut().forget_under(path);
    }

    /// Resolve the object a call acts on: the path's final component,
    /// followed when `follow` and it is a link.
    pub(crate) fn object(&self, at: &At, follow: bool) -> Result<Object, Errno> {
        let linked = at.stat.is_some_and(|s| s.kind == FileKind::Symlink);
        let object = if follow && linked {
            self.follow(at)?
        } else {
            at.itself()?
        };
        self.not_another_process(object.real.as_deref())?;
        Ok(object)
    }

    /// Follow a final link as the kernel would for the caller. The links
    /// are read and resolved here, one at a time, rather than by the kernel
    /// for pid 1: a link to `/proc/self/fd/N` (or `/dev/stdout`) names the
    /// caller's descriptor, not pid 1's, and every step's directory is
    /// checked like any other. Only a magic link in the caller's own
    /// `/proc/<pid>` is followed by the kernel (its target is no path).
    fn follow(&self, at: &At) -> Result<Object, Errno> {
        let mut hop: Option<At> = None;
        for _ in 0..MAX_LINKS {
            let cur = hop.as_ref().unwrap_or(at);
            match cur.stat {
                Some(s) if s.kind == FileKind::Symlink => {}
                Some(_) => return cur.itself(),
                None => return Err(Errno::NOENT),
            }
            if cur.real.starts_with("/proc") {
                return cur.follow();
            }
            let target = rustix::fs::readlinkat(&*cur.fd, cur.name.as_str(), Vec::new())?;
            let target = target.as_bytes();
            let next = if target.starts_with(b"/") {
                target.to_vec()
            } else {
                [cur.real.as_os_str().as_bytes(), b"/", target].concat()
            };
            hop = Some(self.at_path(AT_FDCWD, &next)?);
        }
        Err(Errno::LOOP)
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
        if id == self.proc || id == self.tgid || (self.proc == self.n.tid && id == self.n.tid) {
            Ok(())
        } else {
            Err(Errno::ACCESS)
        }
    }

    /// `/proc/self`, `/dev/fd`, `/dev/std*` name the caller, not pid 1: rewrite
    /// these prefixes to the caller's /proc directory.
    fn rewrite(&self, path: &[u8]) -> Vec<u8> {
        // Most paths name none of these: no formatting for them.
        if !(path.starts_with(b"/proc/") || path.starts_with(b"/dev/")) {
            return path.to_vec();
        }
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

/// `dir` (absolute, or relative to `base`) with `.` and `..` folded
/// lexically.
fn lexical(base: &[u8], dir: &[u8]) -> PathBuf {
    lexical_join(
        Path::new(OsStr::from_bytes(base)),
        Path::new(OsStr::from_bytes(dir)),
    )
}

/// Whether some component of a directory part may take part in a
/// protected path (only then is its spelling worth a look).
fn mentions_protected(dir: &[u8]) -> bool {
    dir.split(|b| *b == b'/')
        .filter_map(|c| std::str::from_utf8(c).ok())
        .any(oajail_policy::guard::names::may_matter)
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
