//! What depends on where a run starts, checked before the command runs:
//! an `allowWrite` entry that makes the whole home (or `/`) writable from
//! this directory, and a working directory the policy hides.

use crate::Fail;
use crate::plans::Plans;
use anyhow::anyhow;
use oajail_policy::Policy;
use oajail_policy::compile::explain::{Explainer, Fix};
use oajail_policy::compile::mounts::MountStep;
use std::path::{Path, PathBuf};

/// `allowWrite` entries that resolve to `~`, one of its ancestors or `/`
/// from here: a warning, or with `strict` the refusal of the run.
pub fn wide_writes(policy: &Policy, strict: bool) -> Result<(), Fail> {
    let (Some(home), Ok(cwd)) = (home(), std::env::current_dir()) else {
        return Ok(());
    };
    let lines = oajail_policy::wide::wide_writes(&policy.filesystem, &home, &cwd);
    match lines.first() {
        Some(first) if strict => Err(Fail::usage(anyhow!("{first} (refused: --strict)"))),
        _ => {
            crate::settings::print_warnings(&lines);
            Ok(())
        }
    }
}

/// A working directory the mount plan hides (the deepest step over it is
/// a mask) is refused, naming the directory and the entry: the command
/// would start in an empty directory, or not at all.
pub fn hidden_cwd(
    policy: &Policy,
    plans: &Plans,
    facts: &oajail_policy::compile::HostFacts,
) -> Result<(), Fail> {
    let cwd = std::fs::canonicalize(&facts.cwd).unwrap_or_else(|_| facts.cwd.clone());
    let deepest = (plans.compiled.mounts.steps.iter())
        .filter(|s| cwd.starts_with(s.path()))
        .max_by_key(|s| Path::new(s.path()).components().count());
    // A mask over it, or the private /tmp with nothing of the host's
    // bound in below it.
    let masked = matches!(
        deepest,
        Some(MountStep::MaskDir { .. } | MountStep::MaskFile { .. } | MountStep::Tmpfs { .. })
    );
    if !masked {
        return Ok(());
    }
    let explained = Explainer::new(policy, facts, &oajail_jail::HostFs)
        .map(|e| e.read(&oajail_jail::HostFs, &cwd))
        .ok();
    let rule = explained.as_ref().map_or("the policy", |e| e.rule.as_str());
    let or = match explained.as_ref().map(|e| &e.fix) {
        Some(fix @ Fix::Add { .. }) => format!(", or {}", fix.text()),
        _ => String::new(),
    };
    Err(Fail::usage(anyhow!(
        "working directory: {} is hidden in the jail by {rule}; run from another directory{or}",
        cwd.display()
    )))
}

fn home() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(std::fs::canonicalize(&home).unwrap_or_else(|_| PathBuf::from(home)))
}
