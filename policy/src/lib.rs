//! oajail-policy: the one policy that drives every layer of the jail.
//!
//! Stages, each a type:
//! srt settings JSON (or oajail's canonical JSON) → validated, normalised
//! [`Policy`] → compiled plain-data plans ([`compile::CompiledPolicy`]:
//! mounts, Landlock rules, seccomp filter; [`egress`] for the proxy; [`mod@env`]
//! for the environment) → thin appliers in the `oajail-jail` and
//! `oajail-proxy` crates.
//!
//! Loading ([`Policy::from_settings_json`]) runs strict JSON (repeated keys
//! refused) → a walk over srt 0.0.83's schema written as data (types,
//! required keys, ranges, one warning per ignored or unknown key) → a draft
//! of strings with their JSON paths → validation and normalisation (paths
//! lexically, hosts and addresses canonically, every list a sorted set).
//! Canonical JSON input is deserialised, then goes through the same draft
//! and validation. `docs/policy-format.md` is the reference for the format,
//! the hash algorithm, the built-in default and the environment rules.
//!
//! Invariants:
//! - this crate never calls into the kernel to change anything; the only
//!   outside world it sees comes through [`compile::HostFacts`] and the
//!   [`compile::FsView`] trait, so compiled plans are reproducible and
//!   snapshot-testable;
//! - a bad settings file is one error line naming the file and the JSON path
//!   of the field; there is never a fallback to a default after a bad file;
//! - the canonical hash of a policy does not depend on key order, list order,
//!   duplicates, equal spellings, or on whether the policy was read from srt
//!   JSON or canonical JSON; `from_settings_json(to_srt_json(p)) == p` and
//!   the same for `canonical_json`.
//!
//! Tests: unit tests beside each module; `tests/errors.rs` (exact error line
//! of each bad input), `tests/hash.rs` (the documented worked example and
//! invariance), `tests/examples.rs` (insta snapshots and round trips of every
//! `examples/policies/*.json`), `tests/docs.rs` (docs stay in sync).
#![deny(missing_docs)]

mod canonical;
mod check;
pub mod compile;
pub mod credentials;
mod defaults;
pub mod domain;
pub mod egress;
pub mod env;
mod env_values;
pub mod error;
pub mod guard;
pub mod hash;
pub mod host;
pub mod host_runs;
pub mod issued;
mod json;
pub mod l7;
pub mod learn;
mod model;
mod normalize;
pub mod paths;
pub mod reopen;
mod schema;
pub mod srt;
pub mod stat;
pub mod wide;

pub use defaults::{DEFAULT_DENY_READ, builtin_reason};
pub use error::{JsonPath, PolicyError};
pub use model::{
    FilesystemPolicy, Limits, NetworkPolicy, OajailSettings, PathEntry, Policy, ProcessPolicy,
};
pub use paths::{Anchor, PathError, PathMatcher};
