//! Attacks the jail does not block yet. They are kept out of the default
//! run (this file compiles only with `--features not-yet-covered`) and are
//! listed in docs/security-tests.md under "Not yet covered"; each one moves
//! to its family file once the jail blocks it, and its id leaves
//! `catalog::NOT_YET_COVERED`. Run them with
//! `cargo test -p oajail-security-tests --features not-yet-covered --test not_yet_covered`.
//!
//! Empty at the moment: the last ones (B2 names created during the run, H1
//! as root) are blocked by the create-guard and the pids cgroup.
#![cfg(feature = "not-yet-covered")]
