//! Family H: resources and lifecycle, with policy `attack-limits.json`
//! (address space 1 GiB, file size 8 MiB, /tmp 16 MiB).
mod common;
use common::*;
use oajail_security::judge::assert_contained;

const LIMITS: &str = "attack-limits.json";

#[test]
fn blocks_memory_exhaustion() {
    expect_blocked("H2-memory", LIMITS, |_| argv!["alloc", 2048]);
}

#[test]
fn blocks_tmp_fill() {
    expect_blocked("H3-tmp-fill", "attack-limits-tmp.json", |_| {
        argv!["fill-file", "/tmp/fill", 64]
    });
}

#[test]
fn blocks_huge_file_in_workspace() {
    expect_blocked("H3-file-size", LIMITS, |l| {
        argv!["fill-file", l.ws("big"), 64]
    });
}

/// H4: a loop that blocks SIGTERM must still end at `--timeout 1`, within
/// 5 s, with oajail's timeout status (124) and nothing left behind.
#[test]
fn blocks_running_past_the_wall_timeout() {
    let id = "H4-wall-timeout";
    let mut lab = Lab::new(id);
    let marker = format!("oajail-daemon-{}", lab.token);
    let opts = RunOptions {
        oajail_args: vec!["--timeout".into(), "1".into()],
        daemon_marker: Some(marker),
        ..RunOptions::default()
    };
    let run = lab.jailed(LIMITS, &["spin"], &opts);
    assert_eq!(
        run.lab.exit_code,
        Some(124),
        "not ended by the timeout: {:?} {}",
        run.lab,
        run.stderr
    );
    assert!(run.lab.elapsed_ms < 5_000, "took {} ms", run.lab.elapsed_ms);
    assert!(!run.lab.timed_out, "the lab had to kill it");
    let mut run = run;
    run.report = Some(oajail_security::verdict::ProbeReport {
        attack: "spin".into(),
        verdict: oajail_security::verdict::Verdict::Blocked,
        errno: None,
        errno_name: None,
        signal: Some(9),
        detail: format!(
            "ended by --timeout after {} ms (exit 124)",
            run.lab.elapsed_ms
        ),
    });
    assert_blocked(&mut lab, id, &run);
}

/// H5: oajail itself is SIGKILLed while a daemon runs in the jail; nothing
/// of the jail may survive it.
#[test]
fn blocks_surviving_the_supervisor() {
    let id = "H5-supervisor-killed";
    let mut lab = Lab::new(id);
    let marker = format!("oajail-daemon-{}", lab.token);
    let opts = RunOptions {
        kill_after_ms: Some(1_000),
        daemon_marker: Some(marker.clone()),
        ..RunOptions::default()
    };
    let run = lab.jailed(LIMITS, &["daemonize-wait", &marker], &opts);
    assert_eq!(
        run.lab.signal,
        Some(9),
        "oajail was not killed by the lab: {:?}",
        run.lab
    );
    assert_contained(&mut lab, id, &run);
}
