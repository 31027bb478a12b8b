//! `oajail audit`: the real binary audits real policies in real labs.
//!
//! - every policy in examples/policies/ gives the expected verdict counts
//!   (and never an escape or an inconclusive run);
//! - a deliberately weak policy reports its secret reads, persistence and
//!   exfiltration as "allowed by policy" naming the entries, and fails with
//!   `--fail-on allowed`;
//! - the `test-layers` build with the guard switched off turns results into
//!   escapes;
//! - JUnit and SARIF output validate against the published schemas;
//! - a bad policy gives oajail's own one-line error; a lab that cannot be
//!   built fails naming the step.

use oajail_security::lab::{Tools, ablation_oajail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory the jailed commands need not see (reports, policies).
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(format!(
        "/var/tmp/oajail-audit-tests-{}/{name}-{}",
        nix::unistd::getuid(),
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    d
}

/// A lab base of this test process's own (short: the labs' unix socket
/// paths are limited to 107 bytes), so that audits run by others on the
/// machine never meet these tests' labs, and the reverse.
fn lab_base() -> PathBuf {
    scratch("l")
}

fn audit_with(oajail: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let tools = Tools::locate();
    let out = Command::new(oajail)
        .arg("audit")
        .args(args)
        .args(["--jobs", "3"])
        .env("OAJAIL_PROBE_BIN", &tools.probe)
        .env("OAJAIL_LAB_BIN", &tools.lab)
        .env("OAJAIL_AUDIT_DIR", lab_base())
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", oajail.display()));
    eprintln!(
        "oajail audit {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn audit(args: &[&str]) -> Output {
    audit_with(&Tools::locate().oajail, args, &[])
}

fn json_report(args: &[&str]) -> (Output, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = audit(&all);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit printed no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out, v)
}

fn finding<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|x| x["id"] == id))
        .unwrap_or_else(|| panic!("no finding {id} in {report:#}"))
}

