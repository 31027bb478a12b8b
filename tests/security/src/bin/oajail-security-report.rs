//! oajail-security-report: writes docs/security-tests.md from the result
//! records of the root and unprivileged runs.
//!
//! Usage: `oajail-security-report [--root DIR] [--user DIR] [--notes FILE] [--out FILE]
//! [--kernel NAME=ROOTDIR,USERDIR]… [--cells DIR] [--check]`.
//! Defaults: `/var/tmp/oajail-security-results-root`, `…-user`,
//! `tests/security/report-notes.md`, `docs/security-tests.md`.
//! Each `--kernel` adds a column for the results of another kernel
//! (`.ci/kernel-matrix`); `--check` then also requires records from both of
//! its runs, all of them `blocked`, `not_applicable` or `residual`.
//! `--cells` adds the container matrix's section from `oajail-container-matrix`'s
//! output directory; `--check` then also requires cells, none with a
//! disagreement between doctor and the run or an escape outside the losses
//! its banner names, none stale.
//! With `--check` it exits 1 when any record is not `blocked` or
//! `not_applicable`, or when an attack of the catalogue has no record for
//! a run that has any records (an unexplained skip), or when a result is
//! older than six hours (left over from an earlier run).

use anyhow::{Context, Result, bail};
use oajail_security::catalog::{ATTACKS, NOT_YET_COVERED};
use oajail_security::judge::Judgement;
use oajail_security::report;
use std::path::PathBuf;

/// `--check` rejects results older than this: they come from an earlier run.
const MAX_AGE_SECS: u64 = 6 * 3600;

fn main() -> Result<()> {
    let root_dir = env!("CARGO_MANIFEST_DIR");
    let mut root = PathBuf::from("/var/tmp/oajail-security-results-root");
    let mut user = PathBuf::from("/var/tmp/oajail-security-results-user");
    let mut notes = PathBuf::from(root_dir).join("report-notes.md");
    let mut out = PathBuf::from(root_dir).join("../../docs/security-tests.md");
    let mut check = false;
    let mut kernels: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    let mut cells_dir: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" => root = args.next().context("--root needs a directory")?.into(),
            "--user" => user = args.next().context("--user needs a directory")?.into(),
            "--notes" => notes = args.next().context("--notes needs a file")?.into(),
            "--out" => out = args.next().context("--out needs a file")?.into(),
            "--check" => check = true,
            "--kernel" => kernels.push(kernel_arg(
                &args.next().context("--kernel needs NAME=ROOTDIR,USERDIR")?,
            )?),
            "--cells" => cells_dir = Some(args.next().context("--cells needs a directory")?.into()),
            other => bail!("unknown argument {other}"),
        }
    }
    let (r, u) = (report::load(&root), report::load(&user));
    let notes_text =
        std::fs::read_to_string(&notes).with_context(|| format!("read {}", notes.display()))?;
    let (ra, ua) = (report::load_ablation(&root), report::load_ablation(&user));
    let mut text = report::render(&r, &u, "");
    text.push_str(&report::render_ablation(&ra, &ua));
    let runs: Vec<report::KernelRun> = kernels
        .iter()
        .map(|(name, root, user)| report::KernelRun {
            name: name.clone(),
            root: report::load(root),
            user: report::load(user),
        })
        .collect();
    text.push_str(&report::render_kernels((&r, &u), &runs));
    let cells = cells_dir
        .as_deref()
        .map(oajail_security::cells::load)
        .unwrap_or_default();
    text.push_str(&oajail_security::cells_report::render(&cells));
    text.push_str(&notes_text);
    std::fs::write(&out, text).with_context(|| format!("write {}", out.display()))?;
    println!(
        "wrote {} ({} root, {} user results)",
        out.display(),
        r.len(),
        u.len()
    );
    if check {
        let mut bad = Vec::new();
        for (who, set) in [("root", &r), ("user", &u)] {
            if set.is_empty() {
                bad.push(format!("{who}: no results at all"));
                continue;
            }
            for a in ATTACKS.iter().filter(|a| !NOT_YET_COVERED.contains(&a.id)) {
                let rec = set.get(a.id);
                if let Some(r) = rec
                    && oajail_security::judge::now_secs().saturating_sub(r.recorded_at)
                        > MAX_AGE_SECS
                {
                    bad.push(format!(
                        "{who}: {} result is stale (older than {MAX_AGE_SECS} s)",
                        a.id
                    ));
                    continue;
                }
                match rec.map(|x| x.judgement) {
                    Some(Judgement::Blocked | Judgement::NotApplicable | Judgement::Residual) => {}
                    Some(j) => bad.push(format!("{who}: {} {j:?}", a.id)),
                    None => bad.push(format!("{who}: {} has no result", a.id)),
                }
            }
        }
        bad.extend(check_kernels(&runs));
        if cells_dir.is_some() {
            bad.extend(check_cells(&cells));
        }
        if !bad.is_empty() {
            bail!("security report check failed:\n{}", bad.join("\n"));
        }
    }
    Ok(())
}

/// `NAME=ROOTDIR,USERDIR`.
fn kernel_arg(arg: &str) -> Result<(String, PathBuf, PathBuf)> {
    let (name, dirs) = arg
        .split_once('=')
        .context("--kernel: expected NAME=ROOTDIR,USERDIR")?;
    let (root, user) = dirs
        .split_once(',')
        .context("--kernel: expected NAME=ROOTDIR,USERDIR")?;
    Ok((name.to_owned(), root.into(), user.into()))
}

/// The container matrix ran, fresh, and every cell passed.
fn check_cells(cells: &[oajail_security::cells::CellRecord]) -> Vec<String> {
    if cells.is_empty() {
        return vec!["containers: no cell results at all".into()];
    }
    let now = oajail_security::judge::now_secs();
    let mut bad: Vec<String> = (cells.iter())
        .filter(|c| now.saturating_sub(c.recorded_at) > MAX_AGE_SECS)
        .map(|c| {
            format!(
                "containers: {} {}: stale (older than {MAX_AGE_SECS} s)",
                c.cell, c.who
            )
        })
        .collect();
    bad.extend(
        cells
            .iter()
            .flat_map(|c| c.failures())
            .map(|f| format!("containers: {f}")),
    );
    bad
}

/// Every other kernel's runs have records, none of them an escape or an
/// unexpected result.
fn check_kernels(runs: &[report::KernelRun]) -> Vec<String> {
    let mut bad = Vec::new();
    for k in runs {
        for (who, set) in [("root", &k.root), ("user", &k.user)] {
            if set.is_empty() {
                bad.push(format!("kernel {} {who}: no results at all", k.name));
            }
            for rec in set.values() {
                match rec.judgement {
                    Judgement::Blocked | Judgement::NotApplicable | Judgement::Residual => {}
                    j => bad.push(format!("kernel {} {who}: {} {j:?}", k.name, rec.id)),
                }
            }
        }
    }
    bad
}
