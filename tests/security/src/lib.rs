//! oajail-security-tests: the exfiltration suite's shared code.
//!
//! Owns: the probe's verdict contract ([`verdict`]), the attack catalogue
//! ([`catalog`]), the fake home and canaries ([`canary`]), the lab's
//! contract and listeners ([`labspec`], [`sinks`], [`tlssink`], [`dns`]), the host-side
//! harness ([`lab`]), the stage of the guard's attacks and the host's own
//! git afterwards ([`plant`]), judging and result records ([`judge`]) and
//! the report ([`report`]), the container matrix's records ([`cells`]), and `oajail audit`'s runbook, grants and
//! judging relative to a user's policy ([`audit`]). The binaries
//! `oajail-probe`, `oajail-lab` and `oajail-security-report` live in
//! `src/bin/`; `oajail-probe` and `oajail-lab` also ship beside `oajail`
//! for `oajail audit`.
//!
//! Invariants:
//! - a test passes only when the probe reports `blocked` (or the kernel
//!   cannot run the attack, which is recorded and shown) AND every global
//!   post-condition holds; a missing binary, a failed lab or a jail that did
//!   not start never counts as blocked;
//! - canaries are unique per lab and never printed by the probe, so a canary
//!   seen in any output is an escape;
//! - nothing leaves the machine: every address an attack targets lives on
//!   the lab's dummy interface inside its own network namespace.
#![deny(missing_docs)]

pub mod audit;
pub mod canary;
pub mod catalog;
pub mod cells;
pub mod dns;
pub mod judge;
pub mod lab;
pub mod labspec;
pub mod plant;
pub mod report;
pub mod sinks;
pub mod tlssink;
pub mod verdict;
