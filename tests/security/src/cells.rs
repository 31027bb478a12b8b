//! The container matrix's records (`oajail-container-matrix`, read by
//! `oajail-security-report`) and the suite's opt-in to the container tier.
//!
//! A cell is one engine configuration (Docker's defaults, seccomp
//! unconfined, rootless podman, runc with a Kubernetes-like config …) as
//! one user inside it (container root, uid 1000). For each settings mode
//! it records what `oajail doctor` predicted and what a real run did; the
//! attacks the cell ran are the suite's own records, in the cell's results
//! directory beside `cell.json`. (The switches that put the suite's runs
//! in a cell's tier are the lab's: `oajail_audit::switches`.)

use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// What one settings mode gave in a cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModeOutcome {
    /// `plain` (the settings as written), `nested` (with
    /// `enableWeakerNestedSandbox`) or `degraded` (`--allow-degraded`).
    pub mode: String,
    /// `oajail doctor`'s `verdict:` line.
    pub doctor_verdict: String,
    /// Whether doctor says the run goes ahead.
    pub doctor_runs: bool,
    /// The tier doctor names (`tier:` line), if it names one.
    pub doctor_tier: Option<String>,
    /// The rule classes doctor names as not held in full.
    pub doctor_unheld: Vec<String>,
    /// Whether the real run ran its command.
    pub ran: bool,
    /// Its exit status.
    pub exit: Option<i32>,
    /// Its first `oajail:` line when it refused.
    pub refusal: Option<String>,
    /// The rule classes its banner names as not held in full.
    pub banner_unheld: Vec<String>,
    /// The tier the run names, if it names one.
    pub run_tier: Option<String>,
    /// Where doctor and the run disagree (empty: they agree).
    pub disagreements: Vec<String>,
}

/// One attack of the cell's subset, judged against the cell's banner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttackOutcome {
    /// Attack id (catalogue), or the test's name for a control.
    pub id: String,
    /// `blocked`, `residual`, `not_applicable`, `named_loss` (escaped over
    /// a rule class the run's banner names), `passed` (a control),
    /// `escaped`, `failed`.
    pub outcome: String,
    /// The record's detail, or the test's failure.
    pub detail: String,
}

/// One cell as one user inside saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellRecord {
    /// Short name, e.g. `docker-default`.
    pub cell: String,
    /// The engine and its settings, as a user would write them.
    pub settings: String,
    /// `root` or `uid 1000`.
    pub who: String,
    /// The engine versions.
    pub engine: String,
    /// Every settings mode tried.
    pub modes: Vec<ModeOutcome>,
    /// The mode the attacks ran in (none when every mode is refused).
    pub attacks_mode: Option<String>,
    /// The attacks' outcomes.
    pub attacks: Vec<AttackOutcome>,
    /// Why the cell could not be run at all (the engine refused to start
    /// it, the lab's network could not be built), if so.
    #[serde(default)]
    pub error: Option<String>,
    /// Wall time of the cell for this user, in milliseconds.
    pub elapsed_ms: u64,
    /// When it was recorded (unix seconds).
    pub recorded_at: u64,
}

impl CellRecord {
    /// Problems that fail the matrix: a disagreement, an attack that
    /// escaped outside the banner's losses, a failed test.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = (self.error.iter())
            .map(|e| format!("{} {}: {e}", self.cell, self.who))
            .collect();
        for m in &self.modes {
            out.extend(
                (m.disagreements.iter())
                    .map(|d| format!("{} {} {}: {d}", self.cell, self.who, m.mode)),
            );
        }
        out.extend(
            (self.attacks.iter())
                .filter(|a| matches!(a.outcome.as_str(), "escaped" | "failed"))
                .map(|a| {
                    format!(
                        "{} {}: {} {}: {}",
                        self.cell, self.who, a.id, a.outcome, a.detail
                    )
                }),
        );
        out
    }
}

