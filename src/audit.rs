//! `oajail audit`: the security suite's attacks against the user's policy.
//!
//! Loads the policy exactly as a jailed run does (same one-line errors),
//! finds `oajail-probe` and `oajail-lab` beside this binary, proves the lab
//! and the jail work (a preflight run), then runs every selected attack in
//! its own lab, several at a time, and reports. Exit status: 0 when nothing
//! escaped, nothing was inconclusive and (with `--fail-on`) nothing the
//! user forbids was allowed; 1 otherwise; 2 bad usage or policy; 125 when
//! the lab or the jail could not be set up.

use crate::Fail;
use crate::audit_format::{self, Report};
use crate::cli::{AuditArgs, AuditTier, Common};
use crate::settings::{self, Origin};
use anyhow::{Context, anyhow};
use oajail_audit::audit::session::{self, Setup};
use oajail_audit::audit::{Case, Finding, Verdict, channels, runbook};
use oajail_audit::catalog::FAMILIES;
use oajail_audit::lab::Tools;
use oajail_audit::rundir::RunDir;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// `oajail audit …`.
pub fn audit(common: &Common, args: AuditArgs) -> Result<i32, Fail> {
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    settings::print_warnings(&loaded.warnings);
    let policy = &loaded.policy;
    let policy_text = match &origin {
        Origin::File(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read settings file", p.display()))
                .map_err(Fail::usage)?,
        ),
        Origin::Builtin => None,
    };
    let cases = select(runbook::cases(policy), &args.only).map_err(Fail::usage)?;
    let owner = match &args.as_user {
        None => None,
        Some(_) if !session::is_root() => {
            return Err(Fail::usage(anyhow!(
                "--as-user: only root can run attacks as another user"
            )));
        }
        Some(name) => Some(
            session::lookup_user(name)
                .ok_or_else(|| Fail::usage(anyhow!("--as-user: no user named {name}")))?,
        ),
    };
    let tools = tools().map_err(Fail::setup)?;
    // Ctrl-C and friends stop the attacks and come back through the
    // clean-up below. Without the watch, a signal still ends the audit
    // and the next one sweeps, so a failure to set it up is no refusal.
    let _ = oajail_audit::interrupt::watch();
    // Removed when this function returns, whatever the outcome; a run
    // killed before that is swept by the next.
    let (run_dir, swept) =
        RunDir::create(&session::default_base()).map_err(|e| Fail::setup(anyhow!("audit: {e}")))?;
    if swept.runs + swept.old_labs > 0 {
        eprintln!(
            "oajail: audit: removed what earlier audits left in {} ({} run(s) that were killed, {} lab(s) of older versions)",
            session::default_base().display(),
            swept.runs,
            swept.old_labs
        );
    }
    let setup = Setup {
        tools,
        base: run_dir.path.clone(),
        owner,
        policy_text: policy_text.clone(),
        env: test_switches(),
        jobs: args.jobs.unwrap_or_else(default_jobs).max(1),
        refuse_userns: args.tier == Some(AuditTier::Container),
    };
    let progress = Progress::new(cases.len());
    progress.preflight();
    let preflight = setup.preflight(policy);
    progress.finish();
    if let Some(code) = stopped(0, cases.len()) {
        return Ok(code);
    }
    let jail = preflight.map_err(|e| Fail::setup(anyhow!("audit: {e}{}", lab_hint(&e))))?;
    let start = Instant::now();
    let findings = setup.run_all(policy, &jail, &cases, &|f| progress.saw(f));
    progress.finish();
    if let Some(code) = stopped(findings.len(), cases.len()) {
        return Ok(code);
    }
    let exfiltrates = cases.iter().any(|c| c.family == runbook::EXFIL_FAMILY.0);
    let untested = match exfiltrates {
        true => channels::domains(policy).untested,
        false => Vec::new(),
    };
    let report = Report {
        origin: &origin,
        untested: &untested,
        jail: &jail,
        policy_text: policy_text.as_deref(),
        policy_sha256: policy.sha256(),
        findings: &findings,
        fail_on: args.fail_on,
        elapsed_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let text = audit_format::render(&report, args.format);
    match &args.out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("audit: write {}", path.display()))
            .map_err(Fail::setup)?,
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
    eprintln!("oajail: audit: {}", report.summary_line());
    Ok(i32::from(report.fails()))
}

/// What to do when the lab itself cannot have its namespaces: where a
/// container's defaults refuse them, the lab cannot be built there, but
/// the policy can be audited as the container tier holds it elsewhere.
fn lab_hint(e: &session::AuditError) -> &'static str {
    match e.to_string().contains("unshare lab namespaces") {
        true => {
            " (the lab needs a network and a mount namespace, which this place refuses; \
             to audit this policy as oajail's container tier holds it here, run \
             `oajail audit --tier container` where user namespaces work)"
        }
        false => "",
    }
}

