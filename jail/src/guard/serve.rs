//! pid 1's side of the guard: answer one notification by deciding and, when
//! allowed, performing the call itself, relative to the parent directory it
//! opened (so what was checked is what is created).
//!
//! pid 1 shares the command's uid, mount namespace and Landlock domain and
//! holds no capability, so a call it makes has exactly the command's
//! filesystem rights. It never answers `CONTINUE`.

use super::resolve::{Caller, Parent};
use crate::sys::notify::{Notification, answer, answer_fd};
use oajail_policy::compile::guard::{Creation, GuardPlan, Verdict, decide};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// How many denials are printed one by one before only counting.
const LOUD_DENIALS: u32 = 5;

/// A guarded call, decoded from its number and arguments.
#[derive(Debug, Clone, Copy)]
enum Call {
    Open {
        dir: u64,
        path: u64,
        flags: u64,
        mode: u64,
    },
    Mkdir {
        dir: u64,
        path: u64,
        mode: u64,
    },
    Mknod {
        dir: u64,
        path: u64,
        mode: u64,
        dev: u64,
    },
    Symlink {
        target: u64,
        dir: u64,
        path: u64,
    },
    Link {
        odir: u64,
        old: u64,
        ndir: u64,
        new: u64,
        flags: u64,
    },
    Rename {
        odir: u64,
        old: u64,
        ndir: u64,
        new: u64,
        flags: u64,
    },
}

const CWD: u64 = -100i64 as u64;

fn decode(nr: i64, a: [u64; 6]) -> Option<Call> {
    #[cfg(target_arch = "x86_64")]
    if let Some(call) = decode_legacy(nr, a) {
        return Some(call);
    }
    Some(match nr {
        libc::SYS_openat => open(a[0], a[1], a[2], a[3]),
        libc::SYS_mkdirat => mkdir(a[0], a[1], a[2]),
        libc::SYS_mknodat => mknod(a[0], a[1], a[2], a[3]),
        libc::SYS_symlinkat => symlink(a[0], a[1], a[2]),
        libc::SYS_linkat => link(a[0], a[1], a[2], a[3], a[4]),
        libc::SYS_renameat => rename(a[0], a[1], a[2], a[3], 0),
        libc::SYS_renameat2 => rename(a[0], a[1], a[2], a[3], a[4]),
        _ => return None,
    })
}

/// The x86_64 calls without a directory argument: relative to the cwd.
#[cfg(target_arch = "x86_64")]
fn decode_legacy(nr: i64, a: [u64; 6]) -> Option<Call> {
    let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
    Some(match nr {
        libc::SYS_open => open(CWD, a[0], a[1], a[2]),
        libc::SYS_creat => open(CWD, a[0], creat, a[1]),
        libc::SYS_mkdir => mkdir(CWD, a[0], a[1]),
        libc::SYS_mknod => mknod(CWD, a[0], a[1], a[2]),
        libc::SYS_symlink => symlink(a[0], CWD, a[1]),
        libc::SYS_link => link(CWD, a[0], CWD, a[1], 0),
        libc::SYS_rename => rename(CWD, a[0], CWD, a[1], 0),
        _ => return None,
    })
}

fn open(dir: u64, path: u64, flags: u64, mode: u64) -> Call {
    Call::Open {
        dir,
        path,
        flags,
        mode,
    }
}

fn mkdir(dir: u64, path: u64, mode: u64) -> Call {
    Call::Mkdir { dir, path, mode }
}

fn mknod(dir: u64, path: u64, mode: u64, dev: u64) -> Call {
    Call::Mknod {
        dir,
        path,
        mode,
        dev,
    }
}

fn symlink(target: u64, dir: u64, path: u64) -> Call {
    Call::Symlink { target, dir, path }
}

fn link(odir: u64, old: u64, ndir: u64, new: u64, flags: u64) -> Call {
    Call::Link {
        odir,
        old,
        ndir,
        new,
        flags,
    }
}

fn rename(odir: u64, old: u64, ndir: u64, new: u64, flags: u64) -> Call {
    Call::Rename {
        odir,
        old,
        ndir,
        new,
        flags,
    }
}

