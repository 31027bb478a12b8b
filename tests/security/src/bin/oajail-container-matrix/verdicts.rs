//! What `oajail doctor` predicts and what a run did, read from their
//! output, and where the two disagree. Pure: the unit tests below feed it
//! the text of real runs.
//!
//! Read from doctor: the `verdict:` line (`… runs` or `refused: …`), the
//! `tier:` line when it prints one, and the `rule <class>: …` lines whose
//! holders say `NOTHING` or `NOT ENFORCED` (the classes not held in full).
//! Read from the run (`-d`, so that a full jail, which prints no banner,
//! still names its tier): whether its command ran (a marker it prints),
//! its exit status, its first `oajail:` line, the rule classes its banner
//! names (lines of oajail's own that say a rule is not enforced or not
//! held, matched against doctor's class names; `-d`'s notes list every
//! rule and are not the banner), and the tier it names.

use oajail_security::cells::ModeOutcome;

/// The marker the cell's command prints when it runs.
pub const RAN: &str = "oajail-matrix-ran";

/// Doctor's prediction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Doctor {
    /// The `verdict:` line.
    pub verdict: String,
    /// The run goes ahead.
    pub runs: bool,
    /// The tier it names.
    pub tier: Option<String>,
    /// Every rule class it lists (`rule <class>: …`).
    pub classes: Vec<String>,
    /// The classes it says are not held in full.
    pub unheld: Vec<String>,
}

/// `tier: NAME …` or `… tier NAME`: the word after `tier`.
fn tier_in(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("tier")?;
    let rest = line[at + 4..].trim_start_matches([':', ' ', '=']);
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// Read `oajail doctor`'s output (its exit status says whether it runs).
pub fn doctor(stdout: &str, status: Option<i32>) -> Doctor {
    let mut d = Doctor::default();
    for line in stdout.lines() {
        if let Some(v) = line.strip_prefix("verdict:") {
            d.verdict = v.trim().to_owned();
        } else if line.starts_with("tier:") {
            d.tier = tier_in(line);
        } else if let Some(rule) = line.strip_prefix("rule ") {
            let Some((class, holders)) = rule.split_once(": ") else {
                continue;
            };
            d.classes.push(class.to_owned());
            if holders.starts_with("NOTHING") || holders.contains("NOT ENFORCED") {
                d.unheld.push(class.to_owned());
            }
        }
    }
    d.runs = status == Some(0) && !d.verdict.is_empty() && !d.verdict.starts_with("refused");
    d
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Run {
    /// Its command ran (printed [`RAN`]).
    pub ran: bool,
    /// Its exit status.
    pub exit: Option<i32>,
    /// Its first `oajail:` line that is not a warning (the refusal).
    pub first_line: Option<String>,
    /// The classes (of `classes`) its banner names.
    pub banner_unheld: Vec<String>,
    /// The tier it names.
    pub tier: Option<String>,
}

/// A line of oajail's banner: its own, saying a rule is not held in full
/// (not one of `-d`'s timestamped notes, `oajail: [1.2 ms] …`, which list
/// every rule).
pub fn is_banner_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    line.starts_with("oajail:")
        && !line.starts_with("oajail: [")
        && (lower.contains("not enforced") || lower.contains("not held") || lower.contains("loss"))
}

/// Read a run's output; `classes` are doctor's rule class names.
pub fn run(stdout: &str, stderr: &str, status: Option<i32>, classes: &[String]) -> Run {
    let oajail: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("oajail:"))
        .collect();
    let banner: Vec<&str> = oajail
        .iter()
        .copied()
        .filter(|l| is_banner_line(l))
        .collect();
    // The refusal is oajail's own line, not a warning or a `-d` note.
    let own = |l: &&&str| !l.starts_with("oajail: warning") && !l.starts_with("oajail: [");
    Run {
        ran: stdout.lines().any(|l| l.trim() == RAN),
        exit: status,
        first_line: oajail.iter().find(own).map(|l| (*l).to_owned()),
        banner_unheld: (classes.iter())
            .filter(|c| banner.iter().any(|l| l.contains(c.as_str())))
            .cloned()
            .collect(),
        tier: (oajail.iter())
            .filter(|l| !l.contains("NOT ENFORCED"))
            .find_map(|l| tier_in(l)),
    }
}

