//! Resource limits for the command (from the policy's `ResourcePlan`).

use crate::error::Failure;
use nix::sys::resource::{Resource as R, getrlimit, setrlimit};
use oajail_policy::compile::limits::{Resource, RlimitEntry};

fn resource(r: Resource) -> R {
    match r {
        Resource::RlimitCore => R::RLIMIT_CORE,
        Resource::RlimitNofile => R::RLIMIT_NOFILE,
        Resource::RlimitNproc => R::RLIMIT_NPROC,
        Resource::RlimitAs => R::RLIMIT_AS,
        Resource::RlimitFsize => R::RLIMIT_FSIZE,
        Resource::RlimitCpu => R::RLIMIT_CPU,
    }
}

/// Set soft = hard = min(value, inherited hard) for every entry, so the
/// command can neither exceed nor raise them.
pub(crate) fn apply(entries: &[RlimitEntry]) -> Result<(), Failure> {
    for e in entries {
        let r = resource(e.resource);
        let (_, hard) = getrlimit(r)?;
        let value = e.value.min(hard);
        setrlimit(r, value, value).map_err(|err| Failure {
            errno: Some(err as i32),
            msg: format!("{:?}: {}", e.resource, err.desc()),
        })?;
    }
    Ok(())
}
