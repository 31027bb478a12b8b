//! The caller's terminal, saved before the run and put back after it.
//!
//! A non-interactive jailed command shares the caller's terminal through
//! its standard descriptors (it has no controlling terminal: it runs in a
//! session of its own); an interactive one gets a pty of the jail's own and
//! the supervisor puts the caller's terminal in raw mode (`pty.rs`). Either
//! way the terminal can be left in raw mode, without echo or signal keys by
//! a run that ends before it puts them back (a crash, `kill -9`, the wall
//! timeout). The supervisor records
//! the termios of every terminal among descriptors 0–2 before the jail
//! starts and writes it back when the run ends, whatever ended it, so the
//! user's shell gets the terminal it had.
//!
//! Exclusive mode (`TIOCEXCL`) and the other lasting terminal ioctls are
//! refused by seccomp (`policy/src/compile/seccomp.rs`); a degraded run
//! without seccomp could still set exclusive mode, so it is cleared here as
//! well (oajail never runs on a terminal that was exclusive before: opening
//! one fails for everyone but root).

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcsetattr};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// The saved state of the caller's terminals; restored on [`Saved::restore`]
/// and again on drop (restoring twice is harmless).
#[derive(Debug, Default)]
pub struct Saved {
    /// One entry per distinct terminal (by device number): which standard
    /// descriptor reaches it and its termios before the run.
    terms: Vec<(u8, Termios)>,
}

impl Saved {
    /// Record every terminal among descriptors 0–2. Descriptors that are no
    /// terminal (pipes, files, `/dev/null`) are left out.
    pub fn capture() -> Saved {
        let mut saved = Saved::default();
        let mut seen = Vec::new();
        for n in 0..3u8 {
            let fd = standard(n);
            if !rustix::termios::isatty(fd) {
                continue;
            }
            let Ok(stat) = rustix::fs::fstat(fd) else {
                continue;
            };
            if seen.contains(&stat.st_rdev) {
                continue;
            }
            if let Ok(t) = tcgetattr(fd) {
                seen.push(stat.st_rdev);
                saved.terms.push((n, t));
            }
        }
        saved
    }

    /// Write the saved termios back and clear exclusive mode (SIGTTOU
    /// blocked meanwhile).
    pub fn restore(&self) {
        if self.terms.is_empty() || RELAYED.load(Ordering::SeqCst) {
            return;
        }
        without_ttou(|| {
            for (n, termios) in &self.terms {
                let fd = standard(*n);
                // Best effort: a terminal that was hung up meanwhile cannot
                // be restored, and there is nobody left to tell.
                let _ = tcsetattr(fd, OptionalActions::Now, termios);
                let _ = rustix::termios::ioctl_tiocnxcl(fd);
            }
        });
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Set once this process relays the caller's terminal to a pty of the
/// jail's own (`pty.rs`): the command then never held the caller's
/// terminal, and the relay puts back the raw mode it set itself. A blind
/// restore here could write back another interactive oajail's raw mode
/// (parallel runs on one terminal), so [`Saved::restore`] stands down.
static RELAYED: AtomicBool = AtomicBool::new(false);

/// The caller's terminal is relayed from now on (see [`RELAYED`]).
pub(crate) fn relayed() {
    RELAYED.store(true, Ordering::SeqCst);
}

/// Run `f` with SIGTTOU blocked: a supervisor in a background process
/// group would otherwise be stopped by its own terminal settings.
pub(crate) fn without_ttou(f: impl FnOnce()) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let old = ttou.thread_swap_mask(SigmaskHow::SIG_BLOCK).ok();
    f();
    if let Some(old) = old {
        let _ = old.thread_set_mask();
    }
}

/// Standard descriptor `n` of this process, borrowed for the process's
/// lifetime (the supervisor never closes them).
pub(crate) fn standard(n: u8) -> BorrowedFd<'static> {
    match n {
        0 => rustix::stdio::stdin(),
        1 => rustix::stdio::stdout(),
        _ => rustix::stdio::stderr(),
    }
}
