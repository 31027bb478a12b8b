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

/// The kernel "lacks" Landlock (test build: `OAJAIL_TEST_PRETEND_MISSING`)
/// and the user demands every layer (`--strict`): oajail must refuse rather
/// than run with one layer fewer. (Without `--strict` the mounts, namespaces
/// and guard hold every rule, and the run goes ahead: the negotiation of
/// docs/enforcement.md; `tests/jail_cli.rs` covers it.)
#[test]
fn refuses_without_landlock() {
    let mut lab = Lab::new("I1-no-landlock");
    let opts = RunOptions {
        oajail_args: vec!["--strict".into()],
        ..RunOptions::default()
    };
    let run = lab.jailed_test_build(
        &[("OAJAIL_TEST_PRETEND_MISSING", "landlock")],
        DENY_HOME,
        &["nnp"],
        &opts,
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
