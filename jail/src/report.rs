//! What pid 1 enforced, as it reports it to the supervisor over the channel
//! (`sync.rs`) just before forking the command. Plain data shared by both
//! sides: pid 1 builds it, the supervisor prints and returns it.

/// What the jail enforces, as pid 1 reports it just before forking the
/// command (so it reflects what the kernel accepted, not what was asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnforcementReport {
    /// User, mount, pid, net, ipc and uts namespaces.
    pub namespaces: bool,
    /// The mount plan was applied (and the root pivoted).
    pub mounts: bool,
    /// How much of the Landlock plan the kernel enforces.
    pub landlock: LandlockEnforced,
    /// The Landlock ABI the ruleset was built for (0: no Landlock).
    pub landlock_abi: u8,
    /// Every capability set was emptied and checked.
    pub caps: bool,
    /// The seccomp filter will be installed (pid 1 and the command).
    pub seccomp: bool,
    /// The create-guard filter will be installed in the command, with pid 1
    /// answering its notifications.
    pub guard: bool,
}

/// Landlock's part of an [`EnforcementReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LandlockEnforced {
    /// Every right, port rule and scope of the plan.
    Full,
    /// All of it an older ABI has (the negotiated level).
    Partial,
    /// Not applied (no Landlock, or ABI 1 beside the mount layer).
    None,
}
