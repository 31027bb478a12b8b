//! The guard's plan: plain data the compile builds
//! (`compile::guard::build`) and the jail carries to pid 1, with the shape
//! of the command's notification filter (`oajail_bpf::guard` compiles it).

use serde::{Deserialize, Serialize};

/// Bits of `open` flags that make an open able to write or create
/// (`O_WRONLY | O_RDWR | O_CREAT | O_TRUNC`, the same on x86_64 and
/// aarch64).
pub const WRITE_FLAGS: u32 = 0o1 | 0o2 | 0o100 | 0o1000;

/// A call sent to pid 1 only when its flags argument has a [`WRITE_FLAGS`] bit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlagsArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its flags argument.
    pub flags_arg: u8,
    /// x86_64 only.
    pub legacy: bool,
}

/// Mode bits that can make a file run or let others change it: set-id and
/// sticky bits, execute bits, group and other write bits.
pub const RISKY_MODE: u32 = 0o7133;

/// A call sent to pid 1 only when its mode argument has a [`RISKY_MODE`]
/// bit: `fchmod` on a descriptor (a read-only one is enough to change the
/// mode, and a mode can make a disabled hook run again), `fchmodat` and
/// `chmod` by path. `chmod(f, 0644)`, what archivers do for every file,
/// changes nothing that runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeArg {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its mode argument.
    pub mode_arg: u8,
    /// x86_64 only.
    #[serde(default)]
    pub legacy: bool,
}

/// A call sent to pid 1 only when it could change an owner: its user
/// argument is neither `-1` nor the command's uid, or its group argument
/// neither `-1` nor the command's gid. `chown(f, me, me)`, what archivers
/// run as root for every file, changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerArgs {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of its user argument (the group's is the next one).
    pub uid_arg: u8,
    /// x86_64 only.
    pub legacy: bool,
}

/// A call sent to pid 1 only when an argument equals a value:
/// `unlinkat(AT_FDCWD, …)` when no `denyWrite` entry can refuse a removal
/// (`compile/guard.rs`), and `socket(AF_UNIX, …)` when the run reports
/// unix-socket refusals (the supervisor moves that refusal from the deny
/// filter to pid 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgEq {
    /// Kernel name of the call.
    pub syscall: String,
    /// Index of the argument.
    pub arg: u8,
    /// The value that notifies.
    pub value: u32,
}

/// The command's own ids, for [`OwnerArgs`] (the jail maps each to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ids {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

/// The shape of the command's notification filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterShape {
    /// Calls always sent to pid 1 (on every architecture).
    pub notify: Vec<String>,
    /// Calls always sent to pid 1 that exist on x86_64 only.
    pub legacy: Vec<String>,
    /// Calls sent to pid 1 when their flags can write or create.
    pub notify_if_write: Vec<FlagsArg>,
    /// Calls sent to pid 1 when they set a risky mode bit.
    pub notify_if_mode: Vec<ModeArg>,
    /// Calls sent to pid 1 when they could change an owner.
    pub notify_unless_owner: Vec<OwnerArgs>,
    /// The command's ids those are compared with.
    pub ids: Ids,
    /// Calls sent to pid 1 when an argument has one value (absent from
    /// the plan when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify_if_eq: Vec<ArgEq>,
    /// Calls pid 1 only watches and then lets through: `umask` (pid 1
    /// creates files with the caller's mask, and reading it from
    /// `/proc/<pid>/status` at every creation would cost more than the
    /// creation itself), `chdir` and `fchdir` (pid 1 keeps each thread's
    /// working directory instead of reading it back at every call). What
    /// they do is read again afterwards, never trusted from their
    /// arguments, so letting them through cannot be raced.
    pub watch: Vec<String>,
    /// Calls answered ENOSYS, so libc falls back to an older call the
    /// filter can read: `openat2` (its flags live in a struct), `fchmodat2`,
    /// `setxattrat`, `removexattrat` (Linux 6.6 and 6.13 additions).
    pub enosys: Vec<String>,
}

/// The compiled guard plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardPlan {
    /// Writable roots (absolute, canonical): below them every write-like
    /// call is decided.
    pub roots: Vec<String>,
    /// The jail's private file systems (they die with the jail): not
    /// guarded, except below a root bound into them.
    pub private: Vec<String>,
    /// `denyWrite` entries (resolved; existing or not), the settings file
    /// and the oajail binary.
    pub deny_write: Vec<String>,
    /// The home directory (anchor of [`super::names::HOME`]).
    pub home: String,
    /// `$XDG_CONFIG_HOME` when set to another place than `~/.config`.
    pub config_home: Option<String>,
    /// `$XDG_DATA_HOME` when set to another place than `~/.local/share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_home: Option<String>,
    /// `$XDG_STATE_HOME` when set to another place than `~/.local/state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_home: Option<String>,
    /// `.git/config` may be written (`allowGitConfig`).
    pub allow_git_config: bool,
    /// The notification filter's shape.
    pub filter: FilterShape,
}

/// Whether some `denyWrite` entry lies below a writable root. Then a
/// removal there can be refused, and every removal goes to pid 1 to be
/// decided; else only those named by path go there, for the report of the
/// kernel's refusal, and one spelled inside a root is let go on. The
/// filter (`compile/guard.rs`) and pid 1 (`jail/src/guard/serve.rs`) both
/// ask this, so the two cannot disagree.
pub fn removals_decided<P: AsRef<std::path::Path>>(roots: &[P], deny_write: &[P]) -> bool {
    (deny_write.iter()).any(|d| roots.iter().any(|r| d.as_ref().starts_with(r.as_ref())))
}

impl GuardPlan {
    /// [`removals_decided`] for this plan.
    pub fn decides_removals(&self) -> bool {
        removals_decided(&self.roots, &self.deny_write)
    }

    /// The XDG directories set elsewhere than their place in the home.
    pub fn xdg(&self) -> super::names::XdgDirs {
        let path = |v: &Option<String>| v.as_ref().map(std::path::PathBuf::from);
        super::names::XdgDirs {
            config: path(&self.config_home),
            data: path(&self.data_home),
            state: path(&self.state_home),
        }
    }
}
