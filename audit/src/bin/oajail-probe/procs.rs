//! Family C (process, IPC, terminal) and G (environment) attacks.
//!
//! Targets given as `all` mean every process visible in `/proc` except the
//! probe itself: inside the jail that is oajail's init and anything else the
//! jail put in the pid namespace, which is exactly the attack surface.

use crate::raw as sys;
use crate::report::{Outcome, READ_DENIED, has_canary, io_errno, try_syscall};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::fs;
use std::os::unix::net::{UnixDatagram, UnixStream};

/// Errnos that stop a cross-process attack.
const PROC_DENIED: &[Errno] = &[
    Errno::EPERM,
    Errno::EACCES,
    Errno::ESRCH,
    Errno::ENOSYS,
    Errno::ENOENT,
];
/// Errnos that stop a unix-socket connection.
const SOCK_DENIED: &[Errno] = &[
    Errno::EPERM,
    Errno::EACCES,
    Errno::ENOENT,
    Errno::ECONNREFUSED,
    Errno::ENOTDIR,
    Errno::EAFNOSUPPORT,
];

/// Resolve a target argument to pids.
fn targets(arg: &str) -> Vec<i32> {
    if arg != "all" {
        return arg.parse().into_iter().collect();
    }
    let me = std::process::id() as i32;
    // When the attack runs in a re-executed child, its parent is the probe
    // itself (the attacker's own process), not a target.
    let probe_parent: i32 = std::env::var("OAJ_PROBE_PARENT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let mut pids: Vec<i32> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|p| *p != me && *p != probe_parent)
        .collect();
    pids.sort_unstable();
    pids
}

/// Run `one` against every target; the first success wins, else the last block.
fn each(attack: &str, arg: &str, one: impl Fn(i32) -> Result<(), (String, Errno)>) -> Outcome {
    let pids = targets(arg);
    let mut last = None;
    for pid in &pids {
        match one(*pid) {
            Ok(()) => return Outcome::succeeded(attack, format!("worked against pid {pid}")),
            Err((step, e)) => {
                if !PROC_DENIED.contains(&e) {
                    return Outcome::failed(attack, &format!("{step} pid {pid}"), e, PROC_DENIED);
                }
                last = Some((step, e));
            }
        }
    }
    match last {
        Some((step, e)) => Outcome::failed(
            attack,
            &format!("{step} ({} pids)", pids.len()),
            e,
            PROC_DENIED,
        ),
        None => Outcome::blocked_plain(attack, "no target process visible"),
    }
}

/// `ptrace-attach PID|all`.
pub fn ptrace_attach(attack: &str, arg: &str) -> Outcome {
    each(attack, arg, |pid| {
        nix::sys::ptrace::attach(Pid::from_raw(pid)).map_err(|e| ("PTRACE_ATTACH".into(), e))?;
        let _ = nix::sys::ptrace::detach(Pid::from_raw(pid), None);
        Ok(())
    })
}

/// `proc-mem PID|all`: open `/proc/N/mem` read-write.
pub fn proc_mem(attack: &str, arg: &str) -> Outcome {
    each(attack, arg, |pid| {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map(drop)
            .map_err(|e| ("open mem".into(), io_errno(&e)))
    })
}

/// `process-vm-read PID|all`: `process_vm_readv` one byte. EFAULT means the
/// permission check passed (only the address was wrong): that counts as a success.
pub fn process_vm_read(attack: &str, arg: &str) -> Outcome {
    each(attack, arg, |pid| {
        let mut buf = [0u8; 1];
        let mut local = [std::io::IoSliceMut::new(&mut buf)];
        let remote = [nix::sys::uio::RemoteIoVec {
            base: 0x1000,
            len: 1,
        }];
        match nix::sys::uio::process_vm_readv(Pid::from_raw(pid), &mut local, &remote) {
            Ok(_) | Err(Errno::EFAULT) => Ok(()),
            Err(e) => Err(("process_vm_readv".into(), e)),
        }
    })
}

/// `pidfd-getfd PID|all`: steal fd 0 of another process.
pub fn pidfd_getfd(attack: &str, arg: &str) -> Outcome {
    each(attack, arg, |pid| {
        let pidfd = sys::pidfd_open(pid).map_err(|e| ("pidfd_open".into(), e))?;
        sys::pidfd_getfd(&pidfd, 0)
            .map(drop)
            .map_err(|e| ("pidfd_getfd".into(), e))
    })
}

/// `kill PID`: SIGKILL a host process named by the harness.
pub fn kill(attack: &str, arg: &str) -> Outcome {
    each(attack, arg, |pid| {
        nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).map_err(|e| ("kill".into(), e))
    })
}

/// `kill-all`: `kill(-1, SIGKILL)`. The kernel only reports whether some
/// process got the signal, so the verdict comes from the lab's canary check.
pub fn kill_all(attack: &str) -> Outcome {
    match nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL) {
        Ok(()) => Outcome::blocked_plain(
            attack,
            "kill(-1) delivered inside the jail; host canaries checked by the lab",
        ),
        Err(e) => Outcome::failed(attack, "kill(-1)", e, PROC_DENIED),
    }
}

/// `unix-connect PATH`: stream connect to a host listener.
pub fn unix_connect(attack: &str, path: &str) -> Outcome {
    match UnixStream::connect(path) {
        Ok(_) => Outcome::succeeded(attack, "connected"),
        Err(e) => Outcome::failed(attack, "connect", io_errno(&e), SOCK_DENIED),
    }
}

