//! Warnings for allow entries that lift a whole `denyRead` entry.
//!
//! Reads follow srt's Linux precedence, as the compile layer enforces it
//! (`compile/rules.rs`, `srt-semantics.md` §2.4): among the rules on a path
//! and its ancestors the deepest one decides, and on the same path an allow
//! beats a deny. `allowRead` and `allowWrite` both count as allows. So an
//! allow cancels a `denyRead` entry entirely only when, bound to the real
//! home and working directory, it names the denied path itself (or is
//! `<dir>/**` of it). An allow of an ancestor re-opens nothing there: the
//! deny is deeper and still wins. An allow inside the region opens only that
//! part, which is what allows are for.
//!
//! The classic case is `denyRead ["~"]` with `allowRead ["."]` started from
//! `~`: the policy (and its hash) reads the same from every directory, but
//! from the home directory it denies nothing. The policy is still valid, so
//! this is a warning (`oajail` prints it before running, `policy check`
//! lists it).
//!
//! Pure path arithmetic: the caller passes the home and working directory
//! (already resolved by the kernel, e.g. `std::env::current_dir`); this
//! crate makes no syscalls.

use crate::{FilesystemPolicy, PathEntry};
use std::path::{Path, PathBuf};

/// One warning line per (allow, denyRead) pair where the allow entry names
/// the denied region itself, so the deny holds nowhere, in the loader's
/// `<json path>: <what>` form. Deeper `denyRead` entries inside the region
/// still hold and are not warned about.
pub fn reopened_regions(fs: &FilesystemPolicy, home: &Path, cwd: &Path) -> Vec<String> {
    let allows = (fs.allow_read.iter().map(|a| ("allowRead", a)))
        .chain(fs.allow_write.iter().map(|a| ("allowWrite", a)));
    let mut out = Vec::new();
    for (field, allow) in allows {
        let Some(opened) = covered_dir(allow, home, cwd) else {
            continue;
        };
        for deny in fs.deny_read.iter().filter(|d| !d.is_glob()) {
            let denied = deny.resolve(home, cwd);
            if denied == opened {
                out.push(format!(
                    "filesystem.{field}: {:?} resolves to {} here, which re-opens all of denyRead {:?} \
                     (on the same path an allow wins); name only the paths inside it that the command needs",
                    allow.path,
                    opened.display(),
                    deny.path,
                ));
            }
        }
    }
    out
}

/// The directory an allow entry opens entirely: the entry itself, or for a
/// glob the base of a trailing `/**` (anything else opens only part of it).
fn covered_dir(entry: &PathEntry, home: &Path, cwd: &Path) -> Option<PathBuf> {
    if !entry.is_glob() {
        return Some(entry.resolve(home, cwd));
    }
    let base = entry.glob_base();
    let rest = entry.path.strip_prefix(base.as_str())?;
    if rest == "/**" || (base == "." && entry.path == "**") {
        let parsed = PathEntry::parse(&base, false).ok()?;
        return Some(parsed.resolve(home, cwd));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(deny: &[&str], allow: &[&str]) -> FilesystemPolicy {
        let entries = |l: &[&str]| {
            l.iter()
                .map(|p| PathEntry::parse(p, false).unwrap())
                .collect()
        };
        FilesystemPolicy {
            deny_read: entries(deny),
            allow_read: entries(allow),
            allow_write: Vec::new(),
            deny_write: Vec::new(),
            allow_git_config: false,
        }
    }

    const HOME: &str = "/home/u";

    fn warn(deny: &[&str], allow: &[&str], cwd: &str) -> Vec<String> {
        reopened_regions(&fs(deny, allow), Path::new(HOME), Path::new(cwd))
    }

    #[test]
    fn dot_in_home_reopens_home() {
        let w = warn(&["~"], &["."], HOME);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("\".\" resolves to /home/u here, which re-opens all of denyRead \"~\""),
            "{w:?}"
        );
        // From a project directory the same policy is fine…
        assert!(warn(&["~"], &["."], "/home/u/project").is_empty());
        // …and from `/` too: `/` is an ancestor, the deeper deny of `~` wins.
        assert!(warn(&["~", "/etc/secret"], &["."], "/").is_empty());
    }

    #[test]
    fn the_denied_path_itself_or_its_recursive_glob_reopens() {
        assert_eq!(warn(&["~/.ssh"], &["~/.ssh"], "/").len(), 1);
        assert_eq!(warn(&["~/.ssh"], &["~/.ssh/**"], "/").len(), 1);
        assert_eq!(warn(&["/"], &["/"], "/").len(), 1);
        // Only the lifted entry is named: the deeper `~/.ssh` still holds.
        let w = warn(&["~", "~/.ssh"], &["~"], "/");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("denyRead \"~\""), "{w:?}");
    }

    #[test]
    fn ancestors_reopen_nothing_under_the_deeper_deny() {
        // srt §2.4: denyRead `V/v1/token` with allowRead `V/v1` stays denied.
        assert!(warn(&["~/.ssh"], &["~"], "/").is_empty());
        assert!(warn(&["~/.ssh"], &["~/**"], "/").is_empty());
        assert!(warn(&["~"], &["/home"], "/").is_empty());
        assert!(warn(&["~/.aws"], &["."], HOME).is_empty());
    }

    #[test]
    fn narrower_allows_do_not_warn() {
        assert!(warn(&["~"], &["~/project", "/usr/bin/x"], "/").is_empty());
        assert!(warn(&["~"], &["~/*.txt"], "/").is_empty());
        assert!(warn(&["~/.ssh/**"], &["~"], "/").is_empty());
    }

    #[test]
    fn an_allow_write_of_the_denied_path_reopens_it_too() {
        // allowWrite counts as an allow in the read precedence (a write
        // root is bound, so it is readable).
        let mut p = fs(&["~/.aws"], &[]);
        p.allow_write = vec![PathEntry::parse("~/.aws", false).unwrap()];
        let w = reopened_regions(&p, Path::new(HOME), Path::new("/"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("filesystem.allowWrite: \"~/.aws\""),
            "{w:?}"
        );
        p.allow_write = vec![PathEntry::parse("~", false).unwrap()];
        assert!(reopened_regions(&p, Path::new(HOME), Path::new("/")).is_empty());
    }
}
