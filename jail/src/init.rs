//! oajail's init: what pid 1 of the jail does around and after the fork.
//!
//! pid 1 never executes anything. It is non-dumpable (so the command cannot
//! read its memory or /proc files), its argv/environ copy is wiped, it holds
//! no capability, and after the fork it only reads a signalfd, reaps zombies,
//! forwards INT/TERM/HUP/QUIT/USR1/USR2/WINCH to the command's process group,
//! serves the create-guard's notifications ([`crate::guard`]) and exits with
//! the command's status. When the command exits, pid 1 kills and reaps every
//! other process of the jail, so background and double-forked processes never
//! outlive the command, then tells the supervisor the code
//! ([`crate::sync::ExitReport`]) and exits.

use crate::error::Failure;
use crate::guard::Server;
use crate::signals::handled_signals;
use crate::sync::{Channel, ExitReport};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::os::fd::{AsFd, AsRawFd};

/// Title shown in /proc/1/cmdline and /proc/1/comm inside the jail.
const TITLE: &[u8] = b"oajail-init";

/// Die with SIGKILL when the supervisor dies, and check it has not already.
///
/// `getppid()` cannot serve as the check (it is 0 across the pid namespace
/// boundary); the supervisor's channel end hanging up is the same signal.
pub(crate) fn die_with_supervisor(chan: &Channel) -> Result<(), Failure> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if chan.peer_alive() {
        Ok(())
    } else {
        Err(Failure::msg("supervisor exited before the jail started"))
    }
}

/// Non-dumpable, renamed, argv/environ copy wiped.
pub(crate) fn harden() -> Result<(), Failure> {
    nix::sys::prctl::set_dumpable(false)?;
    let name = std::ffi::CString::new(TITLE).map_err(|e| Failure::msg(e.to_string()))?;
    nix::sys::prctl::set_name(&name)?;
    crate::sys::process::scrub_cmdline_and_environ(TITLE)?;
    Ok(())
}

/// The signalfd pid 1 waits on (created before the fork so no SIGCHLD is lost:
/// the signals are already blocked, inherited from the supervisor).
pub(crate) fn signal_fd() -> Result<SignalFd, Failure> {
    Ok(SignalFd::with_flags(
        &handled_signals(),
        SfdFlags::SFD_CLOEXEC,
    )?)
}

/// Without a pid namespace (degraded run) pid 1 is not an init: it becomes
/// a child subreaper so orphaned descendants are reparented to it, and
/// [`kill_descendants`] kills them when the command exits.
pub(crate) fn become_subreaper() -> Result<(), Failure> {
    Ok(nix::sys::prctl::set_child_subreaper(true)?)
}

/// The init loop. Never returns. `flat`: no pid namespace, so descendants
/// must be killed explicitly before exiting.
pub(crate) fn run(
    command: Pid,
    signals: SignalFd,
    flat: bool,
    mut guard: Option<Server>,
    report: ExitReport,
) -> ! {
    let mut keep = vec![signals.as_raw_fd(), report.as_fd().as_raw_fd()];
    keep.extend(guard.as_ref().map(Server::descriptors).unwrap_or_default());
    close_all_but(&keep);
    loop {
        let watch = flat.then_some(&report);
        let (signal_ready, guard_event) = wait(&signals, guard.as_ref(), watch);
        match guard_event {
            GuardEvent::Ready => {
                // A failing listener fails every waiting call; drop it.
                if guard.as_mut().is_some_and(|g| g.serve_one().is_err()) {
                    guard = None;
                }
            }
            // No process holds the filter any more.
            GuardEvent::Gone => guard = None,
            GuardEvent::Idle => {}
        }
        if signal_ready {
            on_signal(&signals, command, flat, guard.as_ref(), &report);
        }
    }
}

/// What the guard's listener has to say after a poll.
enum GuardEvent {
    Idle,
    Ready,
    Gone,
}

/// Block until a signal or a guard notification is pending. With
/// `supervisor` (no pid namespace), its exit report's pipe is watched too:
/// when it breaks the supervisor is gone, and every process of the jail is
/// killed before pid 1 exits.
fn wait(
    signals: &SignalFd,
    guard: Option<&Server>,
    supervisor: Option<&ExitReport>,
) -> (bool, GuardEvent) {
    let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
    let mut at = |fd, events| {
        fds.push(PollFd::new(fd, events));
        fds.len() - 1
    };
    let g = guard.map(|g| at(g.listener.as_fd(), PollFlags::POLLIN));
    let s = supervisor.map(|r| at(r.as_fd(), PollFlags::empty()));
    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
    match poll(&mut fds, PollTimeout::NONE) {
        Ok(_) => {}
        Err(nix::Error::EINTR) => return (false, GuardEvent::Idle),
        // Cannot wait any more: exiting kills the whole jail (fail closed).
        Err(_) => end_now(supervisor.is_some()),
    }
    let ready = |i: Option<usize>, f: PollFlags| {
        i.and_then(|i| fds.get(i))
            .and_then(|p| p.revents())
            .is_some_and(|r| r.intersects(f))
    };
    if ready(s, gone) {
        end_now(true);
    }
    let event = if ready(g, PollFlags::POLLIN) {
        GuardEvent::Ready
    } else if ready(g, gone) {
        GuardEvent::Gone
    } else {
        GuardEvent::Idle
    };
    (ready(Some(0), PollFlags::POLLIN), event)
}

