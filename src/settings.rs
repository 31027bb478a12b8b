//! Settings lookup: `-s FILE`, else `$OAJAIL_SETTINGS`, else
//! `~/.srt-settings.json`, else the built-in default.
//!
//! A file that was named (by flag or variable) must exist; a file that exists
//! must be valid. Either failure is one line naming the file (and the JSON
//! path of the field) and the run stops: there is never a fallback to the
//! default after a bad or missing named file.

use anyhow::{Context, Result, bail};
use oajail_policy::Policy;
use oajail_policy::srt::Loaded;
use std::path::{Path, PathBuf};

/// Where the effective policy came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A settings file.
    File(PathBuf),
    /// The built-in default.
    Builtin,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Builtin => f.write_str("built-in default policy"),
        }
    }
}

/// Find and load the effective policy, with the warnings that depend on
/// where it runs (an `allowRead` that re-opens a whole denied region here).
/// A settings file keeps the built-in secret stores denied (those it does
/// not re-allow: `Policy::deny_builtin_secret_stores`); the re-open check
/// looks at the file's own entries only.
pub fn load(flag: Option<&Path>) -> Result<(Loaded, Origin)> {
    let (mut loaded, origin) = find_and_load(flag)?;
    loaded.warnings.extend(reopen_warnings(&loaded.policy));
    loaded.warnings.extend(write_warnings(&loaded.policy));
    loaded.builtin_deny_read = match origin {
        Origin::File(_) => loaded.policy.deny_builtin_secret_stores(),
        Origin::Builtin => loaded.policy.filesystem.deny_read.clone(),
    };
    Ok((loaded, origin))
}

/// `oajail_policy::reopen` bound to this caller's home and working
/// directory, both resolved through symbolic links so `.` and `~` compare.
fn reopen_warnings(policy: &Policy) -> Vec<String> {
    let (Some(home), Ok(cwd)) = (
        std::env::var_os("HOME").filter(|h| !h.is_empty()),
        std::env::current_dir(),
    ) else {
        return Vec::new();
    };
    let home = std::fs::canonicalize(&home).unwrap_or_else(|_| PathBuf::from(home));
    oajail_policy::reopen::reopened_regions(&policy.filesystem, &home, &cwd)
}

/// `oajail_policy::host_runs::write_warnings` bound to this caller: an
/// `allowWrite` entry the guard always refuses, or one that lets the
/// command plant what a host tool runs later.
fn write_warnings(policy: &Policy) -> Vec<String> {
    let (Some(home), Ok(cwd)) = (
        std::env::var_os("HOME").filter(|h| !h.is_empty()),
        std::env::current_dir(),
    ) else {
        return Vec::new();
    };
    let home = std::fs::canonicalize(&home).unwrap_or_else(|_| PathBuf::from(home));
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|c| c.is_absolute() && *c != home.join(".config"));
    oajail_policy::host_runs::write_warnings(
        &policy.filesystem,
        &home,
        &cwd,
        config_home.as_deref(),
    )
}

fn find_and_load(flag: Option<&Path>) -> Result<(Loaded, Origin)> {
    let named = flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("OAJAIL_SETTINGS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(path) = named {
        return load_file(&path);
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let path = Path::new(&home).join(".srt-settings.json");
        // Only a name that is truly absent falls back to the default: a
        // dangling symlink or an unreadable directory is an error, not "no
        // settings" (`Path::exists` would say false for both).
        match std::fs::symlink_metadata(&path) {
            Ok(_) => return load_file(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("{}: cannot read settings file", path.display()));
            }
        }
    }
    let loaded = Loaded {
        policy: Policy::builtin_default(),
        warnings: Vec::new(),
        builtin_deny_read: Vec::new(),
    };
    Ok((loaded, Origin::Builtin))
}

fn load_file(path: &Path) -> Result<(Loaded, Origin)> {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{shown}: settings file not found")
        }
        Err(e) => return Err(e).with_context(|| format!("{shown}: cannot read settings file")),
    };
    if text.trim().is_empty() {
        bail!("{shown}: settings file is empty");
    }
    let loaded = Policy::from_settings_json(&text, &shown).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((loaded, Origin::File(path.to_path_buf())))
}

/// Print the loader's warnings (unimplemented keys…) once, on stderr.
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("oajail: warning: {w}");
    }
}
