//! oajail-audit: what `oajail audit` runs, shipped beside `oajail`.
//!
//! Owns: the probe's verdict contract ([`verdict`]), the attack catalogue
//! ([`catalog`]), the fake home and canaries ([`canary`]), the lab's
//! contract and listeners ([`labspec`], [`sinks`], [`tlssink`], [`dns`]),
//! the host-side harness that runs one command in the lab ([`lab`]), the
//! directories labs live in and their removal, also after a `kill -9`
//! ([`rundir`]), stopping early without leaving anything ([`interrupt`]),
//! the security suite's switches for its runs in containers ([`switches`]),
//! and the audit proper: its runbook, grants and judging relative to a user's
//! policy ([`audit`]). The binaries `oajail-probe` (one attack per
//! invocation, inside the jail) and `oajail-lab` (the hermetic network
//! lab) live in `src/bin/`; the `.deb` installs both beside `oajail`.
//! The security suite (`tests/security`) runs the same catalogue, probe
//! and lab against the project's own fixture policies.
//!
//! Invariants:
//! - a run proves "blocked" only when the probe reports `blocked` (or the
//!   kernel cannot run the attack, which is recorded and shown); a missing
//!   binary, a failed lab or a jail that did not start never counts as
//!   blocked;
//! - canaries are unique per lab and never printed by the probe, so a canary
//!   seen in any output is an escape;
//! - nothing leaves the machine: every address an attack targets lives on
//!   the lab's dummy interface inside its own network namespace.
#![deny(missing_docs)]

/// Digest of this crate's sources (`build.rs`). `oajail-probe --build-id`
/// and `oajail-lab --build-id` print theirs; a caller runs them only when
/// it matches, so a probe left from an older tree never answers a newer
/// catalogue.
pub const BUILD_ID: &str = env!("OAJAIL_AUDIT_BUILD");

/// The flag both binaries answer with their [`BUILD_ID`].
pub const BUILD_ID_FLAG: &str = "--build-id";

pub mod audit;
pub mod canary;
pub mod catalog;
pub mod dns;
pub mod interrupt;
pub mod lab;
pub mod labspec;
pub mod rundir;
pub mod sinks;
pub mod switches;
pub mod tlssink;
pub mod verdict;
