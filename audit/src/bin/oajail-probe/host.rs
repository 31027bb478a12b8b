//! Attacks on the host's shared state found by the independent review of
//! issue 13: the caller's terminal (C10), tmpfs inodes (H8), host files the
//! jail's own /proc shows (A9) and system secrets of the built-in default
//! (A9).

use crate::raw as sys;
use crate::report::{Outcome, READ_DENIED, io_errno};
use nix::errno::Errno;
use std::os::fd::AsFd;

/// Dispatch this module's attacks; `None` when `id` is not one of them.
pub fn dispatch(id: &str, p: &[String]) -> Option<Outcome> {
    let a = |i: usize| p.get(i).map(String::as_str).unwrap_or("");
    Some(match id {
        "tty-ioctl" => tty_ioctl(id, a(0)),
        "tty-scramble" => tty_scramble(id),
        "host-tty-reach" => host_tty_reach(id),
        "fill-inodes" => fill_inodes(id, a(0), a(1)),
        "read-any" => read_any(id, p),
        "proc-keys" => proc_keys(id, a(0)),
        "memfd-fill" => memfd_fill(id, a(0)),
        "sysv-fill" => sysv_fill(id, a(0)),
        _ => return None,
    })
}

/// The ids of this module.
pub const IDS: &[&str] = &[
    "tty-ioctl",
    "tty-scramble",
    "host-tty-reach",
    "fill-inodes",
    "read-any",
    "proc-keys",
];

/// `tty-ioctl excl|setd`: a terminal ioctl whose effect outlives the
/// process, on the terminal of stdin. Exclusive mode makes every later open
/// of the user's terminal fail (sudo, ssh, pinentry: EBUSY); TIOCSETD
/// swaps the line discipline (here for N_TTY again, harmless to the lab).
pub fn tty_ioctl(attack: &str, which: &str) -> Outcome {
    let (req, arg) = match which {
        "excl" => (libc::TIOCEXCL, 0),
        "setd" => (libc::TIOCSETD, 0), // N_TTY
        other => return Outcome::unexpected(attack, None, format!("unknown ioctl {other}")),
    };
    let stdin = std::io::stdin();
    if !nix::unistd::isatty(stdin.as_fd()).unwrap_or(false) {
        return Outcome::unexpected(attack, None, "stdin is not a terminal");
    }
    match sys::tty_ioctl_int(stdin.as_fd(), req, arg) {
        Ok(()) => {
            // Leave the lab's terminal usable; the row is decided already.
            if which == "excl" {
                let _ = sys::tty_ioctl_int(stdin.as_fd(), libc::TIOCNXCL, 0);
            }
            Outcome::succeeded(attack, format!("ioctl {which} accepted"))
        }
        Err(e) => Outcome::failed(attack, &format!("ioctl {which}"), e, &[Errno::EPERM]),
    }
}

/// `tty-scramble`: a child turns echo, canonical mode and the signal keys
/// around on the terminal of stdin, then is killed with SIGKILL before it
/// can put them back. Whether the terminal was restored is the lab's
/// judgement (it compares the termios before and after the whole run).
pub fn tty_scramble(attack: &str) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let status = std::process::Command::new("/proc/self/exe")
        .arg("tty-scramble-child")
        .status();
    match status {
        Ok(s) if s.signal() == Some(libc::SIGKILL) => Outcome::blocked_plain(
            attack,
            "terminal changed by a process killed with SIGKILL; the lab checks it was restored",
        ),
        Ok(s) => Outcome::unexpected(attack, None, format!("scrambler ended {s:?}")),
        Err(e) => Outcome::unexpected(attack, Some(io_errno(&e)), "spawn scrambler"),
    }
}

/// The scrambler of [`tty_scramble`]: returns only on failure.
pub fn tty_scramble_child() -> i32 {
    use nix::sys::termios::{LocalFlags, SetArg, SpecialCharacterIndices, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let Ok(mut t) = tcgetattr(stdin.as_fd()) else {
        return 2;
    };
    t.local_flags
        .toggle(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::ISIG);
    t.control_chars[SpecialCharacterIndices::VINTR as usize] = 0x01;
    if tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &t).is_err() {
        return 2;
    }
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    2
}

