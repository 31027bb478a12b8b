//! `oajail learn [-s FILE] [--out FILE] [--report FILE] -- CMD`: run CMD
//! in the jail under FILE (default: the built-in policy), with every
//! refusal recorded (the read watch on), then write FILE plus the smallest
//! entries that would have allowed what was refused.
//!
//! The run is an ordinary jailed run: what the settings refuse stays
//! refused (no asking, no decider). Each refusal's entry is the one its
//! live line proposes (`oajail_policy::compile::explain`, `learn`), so a
//! secret store, a mandatory protection or a path that would widen to one
//! is never proposed; those are listed with the reason. An entry for a
//! directory that does not exist yet (oajail ignores missing entries) is
//! made on the host, empty, and said. The result passes `policy check`;
//! running again with `-s OUT --out OUT` adds what the next steps of the
//! command need, until nothing is refused.
//!
//! The exit status is the command's, so a loop can stop when it passes.

use crate::cli::{Common, LearnArgs};
use crate::desk::Seen;
use crate::run::Ran;
use crate::settings::Origin;
use crate::{Fail, settings};
use anyhow::{Context, anyhow};
use oajail_policy::compile::explain::Fix;
use oajail_policy::compile::suggest::is_container;
use oajail_policy::learn::{Addition, Declined, host_entry, merge};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where the learnt file goes without `--out`.
const DEFAULT_OUT: &str = "learned-settings.json";

/// `oajail learn`.
pub fn learn(common: &Common, mut args: LearnArgs) -> Result<i32, Fail> {
    args.run.check().map_err(|e| Fail::usage(anyhow!(e)))?;
    if args.run.ask || args.run.decider.is_some() {
        return Err(Fail::usage(anyhow!(
            "learn: --ask and --decider do not apply: learn refuses what the settings refuse and proposes entries instead"
        )));
    }
    args.run.watch_reads = true;
    let (loaded, origin, base) = load(common.settings.as_deref())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT));
    let Ran { code, desk } = crate::run::execute(common, &args.run, loaded, origin.clone())?;
    let record = desk.record();
    let (additions, mut declined, create) = proposals(&record);
    let (settings, added) = merge(&base, &additions);
    let mut created = make_dirs(&create, &added, &mut declined);
    created.extend(make_containers(&record));
    let text = serde_json::to_string_pretty(&settings).unwrap_or_default() + "\n";
    // What is written must load: the proposal passes `policy check`.
    oajail_policy::Policy::from_settings_json(&text, &out.display().to_string()).map_err(|e| {
        Fail::setup(anyhow!(
            "learn: the proposal does not load ({e}); nothing written"
        ))
    })?;
    std::fs::write(&out, &text)
        .with_context(|| format!("learn: cannot write {}", out.display()))
        .map_err(Fail::setup)?;
    tell(&out, &record, &added, &declined, &created);
    if let Some(path) = &args.report {
        let report = json!({
            "settings": out,
            "base": origin.to_string(),
            "exitStatus": code,
            "added": added,
            "declined": declined,
            "created": created,
            "refusals": record.iter().map(seen_json).collect::<Vec<_>>(),
        });
        let body = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
        std::fs::write(path, body)
            .with_context(|| format!("learn: cannot write {}", path.display()))
            .map_err(Fail::setup)?;
    }
    Ok(code)
}

/// The settings to start from: `-s FILE`, else the built-in policy; with
/// their JSON as written (what the learnt file extends).
fn load(flag: Option<&Path>) -> Result<(oajail_policy::srt::Loaded, Origin, Value), Fail> {
    let Some(path) = flag else {
        let policy = oajail_policy::Policy::builtin_default();
        let base = policy.to_srt_json();
        let loaded = oajail_policy::srt::Loaded {
            policy,
            warnings: Vec::new(),
            builtin_deny_read: Vec::new(),
        };
        return Ok((loaded, Origin::Builtin, base));
    };
    let (loaded, origin) = settings::load(Some(path)).map_err(Fail::usage)?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read settings file", path.display()))
        .map_err(Fail::usage)?;
    let base = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON", path.display()))
        .map_err(Fail::usage)?;
    Ok((loaded, origin, base))
}

