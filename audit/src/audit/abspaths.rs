//! Canaries at the absolute paths a policy names (`/etc/shadow`,
//! `/home/alice/.ssh`), without writing anything on the host.
//!
//! The lab has its own mount namespace: for each such path it overlays the
//! nearest existing directory (`/etc`, `/home`) with an upper directory
//! inside the lab, where the audit planted the fake file beforehand. The
//! command then sees the canary at exactly the path the policy names, and
//! the host's directory is untouched (overlayfs writes only to its upper).
//!
//! Paths the lab cannot fake without disturbing what it runs on are left
//! out: the kernel's trees (`/proc`, `/sys`, `/dev`), `/tmp` (the jail's own),
//! anything whose nearest existing directory is `/` or holds the lab
//! itself, and paths through a symlink or a file.

use super::Loc;
use std::path::{Component, Path, PathBuf};

/// At most this many absolute paths of the policy get a canary.
pub const MAX_ABSOLUTE_PATHS: usize = 24;

/// Top-level trees the lab never overlays.
const NEVER: &[&str] = &["/proc", "/sys", "/dev", "/tmp"];

/// Where the canary for an absolute policy path goes: the path itself when
/// it names a file (or nothing yet), `<dir>/.oaj-canary` when the host has
/// it as a directory. `None` when the lab cannot show one there.
pub fn planted_abs(path: &str, lab_base: &Path) -> Option<Loc> {
    let p = Path::new(path);
    let plain = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain || NEVER.iter().any(|n| p.starts_with(n)) {
        return None;
    }
    let file = match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => p.join(".oaj-canary"),
        Ok(m) if m.is_file() => p.to_path_buf(),
        Ok(_) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => p.to_path_buf(),
        Err(_) => return None,
    };
    let anchor = anchor(&file)?;
    if anchor == Path::new("/") || lab_base.starts_with(&anchor) {
        return None;
    }
    Some(Loc::Abs(file.display().to_string()))
}

/// The nearest existing directory above `file`; `None` when the first
/// existing component is a symlink or not a directory.
fn anchor(file: &Path) -> Option<PathBuf> {
    let mut dir = file.parent()?;
    loop {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => return Some(dir.to_path_buf()),
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => dir = dir.parent()?,
            Err(_) => return None,
        }
    }
}

/// One overlay of the lab: the host directory it covers and the canaries
/// planted in its upper layer (slug, path relative to the directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The host directory overlaid (`/etc`).
    pub dir: PathBuf,
    /// (canary slug, path below `dir`).
    pub files: Vec<(String, PathBuf)>,
}

/// The overlays that show every absolute source: one per outermost
/// anchor (a path under `/etc/ssh` shares `/etc`'s overlay when the policy
/// also names a path whose anchor is `/etc`), so overlays never stack.
pub fn overlay_plan(sources: &[(String, Loc)]) -> Vec<Overlay> {
    let files: Vec<(String, PathBuf, PathBuf)> = sources
        .iter()
        .filter_map(|(slug, loc)| match loc {
            Loc::Abs(p) => {
                let p = PathBuf::from(p);
                anchor(&p).map(|a| (slug.clone(), p, a))
            }
            _ => None,
        })
        .collect();
    let mut anchors: Vec<&PathBuf> = files.iter().map(|(_, _, a)| a).collect();
    anchors.sort_by_key(|a| a.as_os_str().len());
    let mut out: Vec<Overlay> = Vec::new();
    for a in anchors {
        if !out.iter().any(|o| a.starts_with(&o.dir)) {
            out.push(Overlay {
                dir: a.clone(),
                files: Vec::new(),
            });
        }
    }
    for (slug, path, _) in files {
        if let Some(o) = out.iter_mut().find(|o| path.starts_with(&o.dir)) {
            let rel = path.strip_prefix(&o.dir).unwrap_or(&path).to_path_buf();
            o.files.push((slug, rel));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_trees_root_and_the_lab_are_never_overlaid() {
        let base = Path::new("/var/tmp/oajail-audit-0");
        for p in [
            "/proc/1/environ",
            "/tmp/x",
            "/secret-at-root",
            "/var/x/y",
            "/etc/../x",
        ] {
            assert_eq!(planted_abs(p, base), None, "{p}");
        }
    }

    #[test]
    fn files_and_directories_get_a_canary_below_an_existing_directory() {
        let base = Path::new("/var/tmp/oajail-audit-0");
        assert_eq!(
            planted_abs("/etc/oaj-no-such/key", base),
            Some(Loc::Abs("/etc/oaj-no-such/key".into()))
        );
        assert_eq!(
            planted_abs("/etc", base),
            Some(Loc::Abs("/etc/.oaj-canary".into())),
            "a directory gets its canary inside, under its own overlay"
        );
        assert_eq!(
            planted_abs("/usr/bin", base),
            Some(Loc::Abs("/usr/bin/.oaj-canary".into()))
        );
    }

    #[test]
    fn nested_anchors_share_the_outer_overlay() {
        let src = |s: &str, p: &str| (s.to_owned(), Loc::Abs(p.to_owned()));
        let plan = overlay_plan(&[
            src("a", "/usr/share/oaj-x/key"),
            src("b", "/usr/oaj-y"),
            src("c", "/etc/oaj-z"),
        ]);
        let dirs: Vec<&Path> = plan.iter().map(|o| o.dir.as_path()).collect();
        assert_eq!(dirs, [Path::new("/usr"), Path::new("/etc")]);
        assert_eq!(
            plan[0].files,
            [
                ("a".to_owned(), PathBuf::from("share/oaj-x/key")),
                ("b".to_owned(), PathBuf::from("oaj-y"))
            ]
        );
    }
}
