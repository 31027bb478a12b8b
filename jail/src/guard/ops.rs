//! The guarded calls, performed by pid 1 after the decision: each resolves
//! its path(s) with [`Caller`], asks the [`Decider`] about every name it
//! creates, writes, removes or moves, and then makes the call relative to
//! the directory descriptor it resolved (or through the `O_PATH` descriptor
//! of the object it examined), so the object decided on is the object acted
//! on. A file opened for the caller is injected into it (`Answer::Fd`).

use super::callers::Caller;
use super::decider::Decider;
use super::decode::{Call, Obj};
use super::dirs::self_fds;
use super::mover::Move;
use super::resolve::{AT_FDCWD, At, Object};
use oajail_policy::guard::{FileKind, Op, Request, Stat};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

/// What the caller gets back.
pub(crate) enum Answer {
    Value(i64),
    Fd(OwnedFd, bool),
}

/// Perform one decoded call.
pub(crate) fn perform(d: &mut Decider, c: &Caller<'_>, call: Call) -> Result<Answer, Errno> {
    match call {
        Call::Open {
            dir,
            path,
            flags,
            mode,
        } => {
            // A creation needs no look first: with O_EXCL it fails by itself
            // when the name exists, and without it is tried as new first
            // (most are), looked at only when that fails (`fresh`).
            let o = OFlags::from_bits_retain(flags as u32);
            let creates = o.contains(OFlags::CREATE) && !o.contains(OFlags::TMPFILE);
            if !creates {
                return open(d, c, c.at(dir, path)?, flags, mode);
            }
            let mut at = c.at_new(dir, path)?;
            if !o.contains(OFlags::EXCL) {
                if let Some(fd) = fresh(d, c, &at, o, mode)? {
                    return Ok(Answer::Fd(fd, o.contains(OFlags::CLOEXEC)));
                }
                at.look()?;
            }
            open(d, c, at, flags, mode)
        }
        Call::Mkdir { dir, path, mode } => {
            let at = c.at(dir, path)?;
            make(d, c, &at, FileKind::Dir, || {
                rustix::fs::mkdirat(&at.fd, at.last.as_slice(), perm(mode))
            })
        }
        Call::Mknod {
            dir,
            path,
            mode,
            dev,
        } => mknod(d, c, c.at(dir, path)?, mode, dev),
        Call::Symlink { target, dir, path } => {
            let target = c.string(target)?;
            let at = c.at(dir, path)?;
            make(d, c, &at, FileKind::Symlink, || {
                rustix::fs::symlinkat(target.as_slice(), &at.fd, at.last.as_slice())
            })
        }
        Call::Link { old, new, flags } => link(d, c, old, new, flags),
        Call::Rename { old, new, flags } => {
            rename(d, c, c.at(old.0, old.1)?, c.at(new.0, new.1)?, flags)
        }
        Call::Unlink { dir, path, flags } => unlink(d, c, c.at(dir, path)?, flags),
        Call::Truncate { path, len } => truncate(d, c, c.at(AT_FDCWD as u64, path)?, len),
        Call::Chmod { obj, mode } => meta(d, c, obj, |t| t.chmod(perm(mode))),
        Call::Chown { obj, uid, gid } => meta(d, c, obj, |t| t.chown(uid, gid)),
        Call::SetXattr {
            obj,
            name,
            value,
            size,
            flags,
        } => {
            let name = c.string(name)?;
            let value = c.bytes(value, size.min(XATTR_SIZE_MAX) as usize)?;
            let flags = rustix::fs::XattrFlags::from_bits_retain(flags as u32);
            meta(d, c, obj, |t| t.setxattr(&name, &value, flags))
        }
        Call::RemoveXattr { obj, name } => {
            let name = c.string(name)?;
            meta(d, c, obj, |t| t.removexattr(&name))
        }
        // Handled by the server before a caller is made.
        Call::Umask { .. } | Call::Chdir | Call::Socket { .. } | Call::SocketPair { .. } => {
            Err(Errno::NOSYS)
        }
    }
}

/// The largest extended attribute value the kernel takes.
const XATTR_SIZE_MAX: u64 = 65536;

fn request<'a>(path: &'a Path, op: Op<'a>, existing: Option<Stat>) -> Request<'a> {
    Request { path, op, existing }
}

