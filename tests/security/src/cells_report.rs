//! The "Containers" section of docs/security-tests.md, from the container
//! matrix's records ([`crate::cells`]).

use crate::cells::{CellRecord, ModeOutcome};
use std::fmt::Write;

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
    if let Some(e) = &rec.error {
        return format!("**cell not run**: {e}");
    }
    let n = |o: &str| rec.attacks.iter().filter(|a| a.outcome == o).count();
    if rec.attacks.is_empty() {
        return "none".into();
    }
    let mut s = format!(
        "{} blocked, {} controls passed",
        n("blocked") + n("residual") + n("not_applicable"),
        n("passed")
    );
    if n("named_loss") > 0 {
        let _ = write!(s, ", {} named losses", n("named_loss"));
    }
    for bad in ["escaped", "failed"] {
        if n(bad) > 0 {
            let _ = write!(s, ", **{} {bad}**", n(bad));
        }
    }
    s
}

/// `a` when root and uid 1000 agree, else `root: a; uid 1000: b`.
fn both(
    root: Option<&CellRecord>,
    user: Option<&CellRecord>,
    f: &dyn Fn(&CellRecord) -> String,
) -> String {
    match (root.map(f), user.map(f)) {
        (Some(a), Some(b)) if a == b => a,
        (a, b) => format!(
            "root: {}; uid 1000: {}",
            a.unwrap_or_else(|| "–".into()),
            b.unwrap_or_else(|| "–".into())
        ),
    }
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

/// The cells in matrix order, each with its root and uid 1000 records.
fn cells(records: &[CellRecord]) -> Vec<(&str, Option<&CellRecord>, Option<&CellRecord>)> {
    let mut out: Vec<(&str, Option<&CellRecord>, Option<&CellRecord>)> = Vec::new();
    for r in records {
        if !out.iter().any(|(c, _, _)| *c == r.cell) {
            let find = |who: &str| records.iter().find(|x| x.cell == r.cell && x.who == who);
            out.push((r.cell.as_str(), find("root"), find("uid 1000")));
        }
    }
    out
}

/// The "Containers" section of docs/security-tests.md.
pub fn render(records: &[CellRecord]) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut s = String::from("## Containers (`.ci/container-matrix`)\n\n");
    s.push_str(
        "The jail inside real engines, as container root and as uid 1000, with this checkout's binaries \
         bind-mounted read-only (`oajail-container-matrix`; how it works: `docs/container-matrix.md`). \
         In every cell `oajail doctor` and a real run are compared for the settings as written \
         (`plain`), with `enableWeakerNestedSandbox` (`nested`) and with `--allow-degraded` \
         (`degraded`): `doctor = run` when they agree (the run runs exactly when doctor says so, its \
         banner names the rules doctor says are not held in full, and it names the tier doctor names), \
         **`≠`** when not. The first mode that runs gets the suite's attack subset in a lab built in the \
         cell's own network namespace; an escape over a rule class the run's own banner names is a \
         *named loss*, any other escape fails the matrix. Expected outcomes come from doctor in the \
         cell, not from the harness. One value when root and uid 1000 agree.\n\n",
    );
    s.push_str("| cell | settings | plain | nested | degraded | attacks ran in | attacks | banner names |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for (cell, root, user) in cells(records) {
        let mode = |name: &'static str| {
            move |r: &CellRecord| {
                (r.modes.iter())
                    .find(|m| m.mode == name)
                    .map_or_else(|| "–".into(), mode_cell)
            }
        };
        let banner = |r: &CellRecord| {
            (r.modes.iter())
                .find(|m| Some(&m.mode) == r.attacks_mode.as_ref())
                .map(|m| m.banner_unheld.join("; "))
                .unwrap_or_default()
        };
        let settings = root
            .or(user)
            .map(|r| r.settings.clone())
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| {cell} | {settings} | {} | {} | {} | {} | {} | {} |",
            both(root, user, &mode("plain")),
            both(root, user, &mode("nested")),
            both(root, user, &mode("degraded")),
            both(root, user, &tier_of),
            both(root, user, &counts),
            both(root, user, &banner),
        );
    }
    s.push('\n');
    let failures: Vec<String> = records.iter().flat_map(CellRecord::failures).collect();
    if !failures.is_empty() {
        s.push_str("What fails the matrix:\n\n");
        for f in failures {
            let short: String = f.chars().take(400).collect();
            let _ = writeln!(s, "- {}", short.replace('\n', " "));
        }
        s.push('\n');
    }
    render_tiers(&mut s, records);
    s
}