/// Compare doctor's prediction with the run: the one mode's outcome.
/// `accepted`: the run accepts every unheld rule (`--allow-degraded`), so
/// it must run whenever doctor's table exists, whatever the verdict.
pub fn compare(mode: &str, d: &Doctor, r: &Run, accepted: bool) -> ModeOutcome {
    let mut why = Vec::new();
    let predicted = d.runs || (accepted && !d.classes.is_empty());
    if d.verdict.is_empty() {
        why.push("doctor printed no verdict".to_owned());
    }
    if predicted && !r.ran {
        why.push(format!(
            "doctor says it runs; the run refused (exit {:?}): {}",
            r.exit,
            r.first_line.as_deref().unwrap_or("no oajail line")
        ));
    }
    if !predicted && r.ran {
        why.push(format!("doctor says refused ({}); the run ran", d.verdict));
    }
    if !predicted && !r.ran && r.first_line.is_none() {
        why.push(format!(
            "the run refused without an oajail line (exit {:?})",
            r.exit
        ));
    }
    if r.ran && r.exit != Some(0) {
        why.push(format!("the command ran but the run exited {:?}", r.exit));
    }
    if r.ran && r.banner_unheld != d.unheld {
        why.push(format!(
            "doctor names {:?} as not held in full, the run's banner {:?}",
            d.unheld, r.banner_unheld
        ));
    }
    if r.ran && d.tier.is_some() && r.tier != d.tier {
        why.push(format!(
            "doctor names tier {:?}, the run {:?}",
            d.tier, r.tier
        ));
    }
    ModeOutcome {
        mode: mode.to_owned(),
        doctor_verdict: d.verdict.clone(),
        doctor_runs: predicted,
        doctor_tier: d.tier.clone(),
        doctor_unheld: d.unheld.clone(),
        ran: r.ran,
        exit: r.exit,
        refusal: (!r.ran).then(|| r.first_line.clone()).flatten(),
        banner_unheld: r.banner_unheld.clone(),
        run_tier: r.tier.clone(),
        disagreements: why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &str = "landlock: abi 7\n\
        layer namespaces: off: user namespaces unavailable\n\
        rule read deny (denyRead): landlock abi 1; not running here: mounts\n\
        rule private /tmp: NOTHING; not running here: mounts\n\
        rule devices and device ioctls: only landlock abi 5 (device ioctls): NOT ENFORCED in full\n\
        rule syscall deny list: seccomp\n\
        verdict: refused: kernel: no layer holds private /tmp (needs user namespaces)\n";

    #[test]
    fn reads_a_refusal_and_the_classes_not_held() {
        let d = doctor(REFUSED, Some(1));
        assert!(!d.runs);
        assert_eq!(d.unheld, ["private /tmp", "devices and device ioctls"]);
        assert_eq!(d.classes.len(), 4);
        assert_eq!(d.tier, None);
    }

    #[test]
    fn a_degraded_run_must_name_exactly_what_doctor_names() {
        let d = doctor(REFUSED, Some(1));
        let stderr = "oajail: ==== DEGRADED JAIL ====\n\
            oajail: NOT ENFORCED: private /tmp\n\
            oajail: =========\n";
        let r = run(&format!("{RAN}\n"), stderr, Some(0), &d.classes);
        let m = compare("degraded", &d, &r, true);
        assert_eq!(r.banner_unheld, ["private /tmp"]);
        assert_eq!(m.disagreements.len(), 1, "{:?}", m.disagreements);
        assert!(m.disagreements[0].contains("devices and device ioctls"));
    }

    #[test]
    fn doctor_runs_but_the_run_refuses_is_a_disagreement() {
        let out =
            "rule syscall deny list: seccomp\nverdict: every layer at its planned level; runs\n";
        let d = doctor(out, Some(0));
        assert!(d.runs);
        let r = run(
            "",
            "oajail: mounts: mount /proc: operation not permitted\n",
            Some(125),
            &d.classes,
        );
        let m = compare("plain", &d, &r, false);
        assert!(
            m.disagreements[0].contains("mount /proc"),
            "{:?}",
            m.disagreements
        );
    }

    #[test]
    fn debug_notes_name_the_tier_but_are_not_the_banner() {
        let out = "tier: namespaces (the full jail)\n\
            rule devices and device ioctls: mounts, landlock abi 5\n\
            verdict: every layer at its planned level; runs\n";
        let d = doctor(out, Some(0));
        let stderr = "oajail: [0.4 ms] rule devices and device ioctls: only seccomp: NOT ENFORCED in full\n\
            oajail: [35.8 ms] tier: namespaces (the full jail)\n";
        let r = run(&format!("{RAN}\n"), stderr, Some(0), &d.classes);
        assert_eq!(
            (r.tier.as_deref(), r.banner_unheld.len()),
            (Some("namespaces"), 0)
        );
        assert!(compare("plain", &d, &r, false).disagreements.is_empty());
    }

    #[test]
    fn agreeing_refusals_and_tiers_pass() {
        let d = doctor(REFUSED, Some(1));
        let r = run(
            "",
            "oajail: kernel: no layer holds private /tmp\n",
            Some(125),
            &d.classes,
        );
        assert!(compare("plain", &d, &r, false).disagreements.is_empty());
        let out = "tier: container (no user namespaces)\nrule syscall deny list: seccomp\nverdict: runs\n";
        let d = doctor(out, Some(0));
        assert_eq!(d.tier.as_deref(), Some("container"));
        let r = run(
            &format!("{RAN}\n"),
            "oajail: tier container\n",
            Some(0),
            &d.classes,
        );
        assert!(compare("nested", &d, &r, false).disagreements.is_empty());
        let r = run(&format!("{RAN}\n"), "", Some(0), &d.classes);
        assert!(!compare("nested", &d, &r, false).disagreements.is_empty());
    }
}
