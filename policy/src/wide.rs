//! `allowWrite` entries that make the whole home directory, or `/`,
//! writable from where the command starts.
//!
//! `allowWrite: ["."]` is the usual way to let a command write its project;
//! started from `~` (a new terminal's directory) or `/`, the same entry
//! makes everything there writable. The policy reads the same from every
//! directory (and hashes the same), so this depends on the caller's
//! working directory and is a warning at start, an error with `--strict`.
//!
//! Pure path arithmetic, like [`crate::reopen`]: the caller passes the
//! home and working directory, already resolved by the kernel.

use crate::FilesystemPolicy;
use std::path::Path;

/// One line per `allowWrite` entry that, bound to `home` and `cwd`, is the
/// home directory, one of its ancestors, or `/`.
pub fn wide_writes(fs: &FilesystemPolicy, home: &Path, cwd: &Path) -> Vec<String> {
    fs.allow_write
        .iter()
        .filter(|entry| !entry.is_glob())
        .filter_map(|entry| {
            let path = entry.resolve(home, cwd);
            let what = if path == Path::new("/") {
                "the whole file system"
            } else if path == home {
                "your whole home directory"
            } else if home.starts_with(&path) {
                "a directory that holds your home directory"
            } else {
                return None;
            };
            Some(format!(
                "filesystem.allowWrite: {:?} resolves to {} here, which makes {what} writable \
                 (the guard still protects start-up files and tool configuration); run from the \
                 project's directory, or name the directories the command writes",
                entry.path,
                path.display()
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PathEntry, Policy};

    fn fs(entries: &[&str]) -> FilesystemPolicy {
        let mut fs = Policy::builtin_default().filesystem;
        fs.allow_write = (entries.iter())
            .map(|e| PathEntry::parse(e, false).unwrap())
            .collect();
        fs
    }

    #[test]
    fn dot_from_home_or_root_is_wide_and_from_a_project_is_not() {
        let home = Path::new("/home/u");
        let dot = fs(&["."]);
        assert_eq!(
            wide_writes(&dot, home, Path::new("/home/u/proj")),
            Vec::<String>::new()
        );
        let from_home = wide_writes(&dot, home, home);
        assert_eq!(from_home.len(), 1);
        assert!(
            from_home[0].contains("your whole home directory"),
            "{from_home:?}"
        );
        assert!(wide_writes(&dot, home, Path::new("/"))[0].contains("whole file system"));
        assert!(wide_writes(&dot, home, Path::new("/home"))[0].contains("holds your home"));
        assert_eq!(
            wide_writes(&fs(&["~"]), home, Path::new("/home/u/p")).len(),
            1
        );
        assert!(wide_writes(&fs(&["~/proj", "/var/tmp"]), home, home).is_empty());
    }
}