/// `host-tty-reach`: on an interactive run (stdin and stdout on the lab's
/// pty, whose `st_dev:st_ino` is in `OAJ_HOST_TTY`), look for the caller's
/// terminal among every descriptor of the process and `/dev/tty`, and
/// push a byte with TIOCSTI into each terminal found. Succeeds when any of
/// them is the caller's terminal: then an ioctl filter is all that keeps
/// input out of the user's shell.
pub fn host_tty_reach(attack: &str) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let Some(host) = std::env::var("OAJ_HOST_TTY").ok() else {
        return Outcome::unexpected(attack, None, "OAJ_HOST_TTY not set");
    };
    if !nix::unistd::isatty(std::io::stdin().as_fd()).unwrap_or(false) {
        return Outcome::unexpected(attack, None, "stdin is not a terminal");
    }
    let mut files: Vec<(String, std::fs::File)> = Vec::new();
    // Copies of the descriptors themselves: reopening /proc/self/fd/N by
    // path could fail where the descriptor still works.
    let numbers: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for n in numbers {
        if let Ok(fd) = sys::dup_number(n) {
            files.push((format!("fd {n}"), std::fs::File::from(fd)));
        }
    }
    if let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        files.push(("/dev/tty".into(), f));
    }
    let mut own = Vec::new();
    for (name, f) in &files {
        let Ok(m) = f.metadata() else { continue };
        let sti = sys::tiocsti(f.as_fd(), b'#', false);
        if format!("{}:{}", m.dev(), m.ino()) == host {
            return Outcome::succeeded(
                attack,
                format!("{name} is the caller's terminal (TIOCSTI: {sti:?})"),
            );
        }
        if nix::unistd::isatty(f.as_fd()).unwrap_or(false) {
            own.push(format!("{name}: {sti:?}"));
        }
    }
    Outcome::blocked_plain(
        attack,
        format!(
            "no descriptor reaches the caller's terminal; the jail's own: {}",
            own.join(", ")
        ),
    )
}