/// Create a new entry at `at` (decided first, under the caller's umask).
fn make(
    d: &mut Decider,
    c: &Caller<'_>,
    at: &At,
    kind: FileKind,
    call: impl FnOnce() -> Result<(), Errno>,
) -> Result<Answer, Errno> {
    d.check_at("creating", at, Op::Create(kind))?;
    set_umask(d, c)?;
    call()?;
    let path = at.path();
    // A directory kept under this name was removed unseen: it is stale.
    c.forget_dirs(&path);
    d.done(&request(&path, Op::Create(kind), at.stat));
    Ok(Answer::Value(0))
}

fn set_umask(d: &mut Decider, c: &Caller<'_>) -> Result<(), Errno> {
    d.umask(c.umask);
    Ok(())
}

fn mknod(d: &mut Decider, c: &Caller<'_>, at: At, mode: u64, dev: u64) -> Result<Answer, Errno> {
    // A type of 0 means a regular file, as for the kernel.
    let (kind, ftype) = match FileType::from_raw_mode(mode as u32 & libc::S_IFMT) {
        FileType::Unknown | FileType::RegularFile => (FileKind::File, FileType::RegularFile),
        other => (FileKind::Other, other),
    };
    make(d, c, &at, kind, || {
        rustix::fs::mknodat(&at.fd, at.last.as_slice(), ftype, perm(mode), dev)
    })
}

/// `open` with a flag that can write or create.
fn open(d: &mut Decider, c: &Caller<'_>, at: At, flags: u64, mode: u64) -> Result<Answer, Errno> {
    let asked = OFlags::from_bits_retain(flags as u32);
    let cloexec = asked.contains(OFlags::CLOEXEC);
    if asked.contains(OFlags::TMPFILE) {
        // An unnamed file: no name is made here (naming it is a guarded link).
        set_umask(d, c)?;
        let fd = rustix::fs::openat(
            &at.fd,
            at.last.as_slice(),
            asked | OFlags::CLOEXEC,
            perm(mode),
        )?;
        return Ok(Answer::Fd(fd, cloexec));
    }
    let create = asked.contains(OFlags::CREATE);
    let excl = asked.contains(OFlags::EXCL);
    let linked = at.stat.is_some_and(|s| s.kind == FileKind::Symlink);
    let fd = match at.stat {
        // Nothing there and nothing to create.
        None if !create => return Err(Errno::NOENT),
        None => create_file(d, c, &at, asked, mode)?,
        Some(_) if create && excl => return Err(Errno::EXIST),
        Some(_) if linked && !asked.contains(OFlags::NOFOLLOW) => {
            // The link's own name counts, and then what it points at.
            d.check_at("writing", &at, Op::Write)?;
            let object = match c.object(&at, true) {
                // Creating through a dangling link would make a name that
                // was never decided on.
                Err(Errno::NOENT) if create => return Err(Errno::ACCESS),
                other => other?,
            };
            decide_write(d, &object)?;
            reopen(&object, asked - OFlags::CREATE)?
        }
        Some(stat) => {
            d.check_at("writing", &at, Op::Write)?;
            open_existing(&at, asked - OFlags::CREATE, stat)?
        }
    };
    Ok(Answer::Fd(fd, cloexec))
}

/// A new file. `O_EXCL` is added: if the name appeared meanwhile (outside
/// the jail) the call fails rather than open something not decided on.
fn create_file(
    d: &mut Decider,
    c: &Caller<'_>,
    at: &At,
    asked: OFlags,
    mode: u64,
) -> Result<OwnedFd, Errno> {
    d.check_at("creating", at, Op::Create(FileKind::File))?;
    make_file(d, c, at, asked, mode)
}

/// Make the new file `create_file` decided on.
fn make_file(
    d: &mut Decider,
    c: &Caller<'_>,
    at: &At,
    asked: OFlags,
    mode: u64,
) -> Result<OwnedFd, Errno> {
    let path = at.path();
    let req = request(&path, Op::Create(FileKind::File), None);
    set_umask(d, c)?;
    let flags = asked | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&at.fd, at.last.as_slice(), flags, perm(mode))?;
    c.forget_dirs(&path);
    d.done(&req);
    Ok(fd)
}