/// The entries the refusals call for, what is declined, and the missing
/// directories behind entries (made only if their entry is added).
fn proposals(record: &[Seen]) -> (Vec<Addition>, Vec<Declined>, Vec<(String, PathBuf)>) {
    let mut additions = Vec::new();
    let mut declined = Vec::new();
    let mut create = Vec::new();
    for seen in record {
        let what = format!("{} {} ({})", seen.kind, seen.subject, seen.op);
        let proposal = match (&seen.explanation, &seen.network) {
            (Some(e), _) => match &e.fix {
                Fix::Add {
                    field,
                    value,
                    exists,
                    dir,
                } => {
                    if !exists && *dir {
                        create.push((value.clone(), expand_home(value)));
                    }
                    Ok(((*field).to_owned(), value.clone(), e.rule.clone()))
                }
                Fix::None { why } => Err(why.clone()),
            },
            (None, Some((reason, message))) => network(&seen.subject, reason)
                .map(|entry| ("network.allowedDomains".to_owned(), entry, message.clone())),
            (None, None) => Err("the policy could not be read again to explain it".into()),
        };
        match proposal {
            Ok((field, value, rule)) => additions.push(Addition {
                field,
                value,
                reasons: vec![format!("{what} was refused: {rule}")],
            }),
            Err(why) => declined.push(Declined { what, why }),
        }
    }
    (additions, declined, create)
}

fn network(subject: &str, reason: &str) -> Result<String, String> {
    let (host, port) = subject
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("{subject} names no port"))?;
    host_entry(
        host.trim_start_matches('[').trim_end_matches(']'),
        port,
        reason,
    )
}

/// Make the missing directories of the entries added (oajail ignores an
/// entry that does not exist); a failure turns the entry's proposal into
/// a declined one.
fn make_dirs(
    create: &[(String, PathBuf)],
    added: &[Addition],
    declined: &mut Vec<Declined>,
) -> Vec<String> {
    let mut made = Vec::new();
    for (value, path) in create {
        if !added.iter().any(|a| &a.value == value) || path.exists() {
            continue;
        }
        match std::fs::create_dir_all(path) {
            Ok(()) => made.push(value.clone()),
            Err(e) => declined.push(Declined {
                what: format!("create {value}"),
                why: format!("{e}; create it, or the entry is ignored"),
            }),
        }
    }
    made
}

/// A command that could not make `~/.cache` (or `~/.config`,
/// `~/.local/share`, `~/.local/state`) never reached its own directory
/// below it, and no entry is proposed for the container itself (it holds
/// secret stores and protected paths): make the empty container, so the
/// next round sees the tool's own directory.
fn make_containers(record: &[Seen]) -> Vec<String> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    let mut made = Vec::new();
    for seen in record
        .iter()
        .filter(|s| s.kind == "write" && s.op == "mkdir")
    {
        let path = Path::new(&seen.subject);
        if is_container(&home, path) && !path.exists() && std::fs::create_dir_all(path).is_ok() {
            made.push(shown(&home, path));
        }
    }
    made
}

fn shown(home: &Path, path: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// What learn did, on stderr.
fn tell(
    out: &Path,
    record: &[Seen],
    added: &[Addition],
    declined: &[Declined],
    created: &[String],
) {
    let refused: u64 = record.iter().map(|s| s.count).sum();
    eprintln!(
        "oajail: learn: {refused} refusal(s), {} different; {} entr{} added to {}",
        record.len(),
        added.len(),
        if added.len() == 1 { "y" } else { "ies" },
        out.display()
    );
    for a in added {
        eprintln!("oajail: learn: added {} to {}", a.value, a.field);
    }
    for c in created {
        eprintln!(
            "oajail: learn: made the empty directory {c} (an entry must exist, and a tool's own directory goes below it)"
        );
    }
    for d in declined {
        eprintln!("oajail: learn: not proposed: {}: {}", d.what, d.why);
    }
}

fn seen_json(s: &Seen) -> Value {
    json!({
        "kind": s.kind,
        "op": s.op,
        "subject": s.subject,
        "count": s.count,
        "rule": s.explanation.as_ref().map(|e| e.rule.clone())
            .or_else(|| s.network.as_ref().map(|(_, m)| m.clone())),
    })
}
