//! oajail-policy: the one policy that drives every layer of the jail.
//!
//! Stages, each a type:
//! raw srt settings JSON (`srt::RawSettings`) → validated, normalised [`Policy`]
//! → compiled plain-data plans ([`compile::CompiledPolicy`]: mounts, Landlock
//! rules, seccomp filter, egress allowlist, environment) → thin appliers in
//! the `oajail-jail` and `oajail-proxy` crates.
//!
//! Invariants:
//! - this crate never calls into the kernel to change anything; the only
//!   outside world it sees comes through [`compile::HostFacts`] and the
//!   [`compile::FsView`] trait, so compiled plans are reproducible and
//!   snapshot-testable;
//! - a bad settings file is an error naming the file and the JSON path of the
//!   field; there is never a fallback to a default after a bad file;
//! - the canonical hash of a policy does not depend on key order, list order
//!   or on whether the policy was read from srt JSON or canonical JSON.
#![deny(missing_docs)]

mod canonical;
mod check;
pub mod compile;
mod defaults;
pub mod domain;
pub mod egress;
pub mod env;
pub mod error;
pub mod hash;
pub mod host;
mod json;
mod model;
mod normalize;
pub mod paths;
mod schema;
pub mod srt;

pub use defaults::DEFAULT_DENY_READ;
pub use error::{JsonPath, PolicyError};
pub use model::{
    FilesystemPolicy, Limits, NetworkPolicy, OajailSettings, PathEntry, Policy, ProcessPolicy,
};
pub use paths::{Anchor, PathError, PathMatcher};
