//! A pseudo-terminal of the jail's own, for an interactive run.
//!
//! When the caller's stdin and stdout are terminals and oajail is in the
//! terminal's foreground process group ([`wanted`]), the supervisor asks
//! pid 1 for a pty with the spec. pid 1 opens the pair on the jail's own
//! devpts once its mounts are in place (`open_in_jail`), sends the master
//! to the supervisor, starts a new session, makes the slave its controlling
//! terminal and puts it in place of each standard descriptor that was a
//! terminal (`take_over`); the command gets a process group of its own
//! and becomes the slave's foreground group (`foreground`). So a shell in
//! the jail has job control (Ctrl-Z, `jobs`, `fg`), and Ctrl-C, Ctrl-Z and
//! Ctrl-\ act on the jail's foreground job only.
//!
//! No process of the jail holds a descriptor of the caller's terminal any
//! more: pid 1 replaced its own copies before the command was forked. So
//! no ioctl from the jail (`TIOCSTI`, `TIOCEXCL`, termios, `TIOCSETD`…)
//! reaches the host terminal; it reaches the slave, which dies with the
//! run. The seccomp denies of those ioctls stay, for runs without a pty.
//!
//! The supervisor puts the host terminal in raw mode once the command runs
//! (`start`) and relays bytes both ways on two threads (two, so a
//! command that does not read its input can never stop its output from
//! being drained); SIGWINCH becomes a window-size update of the pty, which
//! the kernel signals to the jail's foreground group. The relay puts the
//! host terminal back in cooked mode once the jail's output is drained, and
//! [`crate::terminal::Saved`] writes the saved state back on every exit
//! path the supervisor lives through; a SIGKILL of the supervisor itself
//! leaves it raw (`stty sane` repairs it; see `docs/enforcement.md`).
//!
//! oajail's own lines (its stderr) reach the terminal through the same
//! writer as the jail's output while the relay runs, at line starts and
//! with `\r\n` (`screen.rs`).
//!
//! Safe calls only (rustix); nothing here needs `unsafe`.

use crate::prompt::{Divert, Prompter, relay_input};
use crate::screen::{Capture, Screen};
use crate::terminal::standard;
use rustix::pty::{OpenptFlags, ioctl_tiocgptpeer, openpt, unlockpt};
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr, tcsetwinsize};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether this run is interactive: stdin and stdout are terminals and
/// this process is in stdin's foreground process group (a background
/// `oajail … &` keeps the shared terminal, as before).
pub fn wanted() -> bool {
    let stdin = rustix::stdio::stdin();
    if !(rustix::termios::isatty(stdin) && rustix::termios::isatty(rustix::stdio::stdout())) {
        return false;
    }
    rustix::termios::tcgetpgrp(stdin).ok() == Some(rustix::process::getpgrp())
}

/// pid 1, after its mounts: a new pair on the jail's own devpts (so
/// `tty`, `ttyname` and `/dev/pts/N` work in the jail) whose slave starts
/// with the caller's terminal settings and size. Returns (master, slave).
pub(crate) fn open_in_jail() -> io::Result<(OwnedFd, OwnedFd)> {
    let host = rustix::stdio::stdin();
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = openpt(flags)?;
    unlockpt(&master)?;
    // TIOCGPTPEER opens the peer of this very master, with no path lookup.
    let slave = ioctl_tiocgptpeer(&master, flags)?;
    tcsetattr(&slave, OptionalActions::Now, &tcgetattr(host)?)?;
    if let Ok(size) = tcgetwinsize(host) {
        tcsetwinsize(&slave, size)?;
    }
    Ok((master, slave))
}

/// Supervisor, once the command runs: put the host terminal in raw mode
/// and relay between it and `master` (received from pid 1). oajail's own
/// lines (its stderr) go through the same writer from now on
/// (`screen.rs`), when stderr is that terminal too.
pub(crate) fn start(master: OwnedFd) -> io::Result<Relay> {
    let stdin = rustix::stdio::stdin();
    let input = File::from(rustix::io::fcntl_dupfd_cloexec(stdin, 3)?);
    let output = File::from(rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdout(), 3)?);
    let cooked = tcgetattr(stdin)?;
    let mut raw = cooked.clone();
    raw.make_raw();
    let (done, drained) = mpsc::channel();
    // From here on the relay owns the terminal: dropping it (an error
    // below included) leaves raw mode.
    crate::terminal::relayed();
    let screen = Arc::new(Screen::new(output));
    let divert = Divert::default();
    let relay = Relay {
        master: Arc::new(File::from(master)),
        drained,
        cooked,
        raw,
        capture: Mutex::new(None),
        prompter: Prompter::new(Arc::clone(&screen), Arc::clone(&divert)),
    };
    tcsetattr(stdin, OptionalActions::Now, &relay.raw)?;
    let to_jail = Arc::clone(&relay.master);
    std::thread::Builder::new()
        .name("oajail-tty-in".into())
        .spawn(move || relay_input(input, &*to_jail, &divert))?;
    let from_jail = Arc::clone(&relay.master);
    let shown = Arc::clone(&screen);
    std::thread::Builder::new()
        .name("oajail-tty-out".into())
        .spawn(move || {
            show(&*from_jail, &shown);
            let _ = done.send(());
        })?;
    if same_terminal(rustix::stdio::stderr(), rustix::stdio::stdout()) {
        let capture = Capture::start(screen)?;
        *relay.capture.lock().unwrap_or_else(|e| e.into_inner()) = Some(capture);
    }
    Ok(relay)
}