/// `fill-inodes DIR N`: create N empty files in DIR. Empty files cost no
/// page of a tmpfs's size, only kernel memory; the mount's `nr_inodes` must
/// stop them (ENOSPC) well before N.
pub fn fill_inodes(attack: &str, dir: &str, n: &str) -> Outcome {
    let Ok(n) = n.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad count {n}"));
    };
    let base = std::path::Path::new(dir).join(format!("oaj-inodes-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&base) {
        return Outcome::unexpected(attack, Some(io_errno(&e)), "mkdir");
    }
    let mut made = 0;
    let mut err = None;
    for i in 0..n {
        match std::fs::File::create(base.join(i.to_string())) {
            Ok(_) => made += 1,
            Err(e) => {
                err = Some(io_errno(&e));
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    match err {
        Some(e) => Outcome::failed(
            attack,
            &format!("create file {made}"),
            e,
            &[Errno::ENOSPC, Errno::EDQUOT],
        ),
        None => Outcome::succeeded(attack, format!("created {made} empty files in {dir}")),
    }
}

/// `read-any PATH…`: any byte of a file, or any entry of a directory, read
/// from the given host secrets is an escape (they hold no canary: they are
/// the host's own).
pub fn read_any(attack: &str, paths: &[String]) -> Outcome {
    let mut hits = Vec::new();
    let mut first_err = None;
    for path in paths {
        let got = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => std::fs::read_dir(path).map(|d| d.count()),
            Ok(_) => std::fs::read(path).map(|b| b.len()),
            Err(e) => Err(e),
        };
        match got {
            Ok(n) if n > 0 => hits.push(format!("{path} ({n})")),
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert(io_errno(&e));
            }
        }
    }
    if !hits.is_empty() {
        return Outcome::succeeded(attack, format!("read: {}", hits.join(", ")));
    }
    match first_err {
        Some(e) => Outcome::failed(attack, "read", e, READ_DENIED),
        None => Outcome::blocked_plain(attack, "every path empty (masked)"),
    }
}

/// `proc-keys DESC`: the jail's /proc/keys lists the keys the caller's uid
/// can view on the host, with their descriptions; DESC is the lab's canary
/// key. /proc/key-users lists key quotas per host uid.
pub fn proc_keys(attack: &str, desc: &str) -> Outcome {
    let keys = std::fs::read_to_string("/proc/keys");
    let users = std::fs::read_to_string("/proc/key-users");
    if let Ok(k) = &keys
        && k.contains(desc)
    {
        return Outcome::succeeded(attack, "/proc/keys shows the host's canary key");
    }
    if let Ok(u) = &users
        && !u.trim().is_empty()
    {
        return Outcome::succeeded(attack, "/proc/key-users lists the host's key users");
    }
    match (keys, users) {
        (Err(e), _) | (_, Err(e)) => Outcome::failed(attack, "read", io_errno(&e), READ_DENIED),
        _ => Outcome::blocked_plain(attack, "/proc/keys and /proc/key-users are empty"),
    }
}

/// `memfd-fill MIB`: write that many MiB into memfds (64 MiB each), never
/// mapped: the pages count against no `RLIMIT_AS`, only against a memory
/// cgroup, whose limit ends the attack (ENOMEM/ENOSPC, or the OOM killer's
/// SIGKILL, seen by the parent probe).
pub fn memfd_fill(attack: &str, mib: &str) -> Outcome {
    use std::io::Write;
    let Ok(n) = mib.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad size {mib}"));
    };
    // Be the OOM killer's first choice, so the parent probe lives to report
    // (memfd pages are in no process's RSS, so it would pick another).
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let chunk = vec![0x5au8; 1 << 20];
    let mut files = Vec::new();
    for i in 0..n {
        if i % 64 == 0 {
            match nix::sys::memfd::memfd_create("oaj-fill", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            {
                Ok(fd) => files.push(std::fs::File::from(fd)),
                Err(e) => {
                    // ENOSYS: refused outright where no cgroup holds the
                    // jail's memory (limits::SharedMemory).
                    return Outcome::failed(
                        attack,
                        "memfd_create",
                        e,
                        &[Errno::ENOMEM, Errno::EMFILE, Errno::ENOSYS],
                    );
                }
            }
        }
        let Some(f) = files.last_mut() else {
            return Outcome::unexpected(attack, None, "no memfd");
        };
        if let Err(e) = f.write_all(&chunk) {
            return Outcome::failed(
                attack,
                &format!("write MiB {i}"),
                io_errno(&e),
                &[Errno::ENOMEM, Errno::ENOSPC],
            );
        }
    }
    Outcome::succeeded(attack, format!("{n} MiB held in memfds"))
}

/// `sysv-fill MIB`: SysV segments of 16 MiB each, made, mapped, filled and
/// unmapped: `RLIMIT_AS` counts a segment only while it is mapped, and it
/// outlives the mapping (until the jail's IPC namespace goes). Ended by a
/// memory cgroup (ENOMEM/ENOSPC or the OOM killer) or refused outright
/// (ENOSYS) where no cgroup holds the jail's memory.
pub fn sysv_fill(attack: &str, mib: &str) -> Outcome {
    const SEGMENT: usize = 16 << 20;
    let Ok(n) = mib.parse::<usize>() else {
        return Outcome::unexpected(attack, None, format!("bad size {mib}"));
    };
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    for i in 0..n.div_ceil(16) {
        if let Err((step, e)) = sys::sysv_segment_fill(SEGMENT) {
            let expected = [Errno::ENOMEM, Errno::ENOSPC, Errno::ENOSYS];
            return Outcome::failed(attack, &format!("{step} (segment {i})"), e, &expected);
        }
    }
    Outcome::succeeded(attack, format!("{n} MiB held in SysV segments"))
}
