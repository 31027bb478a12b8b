//! Where an audit's labs live, and how they are removed.
//!
//! Every `oajail audit` works in a directory of its own under the base
//! (`/var/tmp/oajail-audit-<uid>` or `$OAJAIL_AUDIT_DIR`):
//! `run-<pid>`, beside a lock file `run-<pid>.lock` that
//! the run holds (`flock`) for as long as it lives. Its labs are made
//! inside and removed one by one as they finish; the run's directory goes
//! when the run ends, and the base too when nothing else is left there and
//! this run (or a killed one it swept) made it.
//!
//! Invariants:
//! - a run's lock file is made and locked (with the base locked, so no
//!   sweep sees it in between) before its directory, and removed after it;
//! - a lock that can be taken belongs to a dead run (the kernel drops a
//!   `flock` with its last descriptor, whatever killed the process, and
//!   the descriptor is close-on-exec, so no lab or jailed command holds
//!   it): the next audit removes that run's directory before its own
//!   starts (the sweep);
//! - only names this module makes are ever removed from the base: a
//!   directory the user points `$OAJAIL_AUDIT_DIR` at keeps everything
//!   else;
//! - removal does not stop at a directory without write or search
//!   permission (overlayfs leaves its `work/work` at mode 000, and a
//!   command may chmod what it made): such directories are opened up to
//!   their owner first.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Prefix of the run directories (and their lock files) in the base.
const RUN_PREFIX: &str = "run-";

/// One audit run's directory, removed on drop.
#[derive(Debug)]
pub struct RunDir {
    /// `<base>/run-<pid>`: the labs are made here.
    pub path: PathBuf,
    base: PathBuf,
    lock_path: PathBuf,
    made_base: bool,
    lock: Option<Flock<File>>,
}

/// A step of making the run's directory failed.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct RunDirError {
    /// The step (`create`, `lock`, `open`).
    pub what: &'static str,
    /// The path it failed on.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

/// What the sweep found and removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Directories of runs that ended without removing them.
    pub runs: usize,
    /// Lab directories of older versions of the audit, left in the base.
    pub old_labs: usize,
}

impl RunDir {
    /// Sweep what dead runs left in `base`, then make and lock this run's
    /// directory there. Errors name the path.
    pub fn create(base: &Path) -> Result<(RunDir, Swept), RunDirError> {
        let err = |what: &'static str, p: &Path, source| RunDirError {
            what,
            path: p.to_path_buf(),
            source,
        };
        let made_base = !base.exists();
        fs::create_dir_all(base).map_err(|e| err("create", base, e))?;
        // Sweeps and new runs take turns on the base itself: between the
        // lock file's creation and its flock, a sweep would take it for a
        // dead run's.
        let base_file = File::open(base).map_err(|e| err("open", base, e))?;
        let _turn = Flock::lock(base_file, FlockArg::LockExclusive)
            .map_err(|(_, e)| err("lock", base, io::Error::from(e)))?;
        let swept = sweep(base);
        // Short: the labs' unix sockets live below it, and a socket path
        // has 107 bytes. The pid is unique among live runs, and a dead
        // run's directory was just swept.
        let name = format!("{RUN_PREFIX}{}", std::process::id());
        let lock_path = base.join(format!("{name}.lock"));
        let file = File::create(&lock_path).map_err(|e| err("create", &lock_path, e))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| err("lock", &lock_path, io::Error::from(e)))?;
        let path = base.join(&name);
        let run = RunDir {
            path,
            base: base.to_path_buf(),
            lock_path,
            // A killed run that made the base could not remove it: the run
            // that sweeps it does.
            made_base: made_base || swept.runs > 0,
            lock: Some(lock),
        };
        // Still there: a dead run with this pid whose sweep failed. Ours now.
        let _ = remove_tree(&run.path);
        fs::create_dir(&run.path).map_err(|e| err("create", &run.path, e))?;
        Ok((run, swept))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = remove_tree(&self.path);
        let _ = fs::remove_file(&self.lock_path);
        drop(self.lock.take());
        if self.made_base {
            // Fails, as it should, while another run still works there.
            let _ = fs::remove_dir(&self.base);
        }
    }
}

/// Remove every run directory in `base` whose run is gone, and the lab
/// directories older versions of the audit left there (the caller holds
/// the base's lock).
fn sweep(base: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = fs::read_dir(base) else {
        return swept;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if let Some(run) = name.strip_prefix(RUN_PREFIX) {
            if let Some(run) = run.strip_suffix(".lock") {
                swept.runs += usize::from(sweep_run(base, run));
            } else if path.is_dir()
                && !base.join(format!("{name}.lock")).exists()
                && remove_tree(&path).is_ok()
            {
                // Its lock file is made first and removed last: a run
                // directory without one was left by a run that is gone.
                swept.runs += 1;
            }
        } else if is_old_lab(&name, &path) && remove_tree(&path).is_ok() {
            swept.old_labs += 1;
        }
    }
    swept
}