/// Whether two descriptors reach the same terminal.
fn same_terminal(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    let rdev = |fd| rustix::fs::fstat(fd).ok().map(|s| s.st_rdev);
    rustix::termios::isatty(a) && rdev(a).is_some() && rdev(a) == rdev(b)
}

/// The running relay between the host terminal and the pty master.
#[derive(Debug)]
pub(crate) struct Relay {
    master: Arc<File>,
    drained: Receiver<()>,
    /// The caller's terminal settings before raw mode.
    cooked: Termios,
    /// The raw mode set.
    raw: Termios,
    /// oajail's stderr, moved into the screen while the relay runs.
    capture: Mutex<Option<Capture>>,
    /// Questions to the user (`--ask`).
    prompter: Prompter,
}

impl Relay {
    /// Questions to the user at the caller's terminal.
    pub(crate) fn prompter(&self) -> Prompter {
        self.prompter.clone()
    }

    /// The host terminal changed size: give the pty the same size (the
    /// kernel sends SIGWINCH to the jail's foreground group).
    pub(crate) fn resize(&self) {
        if let Ok(size) = tcgetwinsize(rustix::stdio::stdin()) {
            let _ = tcsetwinsize(&*self.master, size);
        }
    }

    /// The jail is gone: wait (at most `limit`) until the output it left in
    /// the pty has reached the host terminal (the master reads end-of-file,
    /// EIO, once no process holds the slave), then leave raw mode, so
    /// oajail's own last lines (the timeout note) print as usual.
    ///
    /// Raw mode goes first, stderr second: a refusal pid 1 reported just
    /// before the end can be printed in between, and on a raw terminal its
    /// bare `\n` would not return the cursor (the next line would start
    /// where this one ended).
    pub(crate) fn drain(&self, limit: Duration) {
        let _ = self.drained.recv_timeout(limit);
        self.unraw();
        self.release_stderr();
    }

    /// Give oajail's stderr back, once what waits in the screen is written.
    fn release_stderr(&self) {
        let taken = self.capture.lock().map(|mut c| c.take());
        if let Ok(Some(capture)) = taken {
            capture.stop(Duration::from_millis(500));
        }
    }

    /// Only while the terminal is still in the raw mode set here: another
    /// interactive oajail started meanwhile on the same terminal (`make
    /// -j`) took this raw mode for the caller's state, and may end after
    /// a run that restored it already; the one whose raw mode is still in
    /// place puts the terminal back.
    fn unraw(&self) {
        let stdin = rustix::stdio::stdin();
        crate::terminal::without_ttou(|| {
            if tcgetattr(stdin).is_ok_and(|now| same_modes(&now, &self.raw)) {
                let _ = tcsetattr(stdin, OptionalActions::Now, &self.cooked);
            }
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.unraw();
        self.release_stderr();
    }
}

fn same_modes(a: &Termios, b: &Termios) -> bool {
    a.input_modes == b.input_modes
        && a.output_modes == b.output_modes
        && a.control_modes == b.control_modes
        && a.local_modes == b.local_modes
}

/// The jail's output to the screen until end-of-file or an error (EIO:
/// the jail's side hung up).
fn show(mut from: impl Read, screen: &Screen) {
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if screen.output(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// pid 1, before it drops privileges: a new session whose controlling
/// terminal is `slave`, and `slave` in place of every standard descriptor
/// that is a terminal (the caller's; descriptors redirected to files or
/// pipes stay as they are). After this no process of the jail holds the
/// caller's terminal.
pub(crate) fn take_over(slave: OwnedFd) -> io::Result<()> {
    nix::unistd::setsid()?;
    rustix::process::ioctl_tiocsctty(&slave)?;
    let tty = |n| rustix::termios::isatty(standard(n));
    if tty(0) {
        nix::unistd::dup2_stdin(&slave)?;
    }
    if tty(1) {
        nix::unistd::dup2_stdout(&slave)?;
    }
    if tty(2) {
        nix::unistd::dup2_stderr(&slave)?;
    }
    Ok(())
}

/// The command, before `execve`: a process group of its own, made the
/// foreground group of its controlling terminal (SIGTTOU blocked
/// meanwhile: until the call succeeds the group is a background one).
pub(crate) fn foreground() -> io::Result<()> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let old = ttou.thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    let tty = (0..3).map(standard).find(|fd| rustix::termios::isatty(*fd));
    let set = match tty {
        Some(fd) => {
            rustix::termios::tcsetpgrp(fd, rustix::process::getpid()).map_err(io::Error::from)
        }
        None => Err(io::Error::other(
            "no standard descriptor is the jail's terminal",
        )),
    };
    old.thread_set_mask()?;
    set
}
