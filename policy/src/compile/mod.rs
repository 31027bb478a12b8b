//! Compilation of a validated [`Policy`] into plain-data plans.
//!
//! `compile` is pure: the host is seen only through [`HostFacts`] (home, cwd,
//! uid, the oajail binary, …) and the read-only [`FsView`] trait (lstat,
//! read_dir, readlink). The jail crate implements `FsView` on the real
//! filesystem; tests use [`MemFs`], so the snapshots do not depend on the
//! machine.
//!
//! Plans and their owners:
//! - [`mounts::MountPlan`] (filesystem layer): the mount namespace built by
//!   `oajail_jail::mount::Prepared::apply`;
//! - [`landlock::LandlockPlan`] (filesystem layer): the Landlock ruleset
//!   applied by `oajail_jail::landlock::restrict` just before seccomp;
//! - [`seccomp::SeccompPlan`] and [`limits::ResourcePlan`] (runtime layer);
//! - [`crate::guard::GuardPlan`] (filesystem layer): the guard pid 1 runs for every
//!   write-like call of the command, which holds the mandatory write denies
//!   (`oajail_jail`'s `guard` module).
//!
//! Invariants:
//! - every path in a plan is absolute, canonical (no symlink component at
//!   compile time) and means the same path inside and outside the jail;
//! - mount steps are ordered shallow to deep, so a more specific rule is
//!   mounted later and wins;
//! - any budget overrun or unexpressible rule is an error (fail closed), never
//!   a silently smaller protection.

pub mod container;
mod fsview;
mod guard;
pub mod home_sockets;
pub mod landlock;
pub mod limits;
pub mod mounts;
mod rules;
pub mod seccomp;

pub use crate::stat::FileKind;
pub use fsview::{FsView, MemFs};

use crate::Policy;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Facts about the host the plans are compiled for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostFacts {
    /// The caller's home directory (absolute); `~` in policy paths.
    pub home: PathBuf,
    /// The caller's working directory (absolute); relative policy paths.
    pub cwd: PathBuf,
    /// The caller's uid (mapped to itself inside the jail).
    pub uid: u32,
    /// The caller's gid (mapped to itself inside the jail).
    pub gid: u32,
    /// The running oajail binary; never writable from the jail.
    pub exe: PathBuf,
    /// The settings file the policy came from, if any; never writable from the jail.
    pub settings_path: Option<PathBuf>,
    /// `$SSH_AUTH_SOCK` of the caller, if set: its directory is masked.
    pub ssh_auth_sock: Option<PathBuf>,
    /// Total RAM in bytes, if known; bounds the default size of `/tmp`.
    pub mem_total_bytes: Option<u64>,
    /// `$XDG_CONFIG_HOME` of the caller, if set (absolute): the guard
    /// protects the configuration files there as it does under `~/.config`.
    #[serde(default)]
    pub xdg_config_home: Option<PathBuf>,
}

impl HostFacts {
    /// Facts that know only the home and working directories: uid and gid
    /// 1000, the binary at `/usr/bin/oajail`, no settings file, agent
    /// socket, memory size or `$XDG_CONFIG_HOME`. What tests and tools that
    /// compile for a described host (not this one) start from, setting the
    /// other fields they need.
    pub fn with_dirs(home: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        HostFacts {
            home: home.into(),
            cwd: cwd.into(),
            uid: 1000,
            gid: 1000,
            exe: "/usr/bin/oajail".into(),
            settings_path: None,
            ssh_auth_sock: None,
            mem_total_bytes: None,
            xdg_config_home: None,
        }
    }
}

/// Every plan compiled from one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompiledPolicy {
    /// sha256 of the canonical policy these plans were compiled from.
    pub policy_sha256: String,
    /// Mount namespace layout.
    pub mounts: mounts::MountPlan,
    /// Landlock ruleset for the command (and pid 1).
    pub landlock: landlock::LandlockPlan,
    /// seccomp filter for the command.
    pub seccomp: seccomp::SeccompPlan,
    /// rlimits and wall-clock limit.
    pub limits: limits::ResourcePlan,
    /// The guard: every write-like call decided by pid 1.
    pub guard: crate::guard::GuardPlan,
}

/// Why a policy could not be compiled for this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// A filesystem walk (mandatory denies, globs, Landlock complements) went over budget.
    #[error(
        "{what} under {root} visited more than {budget} entries; narrow the policy entry to smaller directories"
    )]
    WalkBudget {
        /// What was being walked for.
        what: String,
        /// The directory the walk started at.
        root: String,
        /// The entry budget.
        budget: usize,
    },
    /// A path could not be resolved (symlink loop, non-absolute home or cwd…).
    #[error("filesystem.{field}: {path}: {reason}")]
    Path {
        /// The policy list (`denyRead`, `allowWrite`…) or host fact.
        field: String,
        /// The path as written or resolved so far.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A directory could not be listed while compiling.
    #[error("{what}: cannot list {path}: {reason}")]
    ReadDir {
        /// What was being compiled.
        what: String,
        /// The directory.
        path: String,
        /// The OS error text.
        reason: String,
    },
    /// The runtime layer's plans (seccomp, limits) could not be compiled.
    #[error("{0}")]
    Runtime(String),
}

/// Compile `policy` for the host described by `facts` and `fs`.
pub fn compile(
    policy: &Policy,
    facts: &HostFacts,
    fs: &dyn FsView,
) -> Result<CompiledPolicy, CompileError> {
    let cached = fsview::Cached::new(fs);
    let fs: &dyn FsView = &cached;
    let rules = rules::Rules::build(policy, facts, fs)?;
    let mounts = mounts::build(&rules, policy, facts, fs)?;
    let landlock = landlock::build(&rules, policy, fs)?;
    let config_home = facts
        .xdg_config_home
        .as_ref()
        .and_then(|p| fsview::canonicalize(fs, p).ok());
    let ids = crate::guard::Ids {
        uid: facts.uid,
        gid: facts.gid,
    };
    let guard = guard::build(policy, &rules, &rules.home, config_home.as_deref(), ids);
    Ok(CompiledPolicy {
        policy_sha256: policy.sha256(),
        mounts,
        landlock,
        guard,
        seccomp: seccomp::compile(policy, facts)?,
        limits: limits::compile(policy, facts)?,
    })
}

/// Compile only the filesystem plans (mounts and Landlock); what `compile`
/// uses, exposed so the filesystem layer can be tested on its own.
pub fn compile_filesystem(
    policy: &Policy,
    facts: &HostFacts,
    fs: &dyn FsView,
) -> Result<(mounts::MountPlan, landlock::LandlockPlan), CompileError> {
    let cached = fsview::Cached::new(fs);
    let fs: &dyn FsView = &cached;
    let rules = rules::Rules::build(policy, facts, fs)?;
    let mounts = mounts::build(&rules, policy, facts, fs)?;
    let landlock = landlock::build(&rules, policy, fs)?;
    Ok((mounts, landlock))
}

#[cfg(test)]
#[path = "compile_tests.rs"]
mod tests;
