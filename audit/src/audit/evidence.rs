//! Judging one audit run: what the lab saw, relative to the policy.
//!
//! "Worked" is observed: a canary in the command's stdout or stderr, in any
//! sink's data or a DNS query name; a changed fake home; a killed host
//! canary process; bytes injected into a terminal; a daemon left behind; or
//! the probe's own `succeeded`. For exfiltration only canaries that arrived
//! count (a request the proxy accepted but whose bytes no sink received
//! exfiltrated nothing), and every secret that arrived must have been
//! readable under the policy for the finding to be `allowed`.

use super::grant::Grants;
use super::layer::blocked_by;
use super::{Case, Channel, Grant, Kind, Loc, Refusal, Target, Verdict};
use crate::lab::{Lab, Run};
use crate::verdict::Verdict as Probe;

/// What one run proves.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The verdict relative to the policy.
    pub verdict: Verdict,
    /// The entries that grant it (for `allowed`).
    pub grants: Vec<Grant>,
    /// What the probe and the lab saw.
    pub detail: String,
    /// The finding in one line: "allowed because <entry>", "blocked by
    /// <layer>: <rule>", "ESCAPE: it worked although <rule>".
    pub reason: String,
}

impl Judged {
    /// A run that proves nothing.
    pub fn inconclusive(detail: String) -> Judged {
        Judged {
            verdict: Verdict::Inconclusive,
            grants: Vec::new(),
            reason: format!("inconclusive: {detail}"),
            detail,
        }
    }
}

/// "allowed because …" for `grants`: the reads the missing `denyRead`
/// entries leave open in one clause (three paths named, then a count),
/// every other grant once.
pub fn because(grants: &[Grant]) -> String {
    let mut open: Vec<&str> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for g in grants {
        if g.field == "filesystem.denyRead" && g.entry.is_none() && !g.covers.is_empty() {
            if !open.contains(&g.covers.as_str()) {
                open.push(&g.covers);
            }
        } else if !parts.contains(&g.why) {
            parts.push(g.why.clone());
        }
    }
    match open.as_slice() {
        [] => {}
        [one] if parts.is_empty() => parts.push(format!(
            "no filesystem.denyRead entry covers {one} (reads are open unless denied)"
        )),
        _ => {
            let named = open.iter().take(3).copied().collect::<Vec<_>>().join(", ");
            let more = match open.len().saturating_sub(3) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            parts.insert(
                0,
                format!("no filesystem.denyRead entry covers {named}{more} (reads are open unless denied)"),
            );
        }
    }
    format!("allowed because {}", parts.join("; "))
}

/// Judged `blocked`: the layer that stopped it and the rule it met.
fn blocked(case: &Case, lab: &Lab, run: &Run, grants: &Grants<'_>, detail: String) -> Judged {
    Judged {
        verdict: Verdict::Blocked,
        grants: Vec::new(),
        reason: format!(
            "blocked by {}: {}",
            blocked_by(case, run, &lab.dir),
            grants.denial(&case.target)
        ),
        detail,
    }
}

/// Judged `escape`: it worked, and `why` the policy says no.
fn escape(detail: String, why: &str) -> Judged {
    Judged {
        verdict: Verdict::Escape,
        grants: Vec::new(),
        reason: format!("ESCAPE: it worked although {why}"),
        detail,
    }
}

