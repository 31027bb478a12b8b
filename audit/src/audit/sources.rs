//! Where the audit's canary secrets live in a lab: the home's secret
//! stores, the workspace `.env`, and the paths the policy's read rules
//! name, with the lab's placeholders for them and the lab's base
//! directory. The runbook, the exfiltration channels and the session all
//! start from these.

use super::Loc;
use super::abspaths::{MAX_ABSOLUTE_PATHS, planted_abs};
use crate::canary::HOME_SECRETS;
use oajail_policy::PathEntry;
use oajail_policy::Policy;
use std::path::PathBuf;

/// The workspace's own `.env`: (path relative to the workspace, slug).
pub const WS_SECRET: (&str, &str) = (".env", "ws-env");

/// At most this many paths named by the policy get a planted canary.
const MAX_POLICY_PATHS: usize = 24;

/// Every place a canary secret lives in an audit lab: (slug, where). The
/// home's secret stores, the workspace `.env`, every plain `~/…` or `./…`
/// path the policy's read rules name (so a store the user cares about is
/// planted even when the suite's fake home lacks it), and every absolute
/// one the lab can fake ([`super::abspaths`]).
pub fn secret_sources(policy: &Policy) -> Vec<(String, Loc)> {
    let mut out: Vec<(String, Loc)> = HOME_SECRETS
        .iter()
        .map(|(rel, slug)| ((*slug).to_owned(), Loc::Home((*rel).to_owned())))
        .collect();
    out.push((WS_SECRET.1.into(), Loc::Ws(WS_SECRET.0.into())));
    for (n, loc) in named(policy)
        .filter_map(planted_loc)
        .take(MAX_POLICY_PATHS)
        .enumerate()
    {
        if !out.iter().any(|(_, l)| *l == loc) {
            out.push((format!("policy-{n}"), loc));
        }
    }
    let base = default_base();
    let absolute = named(policy)
        .filter(|e| !e.is_glob() && e.path.starts_with('/'))
        .filter_map(|e| planted_abs(&e.path, &base));
    for (n, loc) in absolute.take(MAX_ABSOLUTE_PATHS).enumerate() {
        if !out.iter().any(|(_, l)| *l == loc) {
            out.push((format!("policy-abs-{n}"), loc));
        }
    }
    out
}

/// The paths the policy's read rules name (denyRead first), the built-in
/// secret stores a settings file keeps last (the fake home plants the
/// usual ones anyway; the file's own entries must not be crowded out).
fn named(policy: &Policy) -> impl Iterator<Item = &PathEntry> {
    let fs = &policy.filesystem;
    let builtin = |e: &&PathEntry| oajail_policy::builtin_reason(&e.path).is_some();
    let (stores, own): (Vec<&PathEntry>, Vec<&PathEntry>) = fs.deny_read.iter().partition(builtin);
    own.into_iter().chain(&fs.allow_read).chain(stores)
}

/// Where the canary for a policy path goes: the path itself when it names
/// a file, `<dir>/.oaj-canary` when the fake home already has it as a
/// directory (a secret store below it). Globs and absolute paths: none
/// here (absolute ones are [`planted_abs`]'s).
fn planted_loc(entry: &PathEntry) -> Option<Loc> {
    if entry.is_glob() && !entry.literal {
        return None;
    }
    let p = entry.path.as_str();
    let (rel, home) = match p.strip_prefix("~/") {
        Some(r) => (r, true),
        None if p.starts_with('/') || p.starts_with('~') || p == "." => return None,
        None => (p.strip_prefix("./").unwrap_or(p), false),
    };
    let is_dir = HOME_SECRETS
        .iter()
        .any(|(s, _)| home && s.starts_with(&format!("{rel}/")));
    let rel = if is_dir {
        format!("{rel}/.oaj-canary")
    } else {
        rel.to_owned()
    };
    Some(if home { Loc::Home(rel) } else { Loc::Ws(rel) })
}

/// The lab path placeholder for a location.
pub fn at(loc: &Loc) -> String {
    match loc {
        Loc::Home(r) => format!("@HOME@/{r}"),
        Loc::Ws(r) => format!("@WS@/{r}"),
        Loc::Abs(p) => p.clone(),
    }
}

/// The default directory for audit labs: `$OAJAIL_AUDIT_DIR`, else
/// `/var/tmp/oajail-audit-<uid>` (not /tmp: the jail gives the command a
/// private /tmp, which would hide the lab's workspace).
pub fn default_base() -> PathBuf {
    std::env::var_os("OAJAIL_AUDIT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(format!("/var/tmp/oajail-audit-{}", nix::unistd::getuid()))
        })
}
