//! Reserved exit codes of the `oajail` binary.
//!
//! Any other status is the command's own: an exit code passes through
//! unchanged and death by signal N becomes `128 + N`, as a shell reports it.

use nix::sys::wait::WaitStatus;

/// The policy or the command line was rejected before anything ran
/// (the same code clap uses for usage errors).
pub const USAGE: i32 = 2;
/// `--timeout` expired and the whole jail was killed (as coreutils `timeout`).
pub const TIMEOUT: i32 = 124;
/// A jail setup step failed; nothing of the command ran.
pub const SETUP_FAILED: i32 = 125;
/// The command was found but could not be executed.
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found.
pub const NOT_FOUND: i32 = 127;

/// The status a shell would report for a process killed by `signal`.
pub fn for_signal(signal: i32) -> i32 {
    128 + signal
}

/// Exit status for a wait status: the code, or 128+N for signal N.
pub(crate) fn of_status(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => for_signal(sig as i32),
        _ => SETUP_FAILED,
    }
}
