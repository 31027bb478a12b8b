//! The container tier's private directory: where the full jail mounts a
//! private `/tmp`, a run without a mount view gets a directory of its own,
//! `/tmp/oajail-<uid>-<unique>/`, with `tmp/` (the command's `TMPDIR`, the
//! only temporary directory it may write; Landlock keeps the rest of `/tmp`
//! out of its reach) and `etc/` (what the command may read but not write:
//! the run's trust bundle).
//!
//! It is the one thing a run leaves on the file system while it lasts, and
//! it does not outlive the run: the supervisor removes it at exit, and
//! holds an exclusive `flock` on it meanwhile, so that the next run in
//! the container removes what a `kill -9` left behind (a directory whose
//! lock nobody holds), once its command runs. Only the caller's own
//! directories are looked at.

use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the run directories are made: the first of these where one can
/// be (a container may have a read-only `/tmp`), then the caller's
/// `$TMPDIR` and `$XDG_RUNTIME_DIR`.
const BASES: &[&str] = &["/tmp", "/var/tmp"];

/// A run's private directory; removed when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    /// The lock that marks it as in use (released by the kernel when this
    /// process dies, however it dies).
    _lock: Flock<File>,
}

impl RunDir {
    /// Make this run's directory ([`RunDir::sweep`] removes what killed
    /// runs left, off the start-up path).
    pub fn create() -> io::Result<RunDir> {
        let prefix = prefix();
        let mut last = io::Error::other("no /tmp or /var/tmp to make the run's directory in");
        for base in bases() {
            match RunDir::create_in(&base, &prefix) {
                Ok(dir) => return Ok(dir),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn create_in(base: &Path, prefix: &str) -> io::Result<RunDir> {
        // Made under a name the sweep does not look at, locked, then
        // renamed: another run's sweep never sees it unlocked.
        let (staged, suffix) = unique(base, &format!(".{prefix}"))?;
        let path = base.join(format!("{prefix}{suffix}"));
        let made = (|| {
            let dir = File::open(&staged)?;
            let lock = Flock::lock(dir, FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| io::Error::from(e))?;
            for sub in ["tmp", "etc"] {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(staged.join(sub))?;
            }
            let (cwd, no) = (rustix::fs::CWD, rustix::fs::RenameFlags::NOREPLACE);
            rustix::fs::renameat_with(cwd, &staged, cwd, &path, no)?;
            Ok(lock)
        })();
        match made {
            Ok(lock) => Ok(RunDir { path, _lock: lock }),
            Err(e) => {
                let _ = remove_all(&staged);
                Err(e)
            }
        }
    }

    /// Remove the caller's run directories that no live run holds (what a
    /// `kill -9` left). Called once the command runs: it is not on the
    /// start-up path, and this run's own directory is locked.
    pub fn sweep(&self) {
        if let Some(base) = self.path.parent() {
            sweep(base, &prefix(), nix::unistd::getuid().as_raw());
        }
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The command's `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }

    /// What the command reads and may not write.
    pub fn etc(&self) -> PathBuf {
        self.path.join("etc")
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = remove_all(&self.path) {
            eprintln!(
                "oajail: tmpdir: could not remove {} ({}); the next run removes it",
                self.path.display(),
                crate::error::lower_first(&e.to_string())
            );
        }
    }
}

/// The places a run directory may be made, in order (directories only).
fn bases() -> Vec<PathBuf> {
    let vars = ["TMPDIR", "XDG_RUNTIME_DIR"].map(|v| std::env::var_os(v).map(PathBuf::from));
    let mut out: Vec<PathBuf> = BASES.iter().map(PathBuf::from).collect();
    out.extend(vars.into_iter().flatten().filter(|p| p.is_absolute()));
    out.retain(|p| p.is_dir());
    out.dedup();
    out
}

/// `oajail-<uid>-`: the caller's run directories.
fn prefix() -> String {
    format!("oajail-{}-", nix::unistd::getuid().as_raw())
}

/// Make `<base>/<prefix><unique>` (mode 0700), new; returns it and the
/// unique part.
fn unique(base: &Path, prefix: &str) -> io::Result<(PathBuf, String)> {
    let pid = std::process::id();
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let suffix = format!("{pid:x}{nanos:08x}{attempt:x}");
        let path = base.join(format!("{prefix}{suffix}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok((path, suffix)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no unique name for the run's directory"))
}

/// Remove the caller's run directories that no live run holds.
fn sweep(base: &Path, prefix: &str, uid: u32) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        // Ours, and a real directory (not a link someone planted).
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if !ours {
            continue;
        }
        let Ok(dir) = File::open(&path) else {
            continue;
        };
        // Held: a run is using it.
        if Flock::lock(dir, FlockArg::LockExclusiveNonblock).is_ok() {
            let _ = remove_all(&path);
        }
    }
}

/// Remove a tree the command wrote, directories it made unreadable
/// included (they are its user's, so their mode may be changed).
fn remove_all(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            open_up(path);
            std::fs::remove_dir_all(path)
        }
    }
}

/// Give every directory below `path` (links not followed) mode 0700.
fn open_up(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A directory whose lock nobody holds is swept; a held one stays; one
    /// of the same name made by the sweep's own test as a link stays.
    #[test]
    fn sweep_removes_only_unheld_directories() {
        let base = std::env::temp_dir().join(format!("oajail-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let uid = nix::unistd::getuid().as_raw();
        let stale = base.join("p-stale");
        std::fs::create_dir_all(stale.join("tmp/locked")).unwrap();
        std::fs::set_permissions(stale.join("tmp/locked"), PermissionsExt::from_mode(0o000))
            .unwrap();
        let live = base.join("p-live");
        std::fs::create_dir_all(&live).unwrap();
        let held = Flock::lock(File::open(&live).unwrap(), FlockArg::LockExclusive).unwrap();
        std::os::unix::fs::symlink(&live, base.join("p-link")).unwrap();
        sweep(&base, "p-", uid);
        assert!(!stale.exists());
        assert!(live.exists());
        assert!(base.join("p-link").exists());
        drop(held);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