/// Take the lock of run `run` (`<pid>`); when it can be taken, the
/// run is dead: remove its directory, then its lock file.
fn sweep_run(base: &Path, run: &str) -> bool {
    let lock_path = base.join(format!("{RUN_PREFIX}{run}.lock"));
    let Ok(file) = File::open(&lock_path) else {
        return false;
    };
    let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        return false;
    };
    let dir = base.join(format!("{RUN_PREFIX}{run}"));
    let removed = !dir.exists() || remove_tree(&dir).is_ok();
    if removed {
        let _ = fs::remove_file(&lock_path);
    }
    drop(lock);
    removed
}

/// A lab directory as audits before run directories made them, straight
/// in the base: `<attack>-<16 hex token>` holding the lab's `home`, `ws`
/// and `logs`, untouched for [`OLD_LAB_AGE`] (an older audit may still be
/// running there: its labs live for seconds).
fn is_old_lab(name: &str, path: &Path) -> bool {
    let token = name.rsplit('-').next().unwrap_or("");
    let idle = |p: &Path| {
        fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > OLD_LAB_AGE)
    };
    token.len() == 16
        && token.bytes().all(|b| b.is_ascii_hexdigit())
        && ["home", "ws", "logs"].iter().all(|d| path.join(d).is_dir())
        && idle(path)
        && idle(&path.join("logs"))
}

/// How long an older version's lab must be untouched before a sweep
/// takes it for abandoned.
const OLD_LAB_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// `remove_dir_all`, which also gets through directories that deny their
/// owner write or search permission (opened up to 0700 first).
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            open_up(path);
            fs::remove_dir_all(path)
        }
        _ => Ok(()),
    }
}

/// Give every directory under `dir` (not through symlinks) mode 0700.
fn open_up(dir: &Path) {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        open_up(&entry.path());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("oajail-rundir-{name}-{}", std::process::id()));
        let _ = remove_tree(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_run_leaves_the_base_as_it_found_it() {
        let parent = scratch("leaves");
        let base = parent.join("base");
        let (run, swept) = RunDir::create(&base).unwrap();
        assert_eq!(swept, Swept::default());
        let work = run.path.join("lab-0123456789abcdef/abs/0/work/work");
        fs::create_dir_all(&work).unwrap();
        fs::set_permissions(&work, fs::Permissions::from_mode(0o000)).unwrap();
        drop(run);
        assert!(!base.exists(), "the base the run made is gone");
        remove_tree(&parent).unwrap();
    }

    #[test]
    fn the_sweep_removes_dead_runs_and_old_labs_and_nothing_else() {
        let base = scratch("sweep");
        // A dead run: its lock file is free.
        fs::create_dir_all(base.join("run-1-aaaa/lab/home")).unwrap();
        File::create(base.join("run-1-aaaa.lock")).unwrap();
        // A run directory whose lock file never got made.
        fs::create_dir_all(base.join("run-2-bbbb")).unwrap();
        // An older audit's lab, and things that are not ours.
        let old = base.join("A1-sendfile-14e56f8b96a496ec");
        for d in ["home", "ws", "logs"] {
            fs::create_dir_all(old.join(d)).unwrap();
        }
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for p in [old.clone(), old.join("logs")] {
            File::open(&p).unwrap().set_modified(hour_ago).unwrap();
        }
        // An older version's lab in use right now is left alone.
        for d in ["home", "ws", "logs"] {
            fs::create_dir_all(base.join("A1-sendfile-0123456789abcdef").join(d)).unwrap();
        }
        fs::create_dir_all(base.join("notes-14e56f8b96a496ec")).unwrap();
        fs::write(base.join("keep.txt"), "mine").unwrap();
        // A live run (this process holds its lock) survives.
        let (live, swept) = RunDir::create(&base).unwrap();
        assert_eq!(
            swept,
            Swept {
                runs: 2,
                old_labs: 1
            }
        );
        let mut left: Vec<String> = fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let name = live
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            left,
            [
                "A1-sendfile-0123456789abcdef".to_owned(),
                "keep.txt".into(),
                "notes-14e56f8b96a496ec".into(),
                name.clone(),
                format!("{name}.lock")
            ]
        );
        drop(live);
        remove_tree(&base).unwrap();
    }
}
