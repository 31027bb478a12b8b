//! The [`JailSpec`] of a negotiated run: the compiled plans, with the
//! seccomp and guard programs compiled and only what the layers that run
//! need; in the container tier, the plans adapted to it first
//! (`oajail_policy::compile::container`).

use super::{Negotiation, Tier};
use crate::connect::ConnectSpec;
use crate::guard::GuardSpec;
use crate::seccomp::{SeccompError, SeccompProgram};
use crate::spec::JailSpec;
use oajail_policy::compile::CompiledPolicy;
use oajail_policy::compile::container::{ContainerInputs, HANDED_OFF, adapt};
use std::borrow::Cow;
use std::ffi::CString;
use std::net::SocketAddr;
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

/// What a container-tier run has beyond the plans: its own directories and
/// the proxy listeners the supervisor bound.
#[derive(Debug, Clone)]
pub struct ContainerTier {
    /// The run's private temporary directory (`TMPDIR`).
    pub tmpdir: PathBuf,
    /// The run's read-only directory (the trust bundle).
    pub readonly: PathBuf,
    /// The proxy's listeners in the container's network.
    pub proxy: Vec<SocketAddr>,
    /// The port the jail is told the proxy listens on.
    pub jail_port: u16,
}

impl Negotiation {
    /// Build the spec for `command` from `plans` (compiles the BPF
    /// programs); `container` is required in the container tier.
    pub fn build_spec(
        &self,
        command: Command,
        plans: &CompiledPolicy,
        container: Option<&ContainerTier>,
    ) -> Result<JailSpec, SeccompError> {
        let layers = self.layers();
        let plans = match (self.tier, container) {
            (Tier::Container, Some(c)) => Cow::Owned(self.container_plans(plans, c)),
            _ => Cow::Borrowed(plans),
        };
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
        spec.scope_command = layers.landlock && layers.landlock_abi >= 6 && !layers.namespaces;
        if let (true, Some(c)) = (layers.connect, container) {
            spec.connect = Some(ConnectSpec {
                proxy: c.proxy.clone(),
                jail_port: c.jail_port,
                allow_local_binding: !self.facts.restrict_tcp,
                allow_unix: !self.facts.unix_sockets_denied,
            });
        }
        Ok(spec)
    }

    fn container_plans(&self, plans: &CompiledPolicy, c: &ContainerTier) -> CompiledPolicy {
        let mut adapted = plans.clone();
        self.adapt(&mut adapted, c);
        adapted
    }

    /// Adapt `plans` to the container tier in place (also what `oajail
    /// explain` shows there). Without the hand-off (a test build switched
    /// it off) its calls are not sent to pid 1: they run as made, under
    /// Landlock's port rule alone, which is what such a build shows.
    pub fn adapt(&self, adapted: &mut CompiledPolicy, c: &ContainerTier) {
        let ports: Vec<u16> = c.proxy.iter().map(SocketAddr::port).collect();
        let tmpdir = c.tmpdir.to_string_lossy();
        let readonly = c.readonly.to_string_lossy();
        adapt(
            adapted,
            &ContainerInputs {
                tmpdir: &tmpdir,
                readonly: Some(&readonly),
                proxy_ports: &ports,
                allow_unix: !self.facts.unix_sockets_denied,
            },
        );
        if !self.layers().connect {
            let notify = &mut adapted.guard.filter.notify;
            notify.retain(|call| !HANDED_OFF.contains(&call.as_str()));
        }
    }
}
