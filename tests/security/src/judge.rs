//! Judging a run: the probe's verdict plus the global post-conditions, and
//! the result record the report is generated from.
//!
//! Global post-conditions (after every jailed run): no canary in stdout,
//! stderr, any sink event or DNS query, or any workspace file; no sink or
//! stand-in socket contacted at all; the fake home unchanged; the host
//! canary process alive; nothing injected into the terminal; no daemon left.

use crate::catalog;
use crate::lab::{Lab, Run};
use crate::labspec::SinkEvent;
use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// Final outcome of one attack test, as recorded for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    /// Blocked and every post-condition held.
    Blocked,
    /// The kernel cannot run the attack (shown in the report, never silently green).
    NotApplicable,
    /// The attack worked or a post-condition failed.
    Escaped,
    /// The probe failed in a way it did not expect.
    Unexpected,
    /// oajail or the lab failed before the probe could run: proves nothing.
    NotRun,
    /// A documented residual (docs/threat-model.md) behaved exactly as
    /// documented, and every global post-condition held.
    Residual,
}

/// One line of the report's raw data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultRecord {
    /// Attack id (catalog).
    pub id: String,
    /// The judgement.
    pub judgement: Judgement,
    /// Probe detail and any post-condition violations.
    pub detail: String,
    /// The errno name the probe saw, if any.
    pub errno: Option<String>,
    /// The signal the probe saw, if any.
    pub signal: Option<i32>,
    /// uid the suite ran as.
    pub uid: u32,
    /// `uname -r`.
    pub kernel: String,
    /// When the record was written (unix seconds), so stale results from an
    /// earlier run can be told apart.
    #[serde(default)]
    pub recorded_at: u64,
    /// oajail's own lines on stderr (its banner of rules not held in
    /// full, a refusal), bounded with those kept over start-up warnings
    /// (`oajail_audit::audit::lines::keep`): the container matrix judges an
    /// escape against the banner of the run it happened in.
    #[serde(default)]
    pub oajail_lines: Vec<String>,
}

/// Violations of the global post-conditions (`allow_events`: contacting a
/// sink is not by itself a violation; canaries in it still are).
pub fn postconditions(lab: &mut Lab, run: &Run, allow_events: bool) -> Vec<String> {
    postconditions_allowing(lab, run, &|_| allow_events)
}

/// As [`postconditions`], with `allow` deciding which sink events are legitimate.
pub fn postconditions_allowing(
    lab: &mut Lab,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
) -> Vec<String> {
    let mut v = Vec::new();
    let canary = format!("OAJ-CANARY-{}", lab.token);
    if run.stdout.contains(&canary) {
        v.push("canary in stdout".into());
    }
    if run.stderr.contains(&canary) {
        v.push("canary in stderr".into());
    }
    for ev in &run.events {
        if ev.data.contains(&canary) || ev.name.as_deref().is_some_and(|n| n.contains(&lab.token)) {
            v.push(format!("canary reached {} sink at {}", ev.sink, ev.local));
        } else if !allow(ev) {
            v.push(format!(
                "{} sink at {} contacted ({} bytes)",
                ev.sink, ev.local, ev.bytes
            ));
        }
    }
    for file in files_with(&lab.dir.join("ws"), canary.as_bytes()) {
        v.push(format!("canary in workspace file {}", file.display()));
    }
    v.extend(
        lab.home_changes()
            .into_iter()
            .map(|c| format!("fake home {c}")),
    );
    if !lab.canary_alive() {
        v.push("host canary process was killed".into());
    }
    if run.lab.pty_injected.is_some_and(|n| n > 0) {
        v.push("bytes injected into the terminal".into());
    }
    if let Some(change) = &run.lab.pty_state_changed {
        v.push(format!("terminal state left changed: {change}"));
    }
    if run.lab.leftover_daemons > 0 {
        v.push(format!(
            "{} daemon(s) outlived the jail",
            run.lab.leftover_daemons
        ));
    }
    v
}

