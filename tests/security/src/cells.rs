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
    /// The cell's place in the matrix (the report keeps that order).
    #[serde(default)]
    pub order: usize,
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
    out.sort_by(|a, b| (a.order, &a.cell, &a.who).cmp(&(b.order, &b.cell, &b.who)));
    out
}
