//! Family I: fail-closed behaviour. oajail must refuse with one `oajail:`
//! line and a non-zero status, and the command must never run unconfined.
mod common;
use common::*;

#[test]
fn refuses_without_user_namespaces() {
    let mut lab = Lab::new("I1-no-user-namespaces");
    let opts = RunOptions {
        no_userns: true,
        ..RunOptions::default()
    };
    let run = lab.jailed(DENY_HOME, &["nnp"], &opts);
    assert_refused(&mut lab, "I1-no-user-namespaces", &run);
}

#[test]
fn refuses_invalid_policy() {
    let mut lab = Lab::new("I1-bad-policy");
    let run = lab.jailed("attack-invalid.json", &["nnp"], &RunOptions::default());
    assert_refused(&mut lab, "I1-bad-policy", &run);
}

/// The kernel "lacks" Landlock (test build: `OAJAIL_TEST_PRETEND_MISSING`).
/// The mounts then hold a read deny only for the paths as they are at the
/// start, not a denied file the host replaces during the run (A14), so
/// oajail must refuse without a flag rather than run with that rule half
/// held. (`--strict` refuses too: `tests/jail_cli.rs`.)
#[test]
fn refuses_without_landlock() {
    let mut lab = Lab::new("I1-no-landlock");
    let run = lab.jailed_test_build(
        &[("OAJAIL_TEST_PRETEND_MISSING", "landlock")],
        DENY_HOME,
        &["nnp"],
        &RunOptions::default(),
    );
    assert_refused(&mut lab, "I1-no-landlock", &run);
}

/// The kernel "lacks" seccomp filters: refuse.
#[test]
fn refuses_without_seccomp() {
    let mut lab = Lab::new("I1-no-seccomp");
    let run = lab.jailed_test_build(
        &[("OAJAIL_TEST_PRETEND_MISSING", "seccomp")],
        DENY_HOME,
        &["nnp"],
        &RunOptions::default(),
    );
    assert_refused(&mut lab, "I1-no-seccomp", &run);
}

/// The kernel "lacks" seccomp user notification with a listener (the
/// create-guard): refuse, naming the `guard` step.
#[test]
fn refuses_without_the_create_guard() {
    let mut lab = Lab::new("I1-no-guard");
    let run = lab.jailed_test_build(
        &[("OAJAIL_TEST_PRETEND_MISSING", "guard")],
        DENY_HOME,
        &["nnp"],
        &RunOptions::default(),
    );
    assert!(
        run.stderr.contains("oajail: guard:"),
        "no guard step in: {}",
        run.stderr
    );
    assert_refused(&mut lab, "I1-no-guard", &run);
}

/// I1 "proxy gone": the proxy runs inside the oajail process (it cannot be
/// killed apart from the supervisor; that case is H5), so the reachable
/// failure is the proxy failing to start. Its decision log cannot be
/// opened (the parent directory does not exist): oajail must refuse before
/// the command runs, with a network policy that needs the proxy, even
/// with `--allow-degraded`; never run the command with direct network or
/// with no proxy in front of it.
#[test]
fn refuses_when_the_proxy_cannot_start() {
    let id = "I1-proxy-fails-to-start";
    let mut lab = Lab::new(id);
    let opts = RunOptions {
        oajail_args: vec![
            "--allow-degraded".into(),
            "--log-json".into(),
            lab.path("no-such-dir/decisions.jsonl"),
        ],
        ..RunOptions::default()
    };
    let run = lab.jailed(
        "attack-proxy.json",
        &["proxy-connect", "allowed.test:443", "allowed.test"],
        &opts,
    );
    assert_refused(&mut lab, id, &run);
}

/// I2: `--env-keep` values the settings file refuses (`*` keeps every
/// secret, `a=b` and the empty name are no names) are refused on the
/// command line too, before the command runs.
#[test]
fn refuses_bad_env_keep_values() {
    for (n, value) in ["*", "a=b", ""].iter().enumerate() {
        let id = "I2-env-keep-bad";
        let mut lab = Lab::new(&format!("{id}-{n}"));
        let opts = RunOptions {
            oajail_args: vec!["--env-keep".into(), (*value).into()],
            ..RunOptions::default()
        };
        let run = lab.jailed(DENY_HOME, &["env-scan"], &opts);
        assert!(
            run.stderr.contains("--env-keep"),
            "{value:?}: the refusal does not name --env-keep: {}",
            run.stderr
        );
        assert_refused(&mut lab, id, &run);
    }
}

/// I2: `--timeout 0` means no timeout (as coreutils' timeout), not "kill at
/// once": the command runs to its end and its status passes through.
#[test]
fn timeout_zero_is_no_timeout() {
    let id = "I2-timeout-zero";
    let mut lab = Lab::new(id);
    let opts = RunOptions {
        oajail_args: vec!["--timeout".into(), "0".into()],
        ..RunOptions::default()
    };
    let run = lab.jailed(DENY_HOME, &["nnp"], &opts);
    assert_ne!(
        run.lab.exit_code,
        Some(124),
        "killed by --timeout 0: {}",
        run.stderr
    );
    assert_blocked(&mut lab, id, &run);
}

/// I2: `-c` runs the string with bash, as srt does (`[[ ]]` is bash
/// syntax; /bin/sh as dash exits 2 or 127 on it), inside the jail.
#[test]
fn dash_c_runs_bash() {
    let id = "I2-dash-c-bash";
    let mut lab = Lab::new(id);
    let policy = lab.policy(DENY_HOME);
    let script = format!(
        "[[ -n \"$BASH_VERSION\" && 1 == 1 ]] && exec {} nnp",
        lab.tools.probe.display()
    );
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        policy,
        "-c".into(),
        script,
    ];
    let run = lab.run(argv, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}