/// `open(O_CREAT)` without `O_EXCL`, tried as the creation of a new file:
/// `None` when the name exists or a new file there would be refused (the
/// caller then looks at the name and decides as usual, saying why).
fn fresh(
    d: &mut Decider,
    c: &Caller<'_>,
    at: &At,
    asked: OFlags,
    mode: u64,
) -> Result<Option<OwnedFd>, Errno> {
    if !d.allows_at(at, Op::Create(FileKind::File)) {
        return Ok(None);
    }
    match make_file(d, c, at, asked, mode) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::EXIST) => Ok(None),
        Err(e) => {
            // Made without `check_at`: note the name, so a write the
            // kernel refused to pid 1 is reported as any other.
            d.note_at(at, Op::Create(FileKind::File));
            Err(e)
        }
    }
}

/// Open an existing non-link entry the caller decided to write. Only a
/// special file is opened non-blocking (pid 1 must not wait for a FIFO's
/// reader); the caller's own status flags are put back afterwards.
fn open_existing(at: &At, flags: OFlags, stat: Stat) -> Result<OwnedFd, Errno> {
    let special = stat.kind == FileKind::Other;
    let mut f = flags | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
    if special {
        f |= OFlags::NONBLOCK;
    }
    let fd = rustix::fs::openat(&at.fd, at.last.as_slice(), f, Mode::empty())?;
    restore_blocking(fd, flags, special)
}

/// Reopen an examined object with the caller's flags.
fn reopen(object: &Object, flags: OFlags) -> Result<OwnedFd, Errno> {
    let special = object.stat.kind == FileKind::Other;
    let mut f = (flags - OFlags::EXCL) | OFlags::NOCTTY | OFlags::CLOEXEC;
    if special {
        f |= OFlags::NONBLOCK;
    }
    let fd = rustix::fs::openat(self_fds()?, object.magic_name(), f, Mode::empty())?;
    restore_blocking(fd, flags, special)
}

fn restore_blocking(fd: OwnedFd, asked: OFlags, added: bool) -> Result<OwnedFd, Errno> {
    if added && !asked.contains(OFlags::NONBLOCK) {
        // F_SETFL changes only the status flags (append, async, direct,
        // noatime, nonblock): the caller's, without O_NONBLOCK.
        rustix::fs::fcntl_setfl(&fd, asked - OFlags::NONBLOCK)?;
    }
    Ok(fd)
}

/// Decide writing an object reached through a link (objects without a path,
/// such as pipes and sockets, name nothing the guard protects).
fn decide_write(d: &mut Decider, object: &Object) -> Result<(), Errno> {
    match &object.real {
        Some(real) => d.check("writing", &request(real, Op::Write, Some(object.stat))),
        None => Ok(()),
    }
}

fn link(
    d: &mut Decider,
    c: &Caller<'_>,
    old: (u64, u64),
    new: (u64, u64),
    flags: u64,
) -> Result<Answer, Errno> {
    let flags = AtFlags::from_bits_retain(flags as u32);
    let old_path = c.string(old.1)?;
    let dst = c.at(new.0, new.1)?;
    let dst_path = dst.path();
    if old_path.is_empty() && flags.contains(AtFlags::EMPTY_PATH) {
        // linkat(fd, "", …, AT_EMPTY_PATH): name the caller's open file
        // (an O_TMPFILE, typically) through its /proc magic link.
        let object = c.fd_object(old.0 as i32)?;
        let source = object.real.clone().unwrap_or_default();
        let op = Op::Link {
            source: &source,
            stat: object.stat,
        };
        d.check_at("linking", &dst, op)?;
        let req = request(&dst_path, op, dst.stat);
        let src = format!("fd/{}", old.0 as i32);
        rustix::fs::linkat(
            c.proc_dir(),
            src.as_str(),
            &dst.fd,
            dst.last.as_slice(),
            AtFlags::SYMLINK_FOLLOW,
        )?;
        c.forget_dirs(&dst_path);
        d.done(&req);
        return Ok(Answer::Value(0));
    }
    let src = c.at_path(old.0 as i32, &old_path)?;
    let stat = src.stat.ok_or(Errno::NOENT)?;
    let follow = flags.contains(AtFlags::SYMLINK_FOLLOW) && stat.kind == FileKind::Symlink;
    let (source, stat) = if follow {
        let object = c.object(&src, true)?;
        (object.real.unwrap_or_default(), object.stat)
    } else {
        (src.path(), stat)
    };
    let op = Op::Link {
        source: &source,
        stat,
    };
    d.check_at("linking", &dst, op)?;
    let req = request(&dst_path, op, dst.stat);
    let follow_flag = flags & AtFlags::SYMLINK_FOLLOW;
    match rustix::fs::linkat(
        &src.fd,
        src.last.as_slice(),
        &dst.fd,
        dst.last.as_slice(),
        follow_flag,
    ) {
        Err(Errno::XDEV) => across(d, Move::Link(follow_flag), (&src, &dst), follow, false)?,
        done => done?,
    }
    c.forget_dirs(&dst_path);
    d.done(&req);
    Ok(Answer::Value(0))
}

