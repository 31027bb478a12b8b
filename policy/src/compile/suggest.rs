//! The narrowest settings entry that would allow a refused path, kept clear
//! of what must stay protected.
//!
//! Writes: a tool's own directory (`~/.npm`, `~/.cache/pip`,
//! `~/.local/share/<tool>`), else the directory the call wrote into, else
//! the path itself. Reads: the path itself, carved out of a broader deny.
//! Never proposed: the home directory, `/` or a top-level system
//! directory; a path that is, lies inside or contains a secret store (the
//! built-in list and the policy's own `denyRead`); a path inside a
//! mandatory protection (the guard's home catalogue: shell and tool
//! configuration, `~/.local/bin`, `~/.cargo` …), which the guard refuses
//! anyway; a home container (no collapsing `~/.config/tool` into
//! `~/.config`); a name the guard protects at any depth (`.vscode`,
//! `lefthook*` …); a path the settings deny by name.

use super::rules::Rules;
use super::{FsView, HostFacts};
use crate::guard::anywhere;
use crate::guard::names::{XdgDirs, components, mandatory_at};
use crate::{DEFAULT_DENY_READ, PathEntry, Policy};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Directories under the home whose children are tools' own directories.
pub const CONTAINERS: &[&str] = &[".cache", ".config", ".local/share", ".local/state"];

/// Whether `path` is one of the [`CONTAINERS`] under `home`, or a directory
/// on the way to one (`~/.local`): never proposed itself, but a tool that
/// cannot make it never gets as far as its own directory below it.
pub fn is_container(home: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(home) else {
        return false;
    };
    !rel.as_os_str().is_empty() && CONTAINERS.iter().any(|c| Path::new(c).starts_with(rel))
}

/// Top-level system directories whose children are proposed only by name.
const SYSTEM: &[&str] = &[
    "/etc",
    "/opt",
    "/srv",
    "/usr",
    "/usr/local",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/tmp",
    "/home",
    "/root",
    "/mnt",
    "/media",
];

/// A proposed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// The entry as it goes into the settings file (`~/`-relative under
    /// the home directory).
    pub value: String,
    /// The absolute path it names.
    pub path: PathBuf,
    /// It exists on the host now.
    pub exists: bool,
    /// It is (or, missing, is made as) a directory.
    pub dir: bool,
}

/// What a proposal must keep clear of.
#[derive(Debug)]
pub struct Protections {
    /// Secret stores (the built-in list, the policy's `denyRead`), with why.
    secrets: Vec<(PathBuf, String)>,
    /// Where `$XDG_*_HOME` put the home's configuration, for the guard's
    /// home catalogue.
    xdg: XdgDirs,
    /// `denyWrite` entries, the settings file, the oajail binary.
    deny_write: BTreeSet<PathBuf>,
}

impl Protections {
    pub(crate) fn new(policy: &Policy, facts: &HostFacts, fs: &dyn FsView, rules: &Rules) -> Self {
        let home = &rules.home;
        let mut secrets: Vec<(PathBuf, String)> = DEFAULT_DENY_READ
            .iter()
            .filter_map(|(text, why)| {
                let entry = PathEntry::parse(text, false).ok()?;
                Some((
                    entry.resolve(home, &facts.cwd),
                    format!("a secret store ({why})"),
                ))
            })
            .collect();
        for entry in &policy.filesystem.deny_read {
            for path in Rules::entry_paths(fs, "denyRead", entry, home, &facts.cwd) {
                let why = format!("denied by filesystem.denyRead \"{}\"", entry.path);
                secrets.push((path, why));
            }
        }
        let xdg = XdgDirs::elsewhere(
            home,
            facts.xdg_config_home.clone(),
            facts.xdg_data_home.clone(),
            facts.xdg_state_home.clone(),
        );
        Protections {
            secrets,
            xdg,
            deny_write: rules.deny_write.clone(),
        }
    }

    /// Why `c` may not be made writable, if it may not.
    pub fn write_refusal(&self, home: &Path, c: &Path) -> Option<String> {
        if let Some(why) = too_wide(home, c) {
            return Some(why);
        }
        for (secret, why) in &self.secrets {
            if c.starts_with(secret) {
                return Some(format!("{} is {why}", shown(home, secret)));
            }
            if secret.starts_with(c) {
                return Some(format!(
                    "{} would contain {}, {why}",
                    shown(home, c),
                    shown(home, secret)
                ));
            }
        }
        if let Some(e) = mandatory_at(c, home, &self.xdg) {
            return Some(format!(
                "{} is a mandatory protection ({}: {})",
                shown(home, c),
                e.tool,
                e.runs
            ));
        }
        // A directory above an entry of the catalogue (`~/.npm` above
        // `~/.npm/_npx`) may be proposed: the guard keeps refusing the entry
        // whatever the settings say, and the home's containers (`~/.config`)
        // are never proposed (`too_wide`).
        let parts = c
            .strip_prefix("/")
            .ok()
            .and_then(components)
            .unwrap_or_default();
        let anywhere_hit = anywhere::index().find(&parts).map(|(e, _)| e.shown());
        let named = parts.iter().find(|n| **n == ".git" || **n == ".claude");
        if let Some(name) = anywhere_hit.or(named.map(|n| (*n).to_owned())) {
            return Some(format!(
                "{name} is protected wherever it is (the guard refuses writes there whatever the settings say)"
            ));
        }
        if let Some(d) = self
            .deny_write
            .iter()
            .find(|d| c.starts_with(d) || d.starts_with(c))
        {
            return Some(format!(
                "{} is never writable (filesystem.denyWrite, the settings file or the oajail binary)",
                shown(home, d)
            ));
        }
        None
    }

