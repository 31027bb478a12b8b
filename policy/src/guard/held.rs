//! What protects a path by its spelling alone, for the code that judges a
//! policy without a filesystem: `policy check`'s warnings
//! (`crate::host_runs`) and `oajail audit`'s reading of a user's policy. The
//! guard decides with the same functions (`decide.rs`), plus what only the
//! tree can say (git directories found by their content, what a
//! repository's configuration names, links, `denyWrite` directories).

use super::anywhere;
use super::names::{self, XdgDirs};
use super::pattern::Entry;
use std::path::{Path, PathBuf};

/// The anchors a policy's paths are judged against.
#[derive(Debug, Clone)]
pub struct Anchors {
    /// The home directory (canonical).
    pub home: PathBuf,
    /// The XDG directories set elsewhere.
    pub xdg: XdgDirs,
}

/// What holds a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A name protected at any depth (`.bashrc`, `.vscode/`, `lefthook*`).
    Anywhere(&'static Entry),
    /// A path of the home protected whatever `allowWrite` says.
    Home(&'static Entry),
    /// Inside a `.git`: what git runs or reads as configuration.
    Git(&'static str),
    /// The home's configuration, protected by default: the dot entry or
    /// XDG directory that holds the path.
    Default(PathBuf),
}

impl Held {
    /// Whether an `allowWrite` entry can open it (only the default does).
    pub fn mandatory(&self) -> bool {
        !matches!(self, Held::Default(_))
    }

    /// The tool that reads or runs it, when one entry names it.
    pub fn tool(&self) -> Option<&'static str> {
        match self {
            Held::Anywhere(e) | Held::Home(e) => Some(e.tool),
            Held::Git(_) => Some("git"),
            Held::Default(_) => None,
        }
    }

    /// One phrase for messages: what is protected, and by which tool.
    pub fn describe(&self, home: &Path) -> String {
        match self {
            Held::Anywhere(e) => format!("every {} ({}: {})", e.shown(), e.tool, e.runs),
            Held::Home(e) => format!("~/{} ({}: {})", e.shown(), e.tool, e.runs),
            Held::Git(what) => format!(".git/{what} (git: what it runs on the next git command)"),
            Held::Default(area) => format!(
                "{} by default (the home's configuration)",
                shown_in_home(area, home)
            ),
        }
    }
}

/// `path` as `~/…` when it is in `home`.
pub fn shown_in_home(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rel) if rel.as_os_str().is_empty() => "~".to_owned(),
        Ok(rel) => format!("~/{}", rel.display()),
        Err(_) => path.display().to_string(),
    }
}

/// What always protects `path` (absolute, lexical), whatever `allowWrite`
/// names.
pub fn mandatory(path: &Path, at: &Anchors, allow_git_config: bool) -> Option<Held> {
    let parts: Vec<&str> = path.iter().skip(1).filter_map(|c| c.to_str()).collect();
    if let Some((e, _)) = anywhere::index().find(&parts) {
        return Some(Held::Anywhere(e));
    }
    if let Some(e) = names::mandatory_at(path, &at.home, &at.xdg) {
        return Some(Held::Home(e));
    }
    let git = parts.iter().position(|c| *c == ".git")?;
    let next = *parts.get(git + 1)?;
    let held = match next {
        "hooks" | "info" | "commondir" | "gitdir" => true,
        "config" | "config.worktree" => !allow_git_config,
        _ => false,
    };
    held.then(|| Held::Git(git_name(next)))
}

fn git_name(next: &str) -> &'static str {
    match next {
        "hooks" => "hooks",
        "info" => "info",
        "commondir" => "commondir",
        "gitdir" => "gitdir",
        "config.worktree" => "config.worktree",
        _ => "config",
    }
}

/// What holds `path` when the writable roots are `roots`: a mandatory
/// protection, or the default one unless the root nearest to `path`
/// names the configuration explicitly.
pub fn held(path: &Path, at: &Anchors, roots: &[PathBuf], allow_git_config: bool) -> Option<Held> {
    if let Some(h) = mandatory(path, at, allow_git_config) {
        return Some(h);
    }
    let area = names::default_area(path, &at.home, &at.xdg)?;
    (!names::explicitly_writable(&area, path, roots)).then_some(Held::Default(area))
}

/// The mandatory [`names::HOME`] entries strictly inside `path` (which an
/// `allowWrite` entry at `path` leaves protected), through the home and
/// the XDG directories.
pub fn home_entries_inside(path: &Path, at: &Anchors) -> Vec<(&'static Entry, PathBuf)> {
    let mut anchors = vec![(at.home.clone(), String::new())];
    anchors.extend(
        (at.xdg.anchors().into_iter()).map(|(d, prefix)| (d.to_path_buf(), prefix.to_owned())),
    );
    let mut out = Vec::new();
    for e in names::HOME {
        for (anchor, prefix) in &anchors {
            let Some(rest) = e.path.strip_prefix(prefix.as_str()) else {
                continue;
            };
            let place = anchor.join(rest);
            if place != path && place.starts_with(path) && !out.iter().any(|(o, _)| *o == e) {
                out.push((e, place));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Anchors {
        Anchors {
            home: "/h".into(),
            xdg: XdgDirs::default(),
        }
    }

    #[test]
    fn mandatory_default_and_open() {
        let roots = |r: &[&str]| r.iter().map(PathBuf::from).collect::<Vec<_>>();
        let h = |p: &str, r: &[&str]| held(Path::new(p), &at(), &roots(r), false);
        assert!(matches!(h("/h/.bashrc", &["/h"]), Some(Held::Anywhere(_))));
        assert!(matches!(
            h("/w/a/lefthook.toml", &["/w"]),
            Some(Held::Anywhere(_))
        ));
        assert!(matches!(
            h("/h/.cargo/config.toml", &["/h/.cargo"]),
            Some(Held::Home(_))
        ));
        assert_eq!(h("/h/.cargo/.package-cache", &["/h/.cargo"]), None);
        assert_eq!(
            h("/h/.myapprc", &["/h"]),
            Some(Held::Default("/h/.myapprc".into()))
        );
        assert_eq!(h("/h/.myapprc", &["/h", "/h/.myapprc"]), None);
        assert_eq!(h("/h/notes", &["/h"]), None);
        assert!(matches!(
            h("/w/.git/hooks/x", &["/w"]),
            Some(Held::Git("hooks"))
        ));
        assert_eq!(held(Path::new("/w/.git/config"), &at(), &[], true), None);
    }

    #[test]
    fn entries_left_inside_an_open_directory() {
        let inside: Vec<&str> = home_entries_inside(Path::new("/h/.cargo"), &at())
            .iter()
            .map(|(e, _)| e.path)
            .collect();
        assert!(inside.contains(&".cargo/config.toml") && inside.contains(&".cargo/registry"));
        assert!(!inside.contains(&".rustup"));
    }
}