fn rename(d: &mut Decider, c: &Caller<'_>, src: At, dst: At, flags: u64) -> Result<Answer, Errno> {
    let flags = RenameFlags::from_bits_retain(flags as u32);
    let stat = src.stat.ok_or(Errno::NOENT)?;
    let (sp, dp) = (src.path(), dst.path());
    let mut reqs = vec![
        (request(&sp, Op::RenameFrom, Some(stat)), "moving"),
        (
            request(&dp, Op::RenameTo { source: &sp, stat }, dst.stat),
            "renaming onto",
        ),
    ];
    if flags.contains(RenameFlags::EXCHANGE) {
        // Both names are targets: the old one receives the new entry.
        let back = dst.stat.ok_or(Errno::NOENT)?;
        reqs.push((request(&dp, Op::RenameFrom, Some(back)), "moving"));
        reqs.push((
            request(
                &sp,
                Op::RenameTo {
                    source: &dp,
                    stat: back,
                },
                Some(stat),
            ),
            "renaming onto",
        ));
    }
    for (req, verb) in &reqs {
        d.check(verb, req)?;
    }
    for (at, op) in [
        (&src, Op::RenameFrom),
        (&dst, Op::RenameTo { source: &sp, stat }),
    ] {
        if at.lexical.is_some() {
            d.check_at("renaming", at, op)?;
        }
    }
    // Whatever happens next, directories kept at either name are stale.
    c.forget_dirs(&sp);
    c.forget_dirs(&dp);
    match rustix::fs::renameat_with(
        &*src.fd,
        src.last.as_slice(),
        &*dst.fd,
        dst.last.as_slice(),
        flags,
    ) {
        Err(Errno::XDEV) => {
            let exchange = flags.contains(RenameFlags::EXCHANGE);
            across(d, Move::Rename(flags), (&src, &dst), false, exchange)?;
        }
        done => done?,
    }
    for (req, _) in &reqs {
        d.done(req);
    }
    Ok(Answer::Value(0))
}

/// A move across directories that pid 1's Landlock domain refused: on
/// ABI 1 every one is (no `refer` right), and the mover makes it when what
/// moves stays as readable as it was (`mover.rs`). Elsewhere `EXDEV` stands
/// (different mounts, or ABI 2's `refer` check said no).
fn across(
    d: &Decider,
    what: Move,
    (src, dst): (&At, &At),
    follow: bool,
    exchange: bool,
) -> Result<(), Errno> {
    let Some(mover) = d.mover() else {
        return Err(Errno::XDEV);
    };
    let movable = |at: &At, to: &At| {
        let from = (at.fd.as_fd(), at.name.as_str());
        (at.stat).is_some_and(|s| mover.may_move(from, &at.path(), s.kind, follow, &to.real))
    };
    if !movable(src, dst) || (exchange && !movable(dst, src)) {
        return Err(Errno::XDEV);
    }
    let (old, new) = (
        (src.fd.as_fd(), &src.last[..]),
        (dst.fd.as_fd(), &dst.last[..]),
    );
    mover.perform(what, old, new)
}

fn unlink(d: &mut Decider, c: &Caller<'_>, at: At, flags: u64) -> Result<Answer, Errno> {
    let flags = AtFlags::from_bits_retain(flags as u32);
    let path = at.path();
    let stat = at.stat.ok_or(Errno::NOENT)?;
    let req = request(&path, Op::Remove, Some(stat));
    d.check_at("removing", &at, Op::Remove)?;
    c.forget_dirs(&path);
    rustix::fs::unlinkat(&at.fd, at.last.as_slice(), flags)?;
    d.done(&req);
    Ok(Answer::Value(0))
}