    /// Why `c` may not be made readable, if it may not.
    pub fn read_refusal(&self, home: &Path, c: &Path) -> Option<String> {
        if let Some(why) = too_wide(home, c) {
            return Some(why);
        }
        self.secrets.iter().find_map(|(secret, why)| {
            let builtin = why.starts_with("a secret store");
            if c.starts_with(secret) && builtin {
                Some(format!(
                    "{} is {why}; oajail never proposes reading it",
                    shown(home, secret)
                ))
            } else if secret.starts_with(c) && c != secret {
                Some(format!(
                    "{} would contain {}, {why}",
                    shown(home, c),
                    shown(home, secret)
                ))
            } else {
                None
            }
        })
    }
}

/// The jail's own file systems: nothing of the host's is there to allow.
const JAIL_OWN: &[&str] = &["/dev", "/proc", "/sys"];

/// The home directory, `/`, an ancestor of the home, a top-level system
/// directory, the jail's own `/dev`, `/proc`, `/sys`.
fn too_wide(home: &Path, c: &Path) -> Option<String> {
    if let Some(own) = JAIL_OWN.iter().find(|o| c.starts_with(o)) {
        return Some(format!("{own} is the jail's own, not the host's"));
    }
    if home.starts_with(c) {
        return Some(format!(
            "{} would make the whole home directory (or more) writable",
            c.display()
        ));
    }
    let depth = c.components().count().saturating_sub(1);
    if !c.starts_with(home) && (depth < 2 || SYSTEM.iter().any(|s| Path::new(s) == c)) {
        return Some(format!("{} is a system directory", c.display()));
    }
    None
}

/// `~/…` under the home directory, the absolute path elsewhere.
pub(crate) fn shown(home: &Path, path: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The narrowest sensible `allowWrite` entry for a refused write of `path`
/// (`dir`: the call made a directory there).
pub(crate) fn write(
    p: &Protections,
    fs: &dyn FsView,
    home: &Path,
    path: &Path,
    dir: bool,
) -> Result<Suggestion, String> {
    // From the base down to the path: the first that keeps clear of every
    // protection (a base that contains one gives way to a deeper
    // directory; one inside a protection stays refused all the way down).
    // When none does, the reason given is the path's own.
    let mut refusal = None;
    for c in chain(&base(home, path), path) {
        match p.write_refusal(home, &c) {
            None => {
                let is_dir = c != path || dir;
                return Ok(suggestion(fs, home, c, is_dir));
            }
            Some(why) => refusal = Some(why),
        }
    }
    Err(refusal.unwrap_or_else(|| format!("{} cannot be allowed", path.display())))
}

/// The `allowRead` entry for a refused read of `path` that `denied` hides.
pub(crate) fn read(
    p: &Protections,
    fs: &dyn FsView,
    home: &Path,
    path: &Path,
    denied: &Path,
) -> Result<Suggestion, String> {
    if let Some(why) = p.read_refusal(home, path) {
        return Err(why);
    }
    if path == denied {
        return Err(format!(
            "{} is denied by name in the settings; oajail does not undo a deny written for it",
            shown(home, path)
        ));
    }
    let dir = fs.kind(path) == Some(super::FileKind::Dir);
    Ok(suggestion(fs, home, path.to_path_buf(), dir))
}

fn suggestion(fs: &dyn FsView, home: &Path, path: PathBuf, dir: bool) -> Suggestion {
    let kind = fs.kind(&path);
    Suggestion {
        value: shown(home, &path),
        exists: kind.is_some(),
        dir: kind.map_or(dir, |k| k == super::FileKind::Dir),
        path,
    }
}

/// Where the proposal starts for `path`: a tool's own directory under the
/// home, else the directory written into (the path itself directly in the
/// home or in a system directory).
fn base(home: &Path, path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(path).to_path_buf();
    if let Ok(rel) = path.strip_prefix(home) {
        let comps: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        for container in CONTAINERS {
            let depth = container.split('/').count();
            if comps.len() > depth && comps[..depth].join("/") == *container {
                return home.join(container).join(comps[depth]);
            }
        }
        return match comps.as_slice() {
            [first, _, ..] if first.starts_with('.') => home.join(first),
            [_] => path.to_path_buf(),
            _ => parent,
        };
    }
    if too_wide(home, &parent).is_some() {
        path.to_path_buf()
    } else {
        parent
    }
}

/// `base`, then each deeper directory down to `path` itself.
fn chain(base: &Path, path: &Path) -> Vec<PathBuf> {
    let mut out = vec![base.to_path_buf()];
    if let Ok(rest) = path.strip_prefix(base) {
        let mut at = base.to_path_buf();
        for c in rest.iter() {
            at.push(c);
            out.push(at.clone());
        }
    }
    out
}