/// Canary slugs seen anywhere the command could send them, with where.
fn canaries_seen(token: &str, run: &Run) -> Vec<(String, String)> {
    let needle = format!("oaj-canary-{token}-");
    let mut out: Vec<(String, String)> = Vec::new();
    let mut scan = |text: &str, place: String| {
        let lower = text.to_ascii_lowercase();
        for (i, _) in lower.match_indices(&needle) {
            let slug: String = lower[i + needle.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            let slug = slug.split('.').next().unwrap_or("").to_owned();
            if !out.iter().any(|(s, p)| *s == slug && *p == place) {
                out.push((slug, place.clone()));
            }
        }
    };
    scan(&run.stdout, "stdout".into());
    scan(&run.stderr, "stderr".into());
    for ev in &run.events {
        scan(&ev.data, format!("{} sink {}", ev.sink, ev.local));
        if let Some(n) = &ev.name {
            scan(n, format!("{} name {}", ev.sink, ev.local));
        }
    }
    out
}

/// The read target a seen canary slug stands for (`None`: not a secret
/// source of the policy, e.g. the host process's cwd).
fn source_of(slug: &str, sources: &[(String, Loc)]) -> Option<Target> {
    if slug.starts_with("env-") {
        return Some(Target::Env);
    }
    sources
        .iter()
        .find(|(s, _)| {
            let s = s.to_ascii_lowercase();
            s == slug || (!slug.is_empty() && s.starts_with(slug))
        })
        .map(|(_, l)| Target::Read(l.clone()))
}

/// Judge `run` of `case` in `lab` against the policy's `grants`.
pub fn judge(
    case: &Case,
    lab: &mut Lab,
    run: &Run,
    grants: &Grants<'_>,
    sources: &[(String, Loc)],
) -> Judged {
    if let Some(e) = &run.lab.lab_error {
        return Judged::inconclusive(format!("lab failed: {e}"));
    }
    let refused = run.report.is_none()
        && run.lab.exit_code.is_some_and(|c| c != 0)
        && super::lines::refusal(&run.stderr).is_some();
    match case.stage.refusal {
        Refusal::Required => return refusal_required(case, lab, run, grants, refused),
        Refusal::Blocks if refused && lab.home_changes().is_empty() => {
            return blocked(case, lab, run, grants, refusal_line(run));
        }
        _ => {}
    }
    let seen = canaries_seen(&lab.token, run);
    let mut effects: Vec<String> = seen
        .iter()
        .map(|(slug, place)| format!("canary {slug} in {place}"))
        .collect();
    effects.extend(
        lab.home_changes()
            .into_iter()
            .map(|c| format!("fake home {c}")),
    );
    if !lab.canary_alive() {
        effects.push("host canary process was killed".into());
    }
    if run.lab.pty_injected.is_some_and(|n| n > 0) {
        effects.push("bytes injected into the terminal".into());
    }
    if run.lab.leftover_daemons > 0 {
        effects.push("a daemon outlived the jail".into());
    }
    if let Some(change) = &run.lab.pty_state_changed {
        effects.push(format!("the terminal was left changed: {change}"));
    }
    if let Some(want) = case.stage.exit_code
        && run.report.is_some()
        && run.lab.exit_code != Some(want)
    {
        effects.push(format!(
            "exit status {:?} instead of the command's {want}",
            run.lab.exit_code
        ));
    }
    let probe = run.report.as_ref();
    let said = probe.map(|r| r.detail.clone()).unwrap_or_default();
    let detail = |extra: &str| {
        let mut d = said.clone();
        for part in effects.iter().map(String::as_str).chain([extra]) {
            if !part.is_empty() {
                if !d.is_empty() {
                    d.push_str("; ");
                }
                d.push_str(part);
            }
        }
        d
    };
    // An exfiltration through the network counts only what reached a sink
    // or a DNS query; the output channel is X1's (oajail's own deny log may
    // echo a refused name, which is not this channel working).
    let seen: Vec<(String, String)> = match &case.target {
        Target::Exfil(Channel::Stdout) => seen
            .into_iter()
            .filter(|(_, p)| p == "stdout" || p == "stderr")
            .collect(),
        Target::Exfil(_) => seen
            .into_iter()
            .filter(|(_, p)| p != "stdout" && p != "stderr")
            .collect(),
        _ => seen,
    };
    let worked = match &case.target {
        Target::Exfil(_) => !seen.is_empty(),
        // It ran at all (the tier's other rules are the other rows').
        Target::ContainerTier => probe.is_some() || !effects.is_empty(),
        // A daemon attack's probe "succeeds" in starting its daemon; it
        // works only if the lab finds the daemon alive after the jail.
        _ if case.stage.daemon => !effects.is_empty(),
        _ => probe.is_some_and(|r| r.verdict == Probe::Succeeded) || !effects.is_empty(),
    };
    if !worked {
        // A resource attack whose whole jail got SIGKILL (not the lab's
        // timeout): a memory cgroup's OOM killer ended it (memfd pages are
        // in no process's RSS, so it may pick the probe itself).
        let oom = run.report.is_none() && run.lab.exit_code == Some(137) && !run.lab.timed_out;
        if oom && case.kind == Kind::Resources && effects.is_empty() {
            let why = "the whole jail was killed (SIGKILL): a memory cgroup's OOM killer";
            return Judged {
                verdict: Verdict::Blocked,
                grants: Vec::new(),
                reason: format!(
                    "blocked by the memory cgroup (its OOM killer ended the whole jail): {}",
                    grants.denial(&case.target)
                ),
                detail: why.to_owned(),
            };
        }
        return not_worked(case, lab, run, grants, detail(""));
    }
    let granted = match &case.target {
        Target::Exfil(channel) => {
            let mut reads: Vec<Target> = Vec::new();
            for (slug, _) in &seen {
                let t = source_of(slug, sources).unwrap_or(Target::Never);
                if !reads.contains(&t) {
                    reads.push(t);
                }
            }
            grants.exfil(channel, &reads)
        }
        t => grants
            .of(t)
            .ok_or_else(|| "no policy entry grants it".to_owned()),
    };
    match granted {
        Ok(g) => Judged {
            verdict: Verdict::Allowed,
            reason: because(&g),
            grants: g,
            detail: detail(""),
        },
        Err(why) => match grants.tier_loss(case) {
            Some(loss) => Judged {
                verdict: Verdict::Allowed,
                reason: because(std::slice::from_ref(&loss)),
                grants: vec![loss],
                detail: detail(""),
            },
            None => escape(detail(&why), &why),
        },
    }
}

fn not_worked(case: &Case, lab: &Lab, run: &Run, grants: &Grants<'_>, detail: String) -> Judged {
    let Some(report) = &run.report else {
        let last = run.stderr.lines().last().unwrap_or("").trim().to_owned();
        return Judged::inconclusive(format!(
            "no probe verdict (exit {:?}, signal {:?}): {last}",
            run.lab.exit_code, run.lab.signal
        ));
    };
    match report.verdict {
        Probe::Blocked | Probe::Succeeded => blocked(case, lab, run, grants, detail),
        Probe::NotApplicable => Judged {
            verdict: Verdict::NotApplicable,
            grants: Vec::new(),
            reason: format!("not applicable on this kernel: {detail}"),
            detail,
        },
        Probe::Unexpected => Judged::inconclusive(detail),
    }
}

/// oajail's refusal line, not a start-up warning (or its last stderr line).
fn refusal_line(run: &Run) -> String {
    let line = super::lines::refusal(&run.stderr)
        .or_else(|| run.stderr.lines().last())
        .unwrap_or("")
        .trim();
    format!("refused: {line}")
}

/// Family I: the command must not run at all. It running (a probe verdict)
/// is the attack working, whatever it then did; a refusal without the one
/// `oajail:` line, or a lab that failed, proves nothing.
fn refusal_required(
    case: &Case,
    lab: &mut Lab,
    run: &Run,
    grants: &Grants<'_>,
    refused: bool,
) -> Judged {
    if let Some(e) = &run.lab.lab_error {
        return Judged::inconclusive(format!("lab failed: {e}"));
    }
    let changed = lab.home_changes();
    if refused && changed.is_empty() {
        return blocked(case, lab, run, grants, refusal_line(run));
    }
    if run.report.is_some() || !changed.is_empty() {
        let said = run.report.as_ref().map(|r| r.detail.as_str()).unwrap_or("");
        let detail = format!(
            "not refused: the command ran (exit {:?}) {said}; fake home changes: {changed:?}",
            run.lab.exit_code
        );
        return escape(detail, "oajail must refuse to run the command here");
    }
    Judged::inconclusive(format!(
        "no probe verdict and no `oajail:` refusal line (exit {:?}): {}",
        run.lab.exit_code,
        run.stderr.lines().last().unwrap_or("").trim()
    ))
}