fn truncate(d: &mut Decider, c: &Caller<'_>, at: At, len: u64) -> Result<Answer, Errno> {
    at.stat.ok_or(Errno::NOENT)?;
    let object = c.object(&at, true)?;
    decide_write(d, &object)?;
    match object.stat.kind {
        FileKind::Dir => Err(Errno::ISDIR),
        FileKind::File => {
            let flags = OFlags::WRONLY | OFlags::NOCTTY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(object.magic(), flags, Mode::empty())?;
            rustix::fs::ftruncate(&fd, len)?;
            Ok(Answer::Value(0))
        }
        _ => Err(Errno::INVAL),
    }
}

/// The object of a metadata call, and how to reach it.
struct Target {
    object: Object,
    /// The parent and name, when the object is a link itself (not followed):
    /// calls that follow links must name it from its parent.
    link: Option<At>,
}

impl Target {
    fn chmod(&self, mode: Mode) -> Result<(), Errno> {
        rustix::fs::chmod(self.object.magic(), mode)
    }

    fn chown(&self, uid: u64, gid: u64) -> Result<(), Errno> {
        let id = |v: u64| (v as u32 != u32::MAX).then_some(v as u32);
        let uid = id(uid).map(rustix::fs::Uid::from_raw);
        let gid = id(gid).map(rustix::fs::Gid::from_raw);
        rustix::fs::chownat(&self.object.fd, "", uid, gid, AtFlags::EMPTY_PATH)
    }

    fn setxattr(
        &self,
        name: &[u8],
        value: &[u8],
        flags: rustix::fs::XattrFlags,
    ) -> Result<(), Errno> {
        match &self.link {
            Some(at) => rustix::fs::lsetxattr(link_path(at), name, value, flags),
            None => rustix::fs::setxattr(self.object.magic(), name, value, flags),
        }
    }

    fn removexattr(&self, name: &[u8]) -> Result<(), Errno> {
        match &self.link {
            Some(at) => rustix::fs::lremovexattr(link_path(at), name),
            None => rustix::fs::removexattr(self.object.magic(), name),
        }
    }
}

/// A link itself, named through its parent's descriptor.
fn link_path(at: &At) -> String {
    format!("/proc/self/fd/{}/{}", at.fd.as_raw_fd(), at.name)
}

/// Change an object's metadata after deciding it.
fn meta(
    d: &mut Decider,
    c: &Caller<'_>,
    obj: Obj,
    call: impl FnOnce(&Target) -> Result<(), Errno>,
) -> Result<Answer, Errno> {
    let target = match obj {
        Obj::Fd(fd) => Target {
            object: c.fd_object(fd as i32)?,
            link: None,
        },
        Obj::Path {
            dir,
            path,
            follow,
            empty,
        } => {
            let path = c.string(path)?;
            if path.is_empty() && empty {
                Target {
                    object: c.fd_object(dir as i32)?,
                    link: None,
                }
            } else {
                let at = c.at_path(dir as i32, &path)?;
                at.stat.ok_or(Errno::NOENT)?;
                d.check_at("changing", &at, Op::Meta)?;
                let object = c.object(&at, follow)?;
                let is_link = object.stat.kind == FileKind::Symlink;
                Target {
                    object,
                    link: is_link.then_some(at),
                }
            }
        }
    };
    let stat = target.object.stat;
    match &target.object.real {
        Some(real) => d.check("changing", &request(real, Op::Meta, Some(stat)))?,
        // A file whose name was removed while other names of it remain
        // (a descriptor kept across an unlink of one of its hard links):
        // the change would reach those names, which cannot be decided.
        None if stat.kind != FileKind::Other && stat.nlink > 0 => {
            return Err(d.refuse(
                Op::Meta,
                "a descriptor's file",
                "its name was removed but other links to it remain",
            ));
        }
        None => {}
    }
    call(&target)?;
    Ok(Answer::Value(0))
}

fn perm(mode: u64) -> Mode {
    Mode::from_raw_mode(mode as u32 & 0o7777)
}