fn files_with(root: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => {
                    let b = fs::read(&p).unwrap_or_default();
                    if b.windows(needle.len()).any(|w| w == needle) {
                        out.push(p);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Judge a run whose probe verdict should be `blocked`.
fn judge(lab: &mut Lab, run: &Run) -> (Judgement, String) {
    judge_allowing(lab, run, &|_| false)
}

fn judge_allowing(
    lab: &mut Lab,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
) -> (Judgement, String) {
    if let Some(e) = &run.lab.lab_error {
        return (Judgement::NotRun, format!("lab failed: {e}"));
    }
    let violations = postconditions_allowing(lab, run, allow);
    let Some(report) = &run.report else {
        let last = run.stderr.lines().last().unwrap_or("").to_owned();
        let mut d = format!(
            "no probe verdict (exit {:?}, signal {:?}): {last}",
            run.lab.exit_code, run.lab.signal
        );
        if !violations.is_empty() {
            d.push_str(&format!("; {}", violations.join("; ")));
            return (Judgement::Escaped, d);
        }
        return (Judgement::NotRun, d);
    };
    let mut detail = report.detail.clone();
    if !violations.is_empty() {
        detail.push_str(&format!("; {}", violations.join("; ")));
        return (Judgement::Escaped, detail);
    }
    let j = match report.verdict {
        Verdict::Blocked => Judgement::Blocked,
        Verdict::Succeeded => Judgement::Escaped,
        Verdict::Unexpected => Judgement::Unexpected,
        Verdict::NotApplicable => Judgement::NotApplicable,
    };
    (j, detail)
}

/// Record the result and fail the test unless the attack was blocked (or
/// the kernel cannot run it).
pub fn assert_blocked(lab: &mut Lab, id: &str, run: &Run) {
    let (j, detail) = judge(lab, run);
    finish(id, run, j, detail);
}

/// As [`assert_blocked`], with what the test itself found on the host
/// after the run (the user's own tool ran a command the jail planted):
/// any such finding is an escape, whatever the probe said.
pub fn assert_blocked_host_clean(lab: &mut Lab, id: &str, run: &Run, host: &[String]) {
    let (mut j, mut detail) = judge(lab, run);
    if !host.is_empty() {
        j = Judgement::Escaped;
        detail.push_str(&format!("; on the host: {}", host.join("; ")));
    }
    finish(id, run, j, detail);
}

/// As [`assert_blocked`], with `allow` naming the sink events that are
/// legitimate in this run (e.g. the proxy's DNS query for an allowed name).
pub fn assert_blocked_allowing(
    lab: &mut Lab,
    id: &str,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
) {
    let (j, detail) = judge_allowing(lab, run, allow);
    finish(id, run, j, detail);
}

/// For documented residuals: `holds` says whether the run showed exactly
/// the documented behaviour. Records `residual` when it did and every
/// global post-condition (no denied canary anywhere) held; fails otherwise,
/// so a change in either direction is noticed.
pub fn assert_residual(lab: &mut Lab, id: &str, run: &Run, holds: bool, what: &str) {
    assert_residual_allowing(lab, id, run, &|_| false, holds, what);
}

/// As [`assert_residual`], with `allow` naming the sink events that are
/// part of the documented residual (e.g. bytes reaching an allowed host).
pub fn assert_residual_allowing(
    lab: &mut Lab,
    id: &str,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
    holds: bool,
    what: &str,
) {
    let violations = postconditions_allowing(lab, run, allow);
    let (j, detail) = if !violations.is_empty() {
        (Judgement::Escaped, violations.join("; "))
    } else if holds {
        (Judgement::Residual, format!("as documented: {what}"))
    } else {
        let probe = run.report.as_ref().map(|r| r.detail.clone());
        (
            Judgement::Unexpected,
            format!("residual changed, expected {what}; probe: {probe:?}"),
        )
    };
    finish(id, run, j, detail);
}

/// Like [`assert_blocked`], but first runs the attack without the jail: if
/// the kernel itself cannot perform it (no x32, no vsock…), the result is
/// `not_applicable` with the baseline's reason instead of a block that
/// proves nothing about the jail.
pub fn assert_blocked_or_unsupported(lab: &mut Lab, id: &str, baseline: &Run, run: &Run) {
    let supported = baseline
        .report
        .as_ref()
        .is_some_and(|r| r.verdict == Verdict::Succeeded);
    if supported {
        return assert_blocked(lab, id, run);
    }
    let why = baseline
        .report
        .as_ref()
        .map(|r| r.detail.clone())
        .unwrap_or_else(|| "baseline gave no verdict".into());
    let (j, detail) = judge(lab, run);
    let (j, detail) = match j {
        Judgement::Escaped => (j, detail),
        _ => (
            Judgement::NotApplicable,
            format!("kernel cannot run it without the jail ({why}); jailed: {detail}"),
        ),
    };
    finish(id, run, j, detail);
}

/// For lifecycle attacks where the probe only starts something and the lab
/// judges the effect (a daemon that must not outlive the jail).
pub fn assert_contained(lab: &mut Lab, id: &str, run: &Run) {
    let (mut j, detail) = judge(lab, run);
    let started = run
        .report
        .as_ref()
        .is_some_and(|r| r.verdict == Verdict::Succeeded);
    if started && j == Judgement::Escaped && postconditions(lab, run, false).is_empty() {
        j = Judgement::Blocked;
    }
    finish(id, run, j, detail);
}

/// The attack must be blocked, or oajail must refuse to run at all (one
/// `oajail:` line, non-zero status, probe never ran): both keep the host safe.
pub fn assert_blocked_or_refused(lab: &mut Lab, id: &str, run: &Run) {
    if run.report.is_none() && run.lab.lab_error.is_none() {
        return assert_refused(lab, id, run);
    }
    assert_blocked(lab, id, run);
}

/// Judge an attack made by a real client (curl, python, node) instead of
/// the probe: `allow` decides which sink events are legitimate, and
/// `refusal` is the refusal the client saw (the proxy's answer, the TLS
/// error), found in its output by the test, or what was missing from it. An
/// event `allow` refuses or a canary anywhere is an escape; no violation but
/// no refusal either is `unexpected` (a client that never reached the proxy
/// proves nothing).
pub fn judge_client(
    lab: &mut Lab,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
    refusal: Result<String, String>,
) -> (Judgement, String) {
    if let Some(e) = &run.lab.lab_error {
        return (Judgement::NotRun, format!("lab failed: {e}"));
    }
    let violations = postconditions_allowing(lab, run, allow);
    match (violations.is_empty(), refusal) {
        (false, r) => (
            Judgement::Escaped,
            format!("{} (client saw: {r:?})", violations.join("; ")),
        ),
        (true, Ok(r)) => (Judgement::Blocked, r),
        (true, Err(missing)) => (
            Judgement::Unexpected,
            format!(
                "no refusal in the client's output ({missing}; exit {:?})",
                run.lab.exit_code
            ),
        ),
    }
}

/// Record [`judge_client`]'s judgement and fail the test unless blocked.
pub fn assert_client_refused(
    lab: &mut Lab,
    id: &str,
    run: &Run,
    allow: &dyn Fn(&SinkEvent) -> bool,
    refusal: Result<String, String>,
) {
    let (j, detail) = judge_client(lab, run, allow, refusal);
    finish(id, run, j, detail);
}

/// For races where the write may legitimately land inside the allowed root:
/// the probe's verdict does not matter, only that the host stays intact
/// (every global post-condition holds) and the run happened (oajail ran the
/// probe or refused with its one-line error).
pub fn assert_host_unchanged(lab: &mut Lab, id: &str, run: &Run) {
    let violations = postconditions(lab, run, false);
    let refused = run.report.is_none() && run.stderr.lines().any(|l| l.starts_with("oajail"));
    let (j, detail) = match (&run.lab.lab_error, violations.is_empty()) {
        (Some(e), _) => (Judgement::NotRun, format!("lab failed: {e}")),
        (None, false) => (Judgement::Escaped, violations.join("; ")),
        (None, true) if run.report.is_some() || refused => {
            (Judgement::Blocked, "host unchanged".into())
        }
        (None, true) => (
            Judgement::NotRun,
            format!("no verdict and no refusal: {}", run.stderr.trim()),
        ),
    };
    finish(id, run, j, detail);
}

/// For fail-closed cases: oajail must refuse (non-zero, one `oajail:` line)
/// and the probe must never have run.
pub fn assert_refused(lab: &mut Lab, id: &str, run: &Run) {
    let violations = postconditions(lab, run, false);
    let refused = run.report.is_none() && run.lab.exit_code.is_some_and(|c| c != 0);
    let named = run.stderr.lines().any(|l| l.starts_with("oajail"));
    let (j, detail) = match (
        &run.lab.lab_error,
        refused && named && violations.is_empty(),
    ) {
        (Some(e), _) => (Judgement::NotRun, format!("lab failed: {e}")),
        (None, true) => (
            Judgement::Blocked,
            format!(
                "refused: {}",
                run.stderr
                    .lines()
                    .find(|l| l.starts_with("oajail"))
                    .unwrap_or("")
            ),
        ),
        (None, false) => (
            Judgement::Escaped,
            format!(
                "not refused (exit {:?}, probe ran: {}, stderr: {}) {}",
                run.lab.exit_code,
                run.report.is_some(),
                run.stderr.trim(),
                violations.join("; ")
            ),
        ),
    };
    finish(id, run, j, detail);
}

fn finish(id: &str, run: &Run, j: Judgement, detail: String) {
    assert!(
        catalog::attack(id).is_some(),
        "attack id {id} is not in the catalog"
    );
    let rec = ResultRecord {
        id: id.to_owned(),
        judgement: j,
        detail: detail.clone(),
        errno: run.report.as_ref().and_then(|r| r.errno_name.clone()),
        signal: run.report.as_ref().and_then(|r| r.signal),
        uid: nix::unistd::getuid().as_raw(),
        kernel: kernel(),
        recorded_at: now_secs(),
        oajail_lines: oajail_audit::audit::lines::keep(&run.stderr),
    };
    record(&rec);
    match j {
        Judgement::Blocked | Judgement::Residual => {}
        Judgement::NotApplicable => eprintln!("NOT APPLICABLE on this kernel: {id}: {detail}"),
        _ => panic!(
            "{id}: {j:?}: {detail}\n  argv: {:?}\n  stdout: {}\n  stderr: {}",
            run.argv,
            run.stdout.trim(),
            run.stderr.trim()
        ),
    }
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `uname -r`.
pub fn kernel() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Directory results are written to: `$OAJAIL_SECURITY_RESULTS`, else
/// `/var/tmp/oajail-security-results-{root|user}`.
pub fn results_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OAJAIL_SECURITY_RESULTS") {
        return PathBuf::from(d);
    }
    let who = if nix::unistd::getuid().is_root() {
        "root"
    } else {
        "user"
    };
    PathBuf::from(format!("/var/tmp/oajail-security-results-{who}"))
}

fn record(rec: &ResultRecord) {
    let dir = results_dir();
    let write = write_record(
        &dir,
        &rec.id,
        &serde_json::to_vec_pretty(rec).unwrap_or_default(),
    );
    if let Err(e) = write {
        panic!(
            "security suite: write result for {} to {}: {e}",
            rec.id,
            dir.display()
        );
    }
}

/// Write `dir/<id>.json`, replacing an earlier record of the same id.
///
/// Never by opening the existing file for writing: in the kernel matrix the
/// results directory is the host's, shared over 9p, where every file the
/// unprivileged user creates belongs to root, so the user may not truncate
/// a record it wrote before (a test that records the same id twice, or a
/// re-run). The record goes to a fresh file named for this process and is
/// renamed over the old one (the directory's permission, not the file's;
/// `.ci/kernel-matrix` makes that directory non-sticky for this). Where
/// even that is refused, the old record is removed first, and where that
/// is refused too, a first record is written in place. A reader never sees
/// a half-written record under `<id>.json` except in that last case.
pub fn write_record(dir: &Path, id: &str, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{id}.{}.{nanos}.tmp", std::process::id()));
    let dest = dir.join(format!("{id}.json"));
    fs::write(&tmp, bytes)?;
    let renamed = fs::rename(&tmp, &dest).or_else(|_| {
        fs::remove_file(&dest)?;
        fs::rename(&tmp, &dest)
    });
    if renamed.is_ok() {
        return Ok(());
    }
    let _ = fs::remove_file(&tmp);
    match fs::symlink_metadata(&dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::write(&dest, bytes),
        _ => renamed,
    }
}

/// One attack run with one enforcement layer switched off (I2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AblationRecord {
    /// Attack id (catalog).
    pub id: String,
    /// Layers the documentation says stop this attack on their own.
    pub claimed: Vec<String>,
    /// For each layer switched off: the judgement and its detail.
    pub without: Vec<(String, Judgement, String)>,
    /// uid the suite ran as.
    pub uid: u32,
}

/// Judge a run of the ablation matrix (no assertion, no record).
pub fn judge_run(lab: &mut Lab, run: &Run) -> (Judgement, String) {
    judge(lab, run)
}

/// Record the ablation row and fail when the layers that matter differ from
/// the claim: an attack must only escape when a claimed layer is off, and
/// never when the claim names two or more layers (defence in depth).
pub fn assert_ablation(rec: &AblationRecord) {
    let dir = results_dir().join("ablation");
    let write = write_record(
        &dir,
        &rec.id,
        &serde_json::to_vec_pretty(rec).unwrap_or_default(),
    );
    if let Err(e) = write {
        panic!("security suite: write ablation result for {}: {e}", rec.id);
    }
    let mut problems = Vec::new();
    for (layer, j, detail) in &rec.without {
        match j {
            Judgement::Blocked | Judgement::NotApplicable => {}
            Judgement::Escaped if rec.claimed.len() == 1 && rec.claimed.contains(layer) => {}
            Judgement::Escaped if rec.claimed.contains(layer) => {
                problems.push(format!(
                    "without {layer}: escaped, but the claim is defence in depth ({detail})"
                ));
            }
            other => problems.push(format!("without {layer}: {other:?} ({detail})")),
        }
    }
    assert!(
        problems.is_empty(),
        "{}: layer ablation (claimed {:?}):\n  {}",
        rec.id,
        rec.claimed,
        problems.join("\n  ")
    );
}

#[cfg(test)]
mod tests {
    use super::write_record;
    use std::os::unix::fs::PermissionsExt;

    /// A second record of the same id replaces the first even when the first
    /// file may not be opened for writing (the 9p-shared results directory),
    /// and leaves no temporary file behind.
    #[test]
    fn second_record_replaces_a_read_only_first() {
        let dir = std::env::temp_dir().join(format!("oaj-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_record(&dir, "X1-same", b"first").unwrap();
        let first = dir.join("X1-same.json");
        std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o444)).unwrap();
        write_record(&dir, "X1-same", b"second").unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["X1-same.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
