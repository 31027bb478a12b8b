//! Masked credential files (srt `credentials.files[]` with `mode: "mask"`):
//! the supervisor's part.
//!
//! The supervisor reads each real file (it runs as the caller, outside the
//! jail); its value (the content without one trailing line ending) goes to
//! the proxy's swap, and the jail is told to show, at the same path, a
//! read-only file holding the sentinel and the same line ending (see
//! `oajail_jail::mount`). The path stays in `denyRead`, so the plan masks
//! the real file with an empty one underneath; the one Landlock rule added
//! here (read, on that path) is opened by pid 1 after the mounts, so it
//! names the sentinel's inode, never the real one.
//!
//! Refused, with one line naming `credentials.files[i].path`: a path that
//! does not exist, is a symlink, a directory or anything but a regular
//! file; an unreadable, empty, non-UTF-8 or over-[`MAX_BYTES`] file; a
//! value an HTTP header cannot carry (it is only ever swapped into one);
//! and a path the mount plan does not mask with a file (a denied parent
//! directory hides it already).
use crate::Fail;
use crate::plans::{self, Plans};
use crate::settings::Origin;
use anyhow::anyhow;
use oajail_jail::MaskedFileSpec;
use oajail_policy::compile::landlock::{FsAccess, FsRule};
use oajail_policy::compile::mounts::MountStep;
use oajail_policy::credentials::MaskedFile;
use oajail_policy::{PathEntry, Policy};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest masked file read (tokens and keys are far smaller).
pub const MAX_BYTES: u64 = 64 * 1024;

/// One masked file as read by the supervisor.
pub struct Found<'p> {
    /// The policy entry.
    pub rule: &'p MaskedFile,
    /// The real, symlink-free path (the jail's path too).
    pub path: PathBuf,
    /// The secret: the content without its trailing line ending.
    pub value: String,
    /// That line ending (`""`, `"\n"` or `"\r\n"`), kept after the sentinel.
    pub ending: &'static str,
}

/// Read every masked file of `policy`, checked against the mount plan.
pub fn read_all<'p>(
    policy: &'p Policy,
    plans: &Plans,
    origin: &Origin,
) -> Result<Vec<Found<'p>>, Fail> {
    let mut out = Vec::new();
    if policy.credential_files.is_empty() {
        return Ok(out);
    }
    let facts = plans::host_facts(origin)?;
    let written = written_paths(origin);
    for (n, rule) in policy.credential_files.iter().enumerate() {
        let i = index_in(&written, &rule.path).unwrap_or(n);
        let refuse = |why: String| {
            Fail::usage(anyhow!(
                "credentials.files[{i}].path: {:?}: {why}",
                rule.path.path
            ))
        };
        let path = rule.path.resolve(&facts.home, &facts.cwd);
        let found = read_one(rule, &path).map_err(refuse)?;
        let masked = (plans.compiled.mounts.steps.iter()).any(
            |s| matches!(s, MountStep::MaskFile { path, .. } if Path::new(path) == found.path),
        );
        if !masked {
            return Err(refuse(
                "the mount plan does not mask it with a file (is a parent directory denied?); \
                 a masked file must be visible to be replaced"
                    .into(),
            ));
        }
        out.push(found);
    }
    Ok(out)
}

/// `credentials.files[]` of the settings file as written: `(index, path
/// entry)` of each `"mask"` entry, so a refusal names the index the user
/// wrote (the policy keeps masked files sorted, without `"deny"` ones).
/// Empty for the built-in policy or a file in oajail's canonical form.
fn written_paths(origin: &Origin) -> Vec<(usize, PathEntry)> {
    let Origin::File(file) = origin else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let files = doc["credentials"]["files"].as_array().cloned();
    (files.unwrap_or_default().iter().enumerate())
        .filter(|(_, f)| f["mode"] == "mask")
        .filter_map(|(i, f)| Some((i, PathEntry::parse(f["path"].as_str()?, true).ok()?)))
        .collect()
}

fn index_in(written: &[(usize, PathEntry)], entry: &PathEntry) -> Option<usize> {
    (written.iter())
        .find(|(_, w)| w.path == entry.path)
        .map(|(i, _)| *i)
}

fn read_one<'p>(rule: &'p MaskedFile, path: &Path) -> Result<Found<'p>, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "no such file (the file's content is the secret, so it must exist)".to_owned()
        }
        _ => format!("cannot be read: {}", lower(&e)),
    })?;
    if meta.is_symlink() {
        return Err("is a symbolic link; name the file it points to".into());
    }
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.len() > MAX_BYTES {
        return Err(format!("is larger than {MAX_BYTES} bytes"));
    }
    let real = std::fs::canonicalize(path).map_err(|e| format!("cannot be read: {}", lower(&e)))?;
    let mut bytes = Vec::new();
    std::fs::File::open(&real)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot be read: {}", lower(&e)))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("is larger than {MAX_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| "is not utf-8 text".to_owned())?;
    let (value, ending) = split_ending(&text);
    if value.is_empty() {
        return Err("is empty".into());
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(
            "holds line breaks or control characters, which an http header \
                    cannot carry; mode \"mask\" needs a one-line value"
                .into(),
        );
    }
    Ok(Found {
        rule,
        path: real,
        value: value.to_owned(),
        ending,
    })
}

/// The text without one trailing line ending, and that ending.
fn split_ending(text: &str) -> (&str, &'static str) {
    if let Some(v) = text.strip_suffix("\r\n") {
        (v, "\r\n")
    } else if let Some(v) = text.strip_suffix('\n') {
        (v, "\n")
    } else {
        (text, "")
    }
}

fn lower(e: &std::io::Error) -> String {
    let s = e.to_string();
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// The jail's side: each file's sentinel content, and a read rule on its
/// path (opened by pid 1 after the mounts: the sentinel's inode).
pub fn apply(
    found: &[Found<'_>],
    sentinels: &[(String, String)],
    plans: &mut Plans,
) -> Vec<MaskedFileSpec> {
    let mut out = Vec::new();
    for (f, (_, sentinel)) in found.iter().zip(sentinels) {
        let path = f.path.display().to_string();
        plans.compiled.landlock.fs_rules.push(FsRule {
            path: path.clone(),
            access: [FsAccess::ReadFile].into(),
        });
        out.push(MaskedFileSpec {
            path,
            content: format!("{sentinel}{}", f.ending),
        });
    }
    out
}
