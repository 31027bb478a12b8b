//! The signals the supervisor and pid 1 both handle: the supervisor blocks
//! them before the clone (pid 1 inherits the mask, so none is lost before
//! its signalfd exists) and both read them from a signalfd.

use nix::sys::signal::{SigSet, Signal};

/// Signals passed on to the command (through pid 1).
pub const FORWARDED_SIGNALS: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// The signals the supervisor and pid 1 block and read from a signalfd.
pub(crate) fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED_SIGNALS {
        set.add(s);
    }
    set.add(Signal::SIGCHLD);
    set
}