/// One table per tier: the subset's outcomes, a column per cell.
fn render_tiers(s: &mut String, records: &[CellRecord]) {
    let mut tiers: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| !r.attacks.is_empty()) {
        let t = tier_of(r);
        if !tiers.contains(&t) {
            tiers.push(t);
        }
    }
    for tier in tiers {
        let cells: Vec<_> = cells(records)
            .into_iter()
            .filter(|(_, r, u)| {
                [r, u]
                    .iter()
                    .any(|x| x.is_some_and(|x| tier_of(x) == tier && !x.attacks.is_empty()))
            })
            .collect();
        let _ = writeln!(s, "### Tier: {tier}\n\nCells: root / uid 1000.\n");
        s.push_str("| attack |");
        for (c, _, _) in &cells {
            let _ = write!(s, " {c} |");
        }
        s.push_str("\n|---|");
        s.push_str(&"---|".repeat(cells.len()));
        s.push('\n');
        let mut ids: Vec<&str> = Vec::new();
        for (_, r, u) in &cells {
            for a in r.iter().chain(u.iter()).flat_map(|x| &x.attacks) {
                if !ids.contains(&a.id.as_str()) {
                    ids.push(&a.id);
                }
            }
        }
        for id in ids {
            let _ = write!(s, "| {id} |");
            for (_, r, u) in &cells {
                let _ = write!(s, " {} / {} |", outcome_cell(*r, id), outcome_cell(*u, id));
            }
            s.push('\n');
        }
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::AttackOutcome;

    fn record(who: &str, ran: bool, escaped: bool) -> CellRecord {
        let mode = ModeOutcome {
            mode: "plain".into(),
            doctor_runs: true,
            ran,
            disagreements: if ran {
                vec![]
            } else {
                vec!["doctor says it runs; the run refused".into()]
            },
            ..ModeOutcome::default()
        };
        let outcome = if escaped { "escaped" } else { "blocked" };
        CellRecord {
            cell: "docker-default".into(),
            settings: "docker run".into(),
            who: who.into(),
            engine: String::new(),
            modes: vec![mode],
            attacks_mode: ran.then(|| "plain".to_owned()),
            attacks: vec![AttackOutcome {
                id: "E9-proxy-port-other-address".into(),
                outcome: outcome.into(),
                detail: "sink answered".into(),
            }],
            error: None,
            elapsed_ms: 0,
            recorded_at: 0,
            order: 0,
        }
    }

    #[test]
    fn one_row_per_cell_and_every_failure_listed() {
        let same = render(&[record("root", true, false), record("uid 1000", true, false)]);
        assert!(
            same.contains("| docker-default | docker run | runs = ran |"),
            "{same}"
        );
        assert!(!same.contains("What fails the matrix"), "{same}");
        let differ = render(&[
            record("root", true, false),
            record("uid 1000", false, false),
        ]);
        assert!(
            differ.contains("root: runs = ran; uid 1000: **runs ≠ refused**"),
            "{differ}"
        );
        assert!(
            differ.contains("- docker-default uid 1000 plain: doctor says it runs"),
            "{differ}"
        );
        let escaped = render(&[record("root", true, true), record("uid 1000", true, false)]);
        assert!(escaped.contains("**escaped** / blocked"), "{escaped}");
        assert!(
            escaped.contains("- docker-default root: E9-proxy-port-other-address escaped"),
            "{escaped}"
        );
    }
}