/// `unix-sendto PATH…`: one datagram to each host socket (no connect
/// needed), from an unbound datagram socket and then from one end of a
/// datagram `socketpair`: a pair's end is not tied to its peer, and
/// `sendto` with a path reaches any datagram socket in view. Any datagram
/// sent is the attack working; blocked means every try was refused.
pub fn unix_sendto(attack: &str, paths: &[String]) -> Outcome {
    let mut refused = None;
    for path in paths {
        let unbound = UnixDatagram::unbound().and_then(|s| s.send_to(b"OAJ-PROBE", path));
        if unbound.is_ok() {
            return Outcome::succeeded(
                attack,
                format!("datagram sent to {path} from an unbound socket"),
            );
        }
        let pair = UnixDatagram::pair()
            .map_err(|e| ("socketpair", e))
            .and_then(|(a, _b)| {
                a.send_to(b"OAJ-PROBE-PAIR", path)
                    .map_err(|e| ("sendto", e))
            });
        match pair {
            Ok(_) => {
                return Outcome::succeeded(
                    attack,
                    format!("datagram sent to {path} from a socketpair end"),
                );
            }
            Err(e) => refused = Some(e),
        }
    }
    match refused {
        Some((step, e)) => Outcome::failed(attack, step, io_errno(&e), SOCK_DENIED),
        None => Outcome::unexpected(attack, None, "no path given"),
    }
}

/// `abstract-connect NAME`: connect to `\0NAME`.
pub fn abstract_connect(attack: &str, name: &str) -> Outcome {
    use std::os::linux::net::SocketAddrExt;
    let addr = match std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()) {
        Ok(a) => a,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "abstract address"),
    };
    match UnixStream::connect_addr(&addr) {
        Ok(_) => Outcome::succeeded(attack, "connected"),
        Err(e) => Outcome::failed(attack, "connect", io_errno(&e), SOCK_DENIED),
    }
}

/// `fds-inherited`: any fd above 2 that the jail let through.
pub fn fds_inherited(attack: &str) -> Outcome {
    let entries = match fs::read_dir("/proc/self/fd") {
        Ok(e) => e,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "list /proc/self/fd"),
    };
    // read_dir holds one fd of its own; it points at /proc/<pid>/fd.
    let mut extra = Vec::new();
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let target = fs::read_link(entry.path()).unwrap_or_default();
        let own_listing = target.to_string_lossy().ends_with("/fd");
        if fd > 2 && !own_listing {
            extra.push(format!("{fd}->{}", target.display()));
        }
    }
    if extra.is_empty() {
        Outcome::blocked_plain(attack, "only fds 0-2 open")
    } else {
        Outcome::succeeded(attack, format!("inherited fds: {}", extra.join(", ")))
    }
}

/// `tiocsti [high]`: push a byte into the terminal's input queue (C7).
pub fn tiocsti(attack: &str, high_bits: bool) -> Outcome {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    match sys::tiocsti(stdin.as_fd(), b'X', high_bits) {
        Ok(()) => Outcome::succeeded(attack, "TIOCSTI injected a byte"),
        Err(e) => Outcome::failed(
            attack,
            "ioctl TIOCSTI",
            e,
            &[
                Errno::EPERM,
                Errno::EIO,
                Errno::ENOTTY,
                Errno::EACCES,
                Errno::ENOSYS,
            ],
        ),
    }
}

/// `tioclinux`: try-syscall with a bad fd; only the filter answers EPERM (C8).
pub fn tioclinux(attack: &str) -> Outcome {
    try_syscall(attack, "ioctl TIOCLINUX", sys::tioclinux_badfd())
}

/// `env-scan`: canaries in the probe's own environment (G1).
pub fn env_scan(attack: &str) -> Outcome {
    let own = std::env::vars_os()
        .filter(|(_, v)| has_canary(v.as_encoded_bytes()))
        .count();
    if own > 0 {
        return Outcome::succeeded(attack, format!("{own} environment variables hold a canary"));
    }
    match fs::read("/proc/self/environ") {
        Ok(b) if has_canary(&b) => Outcome::succeeded(attack, "/proc/self/environ holds a canary"),
        Ok(_) => Outcome::blocked_plain(attack, "no canary in the environment"),
        Err(e) => Outcome::unexpected(attack, Some(io_errno(&e)), "read /proc/self/environ"),
    }
}

/// `proc-environ-scan`: canaries in other processes' environ/cmdline (C1, G3).
pub fn proc_environ_scan(attack: &str) -> Outcome {
    let pids = targets("all");
    let (mut read, mut denied) = (0, 0);
    for pid in &pids {
        for file in ["environ", "cmdline"] {
            match fs::read(format!("/proc/{pid}/{file}")) {
                Ok(b) if has_canary(&b) => {
                    return Outcome::succeeded(
                        attack,
                        format!("/proc/{pid}/{file} holds a canary"),
                    );
                }
                Ok(_) => read += 1,
                Err(e) if READ_DENIED.contains(&io_errno(&e)) => denied += 1,
                Err(e) => {
                    return Outcome::failed(
                        attack,
                        &format!("read /proc/{pid}/{file}"),
                        io_errno(&e),
                        READ_DENIED,
                    );
                }
            }
        }
    }
    Outcome::blocked_plain(
        attack,
        format!(
            "{} pids: {read} files read, {denied} denied, no canary",
            pids.len()
        ),
    )
}
