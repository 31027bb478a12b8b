//! Attacks the jail does not block yet. They are kept out of the default
//! run (this file compiles only with `--features not-yet-covered`) and are
//! listed in docs/security-tests.md under "Not yet covered"; each one moves
//! to its family file once the jail blocks it. Run them with
//! `cargo test -p oajail-security-tests --features not-yet-covered --test not_yet_covered`.
#![cfg(feature = "not-yet-covered")]
mod common;
use common::*;

/// H1 (hole when the caller is root): a linear, capped "fork bomb" (at
/// most 200 sleepers, all killed before the probe reports) under
/// `limits.processes = 32`. As an unprivileged user RLIMIT_NPROC stops it
/// at about 30; as root the kernel ignores RLIMIT_NPROC (the jail's uid
/// maps to host uid 0) and all 200 start: oajail has no pids cgroup. The
/// host must still be able to fork afterwards and no sleeper may remain.
#[test]
fn blocks_fork_bomb() {
    let id = "H1-fork-bomb";
    let mut lab = Lab::new(id);
    let marker = format!("oajail-daemon-{}", lab.token);
    let opts = RunOptions {
        daemon_marker: Some(marker.clone()),
        ..RunOptions::default()
    };
    let run = lab.jailed(
        "attack-limits-procs.json",
        &["fork-bomb", "200", &marker],
        &opts,
    );
    let host_forks = std::process::Command::new("true")
        .status()
        .is_ok_and(|s| s.success());
    assert!(host_forks, "the host cannot fork after the bomb");
    assert_blocked(&mut lab, id, &run);
}
