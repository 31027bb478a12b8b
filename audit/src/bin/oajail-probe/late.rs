//! Families C9, D10, H1, H6, H7: attacks added after the first
//! catalogue pass. Several of them are documented residuals
//! (`docs/threat-model.md`): the probe reports `succeeded` when the thing
//! the jail does not prevent happened, and the test asserts exactly that.
//!
//! The fork bomb is linear and capped: it never starts more than CAP
//! processes (hard-capped again at [`BOMB_HARD_CAP`]) and kills every one of
//! them before it reports, so it cannot hurt the machine even where the
//! jail's limit does not apply.

use crate::report::{Outcome, io_errno};
use nix::errno::Errno;
use nix::sys::memfd::{MFdFlags, memfd_create};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// No argument may make the bomb start more processes than this.
const BOMB_HARD_CAP: usize = 512;

/// `fork-bomb CAP MARKER`: start sleepers (carrying MARKER) until the
/// kernel refuses or CAP is reached; blocked when refused with EAGAIN.
pub fn fork_bomb(attack: &str, cap: &str, marker: &str) -> Outcome {
    let Ok(cap) = cap.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad cap {cap}"));
    };
    let cap = cap.min(BOMB_HARD_CAP);
    let mut kids: Vec<Child> = Vec::new();
    let mut refused = None;
    while kids.len() < cap {
        let spawned = Command::new("/proc/self/exe")
            .args(["sleeper", marker])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(c) => kids.push(c),
            Err(e) => {
                refused = Some(io_errno(&e));
                break;
            }
        }
    }
    let started = kids.len();
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    match refused {
        Some(e) => Outcome::failed(
            attack,
            &format!("spawn number {} after {started} started", started + 1),
            e,
            &[Errno::EAGAIN],
        ),
        None => Outcome::succeeded(attack, format!("started all {started} processes")),
    }
}

/// `print-escapes TAG`: write OSC 52 (clipboard), OSC 0 (title) and a
/// hidden-text sequence carrying TAG to stdout. Residual: nothing strips
/// them; the test checks they arrive unchanged.
pub fn print_escapes(attack: &str, tag: &str) -> Outcome {
    let seq = escape_sequences(tag);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(seq.as_bytes()).and_then(|()| out.flush()) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write stdout");
    }
    Outcome::succeeded(attack, "printed OSC 52, OSC 0 and SGR 8 sequences")
}

/// The bytes `print-escapes` writes (the test builds the same string).
pub fn escape_sequences(tag: &str) -> String {
    format!("\x1b]52;c;{tag}\x07\x1b]0;{tag}\x07\x1b[8m{tag}\x1b[0m\n")
}

/// `memfd-exec`: copy this binary into a memfd and execute it from there
/// (`/proc/self/fd/N`, the path `fexecve` uses). Residual: oajail has no
/// exec policy, so it runs.
pub fn memfd_exec(attack: &str) -> Outcome {
    let fd = match memfd_create(c"oaj-fileless", MFdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            return Outcome::failed(attack, "memfd_create", e, &[Errno::EPERM, Errno::ENOSYS]);
        }
    };
    let bytes = match std::fs::read("/proc/self/exe") {
        Ok(b) => b,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "read /proc/self/exe"),
    };
    let mut file = std::fs::File::from(fd);
    if let Err(e) = file.write_all(&bytes) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "write memfd");
    }
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match Command::new(&path).arg("list").output() {
        Ok(o)
            if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("memfd-exec") =>
        {
            Outcome::succeeded(attack, "executed a copy of the probe from a memfd")
        }
        Ok(o) => Outcome::unexpected(attack, None, format!("memfd program: {}", o.status)),
        Err(e) => Outcome::failed(
            attack,
            "execve memfd",
            io_errno(&e),
            &[Errno::EACCES, Errno::EPERM],
        ),
    }
}

/// `reap-orphans N`: make N orphans (a child that starts a short-lived
/// grandchild and exits at once), then look for zombies left under pid 1.
/// Blocked when pid 1 reaped them all.
pub fn reap_orphans(attack: &str, n: &str) -> Outcome {
    let Ok(n) = n.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad count {n}"));
    };
    for _ in 0..n.min(64) {
        let spawned = Command::new("/proc/self/exe")
            .arg("orphan-parent")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(e) = spawned {
            return Outcome::unexpected(attack, Some(io_errno(&e)), "spawn orphan parent");
        }
    }
    // The grandchildren exit after 200 ms; give pid 1 time to reap them.
    std::thread::sleep(Duration::from_millis(1_200));
    match zombies_under_init() {
        Ok(0) => Outcome::blocked_plain(attack, format!("{n} orphans exited, no zombie left")),
        Ok(z) => Outcome::succeeded(attack, format!("{z} zombies left under pid 1")),
        Err(e) => Outcome::unexpected(attack, Some(io_errno(&e)), "scan /proc"),
    }
}

/// `orphan-parent` (helper): start a grandchild that sleeps 200 ms, then
/// return at once so the grandchild is re-parented to pid 1.
pub fn orphan_parent() -> i32 {
    let _ = Command::new("/proc/self/exe")
        .args(["orphan-child"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    0
}

/// `orphan-child` (helper).
pub fn orphan_child() -> i32 {
    std::thread::sleep(Duration::from_millis(200));
    0
}

fn zombies_under_init() -> std::io::Result<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // "pid (comm) S ppid …": comm may hold spaces, so split after ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let mut f = rest.split_whitespace();
        if let (Some("Z"), Some("1")) = (f.next(), f.next()) {
            count += 1;
        }
    }
    Ok(count)
}

/// `inotify-instances N`: open N inotify instances. Residual: the count is
/// per uid and shared with the caller's desktop; only RLIMIT_NOFILE bounds
/// it inside the jail.
pub fn inotify_instances(attack: &str, n: &str) -> Outcome {
    let Ok(n) = n.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad count {n}"));
    };
    let mut held = Vec::new();
    for i in 0..n.min(4096) {
        match nix::sys::inotify::Inotify::init(nix::sys::inotify::InitFlags::IN_CLOEXEC) {
            Ok(fd) => held.push(fd),
            Err(e) => {
                return Outcome::failed(
                    attack,
                    &format!("inotify_init number {}", i + 1),
                    e,
                    &[Errno::EMFILE, Errno::ENFILE],
                );
            }
        }
    }
    Outcome::succeeded(attack, format!("holding {} inotify instances", held.len()))
}
