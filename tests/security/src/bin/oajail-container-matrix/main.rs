//! oajail-container-matrix: the jail in real container engines.
//!
//! Every cell of [`CELLS`] is one engine configuration where agents and CI
//! jobs run (Docker's defaults, seccomp unconfined, rootless podman, a
//! Kubernetes pod as runc runs it …). In each, as container root and as
//! uid 1000, with the checkout's binaries bind-mounted read-only at their
//! own paths:
//! 1. `oajail doctor` and a real run, for the settings as written
//!    (`plain`), with `enableWeakerNestedSandbox` (`nested`) and with
//!    `--allow-degraded` (`degraded`): doctor's verdict, tier and rules
//!    not held must be what the run does (`verdicts`);
//! 2. in the first mode that runs, the suite's attack subset (`subset`),
//!    in a lab whose network the harness built in the cell (`network`):
//!    an escape passes only as a loss the run's banner names.
//!
//! Expected outcomes come from doctor in the cell, never from this file.
//! Results: `OUT/<cell>/<root|user>/` (the suite's records and
//! `cell.json`), read by `oajail-security-report --cells OUT`. Exit 1 on
//! any disagreement, escape outside the banner or failed test.
//!
//! Usage: `oajail-container-matrix --out DIR --oajail BIN --test-bin NAME=PATH…
//! [--only CELL…]`, with the `OAJAIL_CM_*` variables of `.ci/container-engines env`
//! (`.ci/container-matrix` runs it).

mod cell;
mod engine;
mod network;
mod pod;
mod runc;
mod subset;
mod verdicts;

use anyhow::{Context, Result, bail};
use cell::{Bind, Who};
use engine::{Container, Engine, Env};
use oajail_security::cells::{AttackOutcome, CellRecord};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One cell: its name, how a user would write its settings, the engine.
struct Cell {
    name: &'static str,
    settings: &'static str,
    engine: Engine,
}

const UNCONFINED: &[&str] = &["--security-opt", "seccomp=unconfined"];
const UNCONFINED_SYSTEMPATHS: &[&str] = &[
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "systempaths=unconfined",
];

/// The matrix.
const CELLS: &[Cell] = &[
    Cell {
        name: "docker-default",
        settings: "docker run (default settings: the devcontainer, a CI docker executor, a GitHub Actions container: job)",
        engine: Engine::Docker(&[]),
    },
    Cell {
        name: "docker-seccomp-unconfined",
        settings: "docker run --security-opt seccomp=unconfined",
        engine: Engine::Docker(UNCONFINED),
    },
    Cell {
        name: "docker-unconfined-systempaths",
        settings: "docker run --security-opt seccomp=unconfined --security-opt systempaths=unconfined",
        engine: Engine::Docker(UNCONFINED_SYSTEMPATHS),
    },
    Cell {
        name: "docker-profile-systempaths",
        settings: "docker run --security-opt seccomp=examples/containers/oajail-seccomp.json --security-opt systempaths=unconfined",
        engine: Engine::Docker(&[
            "--security-opt",
            "seccomp=examples/containers/oajail-seccomp.json",
            "--security-opt",
            "systempaths=unconfined",
        ]),
    },
    Cell {
        name: "podman-root",
        settings: "podman run as root (default settings)",
        engine: Engine::Podman {
            rootless: false,
            flags: &[],
        },
    },
    Cell {
        name: "podman-rootless",
        settings: "podman run, rootless (default settings)",
        engine: Engine::Podman {
            rootless: true,
            flags: &[],
        },
    },
    Cell {
        name: "podman-rootless-unmask",
        settings: "podman run, rootless, --security-opt unmask=ALL",
        engine: Engine::Podman {
            rootless: true,
            flags: &["--security-opt", "unmask=ALL"],
        },
    },
    Cell {
        name: "k8s-runtime-default",
        settings: "Kubernetes Pod examples/kubernetes/pod-runtime-default.yaml (seccompProfile RuntimeDefault; runc with containerd's spec and profile)",
        engine: Engine::Pod {
            manifest: "examples/kubernetes/pod-runtime-default.yaml",
            host_users: None,
        },
    },
    Cell {
        name: "k8s-runtime-default-userns",
        settings: "the same Pod with hostUsers: false",
        engine: Engine::Pod {
            manifest: "examples/kubernetes/pod-runtime-default.yaml",
            host_users: Some(false),
        },
    },
    Cell {
        name: "k8s-full-jail",
        settings: "Kubernetes Pod examples/kubernetes/pod-full-jail.yaml (hostUsers: false, procMount: Unmasked, seccompProfile Localhost oajail-seccomp.json)",
        engine: Engine::Pod {
            manifest: "examples/kubernetes/pod-full-jail.yaml",
            host_users: None,
        },
    },
];