fn ids_with(report: &Value, verdict: &str) -> Vec<String> {
    report["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter(|x| x["verdict"] == verdict)
                .filter_map(|x| x["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Audit `examples/policies/<name>` and check the summary: `attacks` run,
/// `allowed` by policy, no escape and nothing inconclusive, exit 0.
fn expect_counts(name: &str, attacks: u64, allowed: u64) -> Value {
    let path = format!("examples/policies/{name}");
    let (out, report) = json_report(&["-s", &path]);
    let s = &report["summary"];
    let got = (
        s["attacks"].as_u64(),
        s["allowed"].as_u64(),
        s["escape"].as_u64(),
        s["inconclusive"].as_u64(),
    );
    assert_eq!(
        got,
        (Some(attacks), Some(allowed), Some(0), Some(0)),
        "{name}: (attacks, allowed, escape, inconclusive); allowed: {:?}; escape: {:?}; inconclusive: {:?}",
        ids_with(&report, "allowed"),
        ids_with(&report, "escape"),
        ids_with(&report, "inconclusive"),
    );
    assert_eq!(out.status.code(), Some(0), "{name}: exit status");
    report
}

/// The staged families (terminal, keyring, daemons, fail-closed, symlinked
/// write roots) run under the user's policy and are judged on evidence.
fn expect_blocked(report: &Value, ids: &[&str]) {
    for id in ids {
        let f = finding(report, id);
        assert_eq!(f["verdict"], "blocked", "{id}: {f:#}");
    }
}

#[test]
fn audits_default_policy() {
    let report = expect_counts("default.json", 157, 8);
    // The jail the attacks ran in, as oajail reports it inside the lab.
    let jail = &report["jail"];
    assert_eq!(jail["tier"], "namespaces", "{jail:#}");
    let layers = jail["layers"].as_array().expect("layers");
    assert!(
        layers.iter().any(|l| l[0] == "landlock" && l[1] == "full"),
        "{jail:#}"
    );
    expect_blocked(
        &report,
        &[
            "C7-tiocsti",
            "C10-tty-restored-after-kill",
            "D7-keyring-canary",
            "B7-daemonize",
            "H6-reap-orphans",
            "I1-no-user-namespaces",
        ],
    );
}

#[test]
fn audits_dev_shell_policy() {
    let report = expect_counts("dev-shell.json", 162, 13);
    // Every allowed domain is either the target of exfiltration attacks
    // or listed as untested, with the reason.
    let policy: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/policies/dev-shell.json"))
            .expect("read dev-shell.json"),
    )
    .expect("dev-shell.json is JSON");
    let untested = report["untestedDomains"]
        .as_array()
        .expect("untestedDomains");
    let why = |entry: &str| {
        untested
            .iter()
            .find(|u| u["entry"] == entry)
            .and_then(|u| u["why"].as_str())
            .map(str::to_owned)
    };
    let tested: Vec<String> = ids_with(&report, "allowed")
        .into_iter()
        .filter_map(|id| id.strip_prefix("X2-exfil-https:").map(str::to_owned))
        .collect();
    for entry in policy["network"]["allowedDomains"]
        .as_array()
        .expect("allowedDomains")
    {
        let entry = entry.as_str().expect("a string");
        let name = entry.replace("*.", "oaj-exfil.");
        assert!(
            tested.contains(&name) != why(entry).is_some(),
            "{entry}: tested {tested:?}, untested {untested:?}"
        );
    }
    assert_eq!(
        why("github.com:22").as_deref(),
        Some("port 22: the exfiltration attacks use HTTPS on 443 and HTTP on 80")
    );
    let same = why("pypi.org").expect("pypi.org is left out");
    assert!(
        same.starts_with("the proxy treats it as ") && same.ends_with(", which is tested"),
        "{same}"
    );
}

#[test]
fn audits_globs_and_literals_policy() {
    let report = expect_counts("globs-and-literals.json", 163, 11);
    expect_blocked(
        &report,
        &["A4-symlinked-write-root:./build", "I1-proxy-fails-to-start"],
    );
}

#[test]
fn audits_mcp_server_policy() {
    // The server's own policy: exfiltration through the API host is refused
    // by its read-only HTTP rules inside the terminated tunnel.
    // Its `limits` bound memory as a whole: as root the jail makes a memory
    // cgroup, which counts memfd and SysV pages, so the 1 GiB of H9/H10
    // fits under the bound (allowed by policy); unprivileged there is no
    // cgroup and the jail refuses both calls (blocked).
    let root = nix::unistd::geteuid().is_root();
    let report = expect_counts("mcp-server.json", 162, if root { 8 } else { 6 });
    for id in ["H9-memfd-whole-jail", "H10-sysv-whole-jail"] {
        let verdict = if root { "allowed" } else { "blocked" };
        assert!(
            ids_with(&report, verdict).iter().any(|x| x == id),
            "{id}: not {verdict}"
        );
    }
    expect_blocked(
        &report,
        &[
            "X2-exfil-https:api.openagenda.com",
            "X3-exfil-http:api.openagenda.com",
        ],
    );
}

#[test]
fn audits_srt_compat_policy() {
    expect_counts("srt-compat.json", 160, 11);
}

#[test]
fn audits_strict_offline_policy() {
    expect_counts("strict-offline.json", 161, 6);
}

const WEAK: &str = r#"{
  "network": { "allowedDomains": ["allowed.test"], "deniedDomains": [] },
  "filesystem": {
    "denyRead": [],
    "allowWrite": [
      "~"
    ],
    "denyWrite": []
  }
}
"#;

fn weak_policy() -> PathBuf {
    let p = scratch("weak").join("weak.json");
    std::fs::write(&p, WEAK).unwrap_or_else(|e| panic!("write weak policy: {e}"));
    p
}

fn grant_of(f: &Value) -> Vec<(String, Option<String>)> {
    f["grantedBy"]
        .as_array()
        .map(|g| {
            g.iter()
                .map(|x| {
                    (
                        x["field"].as_str().unwrap_or("").to_owned(),
                        x["entry"].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn weak_policy_is_allowed_by_name_and_fails_on_allowed() {
    let policy = weak_policy();
    let p = policy.display().to_string();
    let (out, report) = json_report(&["-s", &p, "--only", "A,B,X", "--fail-on", "allowed"]);
    // The built-in secret stores stay denied under a settings file that
    // omits them (docs/srt-compatibility.md); another project's .env is
    // the policy's to deny.
    for store in [
        "~/.ssh/id_ed25519",
        "~/.aws/credentials",
        "~/.git-credentials",
    ] {
        let f = finding(&report, &format!("A2-secret-store:{store}"));
        assert_eq!(f["verdict"], "blocked", "{f:#}");
        let reason = f["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("blocked by ") && reason.contains(&format!(" covers {store}")),
            "{reason}"
        );
    }
    let key = finding(&report, "A2-secret-store:~/projects/other/.env");
    assert_eq!(key["verdict"], "allowed", "{key:#}");
    assert_eq!(
        key["reason"],
        "allowed because no filesystem.denyRead entry covers ~/projects/other/.env (reads are open unless denied)"
    );
    assert_eq!(
        grant_of(key),
        vec![("filesystem.denyRead".to_owned(), None)],
        "{key:#}"
    );
    let plant = finding(&report, "B8-audit-other-project");
    assert_eq!(plant["verdict"], "allowed", "{plant:#}");
    assert_eq!(
        grant_of(plant),
        vec![("filesystem.allowWrite".to_owned(), Some("~".to_owned()))]
    );
    assert_eq!(
        plant["grantedBy"][0]["line"], 6,
        "line of \"~\" in allowWrite"
    );
    assert_eq!(
        plant["reason"],
        "allowed because filesystem.allowWrite \"~\" covers ~/projects/other/Makefile"
    );
    // The guard protects start-up files whatever allowWrite says.
    let bashrc = finding(&report, "B1-bashrc-append");
    assert_eq!(bashrc["verdict"], "blocked");
    let reason = bashrc["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("blocked by the write guard (oajail: guard: denied ")
            && reason.contains(" ~/.bashrc ")
            && reason.ends_with(": ~/.bashrc is a mandatory protection (no entry opens it)"),
        "{reason}"
    );
    let proxy = finding(&report, "X2-exfil-https:evil.test")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        proxy.starts_with("blocked by the proxy (")
            && proxy.ends_with(": no network.allowedDomains entry covers evil.test:443"),
        "{proxy}"
    );
    let exfil = finding(&report, "X2-exfil-https:allowed.test");
    assert_eq!(exfil["verdict"], "allowed", "{exfil:#}");
    let grants = grant_of(exfil);
    assert!(
        grants.contains(&(
            "network.allowedDomains".to_owned(),
            Some("allowed.test".to_owned())
        )) && grants.iter().any(|(f, _)| f == "filesystem.denyRead"),
        "{grants:?}"
    );
    // Mandatory denies hold whatever the policy says; direct egress too.
    for id in [
        "B2-git-hook",
        "B2-mcp-json",
        "X5-exfil-direct-tcp",
        "X2-exfil-https:evil.test",
    ] {
        assert_eq!(finding(&report, id)["verdict"], "blocked", "{id}");
    }
    assert!(ids_with(&report, "escape").is_empty(), "{report:#}");
    assert_eq!(out.status.code(), Some(1), "--fail-on allowed must fail");
    // The same persistence findings do not fail a run without --fail-on.
    let out = audit(&["-s", &p, "--only", "persistence"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Absolute paths a policy names (`/home/alice/…`, `/etc/…`) get a canary
/// too: the lab overlays their nearest existing directory in its own mount
/// namespace, so the host never gets the fake files.
#[test]
fn absolute_policy_paths_get_canaries_without_touching_the_host() {
    let (alice, etc) = ("/home/alice", "/etc/oaj-audit-test");
    for p in [alice, etc] {
        assert!(!Path::new(p).exists(), "{p} exists on this host already");
    }
    let policy = scratch("absolute").join("absolute.json");
    std::fs::write(
        &policy,
        format!(
            r#"{{"network": {{"allowedDomains": [], "deniedDomains": []}},
                "filesystem": {{"denyRead": ["~", "{etc}/secret.key"],
                "allowRead": ["{alice}/.ssh/id_rsa"], "allowWrite": [], "denyWrite": []}}}}"#
        ),
    )
    .unwrap_or_else(|e| panic!("write policy: {e}"));
    let p = policy.display().to_string();
    let (_, report) = json_report(&["-s", &p, "--only", "A,X"]);
    let read = finding(&report, "A2-secret-store:/home/alice/.ssh/id_rsa");
    assert_eq!(read["verdict"], "allowed", "{read:#}");
    assert_eq!(
        grant_of(read),
        vec![("filesystem.denyRead".to_owned(), None)],
        "{read:#}"
    );
    let denied = finding(&report, "A2-secret-store:/etc/oaj-audit-test/secret.key");
    assert_eq!(denied["verdict"], "blocked", "{denied:#}");
    // The readable one is also what an exfiltration carries out.
    let out = finding(&report, "X1-exfil-stdout");
    let detail = out["detail"].as_str().unwrap_or("");
    assert!(detail.contains("policy-abs-"), "{out:#}");
    for p in [alice, etc] {
        assert!(!Path::new(p).exists(), "the audit left {p} on the host");
    }
}

#[test]
fn guard_switched_off_turns_results_into_escapes() {
    let out = audit_with(
        &ablation_oajail(),
        &[
            "-s",
            "examples/policies/dev-shell.json",
            "--only",
            "B",
            "--format",
            "json",
        ],
        &[("OAJAIL_TEST_DISABLE", "guard")],
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json report");
    let escapes = ids_with(&report, "escape");
    assert!(
        escapes.iter().any(|id| id == "B2-mcp-json"),
        "without the guard, B2-mcp-json must escape: {escapes:?}"
    );
    assert_eq!(out.status.code(), Some(1));
}

fn validate(kind: &str, file: &Path) {
    let script = root().join("tests/schemas/validate.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(kind)
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!("run validate.py (python3 with xmlschema and jsonschema: .ci/install-deps): {e}")
        });
    assert!(
        out.status.success(),
        "{kind} report does not validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn junit_and_sarif_validate_against_their_schemas() {
    let dir = scratch("formats");
    let policy = weak_policy();
    let p = policy.display().to_string();
    let junit = dir.join("audit.xml");
    let sarif = dir.join("audit.sarif");
    let j = junit.display().to_string();
    let s = sarif.display().to_string();
    let common = [
        "-s",
        p.as_str(),
        "--only",
        "B,X",
        "--fail-on",
        "any-allowed",
    ];
    let out = audit(&[&common[..], &["--format", "junit", "--out", &j]].concat());
    assert_eq!(out.status.code(), Some(1));
    validate("junit", &junit);
    let xml = std::fs::read_to_string(&junit).expect("read junit");
    assert!(
        xml.contains(
            "<failure message=\"allowed because filesystem.allowWrite &quot;~&quot; covers "
        ),
        "{xml}"
    );
    let out = audit(&[&common[..], &["--format", "sarif", "--out", &s]].concat());
    assert_eq!(out.status.code(), Some(1));
    validate("sarif", &sarif);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).expect("read sarif")).expect("json");
    let results = v["runs"][0]["results"].as_array().expect("results");
    let plant = results
        .iter()
        .find(|r| r["ruleId"] == "B8-audit-other-project")
        .expect("a result for B8-audit-other-project");
    let loc = &plant["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], p.as_str());
    assert_eq!(
        loc["region"]["startLine"], 6,
        "the line of \"~\" in allowWrite"
    );
}

#[test]
fn bad_policy_gives_oajails_own_error() {
    let dir = scratch("bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"filesystem": {"denyRead": "~"}}"#).expect("write");
    let b = bad.display().to_string();
    let tools = Tools::locate();
    let run = Command::new(&tools.oajail)
        .args(["-s", &b, "--", "true"])
        .output()
        .expect("run oajail");
    let out = audit(&["-s", &b]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(run.status.code(), Some(2));
    let line = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(line, String::from_utf8_lossy(&run.stderr).trim());
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_lab_that_cannot_be_built_fails_naming_the_step() {
    // A lab directory that cannot exist: the audit must stop at that step
    // with setup status 125, and never print a report.
    let out = audit_with(
        &Tools::locate().oajail,
        &["-s", "examples/policies/strict-offline.json"],
        &[("OAJAIL_AUDIT_DIR", "/proc/self/oajail-audit")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.starts_with("oajail: audit: "), "{err}");
    assert!(err.contains("/proc/self/oajail-audit"), "{err}");
    assert!(!err.contains("escape"), "{err}");
    assert!(out.stdout.is_empty());
    // A lab binary that runs but builds nothing (as when namespaces are
    // refused before it can write its result): the preflight says so.
    let tools = Tools::locate();
    let empty_lab = fake_tool("empty-lab", &tools.lab, true);
    let out = audit_with(
        &tools.oajail,
        &["-s", "examples/policies/strict-offline.json"],
        &[("OAJAIL_LAB_BIN", empty_lab.to_str().unwrap_or_default())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.starts_with("oajail: audit: cannot build the lab: no lab result"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// A script standing in for `real` (the lab or the probe): it answers
/// `--build-id` as `real` does when `same_build`, else with another id,
/// and otherwise exits 0 having done nothing.
fn fake_tool(name: &str, real: &Path, same_build: bool) -> PathBuf {
    let id = if same_build {
        format!("exec {} --build-id", real.display())
    } else {
        "echo 0123456789abcdef".to_string()
    };
    let path = scratch(name).join(name);
    let text = format!("#!/bin/sh\nif [ \"$1\" = --build-id ]; then {id}; fi\nexit 0\n");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&path, mode)
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
    path
}

/// A probe or lab from another build (an older tree's `cargo install`, a
/// stale `target/`) is refused before any attack runs, naming the binary:
/// it would answer this catalogue with another's verdicts.
#[test]
fn a_probe_or_lab_from_another_build_is_refused_naming_it() {
    let tools = Tools::locate();
    for (env, real) in [
        ("OAJAIL_PROBE_BIN", &tools.probe),
        ("OAJAIL_LAB_BIN", &tools.lab),
    ] {
        let stale = fake_tool("stale", real, false);
        let out = audit_with(
            &tools.oajail,
            &["-s", "examples/policies/strict-offline.json"],
            &[(env, stale.to_str().unwrap_or_default())],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{err}");
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        assert!(
            err.starts_with(&format!(
                "oajail: audit: {name} at {} is from another build",
                stale.display()
            )),
            "{err}"
        );
        assert!(err.contains("cargo install --locked --path audit"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// Make user namespaces unavailable to this thread and every process it
/// starts, as a hardened kernel or a container runtime does: clone and
/// unshare with `CLONE_NEWUSER` fail with EPERM; clone3, whose flags a
/// filter cannot read, fails with ENOSYS (libc then falls back to clone).
fn deny_user_namespaces() -> Result<(), Box<dyn std::error::Error>> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let arch = std::env::consts::ARCH.try_into()?;
    let newuser = libc::CLONE_NEWUSER as u64;
    let flag = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(newuser),
        newuser,
    )?;
    let rule = || SeccompRule::new(vec![flag.clone()]).map(|r| vec![r]);
    let eperm = SeccompFilter::new(
        [(libc::SYS_clone, rule()?), (libc::SYS_unshare, rule()?)].into(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let enosys = SeccompFilter::new(
        [(libc::SYS_clone3, vec![])].into(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    for f in [eperm, enosys] {
        let prog: BpfProgram = f.try_into()?;
        seccompiler::apply_filter(&prog)?;
    }
    Ok(())
}

/// User namespaces really refused (a seccomp filter on the thread that
/// starts the audit, inherited by it; not a stand-in path): the audit stops
/// with exit 125 and one `oajail: audit:` line naming the step that needed
/// the namespace (the lab's own when unprivileged, oajail's jail as root),
/// and never prints a report.
#[test]
fn refused_user_namespaces_fail_closed_naming_the_step() {
    let out = std::thread::spawn(|| {
        deny_user_namespaces().unwrap_or_else(|e| panic!("refuse user namespaces: {e}"));
        audit(&[
            "-s",
            "examples/policies/strict-offline.json",
            "--format",
            "json",
        ])
    })
    .join()
    .expect("audit thread");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    let step = if nix::unistd::geteuid().is_root() {
        "oajail: audit: oajail could not run the probe under this policy: "
    } else {
        "oajail: audit: cannot build the lab: unshare lab namespaces: "
    };
    assert!(lines[0].starts_with(step), "{err}");
    assert!(lines[0].contains("namespaces"), "{err}");
    assert!(
        lines[0].contains("EPERM") || lines[0].contains("not permitted"),
        "{err}"
    );
    assert!(!err.contains("escape") && out.stdout.is_empty(), "{err}");
}

#[test]
fn as_user_runs_the_attacks_as_that_user_or_is_refused() {
    let out = audit(&[
        "-s",
        "examples/policies/strict-offline.json",
        "--only",
        "C",
        "--as-user",
        "oajail-test",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if nix::unistd::geteuid().is_root() {
        assert_eq!(out.status.code(), Some(0), "{err}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("C3-kill-host-canary"), "{text}");
    } else {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(
            err.trim(),
            "oajail: --as-user: only root can run attacks as another user"
        );
    }
}

#[test]
fn progress_line_on_a_terminal_and_none_in_a_pipe() {
    // `script` gives the audit a pty as stderr: the progress line appears.
    let tools = Tools::locate();
    let cmd = format!(
        "OAJAIL_AUDIT_DIR={} OAJAIL_PROBE_BIN={} OAJAIL_LAB_BIN={} {} audit -s examples/policies/strict-offline.json --only H",
        lab_base().display(),
        tools.probe.display(),
        tools.lab.display(),
        tools.oajail.display()
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("run script(1) from util-linux: {e}"));
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains("\r\x1b[Kaudit: preflight"), "{tty}");
    // attack 1/N … N/N, redrawn in place; N is the family's size.
    let first = "\r\x1b[Kaudit: attack 1/";
    let total: String = tty
        .split(first)
        .nth(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect())
        .unwrap_or_default();
    assert!(!total.is_empty(), "{tty}");
    assert!(
        tty.contains(&format!(
            "\r\x1b[Kaudit: attack {total}/{total} · 0 escape · "
        )),
        "{tty}"
    );
    // Erased before the report: the table starts on a clean line.
    assert!(tty.contains("\r\x1b[Koajail audit of "), "{tty}");
    // Piped (as in CI), stderr carries only the summary line.
    let out = audit(&["-s", "examples/policies/strict-offline.json", "--only", "H"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("audit: attack") && !err.contains('\x1b'),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    assert!(
        err.starts_with(&format!("oajail: audit: {total} attacks in ")),
        "{err}"
    );
}

/// Every path under `dir`, relative, sorted (a directory tree's shape).
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Processes whose command line or working directory names `needle`.
fn processes_in(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = entry.path();
        let cmdline = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(p.join("cwd")).unwrap_or_default();
        if cmdline.contains(needle) || cwd.display().to_string().contains(needle) {
            out.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    out
}

/// The audit removes its labs, including the overlay work directories
/// the kernel leaves at mode 000 (which an unprivileged run used to leave
/// behind, 93 lab directories for families A and B), and the base it made.
#[test]
fn the_audit_leaves_the_directory_tree_as_it_found_it() {
    // Short names: the labs' unix socket paths are limited to 107 bytes.
    let dir = scratch("t");
    std::fs::write(dir.join("before.txt"), "the user's").expect("write before.txt");
    let before = tree(&dir);
    let base = dir.join("labs");
    let out = audit_with(
        &Tools::locate().oajail,
        &["--only", "A,B"],
        &[("OAJAIL_AUDIT_DIR", base.to_str().unwrap_or_default())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{err}\n{stdout}");
    // The policy names absolute paths: the labs had overlays to remove.
    assert!(stdout.contains("A2-secret-store:/"), "{stdout}");
    assert_eq!(tree(&dir), before, "{err}");
}

/// Wait (up to 10 s) until no process runs in or names `needle`.
fn none_left_running(needle: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes_in(needle).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "still running 10 s after the audit ended: {:?}",
            processes_in(needle)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Ctrl-C (SIGINT) while attacks run: the audit kills its labs, says so in
/// one line, writes no report, exits 130 and leaves nothing behind.
#[test]
fn ctrl_c_stops_the_audit_and_removes_its_labs() {
    let dir = scratch("c");
    let before = tree(&dir);
    let base = dir.join("labs");
    let tools = Tools::locate();
    let child = Command::new(&tools.oajail)
        .args(["audit", "--only", "A,B", "--jobs", "3"])
        .env("OAJAIL_PROBE_BIN", &tools.probe)
        .env("OAJAIL_LAB_BIN", &tools.lab)
        .env("OAJAIL_AUDIT_DIR", &base)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start oajail audit");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tree(&base).iter().filter(|p| p.ends_with("/ws")).count() < 3 {
        assert!(std::time::Instant::now() < deadline, "no labs after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("send SIGINT");
    let out = child.wait_with_output().expect("wait for the audit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("oajail: audit: stopped by SIGINT after ")
                && l.ends_with(" attacks; no report, and the labs are removed")),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "a partial report was printed");
    none_left_running(&base.display().to_string());
    assert_eq!(tree(&dir), before, "{err}");
}

/// `kill -9` of the audit: its labs, sleepers and jailed commands die with
/// it, and the next audit removes what it left (and says so).
#[test]
fn a_killed_audit_leaves_nothing_running_and_the_next_one_sweeps_it() {
    let dir = scratch("k");
    let before = tree(&dir);
    let base = dir.join("labs");
    let tools = Tools::locate();
    let mut child = Command::new(&tools.oajail)
        .args(["audit", "--only", "A,B", "--jobs", "3"])
        .env("OAJAIL_PROBE_BIN", &tools.probe)
        .env("OAJAIL_LAB_BIN", &tools.lab)
        .env("OAJAIL_AUDIT_DIR", &base)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start oajail audit");
    // Kill it while attacks run: several labs exist.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tree(&base).iter().filter(|p| p.ends_with("/ws")).count() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no labs after 60 s: {:?}",
            tree(&base)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().expect("kill -9 the audit");
    let _ = child.wait();
    let needle = base.display().to_string();
    none_left_running(&needle);
    assert!(
        !tree(&base).is_empty(),
        "the killed run left nothing to sweep"
    );
    let out = audit_with(
        &tools.oajail,
        &["--only", "H"],
        &[("OAJAIL_AUDIT_DIR", base.to_str().unwrap_or_default())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "oajail: audit: removed what earlier audits left in {needle} (1 run(s) that were killed"
        )),
        "{err}"
    );
    assert_eq!(tree(&dir), before, "{err}");
}

/// `--tier container`: every lab refuses oajail user namespaces as Docker's
/// default seccomp profile does (EPERM on clone and unshare with
/// CLONE_NEWUSER), so the jail runs its container tier; the report names
/// that tier, the I1 row is allowed by enableWeakerNestedSandbox, and the
/// families the tier holds show no escape. Without the key, oajail's own
/// refusal (naming it) stops the audit.
#[test]
fn tier_container_audits_the_container_tier_and_says_so() {
    let dir = scratch("tier");
    let mut policy: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/policies/strict-offline.json"))
            .expect("read strict-offline.json"),
    )
    .expect("strict-offline.json is JSON");
    policy["enableWeakerNestedSandbox"] = Value::Bool(true);
    let path = dir.join("weaker.json");
    std::fs::write(&path, policy.to_string()).expect("write the policy");
    let p = path.display().to_string();
    let (out, report) = json_report(&["-s", &p, "--tier", "container", "--only", "A,C,E,F,I,X"]);
    let jail = &report["jail"];
    assert_eq!(jail["tier"], "container", "{jail:#}");
    let layers = jail["layers"].as_array().expect("layers");
    assert!(
        layers
            .iter()
            .any(|l| l[0] == "namespaces" && l[1].as_str().is_some_and(|s| s.contains("EPERM"))),
        "{jail:#}"
    );
    let i1 = finding(&report, "I1-no-user-namespaces");
    assert_eq!(i1["verdict"], "allowed", "{i1:#}");
    assert!(
        i1["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("allowed because enableWeakerNestedSandbox accepts")),
        "{i1:#}"
    );
    let s = &report["summary"];
    assert_eq!(
        (s["escape"].as_u64(), s["inconclusive"].as_u64()),
        (Some(0), Some(0)),
        "escape: {:?}; inconclusive: {:?}",
        ids_with(&report, "escape"),
        ids_with(&report, "inconclusive")
    );
    assert_eq!(out.status.code(), Some(0));
    let out = audit(&[
        "-s",
        "examples/policies/strict-offline.json",
        "--tier",
        "container",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.starts_with("oajail: audit: oajail could not run the probe under this policy: ")
            && err.contains("enableWeakerNestedSandbox"),
        "{err}"
    );
}
