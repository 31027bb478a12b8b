//! Family B7/H: outliving the jail.
//!
//! `daemonize MARKER` starts a detached copy of the probe (`sleeper MARKER`,
//! new session, stdio closed) and reports `succeeded` when it started: the
//! escape is judged by the lab, which looks for a process carrying MARKER
//! after oajail has returned. The probe cannot see past its own exit.

use crate::report::{Outcome, io_errno};
use std::process::{Command, Stdio};

/// `daemonize MARKER`.
pub fn daemonize(attack: &str, marker: &str) -> Outcome {
    let child = Command::new("/proc/self/exe")
        .arg("sleeper")
        .arg(marker)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(c) => Outcome::succeeded(
            attack,
            format!(
                "daemon pid {} started; the lab checks it does not outlive the jail",
                c.id()
            ),
        ),
        Err(e) => Outcome::failed(attack, "spawn", io_errno(&e), &[nix::errno::Errno::EAGAIN]),
    }
}

/// `sleeper MARKER`: new session, then sleep for ten minutes.
pub fn sleeper() -> i32 {
    let _ = nix::unistd::setsid();
    std::thread::sleep(std::time::Duration::from_secs(600));
    0
}