struct Args {
    out: PathBuf,
    oajail: PathBuf,
    tests: BTreeMap<String, PathBuf>,
    only: Vec<String>,
}

fn args() -> Result<Args> {
    let mut a = Args {
        out: PathBuf::new(),
        oajail: PathBuf::new(),
        tests: BTreeMap::new(),
        only: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--out" => a.out = value()?.into(),
            "--oajail" => a.oajail = std::fs::canonicalize(value()?).context("--oajail")?,
            "--only" => a.only.push(value()?),
            "--test-bin" => {
                let v = value()?;
                let (name, path) = v.split_once('=').context("--test-bin NAME=PATH")?;
                let path =
                    std::fs::canonicalize(path).with_context(|| format!("test binary {path}"))?;
                a.tests.insert(name.to_owned(), path);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if a.out.as_os_str().is_empty() || !a.oajail.is_file() {
        bail!(
            "usage: oajail-container-matrix --out DIR --oajail BIN --test-bin NAME=PATH… [--only CELL…]"
        );
    }
    for binary in subset::by_binary().keys() {
        a.tests
            .get(*binary)
            .with_context(|| format!("--test-bin {binary}=… is missing"))?;
    }
    Ok(a)
}

fn main() -> Result<()> {
    let a = args()?;
    let env = Env::from_env()?;
    std::fs::create_dir_all(&a.out)?;
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut records = Vec::new();
    let chosen = (CELLS.iter().enumerate())
        .filter(|(_, c)| a.only.is_empty() || a.only.iter().any(|o| o == c.name));
    for (order, cell) in chosen {
        let started = Instant::now();
        let mut recs = run_cell(&a, &env, cell).unwrap_or_else(|e| not_run(&a.out, cell, &e));
        for r in &mut recs {
            r.order = order;
            failures.extend(r.failures());
            let who = if r.who == Who::Root.label() {
                Who::Root
            } else {
                Who::User
            };
            let file = a.out.join(cell.name).join(who.dir()).join("cell.json");
            std::fs::write(file, serde_json::to_vec_pretty(&r)?)?;
        }
        records.extend(recs);
        println!(
            "container-matrix: {} done in {:.1} s",
            cell.name,
            started.elapsed().as_secs_f64()
        );
    }
    print_summary(&records);
    println!(
        "container-matrix: {} cells in {:.1} s",
        records.len() / 2,
        t0.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        bail!("container matrix failed:\n{}", failures.join("\n"));
    }
    Ok(())
}

/// The records of a cell that could not be run, one per user.
fn not_run(out: &Path, cell: &Cell, e: &anyhow::Error) -> Vec<CellRecord> {
    [Who::Root, Who::User]
        .map(|who| {
            let rec = CellRecord {
                cell: cell.name.to_owned(),
                settings: cell.settings.to_owned(),
                who: who.label().to_owned(),
                engine: String::new(),
                modes: Vec::new(),
                attacks_mode: None,
                attacks: Vec::new(),
                error: Some(format!("{e:#}")),
                elapsed_ms: 0,
                recorded_at: oajail_security::judge::now_secs(),
                order: 0,
            };
            let _ = open_dir(&out.join(cell.name).join(who.dir()));
            rec
        })
        .into()
}

fn print_summary(records: &[CellRecord]) {
    for r in records {
        let modes: Vec<String> = (r.modes.iter())
            .map(|m| {
                let doctor = if m.doctor_runs { "runs" } else { "refused" };
                let run = if m.ran { "ran" } else { "refused" };
                let agree = if m.disagreements.is_empty() {
                    "agree"
                } else {
                    "DISAGREE"
                };
                format!("{} doctor {doctor}/run {run} {agree}", m.mode)
            })
            .collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for a in &r.attacks {
            *counts.entry(a.outcome.as_str()).or_default() += 1;
        }
        if let Some(e) = &r.error {
            println!("{:<32} {:<9} NOT RUN: {e}", r.cell, r.who);
            continue;
        }
        println!(
            "{:<32} {:<9} {} | attacks ({}): {counts:?}",
            r.cell,
            r.who,
            modes.join(", "),
            r.attacks_mode.as_deref().unwrap_or("none")
        );
    }
}

/// The directory uid 1000 (or a mapped uid) inside writes to.
fn open_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("create {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
    Ok(())
}

/// The checkout (the workspace root).
pub fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// What every cell mounts: the checkout and the binaries read-only, the
/// cell's results writable, the lab's resolver and hosts files.
fn binds(a: &Args, cell_out: &Path) -> Result<Vec<Bind>> {
    let root = checkout();
    let mut b = vec![Bind {
        path: root.clone(),
        writable: false,
        at: None,
    }];
    for bin in a.tests.values().chain([&a.oajail]) {
        let dir = bin.parent().context("binary directory")?.canonicalize()?;
        if !dir.starts_with(&root) && !b.iter().any(|x| dir.starts_with(&x.path)) {
            b.push(Bind {
                path: dir,
                writable: false,
                at: None,
            });
        }
    }
    b.push(Bind {
        path: cell_out.to_path_buf(),
        writable: true,
        at: None,
    });
    let etc = cell_out.join("lab-etc");
    std::fs::create_dir_all(&etc)?;
    std::fs::write(
        etc.join("resolv.conf"),
        oajail_security::labspec::resolv_conf(),
    )?;
    std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n::1 localhost\n")?;
    for f in ["resolv.conf", "hosts"] {
        std::fs::set_permissions(etc.join(f), std::fs::Permissions::from_mode(0o644))?;
        b.push(Bind {
            path: etc.join(f),
            writable: false,
            at: Some(PathBuf::from("/etc").join(f)),
        });
    }
    Ok(b)
}

fn run_cell(a: &Args, env: &Env, cell: &Cell) -> Result<Vec<CellRecord>> {
    let out = a.out.join(cell.name);
    let _ = std::fs::remove_dir_all(&out);
    open_dir(&out)?;
    let engine = cell.engine;
    let versions = env.versions(&engine);
    let c = engine::start(env, engine, cell.name, &binds(a, &out)?)?;
    network::prepare(c.pid, &env.state).with_context(|| format!("{}: lab network", cell.name))?;
    let mut recs = Vec::new();
    for who in [Who::Root, Who::User] {
        let started = Instant::now();
        let mut rec = run_as(a, &c, cell, who, &out.join(who.dir()))?;
        rec.engine = versions.clone();
        rec.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        recs.push(rec);
    }
    Ok(recs)
}

/// The cell's own settings file: the suite's `attack-deny-home` policy.
const SETTINGS: &str = r#"{
  "network": { "allowedDomains": ["allowed.test"], "deniedDomains": [] },
  "filesystem": { "denyRead": ["~"], "allowWrite": ["."], "denyWrite": [] }
}"#;

fn run_as(
    a: &Args,
    c: &Container<'_>,
    cell: &Cell,
    who: Who,
    results: &Path,
) -> Result<CellRecord> {
    open_dir(results)?;
    let work = results.join("work");
    open_dir(&work)?;
    open_dir(&results.join("home"))?;
    let plain = work.join("settings.json");
    std::fs::write(&plain, SETTINGS)?;
    let nested = work.join("settings-nested.json");
    let mut v: serde_json::Value = serde_json::from_str(SETTINGS)?;
    v["enableWeakerNestedSandbox"] = serde_json::Value::Bool(true);
    std::fs::write(&nested, serde_json::to_vec_pretty(&v)?)?;
    for f in [&plain, &nested] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644))?;
    }
    let vars = base_vars(who, &results.join("home"));
    let oajail = a.oajail.display().to_string();
    let mut modes = Vec::new();
    let mut classes = Vec::new();
    for (mode, file, accept) in [
        ("plain", &plain, false),
        ("nested", &nested, false),
        ("degraded", &plain, true),
    ] {
        let file = file.display().to_string();
        let doc = c.exec(
            who,
            &work,
            &vars,
            &[oajail.clone(), "-s".into(), file.clone(), "doctor".into()],
        )?;
        let d = verdicts::doctor(&String::from_utf8_lossy(&doc.stdout), doc.status.code());
        // -d: a full jail prints no banner, and names its tier only there.
        let mut argv = vec![oajail.clone(), "-d".into(), "-s".into(), file];
        if accept {
            argv.push("--allow-degraded".into());
        }
        argv.extend(["--", "/bin/sh", "-c"].map(String::from));
        argv.push(format!("echo {}", verdicts::RAN));
        let out = c.exec(who, &work, &vars, &argv)?;
        let r = verdicts::run(
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
            out.status.code(),
            &d.classes,
        );
        classes.clone_from(&d.classes);
        modes.push(verdicts::compare(mode, &d, &r, accept));
    }
    let attacks_mode = modes.iter().find(|m| m.ran).map(|m| m.mode.clone());
    let attacks = match &attacks_mode {
        Some(mode) => {
            subset::check_subset(&classes).map_err(anyhow::Error::msg)?;
            attacks(a, c, who, results, mode)?
        }
        None => Vec::new(),
    };
    Ok(CellRecord {
        cell: cell.name.to_owned(),
        settings: cell.settings.to_owned(),
        who: who.label().to_owned(),
        engine: String::new(),
        modes,
        attacks_mode,
        attacks,
        error: None,
        elapsed_ms: 0,
        recorded_at: oajail_security::judge::now_secs(),
        order: 0,
    })
}

