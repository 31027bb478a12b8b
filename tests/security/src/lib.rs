//! oajail-security-tests: the exfiltration suite's shared code.
//!
//! Owns: the stage of the guard's attacks and the host's own git
//! afterwards ([`plant`]), judging and result records ([`judge`]) and the
//! report ([`report`], written by the `oajail-security-report` binary in
//! `src/bin/`), and the container matrix's records ([`cells`], written by
//! `oajail-container-matrix`) and report section ([`cells_report`]). The catalogue, the probe, the lab and the audit's judging
//! are product code in `oajail-audit` (`audit/`), which ships beside
//! `oajail`; they are re-exported here so the suite's tests name one crate.
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

pub use oajail_audit::{audit, canary, catalog, dns, lab, labspec, sinks, tlssink, verdict};

pub mod cells;
pub mod cells_report;
pub mod judge;
pub mod plant;
pub mod report;
