//! seccomp user notification: the create-guard's kernel interface.
//!
//! Raw libc throughout: seccompiler installs filters only without flags (it
//! cannot return a listener), and neither nix nor rustix wraps the
//! `SECCOMP_IOCTL_NOTIF_*` ioctls. Everything else the guard does (reading
//! /proc, the creating calls themselves) goes through safe crates.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Install `program` on the calling thread with a new listener
/// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`) whose waiting tasks only wake for a
/// fatal signal once a notification was received
/// (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, Linux 5.19): a signal handler
/// in the command cannot restart a call pid 1 is already performing.
/// no_new_privs must be set. Returns the listener (close-on-exec).
pub(crate) fn install_with_listener(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "filter too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    let flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel
    // copies the instructions and does not keep the pointer.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success seccomp returns a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as libc::c_int) })
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6).
const SYNC_WAKE_UP: u64 = 1;

/// Ask the kernel to hand the CPU straight to the listener's reader when a
/// call is notified, and back when it is answered (Linux 6.6; older kernels
/// refuse with EINVAL and keep the ordinary wake-ups, which only costs time).
pub(crate) fn sync_wake_up(listener: BorrowedFd<'_>) -> bool {
    // SAFETY: this ioctl takes its flags by value (no pointer is passed);
    // it only changes the listener's wake-up mode.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SYNC_WAKE_UP as libc::c_ulong,
        )
    };
    ret == 0
}

/// One notification: the call a task of the command is blocked in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Notification {
    /// Cookie for the answer.
    pub(crate) id: u64,
    /// Thread id of the caller (in pid 1's pid namespace).
    pub(crate) tid: u32,
    /// System call number.
    pub(crate) nr: i64,
    /// Its six arguments.
    pub(crate) args: [u64; 6],
}

/// Receive the next notification (blocks; the listener is polled first).
pub(crate) fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    // SAFETY: seccomp_notif is plain old data; all-zero is a valid value and
    // the kernel requires the buffer to be zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one `struct seccomp_notif` into `n`, which is
    // exactly that type and lives for the whole call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: n.id,
        tid: n.pid,
        nr: i64::from(n.data.nr),
        args: n.data.args,
    })
}

/// Answer notification `id`: `Ok(val)` is the call's return value,
/// `Err(errno)` its error. The task may be gone (ENOENT): that is not an error.
pub(crate) fn answer(
    listener: BorrowedFd<'_>,
    id: u64,
    result: Result<i64, i32>,
) -> io::Result<()> {
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(errno) => (0, -errno),
    };
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: the ioctl reads one `struct seccomp_notif_resp` from `resp`.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &resp as *const libc::seccomp_notif_resp,
        )
    };
    check_answer(ret)
}

/// Let the call behind notification `id` run as the caller made it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Only for calls without a path
/// argument, whose meaning a racing thread cannot change.
pub(crate) fn answer_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads one `struct seccomp_notif_resp` from `resp`.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &resp as *const libc::seccomp_notif_resp,
        )
    };
    check_answer(ret)
}

/// Answer notification `id` by installing `fd` in the caller's table
/// (`SECCOMP_ADDFD_FLAG_SEND`: the new number is the call's return value,
/// atomically). `cloexec` sets O_CLOEXEC on the caller's copy.
pub(crate) fn answer_fd(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<()> {
    let add = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one `struct seccomp_notif_addfd` from `add`;
    // `fd` is a live descriptor of ours for the duration of the call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &add as *const libc::seccomp_notif_addfd,
        )
    };
    check_answer(ret)
}

/// Put `fd` into the caller's descriptor table at number `target`,
/// closing what was there (`SECCOMP_ADDFD_FLAG_SETFD`, as `dup2` would),
/// without answering the call: the connect hand-off replaces the caller's
/// socket by one pid 1 connected, then answers 0. `cloexec` sets
/// O_CLOEXEC on the caller's copy.
pub(crate) fn replace_fd(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    target: i32,
    cloexec: bool,
) -> io::Result<()> {
    let add = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: target as u32,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one `struct seccomp_notif_addfd` from `add`;
    // `fd` is a live descriptor of ours for the duration of the call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &add as *const libc::seccomp_notif_addfd,
        )
    };
    check_answer(ret)
}

fn check_answer(ret: libc::c_int) -> io::Result<()> {
    if ret >= 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    // ENOENT: the task was killed or its call interrupted meanwhile.
    if e.raw_os_error() == Some(libc::ENOENT) {
        Ok(())
    } else {
        Err(e)
    }
}
