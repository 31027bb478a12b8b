//! Warnings for `allowRead` entries that re-open all of a denied region.
//!
//! `allowRead` carves exceptions out of `denyRead`; an exception that, once
//! bound to the real home and working directory, is the denied directory
//! itself or one of its ancestors cancels the deny entirely. The classic
//! case is `denyRead ["~"]` with `allowRead ["."]` started from `~`: the
//! policy (and its hash) reads the same from every directory, but from the
//! home directory it denies nothing. The policy is still valid, so this is
//! a warning (`oajail` prints it before running, `policy check` lists it).
//!
//! Pure path arithmetic: the caller passes the home and working directory
//! (already resolved by the kernel, e.g. `std::env::current_dir`); this
//! crate makes no syscalls.

use crate::{FilesystemPolicy, PathEntry};
use std::path::{Path, PathBuf};

/// One warning line per (allowRead, denyRead) pair where the allow entry
/// covers the whole denied region, in the loader's `<json path>: <what>`
/// form.
pub fn reopened_regions(fs: &FilesystemPolicy, home: &Path, cwd: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for allow in &fs.allow_read {
        let Some(opened) = covered_dir(allow, home, cwd) else {
            continue;
        };
        for deny in &fs.deny_read {
            if deny.is_glob() {
                continue;
            }
            let denied = deny.resolve(home, cwd);
            if denied.starts_with(&opened) {
                out.push(format!(
                    "filesystem.allowRead: {:?} resolves to {} here, which re-opens all of denyRead {:?} ({}); \
                     name only the paths inside it that the command needs",
                    allow.path,
                    opened.display(),
                    deny.path,
                    denied.display()
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
            w[0].contains("re-opens all of denyRead \"~\" (/home/u)"),
            "{w:?}"
        );
        // From a project directory the same policy is fine…
        assert!(warn(&["~"], &["."], "/home/u/project").is_empty());
        // …and from `/` it re-opens everything.
        assert_eq!(warn(&["~", "/etc/secret"], &["."], "/").len(), 2);
    }

    #[test]
    fn ancestors_and_recursive_globs_reopen() {
        assert_eq!(warn(&["~/.ssh"], &["~"], "/").len(), 1);
        assert_eq!(warn(&["~/.ssh"], &["~/**"], "/").len(), 1);
        assert_eq!(warn(&["~"], &["/home"], "/").len(), 1);
    }

    #[test]
    fn narrower_allows_do_not_warn() {
        assert!(warn(&["~"], &["~/project", "/usr/bin/x"], "/").is_empty());
        assert!(warn(&["~"], &["~/*.txt"], "/").is_empty());
        assert!(warn(&["~/.ssh/**"], &["~"], "/").is_empty());
    }
}