/// What the caller gets back.
enum Answer {
    Value(i64),
    Fd(OwnedFd, bool),
}

/// pid 1's guard state: the listener, the plan and the denial count.
pub(crate) struct Server {
    pub(crate) listener: OwnedFd,
    plan: GuardPlan,
    denied: std::cell::Cell<u32>,
    /// /proc numbers processes differently from the notifications.
    translate: bool,
}

impl Server {
    pub(crate) fn new(listener: OwnedFd, plan: GuardPlan) -> Self {
        crate::sys::notify::sync_wake_up(listener.as_fd());
        Server {
            listener,
            plan,
            denied: std::cell::Cell::new(0),
            translate: !super::resolve::proc_matches_our_pid_namespace(),
        }
    }

    /// Receive and answer one notification. An error means the listener
    /// itself failed (every waiting call then fails; the caller drops it).
    pub(crate) fn serve_one(&self) -> std::io::Result<()> {
        let n = match crate::sys::notify::receive(self.listener.as_fd()) {
            Ok(n) => n,
            // The caller was killed between poll and receive.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let result = self.handle(n);
        let listener = self.listener.as_fd();
        match result {
            Ok(Answer::Value(v)) => answer(listener, n.id, Ok(v)),
            Ok(Answer::Fd(fd, cloexec)) => answer_fd(listener, n.id, fd.as_fd(), cloexec),
            Err(e) => answer(listener, n.id, Err(e.raw_os_error())),
        }
    }

    /// At exit: the total, when more denials happened than were printed.
    pub(crate) fn report_total(&self) {
        let denied = self.denied.get();
        if denied > LOUD_DENIALS {
            eprintln!("oajail: guard: {denied} creations denied in total");
        }
    }

    fn handle(&self, n: Notification) -> Result<Answer, Errno> {
        // Not a guarded call (the filter and this table disagree): refuse.
        let call = decode(n.nr, n.args).ok_or(Errno::NOSYS)?;
        let caller = Caller::open(self.listener.as_fd(), n, self.translate)?;
        match call {
            Call::Open {
                dir,
                path,
                flags,
                mode,
            } => self.open(&caller, dir, path, flags, mode),
            Call::Mkdir { dir, path, mode } => self.mkdir(&caller, dir, path, mode),
            Call::Mknod {
                dir,
                path,
                mode,
                dev,
            } => self.mknod(&caller, (dir, path), mode, dev),
            Call::Symlink { target, dir, path } => self.symlink(&caller, target, dir, path),
            Call::Link {
                odir,
                old,
                ndir,
                new,
                flags,
            } => self.link(&caller, (odir, old), (ndir, new), flags),
            Call::Rename {
                odir,
                old,
                ndir,
                new,
                flags,
            } => self.rename(&caller, (odir, old), (ndir, new), flags),
        }
    }

    fn mkdir(&self, caller: &Caller<'_>, dir: u64, path: u64, mode: u64) -> Result<Answer, Errno> {
        let p = self.checked(caller, dir, path, Creation::Dir)?;
        with_umask(caller, || {
            rustix::fs::mkdirat(&p.fd, p.last.as_slice(), perm(mode))
        })?;
        Ok(Answer::Value(0))
    }

    fn mknod(
        &self,
        caller: &Caller<'_>,
        at: (u64, u64),
        mode: u64,
        dev: u64,
    ) -> Result<Answer, Errno> {
        let p = self.checked(caller, at.0, at.1, Creation::File)?;
        // A type of 0 means a regular file, as for the kernel.
        let kind = match FileType::from_raw_mode(mode as u32 & libc::S_IFMT) {
            FileType::Unknown => FileType::RegularFile,
            k => k,
        };
        with_umask(caller, || {
            rustix::fs::mknodat(&p.fd, p.last.as_slice(), kind, perm(mode), dev)
        })?;
        Ok(Answer::Value(0))
    }

    fn symlink(
        &self,
        caller: &Caller<'_>,
        target: u64,
        dir: u64,
        path: u64,
    ) -> Result<Answer, Errno> {
        let target = caller.string(target)?;
        let p = self.checked(caller, dir, path, Creation::Symlink)?;
        rustix::fs::symlinkat(target.as_slice(), &p.fd, p.last.as_slice())?;
        Ok(Answer::Value(0))
    }

    /// Resolve the parent of the path argument and decide on its final name.
    fn checked(
        &self,
        caller: &Caller<'_>,
        dir: u64,
        path: u64,
        what: Creation,
    ) -> Result<Parent, Errno> {
        let p = caller.parent(dir, path)?;
        self.verdict(&p, what)?;
        Ok(p)
    }

    fn verdict(&self, p: &Parent, what: Creation) -> Result<(), Errno> {
        match decide(&self.plan, &p.real, &p.name, what) {
            Verdict::Allow => Ok(()),
            Verdict::Deny(reason) => {
                self.denied.set(self.denied.get() + 1);
                if self.denied.get() <= LOUD_DENIALS {
                    let path = p.real.join(&p.name);
                    eprintln!(
                        "oajail: guard: denied creating {} ({reason})",
                        path.display()
                    );
                }
                Err(Errno::ACCESS)
            }
        }
    }

    fn open(
        &self,
        caller: &Caller<'_>,
        dir: u64,
        path: u64,
        flags: u64,
        mode: u64,
    ) -> Result<Answer, Errno> {
        let p = self.checked(caller, dir, path, Creation::File)?;
        let asked = OFlags::from_bits_retain(flags as u32);
        let fd = with_umask(caller, || open_at(&p, asked, perm(mode)))?;
        if !asked.contains(OFlags::NONBLOCK) {
            // F_SETFL changes only the status flags (append, async, direct,
            // noatime, nonblock): the caller's, without O_NONBLOCK.
            rustix::fs::fcntl_setfl(&fd, asked - OFlags::NONBLOCK)?;
        }
        not_our_proc(fd.as_fd(), caller)?;
        Ok(Answer::Fd(fd, asked.contains(OFlags::CLOEXEC)))
    }

    fn link(
        &self,
        caller: &Caller<'_>,
        old: (u64, u64),
        new: (u64, u64),
        flags: u64,
    ) -> Result<Answer, Errno> {
        let flags = AtFlags::from_bits_retain(flags as u32);
        let old_path = caller.string(old.1)?;
        let dst = self.checked(caller, new.0, new.1, Creation::HardLink)?;
        if old_path.is_empty() && flags.contains(AtFlags::EMPTY_PATH) {
            // linkat(fd, "", …, AT_EMPTY_PATH): name the caller's open file
            // (an O_TMPFILE, typically) through its /proc magic link.
            let src = caller.fd_path(old.0 as i32);
            rustix::fs::linkat(
                rustix::fs::CWD,
                src.as_str(),
                &dst.fd,
                dst.last.as_slice(),
                AtFlags::SYMLINK_FOLLOW,
            )?;
            return Ok(Answer::Value(0));
        }
        let src = caller.parent_of(old.0 as i32, &old_path)?;
        let follow = flags & AtFlags::SYMLINK_FOLLOW;
        rustix::fs::linkat(
            &src.fd,
            src.last.as_slice(),
            &dst.fd,
            dst.last.as_slice(),
            follow,
        )?;
        Ok(Answer::Value(0))
    }

    fn rename(
        &self,
        caller: &Caller<'_>,
        old: (u64, u64),
        new: (u64, u64),
        flags: u64,
    ) -> Result<Answer, Errno> {
        let flags = RenameFlags::from_bits_retain(flags as u32);
        let src = caller.parent(old.0, old.1)?;
        let dst = caller.parent(new.0, new.1)?;
        let src_dir = is_dir(&src)?;
        self.verdict(&dst, Creation::RenameTarget { dir: src_dir })?;
        if flags.contains(RenameFlags::EXCHANGE) {
            // Both names are targets: the old one receives the new entry.
            let dst_dir = is_dir(&dst)?;
            self.verdict(&src, Creation::RenameTarget { dir: dst_dir })?;
        }
        rustix::fs::renameat_with(
            &src.fd,
            src.last.as_slice(),
            &dst.fd,
            dst.last.as_slice(),
            flags,
        )?;
        Ok(Answer::Value(0))
    }
}

/// open(…, O_CREAT) relative to the checked parent. A final symlink is not
/// followed while creating: an existing target is opened without O_CREAT,
/// a dangling one is refused (creating through it would put a name
/// somewhere that was never checked).
fn open_at(p: &Parent, asked: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let base = asked | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let excl = asked.contains(OFlags::EXCL);
    let flags = if excl { base } else { base | OFlags::NOFOLLOW };
    let name = p.last.as_slice();
    match rustix::fs::openat(&p.fd, name, flags, mode) {
        Err(Errno::LOOP) if !excl && !asked.contains(OFlags::NOFOLLOW) => {
            let existing = base - OFlags::CREATE;
            match rustix::fs::openat(&p.fd, name, existing, Mode::empty()) {
                Err(Errno::NOENT) => Err(Errno::ACCESS),
                other => other,
            }
        }
        other => other,
    }
}

/// Never hand the command a descriptor of pid 1's own /proc directory
/// (its memory, its fds): only the caller's own /proc entries pass.
fn not_our_proc(fd: BorrowedFd<'_>, caller: &Caller<'_>) -> Result<(), Errno> {
    let fs = rustix::fs::fstatfs(fd)?;
    if fs.f_type != rustix::fs::PROC_SUPER_MAGIC {
        return Ok(());
    }
    let (_, tgid) = caller.status()?;
    let link = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())?;
    let link = link.to_string_lossy().into_owned();
    let own = [caller.proc, tgid]
        .iter()
        .any(|id| link.starts_with(&format!("/proc/{id}/")));
    if own { Ok(()) } else { Err(Errno::ACCESS) }
}

