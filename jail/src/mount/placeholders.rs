//! Host placeholders for protected paths that do not exist yet.
//!
//! A mount needs a mount point, so for a missing protected path (say
//! `ws/.vscode`) the supervisor creates its first missing component on the
//! host, empty, before the jail clones the host tree; the jail masks it
//! read-only, so the command cannot create the real thing. After the run the
//! supervisor removes each placeholder it created if it is still empty. If
//! the supervisor is killed with SIGKILL the placeholders stay behind (empty
//! directories or empty files): the same residual as srt.
//!
//! Creation and removal go through `openat2(RESOLVE_NO_SYMLINKS)` on the
//! parent and never follow the last component, so a racing symlink cannot
//! make oajail create or delete anything elsewhere.

use super::{Context, MountError};
use oajail_policy::compile::mounts::{MountPlan, NodeKind};
use rustix::fs::{AtFlags, CWD, Mode, OFlags, ResolveFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Placeholders this process created; removed by [`Placeholders::remove`]
/// or on drop.
#[derive(Debug, Default)]
pub struct Placeholders {
    created: Vec<(PathBuf, NodeKind)>,
}

/// Create the plan's placeholders on the host (call before starting the
/// jail, in the supervisor). One that already exists is left alone.
pub fn create_placeholders(plan: &MountPlan) -> Result<Placeholders, MountError> {
    let mut done = Placeholders::default();
    for p in &plan.placeholders {
        let path = PathBuf::from(&p.path);
        let what = || format!("create placeholder {}", p.path);
        let (parent, name) = split(&path).ctx(what)?;
        let made = match p.kind {
            NodeKind::Dir => {
                rustix::fs::mkdirat(&parent, name.as_str(), Mode::from_raw_mode(0o755))
            }
            NodeKind::File | NodeKind::Symlink => {
                let flags = OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::WRONLY
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                rustix::fs::openat(&parent, name.as_str(), flags, Mode::from_raw_mode(0o600))
                    .map(drop)
            }
        };
        match made {
            Ok(()) => done.created.push((path, p.kind)),
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e).ctx(what),
        }
    }
    Ok(done)
}

impl Placeholders {
    /// Paths created (for messages and tests).
    pub fn paths(&self) -> Vec<PathBuf> {
        self.created.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Remove every placeholder that is still empty; returns those left behind.
    pub fn remove(mut self) -> Vec<PathBuf> {
        self.remove_all()
    }

    fn remove_all(&mut self) -> Vec<PathBuf> {
        let mut left = Vec::new();
        for (path, kind) in std::mem::take(&mut self.created).into_iter().rev() {
            if remove_one(&path, kind).is_err() {
                left.push(path);
            }
        }
        left
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        self.remove_all();
    }
}

fn remove_one(path: &Path, kind: NodeKind) -> std::io::Result<()> {
    let (parent, name) = split(path)?;
    match kind {
        // rmdir refuses a non-empty directory: whatever was put there stays.
        NodeKind::Dir => rustix::fs::unlinkat(&parent, name.as_str(), AtFlags::REMOVEDIR)?,
        NodeKind::File | NodeKind::Symlink => {
            let st = rustix::fs::statat(&parent, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
            let regular = (st.st_mode & libc::S_IFMT) == libc::S_IFREG;
            if !regular || st.st_size != 0 {
                return Err(std::io::Error::other(
                    "placeholder was changed; left in place",
                ));
            }
            rustix::fs::unlinkat(&parent, name.as_str(), AtFlags::empty())?;
        }
    }
    Ok(())
}

/// The parent directory (opened without following symlinks) and the name.
fn split(path: &Path) -> std::io::Result<(OwnedFd, String)> {
    let parent = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent"))?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?
        .to_string_lossy()
        .into_owned();
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = rustix::fs::openat2(
        CWD,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    )?;
    Ok((fd, name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use oajail_policy::compile::mounts::Placeholder;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("placeholders-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn plan(items: &[(&Path, NodeKind)]) -> MountPlan {
        MountPlan {
            steps: Vec::new(),
            placeholders: items
                .iter()
                .map(|(p, k)| Placeholder {
                    path: p.display().to_string(),
                    kind: *k,
                })
                .collect(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn created_empty_and_removed_when_still_empty() {
        let dir = scratch("empty");
        let (d, f) = (dir.join(".vscode"), dir.join(".mcp.json"));
        let made =
            create_placeholders(&plan(&[(&d, NodeKind::Dir), (&f, NodeKind::File)])).unwrap();
        assert!(d.is_dir() && f.is_file());
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 0);
        assert!(made.remove().is_empty());
        assert!(!d.exists() && !f.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn existing_paths_are_not_claimed_and_changed_placeholders_stay() {
        let dir = scratch("kept");
        let mine = dir.join(".idea");
        std::fs::create_dir(&mine).unwrap();
        let (d, f) = (dir.join(".vscode"), dir.join(".gitmodules"));
        let plan = plan(&[
            (&mine, NodeKind::Dir),
            (&d, NodeKind::Dir),
            (&f, NodeKind::File),
        ]);
        let made = create_placeholders(&plan).unwrap();
        assert_eq!(made.paths(), vec![d.clone(), f.clone()]);
        std::fs::write(d.join("x"), "x").unwrap();
        std::fs::write(&f, "changed").unwrap();
        let mut left = made.remove();
        left.sort();
        let mut want = vec![f.clone(), d.clone()];
        want.sort();
        assert_eq!(left, want);
        assert!(
            mine.is_dir(),
            "a directory that existed before is never removed"
        );
    }

    #[test]
    fn a_symlinked_parent_is_refused() {
        let dir = scratch("link");
        std::fs::create_dir(dir.join("real")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let target = dir.join("link/.vscode");
        assert!(create_placeholders(&plan(&[(&target, NodeKind::Dir)])).is_err());
        assert!(!dir.join("real/.vscode").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
