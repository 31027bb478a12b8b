//! Timestamp changes by path, performed by pid 1 without a decision: the
//! filter sends `utimensat` (and x86_64's `utime`, `utimes`, `futimesat`)
//! here only when it names a path; `futimens` on a descriptor the command
//! opened never comes (`policy/src/compile/guard.rs`).

use super::callers::Caller;
use super::decider::Decider;
use super::decode::{Obj, Times};
use oajail_policy::guard::Op;
use rustix::fs::{AtFlags, Timespec, Timestamps};
use rustix::io::Errno;

/// A timestamp change by path. Nothing is decided (a timestamp makes
/// nothing run, and the mounts and Landlock hold the writable roots by
/// themselves); pid 1 performs it with the command's rights only so that a
/// change the kernel refuses outside the roots is reported, as a refused
/// write is (issue 29): before, `touch -h` or `os.utime` of a file outside
/// them failed with no word. The names are noted for that report.
pub(crate) fn utimes(d: &mut Decider, c: &Caller<'_>, obj: Obj, times: Times) -> Result<(), Errno> {
    let times = read_times(c, times)?;
    let on_fd = |fd: u64| -> Result<(), Errno> {
        let object = c.fd_object(fd as i32)?;
        rustix::fs::utimensat(rustix::fs::CWD, object.magic(), &times, AtFlags::empty())
    };
    let (dir, path, follow) = match obj {
        Obj::Fd(fd) => return on_fd(fd),
        Obj::Path {
            dir,
            path,
            follow,
            empty,
        } => {
            let path = c.string(path)?;
            if path.is_empty() && empty {
                return on_fd(dir);
            }
            (dir, path, follow)
        }
    };
    let at = c.at_path(dir as i32, &path)?;
    d.note_at(&at, Op::Meta);
    let flags = match follow {
        true => AtFlags::empty(),
        false => AtFlags::SYMLINK_NOFOLLOW,
    };
    rustix::fs::utimensat(&*at.fd, at.last.as_slice(), &times, flags)
}

/// The caller's times as `utimensat` takes them.
fn read_times(c: &Caller<'_>, times: Times) -> Result<Timestamps, Errno> {
    let ts = |sec: i64, nsec: i64| Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    let words = |addr: u64, len: usize| -> Result<Vec<i64>, Errno> {
        let raw = c.bytes(addr, len)?;
        let word = |b: &[u8]| b.try_into().map(i64::from_ne_bytes);
        (raw.chunks_exact(8).map(word).collect::<Result<Vec<_>, _>>()).map_err(|_| Errno::FAULT)
    };
    let (a, m) = match times {
        Times::Now => {
            let now = ts(0, rustix::fs::UTIME_NOW);
            (now, now)
        }
        Times::Spec(addr) => {
            let w = words(addr, 32)?;
            (ts(w[0], w[1]), ts(w[2], w[3]))
        }
        // Microseconds; `utimes` takes no UTIME_NOW or UTIME_OMIT, and a
        // value out of range is refused by the kernel as it would be.
        Times::Val(addr) => {
            let w = words(addr, 32)?;
            let us = |v: i64| {
                if (0..1_000_000).contains(&v) {
                    v * 1000
                } else {
                    -1
                }
            };
            (ts(w[0], us(w[1])), ts(w[2], us(w[3])))
        }
        Times::Buf(addr) => {
            let w = words(addr, 16)?;
            (ts(w[0], 0), ts(w[1], 0))
        }
    };
    Ok(Timestamps {
        last_access: a,
        last_modification: m,
    })
}
