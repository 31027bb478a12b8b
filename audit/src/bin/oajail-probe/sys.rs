//! Family D: the syscall surface. Each attack is a try-syscall: arguments
//! that make an unfiltered kernel fail harmlessly (bad fd, NULL pointer), so
//! `EPERM`/`ENOSYS`/`SIGSYS` attributes the block to the filter and
//! `EBADF`/`EFAULT`/`EINVAL` proves the call reached the kernel.
//! These run in a child process (see `main.rs`) because a seccomp KILL
//! action must be observed from outside.

use crate::raw as sys;
use crate::report::{FILTERED, Outcome, io_errno, try_syscall};
use nix::errno::Errno;
use std::fs;

/// `io-uring-setup`.
pub fn io_uring_setup(attack: &str) -> Outcome {
    // With kernel.io_uring_disabled=2 the kernel refuses everyone: the
    // filter is not what stops the call, so the attack proves nothing here.
    if fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|v| v.trim() == "2") {
        return Outcome::not_applicable(attack, "kernel.io_uring_disabled=2");
    }
    try_syscall(
        attack,
        "io_uring_setup(4, NULL)",
        sys::io_uring_setup_null(4),
    )
}

/// `io-uring-enter`.
pub fn io_uring_enter(attack: &str) -> Outcome {
    try_syscall(attack, "io_uring_enter(-1)", sys::io_uring_enter_badfd())
}

/// `io-uring-register`.
pub fn io_uring_register(attack: &str) -> Outcome {
    try_syscall(
        attack,
        "io_uring_register(-1)",
        sys::io_uring_register_badfd(),
    )
}

/// `x32-socket`: `socket(AF_INET)` through the x32 syscall number.
pub fn x32_socket(attack: &str) -> Outcome {
    try_syscall(
        attack,
        "x32 socket",
        sys::x32_socket(libc::AF_INET, libc::SOCK_STREAM, 0),
    )
}

/// `x32-getpid`: the most harmless x32 call, to tell "no x32" from "filtered".
pub fn x32_getpid(attack: &str) -> Outcome {
    try_syscall(attack, "x32 getpid", sys::x32_getpid())
}

/// `int80-getpid`: i386 `getpid` through `int 0x80` from a 64-bit process.
pub fn int80_getpid(attack: &str) -> Outcome {
    let ret = sys::int80_getpid();
    if ret > 0 {
        Outcome::succeeded(attack, "int 0x80 getpid returned a pid")
    } else {
        let e = Errno::from_raw(i32::try_from(-ret).unwrap_or(libc::EINVAL));
        Outcome::failed(attack, "int 0x80 getpid", e, FILTERED)
    }
}

/// `int80-socket`: i386 `socketcall(SYS_SOCKET, AF_INET)` through `int 0x80`.
pub fn int80_socket(attack: &str) -> Outcome {
    let ret = sys::int80_socket_inet();
    if ret >= 0 {
        Outcome::succeeded(attack, "int 0x80 socketcall created a socket")
    } else {
        let e = Errno::from_raw(i32::try_from(-ret).unwrap_or(libc::EINVAL));
        Outcome::failed(attack, "int 0x80 socketcall", e, FILTERED)
    }
}

/// `unshare-user`: a nested user namespace (D4).
pub fn unshare_user(attack: &str) -> Outcome {
    use nix::sched::{CloneFlags, unshare};
    match unshare(CloneFlags::CLONE_NEWUSER) {
        Ok(()) => Outcome::succeeded(attack, "created a user namespace"),
        Err(e) => Outcome::failed(
            attack,
            "unshare(CLONE_NEWUSER)",
            e,
            &[Errno::EPERM, Errno::ENOSPC, Errno::ENOSYS, Errno::EUSERS],
        ),
    }
}

/// `unshare-mount`: a new mount namespace (needs CAP_SYS_ADMIN in the jail userns).
pub fn unshare_mount(attack: &str) -> Outcome {
    use nix::sched::{CloneFlags, unshare};
    match unshare(CloneFlags::CLONE_NEWNS) {
        Ok(()) => Outcome::succeeded(attack, "created a mount namespace"),
        Err(e) => Outcome::failed(attack, "unshare(CLONE_NEWNS)", e, FILTERED),
    }
}

/// `clone3`: libc must see ENOSYS so it falls back to `clone`.
pub fn clone3(attack: &str) -> Outcome {
    try_syscall(attack, "clone3(NULL, 0)", sys::clone3_null())
}

/// `setns`.
pub fn setns(attack: &str) -> Outcome {
    try_syscall(attack, "setns(-1)", sys::setns_badfd())
}

/// `umount PATH`: lift a mask (D5).
pub fn umount(attack: &str, path: &str) -> Outcome {
    use nix::mount::{MntFlags, umount2};
    match umount2(path, MntFlags::MNT_DETACH) {
        Ok(()) => Outcome::succeeded(attack, "unmounted"),
        Err(e) => Outcome::failed(
            attack,
            "umount2",
            e,
            &[Errno::EPERM, Errno::ENOSYS, Errno::EACCES, Errno::EINVAL],
        ),
    }
}

