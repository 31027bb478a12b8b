//! Shared helpers of the attack test files: one call per attack.
#![allow(dead_code, unused_imports)]

pub use oajail_security::judge::{
    assert_blocked, assert_blocked_or_unsupported, assert_contained, assert_refused,
};
pub use oajail_security::lab::{Lab, RunOptions};
pub use oajail_security::labspec;

/// Policy with the whole fake home unreadable and only the workspace writable.
pub const DENY_HOME: &str = "attack-deny-home.json";
/// Policy with the home readable except the key files (for write tests).
pub const HOME_READABLE: &str = "attack-home-readable.json";

/// A documented residual (docs/threat-model.md) still succeeds: the probe
/// did what the attack wanted. A change either way must be noticed.
pub fn assert_still_residual(run: &oajail_security::lab::Run) {
    let verdict = run.report.as_ref().map(|r| r.verdict);
    assert_eq!(
        verdict,
        Some(oajail_security::verdict::Verdict::Succeeded),
        "residual changed (good news? update docs/threat-model.md): {} {}",
        run.stdout,
        run.stderr
    );
}

/// Run the probe under oajail with `fixture` and require a block.
pub fn expect_blocked(id: &str, fixture: &str, args: impl FnOnce(&Lab) -> Vec<String>) {
    expect_blocked_with(id, fixture, &RunOptions::default(), args);
}

/// As [`expect_blocked`] with lab options.
pub fn expect_blocked_with(
    id: &str,
    fixture: &str,
    opts: &RunOptions,
    args: impl FnOnce(&Lab) -> Vec<String>,
) {
    let mut lab = Lab::new(id);
    let argv = args(&lab);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(fixture, &argv, opts);
    assert_blocked(&mut lab, id, &run);
}

/// B5 step 1: the jail plants `link -> target` in its workspace (it may:
/// the workspace is writable). Returns whether the link is on the host.
pub fn plant_symlink(lab: &Lab, target: &str, link: &str) -> bool {
    let run = lab.jailed(
        DENY_HOME,
        &["symlink-read", target, link],
        &RunOptions::default(),
    );
    let planted = std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink());
    assert!(
        planted,
        "the jail could not plant {link}: {} {}",
        run.stdout, run.stderr
    );
    planted
}

/// Build an argv from string-ish parts.
#[macro_export]
macro_rules! argv {
    ($($a:expr),* $(,)?) => { vec![$($a.to_string()),*] };
}
