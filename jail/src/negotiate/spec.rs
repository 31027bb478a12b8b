//! The [`JailSpec`] of a negotiated run: the compiled plans, with the
//! seccomp and guard programs compiled and only what the layers that run
//! need.

use super::Negotiation;
use crate::guard::GuardSpec;
use crate::seccomp::{SeccompError, SeccompProgram};
use crate::spec::JailSpec;
use oajail_policy::compile::CompiledPolicy;
use std::ffi::CString;
use std::path::PathBuf;

/// The command a spec runs.
#[derive(Debug, Clone)]
pub struct Command {
    /// `argv[0]` is a path, or a name searched in the `PATH` of `env`.
    pub argv: Vec<CString>,
    /// The complete environment (`NAME=value`).
    pub env: Vec<CString>,
    /// Working directory inside the jail.
    pub cwd: PathBuf,
    /// The oajail binary `GIT_SSH_COMMAND` runs as ssh's ProxyCommand.
    pub ssh_helper: Option<PathBuf>,
}

impl Negotiation {
    /// Build the spec for `command` from `plans` (compiles the BPF programs).
    pub fn build_spec(
        &self,
        command: Command,
        plans: &CompiledPolicy,
    ) -> Result<JailSpec, SeccompError> {
        let layers = self.layers();
        let mut spec = JailSpec::new(command.argv, command.env, command.cwd);
        if layers.seccomp {
            spec.seccomp = Some(SeccompProgram::compile(&plans.seccomp)?);
            if let Some(shared) = &plans.limits.shared_memory {
                let calls = &shared.enosys_without_memory_cgroup;
                spec.memory_seccomp = Some(SeccompProgram::enosys_only(calls)?);
            }
        }
        if layers.guard {
            spec.guard = Some(GuardSpec::compile(&plans.guard)?);
        }
        spec.rlimits = plans.limits.rlimits.clone();
        spec.mounts = Some(plans.mounts.clone());
        if layers.landlock {
            spec.landlock = Some(plans.landlock.clone());
        }
        spec.ssh_helper = command.ssh_helper;
        Ok(spec)
    }
}
