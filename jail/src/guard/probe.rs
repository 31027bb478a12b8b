//! The filesystem as the guard's decision examines it: pid 1's own view,
//! which is the command's (same mount namespace, same Landlock domain).

use oajail_policy::guard::{FileKind, GuardFs, Stat};
use rustix::fs::FileType;
use std::io::Read;
use std::path::Path;

/// [`GuardFs`] on pid 1's view of the filesystem.
pub(crate) struct Probe;

impl GuardFs for Probe {
    fn lstat(&self, path: &Path) -> Option<Stat> {
        rustix::fs::lstat(path).ok().map(|st| stat_of(&st))
    }

    fn read_file(&self, path: &Path, limit: usize) -> Option<Vec<u8>> {
        let file = std::fs::File::open(path).ok()?;
        let mut out = Vec::new();
        file.take(limit as u64).read_to_end(&mut out).ok()?;
        Some(out)
    }

    fn read_dir(&self, path: &Path) -> Option<Vec<String>> {
        let entries = std::fs::read_dir(path).ok()?;
        Some(
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        )
    }

    fn canonical(&self, path: &Path) -> Option<std::path::PathBuf> {
        std::fs::canonicalize(path).ok()
    }
}

/// The guard's view of a `stat` result.
pub(crate) fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => FileKind::Dir,
        FileType::RegularFile => FileKind::File,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    };
    Stat {
        kind,
        dev: st.st_dev,
        ino: st.st_ino,
        nlink: st.st_nlink,
    }
}