/// `mount-bind SRC DST`.
pub fn mount_bind(attack: &str, src: &str, dst: &str) -> Outcome {
    use nix::mount::{MsFlags, mount};
    match mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND, None::<&str>) {
        Ok(()) => Outcome::succeeded(attack, "bind mount created"),
        Err(e) => Outcome::failed(
            attack,
            "mount(MS_BIND)",
            e,
            &[Errno::EPERM, Errno::ENOSYS, Errno::EACCES],
        ),
    }
}

/// `open-tree PATH`: the new mount API.
pub fn open_tree(attack: &str, path: &str) -> Outcome {
    match sys::open_tree_clone(path) {
        Ok(_) => Outcome::succeeded(attack, "open_tree(OPEN_TREE_CLONE) returned a mount fd"),
        Err(e) => Outcome::failed(attack, "open_tree", e, FILTERED),
    }
}

/// `fsopen`.
pub fn fsopen(attack: &str) -> Outcome {
    match sys::fsopen("tmpfs") {
        Ok(_) => Outcome::succeeded(attack, "fsopen(tmpfs) returned a context"),
        Err(e) => Outcome::failed(attack, "fsopen", e, FILTERED),
    }
}

/// `BPF_PROG_LOAD` (uapi/linux/bpf.h; not exported by libc).
const BPF_PROG_LOAD: i32 = 5;

/// `bpf`.
pub fn bpf(attack: &str) -> Outcome {
    try_syscall(
        attack,
        "bpf(BPF_PROG_LOAD, NULL)",
        sys::bpf_null(BPF_PROG_LOAD),
    )
}

/// `perf-event-open`.
pub fn perf_event_open(attack: &str) -> Outcome {
    try_syscall(attack, "perf_event_open(NULL)", sys::perf_event_open_null())
}

/// `userfaultfd`: user-mode-only faults are allowed to unprivileged callers.
pub fn userfaultfd(attack: &str) -> Outcome {
    try_syscall(
        attack,
        "userfaultfd(UFFD_USER_MODE_ONLY)",
        sys::userfaultfd(1),
    )
}

/// `kcmp`.
pub fn kcmp(attack: &str) -> Outcome {
    try_syscall(attack, "kcmp(self, self)", sys::kcmp_self())
}

/// `keyctl-read DESC`: find the host's canary key in the session keyring (D7).
pub fn keyctl_read(attack: &str, desc: &str) -> Outcome {
    let key = match sys::keyctl_search_session(desc) {
        Ok(k) => k,
        Err(e) => {
            let mut ok = FILTERED.to_vec();
            ok.extend([Errno::ENOKEY, Errno::EKEYREVOKED, Errno::EKEYEXPIRED]);
            return Outcome::failed(attack, "keyctl search", e, &ok);
        }
    };
    match sys::keyctl_read(key) {
        Ok(bytes) if crate::report::has_canary(&bytes) => {
            Outcome::succeeded(attack, "read the host key payload")
        }
        Ok(_) => Outcome::succeeded(attack, "found the host key (payload without canary)"),
        Err(e) => Outcome::failed(attack, "keyctl read", e, FILTERED),
    }
}

/// `keyctl`: try-syscall on `keyctl(KEYCTL_GET_KEYRING_ID, @s)`.
pub fn keyctl(attack: &str) -> Outcome {
    try_syscall(attack, "keyctl(GET_KEYRING_ID)", sys::keyctl_session_id())
}

/// Read one `Name:\tvalue` field of `/proc/self/status`.
fn status_field(status: &str, name: &str) -> Option<String> {
    status.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim().to_owned())
    })
}

/// `nnp`: `NoNewPrivs` must be 1, so setuid binaries gain nothing (D8).
pub fn nnp(attack: &str) -> Outcome {
    let status = match fs::read_to_string("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "read /proc/self/status"),
    };
    match status_field(&status, "NoNewPrivs").as_deref() {
        Some("1") => Outcome::blocked_plain(attack, "NoNewPrivs=1"),
        Some(v) => Outcome::succeeded(attack, format!("NoNewPrivs={v}")),
        None => Outcome::unexpected(attack, None, "no NoNewPrivs field"),
    }
}

/// `caps`: every capability set must be empty (D9).
pub fn caps(attack: &str) -> Outcome {
    let status = match fs::read_to_string("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return Outcome::unexpected(attack, Some(io_errno(&e)), "read /proc/self/status"),
    };
    let mut held = Vec::new();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        match status_field(&status, set) {
            Some(v) if v.trim_start_matches('0').is_empty() => {}
            Some(v) => held.push(format!("{set}={v}")),
            None => return Outcome::unexpected(attack, None, format!("no {set} field")),
        }
    }
    if held.is_empty() {
        Outcome::blocked_plain(attack, "all capability sets empty")
    } else {
        Outcome::succeeded(attack, format!("capabilities held: {}", held.join(" ")))
    }
}