fn is_dir(p: &Parent) -> Result<bool, Errno> {
    let st = rustix::fs::statat(&p.fd, p.last.as_slice(), AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(FileType::from_raw_mode(st.st_mode) == FileType::Directory)
}

fn perm(mode: u64) -> Mode {
    Mode::from_raw_mode(mode as u32 & 0o7777)
}

/// Run `f` under the caller's umask (pid 1 is single-threaded, so setting
/// its own umask per call is race-free).
fn with_umask<T>(caller: &Caller<'_>, f: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
    let (umask, _) = caller.status()?;
    rustix::process::umask(Mode::from_raw_mode(umask & 0o777));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_decode_to_their_arguments() {
        let a = [1, 2, 3, 4, 5, 6];
        assert!(matches!(
            decode(libc::SYS_openat, a),
            Some(Call::Open {
                dir: 1,
                path: 2,
                flags: 3,
                mode: 4
            })
        ));
        assert!(matches!(
            decode(libc::SYS_renameat2, a),
            Some(Call::Rename {
                odir: 1,
                old: 2,
                ndir: 3,
                new: 4,
                flags: 5
            })
        ));
        assert!(matches!(
            decode(libc::SYS_renameat, a),
            Some(Call::Rename { flags: 0, .. })
        ));
        assert!(matches!(
            decode(libc::SYS_linkat, a),
            Some(Call::Link {
                odir: 1,
                old: 2,
                ndir: 3,
                new: 4,
                flags: 5
            })
        ));
        assert!(matches!(
            decode(libc::SYS_symlinkat, a),
            Some(Call::Symlink {
                target: 1,
                dir: 2,
                path: 3
            })
        ));
        assert!(decode(libc::SYS_read, a).is_none());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn legacy_calls_use_the_cwd() {
        let a = [1, 2, 3, 4, 5, 6];
        let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
        assert!(matches!(
            decode(libc::SYS_creat, a),
            Some(Call::Open { dir: CWD, path: 1, flags, mode: 2 }) if flags == creat
        ));
        assert!(matches!(
            decode(libc::SYS_open, a),
            Some(Call::Open {
                dir: CWD,
                path: 1,
                flags: 2,
                mode: 3
            })
        ));
        assert!(matches!(
            decode(libc::SYS_rename, a),
            Some(Call::Rename {
                odir: CWD,
                old: 1,
                ndir: CWD,
                new: 2,
                flags: 0
            })
        ));
    }
}