/// Every `cell.json` under `dir/<cell>/<who>/`, sorted by cell and user.
pub fn load(dir: &Path) -> Vec<CellRecord> {
    let mut out: Vec<CellRecord> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|cell| {
            std::fs::read_dir(cell.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|who| std::fs::read(who.path().join("cell.json")).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    out.sort_by(|a, b| (&a.cell, &a.who).cmp(&(&b.cell, &b.who)));
    out
}

/// The tier a cell's attacks ran in: the one doctor named, else what the
/// mode says (`plain` ran: the full jail).
pub fn tier_of(rec: &CellRecord) -> String {
    let mode = rec.attacks_mode.as_deref();
    let named = (rec.modes.iter())
        .find(|m| Some(m.mode.as_str()) == mode)
        .and_then(|m| m.doctor_tier.clone());
    match (named, mode) {
        (Some(t), _) => t,
        (None, Some("plain")) => "full".into(),
        (None, Some("nested")) => "enableWeakerNestedSandbox (no tier named)".into(),
        (None, Some("degraded")) => "--allow-degraded (no tier named)".into(),
        (None, _) => "refused".into(),
    }
}

fn mode_cell(m: &ModeOutcome) -> String {
    let doctor = if m.doctor_runs { "runs" } else { "refused" };
    let run = if m.ran { "ran" } else { "refused" };
    if m.disagreements.is_empty() {
        format!("{doctor} = {run}")
    } else {
        format!("**{doctor} ≠ {run}**")
    }
}

fn counts(rec: &CellRecord) -> String {
    let n = |o: &str| rec.attacks.iter().filter(|a| a.outcome == o).count();
    if let Some(e) = &rec.error {
        return format!("**cell not run**: {e}");
    }
    if rec.attacks.is_empty() {
        return "none".into();
    }
    let mut s = format!(
        "{} blocked, {} controls passed",
        n("blocked") + n("residual") + n("not_applicable"),
        n("passed")
    );
    if n("named_loss") > 0 {
        s.push_str(&format!(", {} named losses", n("named_loss")));
    }
    for bad in ["escaped", "failed"] {
        if n(bad) > 0 {
            s.push_str(&format!(", **{} {bad}**", n(bad)));
        }
    }
    s
}

fn outcome_cell(rec: Option<&CellRecord>, id: &str) -> String {
    let Some(a) = rec.and_then(|r| r.attacks.iter().find(|a| a.id == id)) else {
        return "–".into();
    };
    match a.outcome.as_str() {
        "blocked" | "passed" => a.outcome.clone(),
        "named_loss" => "named loss".into(),
        other => format!("**{other}**"),
    }
}

/// The "Containers" section of docs/security-tests.md.
pub fn render(records: &[CellRecord]) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut s = String::from("## Containers (`.ci/container-matrix`)\n\n");
    s.push_str(
        "The jail inside real engines, as container root and as uid 1000, with this checkout's binaries \
         bind-mounted read-only (`oajail-container-matrix`). In every cell `oajail doctor` and a real run \
         are compared for the settings as written (`plain`), with `enableWeakerNestedSandbox` (`nested`) \
         and with `--allow-degraded` (`degraded`): a cell reads `doctor = run` when they agree (the run \
         runs exactly when doctor says so, names the rules doctor says are not held in full, and the \
         tier doctor names), **`≠`** when not. Then the first mode that runs gets the suite's attack \
         subset in a lab built in the cell's own network namespace; an escape over a rule class the \
         run's own banner names is a *named loss*, any other escape fails the matrix. Expected outcomes \
         come from doctor in the cell, not from the harness.\n\n",
    );
    s.push_str("| cell | settings | who | plain | nested | degraded | attacks ran in | attacks | banner names |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for r in records {
        let mode = |name: &str| {
            (r.modes.iter())
                .find(|m| m.mode == name)
                .map_or_else(|| "–".into(), mode_cell)
        };
        let banner = (r.modes.iter())
            .find(|m| Some(&m.mode) == r.attacks_mode.as_ref())
            .map(|m| m.banner_unheld.join("; "))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.cell,
            r.settings,
            r.who,
            mode("plain"),
            mode("nested"),
            mode("degraded"),
            tier_of(r),
            counts(r),
            banner
        );
    }
    s.push('\n');
    render_tiers(&mut s, records);
    s
}

/// One table per tier: the subset's outcomes, a column per cell.
fn render_tiers(s: &mut String, records: &[CellRecord]) {
    let mut tiers: Vec<String> = records
        .iter()
        .filter(|r| !r.attacks.is_empty())
        .map(tier_of)
        .collect();
    tiers.sort();
    tiers.dedup();
    for tier in tiers {
        let mut cells: Vec<&str> = (records.iter())
            .filter(|r| tier_of(r) == tier && !r.attacks.is_empty())
            .map(|r| r.cell.as_str())
            .collect();
        cells.dedup();
        let _ = writeln!(s, "### Tier: {tier}\n\nCells: root / uid 1000.\n");
        s.push_str("| attack |");
        for c in &cells {
            let _ = write!(s, " {c} |");
        }
        s.push_str("\n|---|");
        s.push_str(&"---|".repeat(cells.len()));
        s.push('\n');
        let mut ids: Vec<&str> = Vec::new();
        for r in records.iter().filter(|r| cells.contains(&r.cell.as_str())) {
            for a in &r.attacks {
                if !ids.contains(&a.id.as_str()) {
                    ids.push(&a.id);
                }
            }
        }
        for id in ids {
            let _ = write!(s, "| {id} |");
            for c in &cells {
                let find = |who: &str| records.iter().find(|r| r.cell == *c && r.who == who);
                let _ = write!(
                    s,
                    " {} / {} |",
                    outcome_cell(find("root"), id),
                    outcome_cell(find("uid 1000"), id)
                );
            }
            s.push('\n');
        }
        s.push('\n');
    }
}