/// Exit at once; without a pid namespace (`flat`) kill every process of the
/// jail first, as the namespace's end would.
fn end_now(flat: bool) -> ! {
    if flat {
        kill_descendants();
    }
    crate::sys::process::exit_now(crate::exit_code::SETUP_FAILED)
}

/// Read one signal: reap on SIGCHLD (ending the jail once the command is
/// gone), forward the others.
fn on_signal(
    signals: &SignalFd,
    command: Pid,
    flat: bool,
    guard: Option<&Server>,
    report: &ExitReport,
) {
    match signals.read_signal() {
        Ok(Some(info)) => {
            let signo = info.ssi_signo as i32;
            if signo == libc::SIGCHLD {
                if let Some(code) = reap(command) {
                    finish(code, flat, guard, report);
                }
            } else if let Ok(sig) = Signal::try_from(signo) {
                forward(command, sig);
            }
        }
        Ok(None) | Err(nix::Error::EINTR) => {}
        // Cannot wait any more: exiting kills the whole jail (fail closed).
        Err(_) => crate::sys::process::exit_now(crate::exit_code::SETUP_FAILED),
    }
}

/// The command is gone: kill the rest of the jail, then exit with `code`.
/// The supervisor gets the code first, but only once no other process of
/// the jail is left: it may then return while the kernel is still tearing
/// down the namespaces in pid 1's exit, and no jailed code runs by then.
/// Anything unexpected skips the report, and the supervisor waits for pid
/// 1's exit as before (where the kernel kills whatever is left).
fn finish(code: i32, flat: bool, guard: Option<&Server>, report: &ExitReport) -> ! {
    let alone = if flat {
        kill_descendants()
    } else {
        kill_namespace()
    };
    if let Some(g) = guard {
        g.report_total();
    }
    if alone {
        report.send(code);
    }
    crate::sys::process::exit_now(code)
}

/// Kill and reap every other process of pid 1's namespace; true once none
/// is left. `kill(-1)` from pid 1 reaches exactly the namespace's other
/// processes, and `ESRCH` says there are none, zombies included. Killed
/// processes' orphans become pid 1's children, so reaping converges; a
/// process that cannot be killed or reaped ends the attempt (bounded: 200
/// ms) rather than hold the jail.
fn kill_namespace() -> bool {
    use nix::errno::Errno;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while std::time::Instant::now() < deadline {
        match kill(Pid::from_raw(-1), Signal::SIGKILL) {
            Err(Errno::ESRCH) => return true,
            Ok(()) => {}
            Err(_) => return false,
        }
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::StillAlive) => {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Kill every process reparented to us (we are their subreaper), repeating
/// while killing a parent orphans more of them; true once none is left.
/// Best effort: needs `/proc/self/task/*/children` (CONFIG_PROC_CHILDREN).
fn kill_descendants() -> bool {
    let me = nix::unistd::getpid();
    for _ in 0..64 {
        let path = format!("/proc/self/task/{me}/children");
        let Ok(text) = std::fs::read_to_string(path) else {
            return false;
        };
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            return true;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::__WALL));
        }
    }
    false
}

/// Close every descriptor above 2 except those in `keep` (the supervisor's
/// leaked descriptors and our channel end must not stay in the jail).
fn close_all_but(keep: &[i32]) {
    let mut keep: Vec<u32> = keep.iter().map(|k| *k as u32).collect();
    keep.sort_unstable();
    let mut low = 3u32;
    for k in keep {
        let _ = crate::sys::fd::close_between(low, k.saturating_sub(1));
        low = low.max(k + 1);
    }
    let _ = crate::sys::fd::close_between(low, u32::MAX);
}

/// Send `sig` to the command's process group (it is a session leader), or to
/// the command alone while it has not called setsid yet.
fn forward(command: Pid, sig: Signal) {
    if kill(Pid::from_raw(-command.as_raw()), sig).is_err() {
        let _ = kill(command, sig);
    }
}

/// Reap every exited child; `Some(status)` once the command itself exited.
fn reap(command: Pid) -> Option<i32> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(s @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                if pid == command =>
            {
                return Some(crate::exit_code::of_status(s));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}