fn base_vars(who: Who, home: &Path) -> Vec<(String, String)> {
    let user = if who == Who::Root { "root" } else { "user" };
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
        ("LANG", "C.UTF-8"),
        ("USER", user),
        ("LOGNAME", user),
        ("CI", "true"),
        ("RUST_BACKTRACE", "1"),
        ("OAJAIL_TEST_STRICT", "1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .chain([("HOME".to_owned(), home.display().to_string())])
    .collect()
}

/// The subset in `mode`, one exec per test binary, one test at a time: a
/// prepared lab's sinks live in the cell's one network namespace.
fn attacks(
    a: &Args,
    c: &Container<'_>,
    who: Who,
    results: &Path,
    mode: &str,
) -> Result<Vec<AttackOutcome>> {
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut vars = base_vars(who, &results.join("home"));
    vars.extend(
        [
            ("OAJAIL_SECURITY_RESULTS", results.display().to_string()),
            ("OAJAIL_SECURITY_LAB", "prepared".to_owned()),
            ("INSTA_WORKSPACE_ROOT", checkout().display().to_string()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    match mode {
        "nested" => vars.push(("OAJAIL_SECURITY_NESTED".into(), "1".into())),
        "degraded" => vars.push(("OAJAIL_SECURITY_ALLOW_DEGRADED".into(), "1".into())),
        _ => {}
    }
    let mut outcomes = Vec::new();
    for (binary, tests) in subset::by_binary() {
        let exe = a.tests[binary].display().to_string();
        let mut argv = vec![exe, "--exact".to_owned(), "--test-threads=1".to_owned()];
        argv.extend(tests.iter().map(|t| (*t).to_owned()));
        let out = c.exec(who, &package, &vars, &argv)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let passed = subset::test_results(&stdout);
        // What the exec said when the binary ran no test at all.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = format!("exit {:?}: {}", out.status.code(), stderr.trim());
        for p in subset::SUBSET.iter().filter(|p| p.binary == binary) {
            let mut failure = failure_of(&stdout, p.test);
            if passed.is_empty() {
                failure = said.chars().take(600).collect();
            }
            outcomes.push(subset::judge(
                p,
                passed.get(p.test).copied(),
                results,
                &failure,
            ));
        }
    }
    Ok(outcomes)
}

/// The panic message libtest printed for `test` (its `---- test stdout ----`
/// section), shortened.
fn failure_of(stdout: &str, test: &str) -> String {
    let head = format!("---- {test} stdout ----");
    let Some(at) = stdout.find(&head) else {
        return String::new();
    };
    let rest = &stdout[at + head.len()..];
    let end = rest
        .find("\n---- ")
        .or_else(|| rest.find("\nfailures:"))
        .unwrap_or(rest.len());
    rest[..end].trim().chars().take(600).collect()
}
