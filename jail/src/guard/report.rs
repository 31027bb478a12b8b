//! What pid 1 tells the supervisor about the calls it served
//! (`crate::events`): the guard's own refusals, the writes the kernel
//! refused to pid 1 (outside the writable roots, or on a path a mask
//! hides), and with the read watch on, opens of a path the policy hides.
//!
//! pid 1 knows the call and the path; the supervisor explains them with
//! the policy. Nothing here decides anything: the report is made after the
//! answer is known, and the read watch lets the open through (`CONTINUE`,
//! which is safe exactly because nothing is decided on it: the mounts and
//! Landlock refuse the open by themselves).

use crate::events::{Refusal, RefusalKind, Sender};
use oajail_policy::compile::FileKind;
use oajail_policy::guard::Op;
use rustix::io::Errno;
use std::path::{Component, Path, PathBuf};

/// The names one call was decided on, and the guard's refusal if any.
/// The path buffers are kept from call to call: recording a name costs a
/// copy into a buffer that is already there, not an allocation.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// (operation, path), in the order they were decided; only the first
    /// `len` belong to the current call.
    names: Vec<(&'static str, PathBuf)>,
    len: usize,
    /// The guard refused the name at this index, by this rule.
    refused: Option<(usize, &'static str)>,
}

impl Seen {
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.refused = None;
    }

    /// A name the guard decided on.
    pub(crate) fn decided(&mut self, op: Op<'_>, path: &Path) {
        match self.names.get_mut(self.len) {
            Some((word_of, kept)) => {
                *word_of = word(op);
                kept.as_mut_os_string().clear();
                kept.as_mut_os_string().push(path.as_os_str());
            }
            None => self.names.push((word(op), path.to_path_buf())),
        }
        self.len += 1;
    }

    /// The guard refused the last name decided.
    pub(crate) fn denied(&mut self, rule: &'static str) {
        if let Some(last) = self.len.checked_sub(1) {
            self.refused = Some((last, rule));
        }
    }

    fn current(&self) -> &[(&'static str, PathBuf)] {
        &self.names[..self.len]
    }

    /// The call failed with `errno`: the refusal to report, if it is one
    /// of the guard's or the kernel refused a write outside `roots` (or
    /// on a read-only mount anywhere: a mask).
    pub(crate) fn refusal(&self, errno: Errno, tid: u32, roots: &[PathBuf]) -> Option<Refusal> {
        let refusal = |kind, (op, path): &(&'static str, PathBuf), rule: Option<&str>| Refusal {
            kind,
            op: (*op).to_owned(),
            path: path.display().to_string(),
            errno: errno.raw_os_error(),
            rule: rule.map(str::to_owned),
            pid: tid,
        };
        let names = self.current();
        if let Some((i, rule)) = self.refused {
            return Some(refusal(RefusalKind::Guard, &names[i], Some(rule)));
        }
        let outside = |p: &Path| !roots.iter().any(|r| p.starts_with(r));
        let name = match errno {
            Errno::ROFS => names.iter().find(|(_, p)| outside(p)).or(names.last()),
            Errno::ACCESS | Errno::PERM => names.iter().find(|(_, p)| outside(p)),
            _ => None,
        }?;
        Some(refusal(RefusalKind::Write, name, None))
    }
}

/// A `socket(AF_UNIX)` pid 1 refused; its `path` names the family and the
/// type (`AF_UNIX SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC`: the supervisor
/// tells glibc's name-service-cache probe from the rest by it).
pub(crate) fn socket(domain: u64, kind: u64, tid: u32) -> Refusal {
    let kind = kind as i32;
    let base = match kind & 0xf {
        libc::SOCK_STREAM => "SOCK_STREAM".to_owned(),
        libc::SOCK_DGRAM => "SOCK_DGRAM".to_owned(),
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".to_owned(),
        other => format!("type {other}"),
    };
    let flags: String = [
        (libc::SOCK_NONBLOCK, "|SOCK_NONBLOCK"),
        (libc::SOCK_CLOEXEC, "|SOCK_CLOEXEC"),
    ]
    .iter()
    .filter(|(bit, _)| kind & bit != 0)
    .map(|(_, name)| *name)
    .collect();
    let family = if domain as i32 == libc::AF_UNIX {
        "AF_UNIX".to_owned()
    } else {
        format!("family {}", domain as i32)
    };
    Refusal {
        kind: RefusalKind::UnixSocket,
        op: "socket".into(),
        path: format!("{family} {base}{flags}"),
        errno: libc::EPERM,
        rule: None,
        pid: tid,
    }
}

fn word(op: Op<'_>) -> &'static str {
    match op {
        Op::Create(FileKind::Dir) => "mkdir",
        Op::Create(FileKind::Symlink) => "symlink",
        Op::Create(_) => "create",
        Op::Write => "write",
        Op::Meta => "metadata",
        Op::Remove => "remove",
        Op::RenameFrom | Op::RenameTo { .. } => "rename",
        Op::Link { .. } => "link",
    }
}

/// The read watch: the paths the jail hides (its masks), and the opens of
/// them it has reported.
#[derive(Debug)]
pub(crate) struct Reads {
    hidden: Vec<PathBuf>,
}

impl Reads {
    pub(crate) fn new(hidden: Vec<PathBuf>) -> Option<Reads> {
        (!hidden.is_empty()).then_some(Reads { hidden })
    }

    /// An open of `path` (as the caller spelled it, relative to `base`
    /// when it is not absolute; links are not followed): reported when a
    /// hidden path covers it.
    pub(crate) fn opened(
        &self,
        events: &mut Sender,
        tid: u32,
        path: &[u8],
        base: impl FnOnce() -> Option<PathBuf>,
    ) {
        use std::os::unix::ffi::OsStrExt;
        let given = Path::new(std::ffi::OsStr::from_bytes(path));
        let full = if given.is_absolute() {
            given.to_path_buf()
        } else {
            let Some(base) = base() else { return };
            base.join(given)
        };
        let full = lexical(&full);
        if self.hidden.iter().any(|h| full.starts_with(h)) {
            events.refused(Refusal {
                kind: RefusalKind::Read,
                op: "open".into(),
                path: full.display().to_string(),
                errno: 0,
                rule: None,
                pid: tid,
            });
        }
    }
}

/// `.` and `..` folded away, without looking at the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(names: &[(Op<'static>, &str)]) -> Seen {
        let mut s = Seen::default();
        for (op, p) in names {
            s.decided(*op, Path::new(p));
        }
        s
    }

    #[test]
    fn a_write_outside_the_roots_is_reported_and_one_inside_is_not() {
        let roots = [PathBuf::from("/w")];
        let s = seen(&[(Op::Create(FileKind::Dir), "/h/.npm")]);
        let r = s.refusal(Errno::ROFS, 7, &roots).unwrap();
        assert_eq!(
            (r.kind, r.op.as_str(), r.path.as_str()),
            (RefusalKind::Write, "mkdir", "/h/.npm")
        );
        // Permissions inside a writable root are the file's, not the policy's.
        let s = seen(&[(Op::Write, "/w/readonly.txt")]);
        assert!(s.refusal(Errno::ACCESS, 7, &roots).is_none());
        // A read-only mount inside a root is a mask: reported.
        let s = seen(&[(Op::Create(FileKind::File), "/w/.env/x")]);
        assert!(s.refusal(Errno::ROFS, 7, &roots).is_some());
        assert!(s.refusal(Errno::NOENT, 7, &roots).is_none());
    }

    #[test]
    fn a_cleared_record_forgets_the_last_call_but_keeps_its_buffers() {
        let roots = [PathBuf::from("/w")];
        let mut s = seen(&[(Op::Write, "/outside/a"), (Op::Write, "/outside/b")]);
        s.clear();
        s.decided(Op::Remove, Path::new("/elsewhere/c"));
        let r = s.refusal(Errno::ROFS, 1, &roots).unwrap();
        assert_eq!((r.op.as_str(), r.path.as_str()), ("remove", "/elsewhere/c"));
        assert_eq!(s.names.len(), 2, "buffers kept");
        s.clear();
        assert!(s.refusal(Errno::ROFS, 1, &roots).is_none());
    }

    #[test]
    fn the_guards_refusal_names_its_rule_and_the_name_it_refused() {
        let roots = [PathBuf::from("/w")];
        let mut s = seen(&[(Op::RenameFrom, "/w/a")]);
        s.decided(Op::Create(FileKind::File), Path::new("/w/.bashrc"));
        s.denied("bash start-up file");
        let r = s.refusal(Errno::ACCESS, 3, &roots).unwrap();
        assert_eq!(r.kind, RefusalKind::Guard);
        assert_eq!(r.path, "/w/.bashrc");
        assert_eq!(r.rule.as_deref(), Some("bash start-up file"));
    }

    #[test]
    fn paths_are_folded_before_they_are_matched() {
        assert_eq!(
            lexical(Path::new("/h/p/../.ssh/./id")),
            PathBuf::from("/h/.ssh/id")
        );
        assert_eq!(lexical(Path::new("/../x")), PathBuf::from("/x"));
    }
}
