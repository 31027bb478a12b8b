//! [`FsView`] on the real filesystem, for compiling plans on this host.

use oajail_policy::compile::{FileKind, FsView};
use std::io;
use std::path::{Path, PathBuf};

/// The host filesystem as compilation sees it (lstat, read_dir, readlink).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostFs;

fn kind_of(ft: std::fs::FileType) -> FileKind {
    if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Dir
    } else if ft.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

impl FsView for HostFs {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| kind_of(m.file_type()))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FileKind)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            // Names that are not UTF-8 cannot appear in a policy; skip them.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            out.push((name, kind_of(entry.file_type()?)));
        }
        out.sort();
        Ok(out)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn link_count(&self, path: &Path) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(path).ok().map(|m| m.nlink())
    }
}