/// When a signal stopped the audit: say so (no report: a partial one
/// would read as a clean bill for the attacks that never ran) and give
/// the exit status `128 + signal`.
fn stopped(done: usize, total: usize) -> Option<i32> {
    let sig = oajail_audit::interrupt::stopped()?;
    eprintln!(
        "oajail: audit: stopped by {} after {done} of {total} attacks; no report, and the labs are removed",
        oajail_audit::interrupt::name(sig)
    );
    Some(128 + sig)
}

/// Keep the cases of the named families (letters or names).
fn select(cases: Vec<Case>, only: &[String]) -> anyhow::Result<Vec<Case>> {
    if only.is_empty() {
        return Ok(cases);
    }
    let mut letters = Vec::new();
    for name in only {
        letters.push(family_letter(name).ok_or_else(|| {
            anyhow!("--only: unknown family {name:?} (letters A-I and X, or secrets, persistence, process, syscalls, network, proxy, environment, resources, exfiltration)")
        })?);
    }
    let kept: Vec<Case> = cases
        .into_iter()
        .filter(|c| letters.contains(&c.family))
        .collect();
    if kept.is_empty() {
        // Family I (fail-closed refusals) is suite-only: nothing to run is
        // an error, never an empty green report.
        anyhow::bail!("--only: the audit has no attack in {}", only.join(", "));
    }
    Ok(kept)
}

fn family_letter(name: &str) -> Option<char> {
    let lower = name.trim().to_ascii_lowercase();
    let mut chars = lower.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        let c = c.to_ascii_uppercase();
        return (FAMILIES.iter().any(|(l, _)| *l == c) || c == runbook::EXFIL_FAMILY.0)
            .then_some(c);
    }
    let words: &[(&str, char)] = &[
        ("secrets", 'A'),
        ("persistence", 'B'),
        ("process", 'C'),
        ("syscalls", 'D'),
        ("network", 'E'),
        ("proxy", 'F'),
        ("environment", 'G'),
        ("resources", 'H'),
        ("exfiltration", 'X'),
    ];
    words.iter().find(|(w, _)| *w == lower).map(|(_, c)| *c)
}

/// `oajail-probe` and `oajail-lab` beside this binary (or named by
/// `OAJAIL_PROBE_BIN` / `OAJAIL_LAB_BIN`); the jail is this binary itself.
fn tools() -> anyhow::Result<Tools> {
    let me = std::env::current_exe().context("audit: locate this binary")?;
    let dir = me.parent().map(Path::to_path_buf).unwrap_or_default();
    let find = |env: &str, name: &str| -> anyhow::Result<PathBuf> {
        let p = std::env::var_os(env)
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join(name));
        if p.is_file() {
            Ok(p)
        } else {
            Err(anyhow!(
                "audit: {name} not found at {} (install it beside oajail: `cargo install --locked --path audit`, or set {env})",
                p.display()
            ))
        }
    };
    let tools = Tools {
        oajail: me.clone(),
        probe: find("OAJAIL_PROBE_BIN", "oajail-probe")?,
        lab: find("OAJAIL_LAB_BIN", "oajail-lab")?,
    };
    tools.same_build().map_err(|e| {
        anyhow!("audit: {e}; install the probe and lab of this oajail: `cargo install --locked --path audit` (in a build tree: `cargo build -p oajail-audit`)")
    })?;
    Ok(tools)
}

/// Labs wait on sinks and timeouts more than they compute: twice the CPUs.
fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() * 2)
        .unwrap_or(2)
        .min(8)
}

/// The layer switches of a `test-layers` build reach the jailed oajail so
/// that an ablated build can be audited; a release build has none.
#[cfg(feature = "test-layers")]
fn test_switches() -> Vec<(String, String)> {
    ["OAJAIL_TEST_DISABLE", "OAJAIL_TEST_PRETEND_MISSING"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect()
}

#[cfg(not(feature = "test-layers"))]
fn test_switches() -> Vec<(String, String)> {
    Vec::new()
}

/// The progress line on stderr, only when stderr is a terminal (a pipe or
/// a file gets the summary line alone, and stdout never gets it): redrawn
/// in place (`\r`, erase to the end of the line) and erased before the
/// report is printed.
struct Progress {
    tty: bool,
    total: usize,
    start: Instant,
    /// Attacks done, escapes, allowed.
    state: Mutex<(usize, usize, usize)>,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            total,
            start: Instant::now(),
            state: Mutex::new((0, 0, 0)),
        }
    }

    /// Before the first attack: the preflight is running.
    fn preflight(&self) {
        if self.tty {
            eprint!("\r\x1b[Kaudit: preflight (the lab and the jail under this policy)");
        }
    }

    fn saw(&self, f: &Finding) {
        let Ok(mut s) = self.state.lock() else { return };
        s.0 += 1;
        match f.verdict {
            Verdict::Escape => s.1 += 1,
            Verdict::Allowed => s.2 += 1,
            _ => {}
        }
        if self.tty {
            eprint!(
                "\r\x1b[Kaudit: attack {}/{} · {} escape · {} allowed · {:.0}s",
                s.0,
                self.total,
                s.1,
                s.2,
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    fn finish(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}
