//! File-descriptor hygiene and fd passing.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Mark every descriptor from `low` upwards close-on-exec
/// (`close_range(low, ~0, CLOSE_RANGE_CLOEXEC)`), so nothing the supervisor
/// inherited reaches the command while oajail's own error channel stays open
/// until `execve` succeeds.
///
/// Raw syscall: neither nix nor std wraps `close_range`.
pub(crate) fn cloexec_from(low: u32) -> io::Result<()> {
    close_range(low, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int)
}

/// Close every descriptor in `[low, high]` now.
pub(crate) fn close_between(low: u32, high: u32) -> io::Result<()> {
    if low > high {
        return Ok(());
    }
    close_range(low, high, 0)
}

fn close_range(low: u32, high: u32, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: close_range only closes or flags descriptors of this process;
    // callers guarantee no live Rust object owns a descriptor in the range
    // they close (the CLOEXEC variant closes nothing).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            low as libc::c_uint,
            high as libc::c_uint,
            flags as libc::c_uint,
        )
    };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Take ownership of a descriptor received through `SCM_RIGHTS`.
pub(crate) fn own_received(fd: RawFd) -> OwnedFd {
    // SAFETY: the kernel just installed `fd` in our table as part of the
    // recvmsg that returned it; nothing else refers to it, so this OwnedFd is
    // its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
