//! Resource limits plan: which rlimits the command starts with.
//!
//! Only limits are lowered, never raised: a value above the inherited hard
//! limit would need CAP_SYS_RESOURCE in the initial namespace, which the jail
//! does not have, and raising limits is not a sandbox's business. The jail
//! applies each entry as `setrlimit(resource, min(value, current hard))` for
//! both soft and hard, so the command cannot raise it back.

use super::{CompileError, HostFacts};
use crate::{Limits, Policy};
use serde::{Deserialize, Serialize};

/// One resource of `setrlimit(2)`, named as in the man page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Resource {
    /// RLIMIT_CORE: core file size in bytes.
    RlimitCore,
    /// RLIMIT_NOFILE: open descriptors.
    RlimitNofile,
    /// RLIMIT_NPROC: processes of the (real) user id.
    RlimitNproc,
    /// RLIMIT_AS: address space in bytes.
    RlimitAs,
    /// RLIMIT_FSIZE: file size in bytes.
    RlimitFsize,
    /// RLIMIT_CPU: CPU seconds.
    RlimitCpu,
}

/// One limit to set (soft = hard = `value`, capped at the inherited hard limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RlimitEntry {
    /// Which resource.
    pub resource: Resource,
    /// The new soft and hard limit.
    pub value: u64,
}

/// Everything about resources the jail enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePlan {
    /// rlimits for the command, in a fixed order.
    pub rlimits: Vec<RlimitEntry>,
    /// Size of the private /tmp tmpfs in bytes, if limited.
    pub tmp_size_bytes: Option<u64>,
    /// Wall-clock limit from the policy; the CLI's `--timeout` takes precedence.
    pub wall_seconds: Option<u64>,
    /// How shared memory is bounded, when `addressSpaceBytes` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<SharedMemory>,
}

/// `RLIMIT_AS` counts what a process maps, not memory that outlives the
/// mapping: memfd pages, SysV segments and tmpfs files stay allocated
/// after `munmap` (an unprivileged run without a cgroup wrote 1 GiB into a
/// memfd and 1 GiB into SysV segments under a 256 MiB limit). A memory
/// cgroup counts them all; without one, the jail bounds them itself:
/// `/dev/shm` and the default `/tmp` are sized to the limit (the mount
/// plan), and the calls that make memory no file system holds are
/// answered ENOSYS (programs then fall back to `/dev/shm`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedMemory {
    /// The most `/dev/shm` and a default-sized `/tmp` each hold.
    pub tmpfs_bytes: u64,
    /// Calls answered ENOSYS when no cgroup holds the jail's memory.
    pub enosys_without_memory_cgroup: Vec<String>,
}

/// The calls of [`SharedMemory::enosys_without_memory_cgroup`]: an
/// anonymous file (`memfd_create`) and a SysV segment (`shmget`).
pub const UNCOUNTED_MEMORY_CALLS: &[&str] = &["memfd_create", "shmget"];

/// Core dumps are off unless the policy says otherwise: a core file of a
/// jailed process may hold secrets it was given and lands in a writable dir.
pub const DEFAULT_CORE_BYTES: u64 = 0;

/// Compile the policy's `oajail.limits` into a [`ResourcePlan`].
pub fn compile(policy: &Policy, _facts: &HostFacts) -> Result<ResourcePlan, CompileError> {
    Ok(plan(&policy.oajail.limits))
}

/// The plan of `limits` alone (`oajail doctor` shows the whole-jail bounds).
pub fn plan(limits: &Limits) -> ResourcePlan {
    let core = limits.core_bytes.unwrap_or(DEFAULT_CORE_BYTES);
    let optional = [
        (Resource::RlimitNofile, limits.open_files),
        (Resource::RlimitNproc, limits.processes),
        (Resource::RlimitAs, limits.address_space_bytes),
        (Resource::RlimitFsize, limits.file_size_bytes),
        (Resource::RlimitCpu, limits.cpu_seconds),
    ];
    let mut rlimits = vec![RlimitEntry {
        resource: Resource::RlimitCore,
        value: core,
    }];
    rlimits.extend(
        optional
            .into_iter()
            .filter_map(|(resource, v)| v.map(|value| RlimitEntry { resource, value })),
    );
    let shared_memory = limits.address_space_bytes.map(|bytes| SharedMemory {
        tmpfs_bytes: bytes,
        enosys_without_memory_cgroup: (UNCOUNTED_MEMORY_CALLS.iter())
            .map(|c| (*c).to_owned())
            .collect(),
    });
    ResourcePlan {
        rlimits,
        tmp_size_bytes: limits.tmp_size_bytes,
        wall_seconds: limits.wall_seconds,
        shared_memory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Limits {
        Limits {
            core_bytes: None,
            ..Limits::default()
        }
    }

    #[test]
    fn default_is_core_zero_only() {
        let plan = plan(&none());
        assert_eq!(
            plan.rlimits,
            vec![RlimitEntry {
                resource: Resource::RlimitCore,
                value: 0
            }]
        );
        assert_eq!(plan.wall_seconds, None);
    }

    #[test]
    fn every_set_limit_is_listed_in_order() {
        let limits = Limits {
            open_files: Some(64),
            cpu_seconds: Some(5),
            core_bytes: Some(1),
            ..none()
        };
        let got: Vec<_> = plan(&limits)
            .rlimits
            .iter()
            .map(|e| (e.resource, e.value))
            .collect();
        assert_eq!(
            got,
            vec![
                (Resource::RlimitCore, 1),
                (Resource::RlimitNofile, 64),
                (Resource::RlimitCpu, 5)
            ]
        );
    }
}
