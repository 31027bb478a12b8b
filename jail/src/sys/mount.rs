//! Mount-API calls that no safe crate wraps.
//!
//! rustix (used by `crate::mount` for `open_tree`, `move_mount`, `fsopen`,
//! `fsmount`, `fsconfig`, `openat2` and `pivot_root`) has no
//! `mount_setattr(2)`, and neither has nix; it is the one call here.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `AT_RECURSIVE` from `<linux/fcntl.h>` (not exported by libc 0.2 on every target).
const AT_RECURSIVE: libc::c_int = 0x8000;

/// `struct mount_attr` (`MOUNT_ATTR_SIZE_VER0`, 32 bytes).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Mount attributes (`MOUNT_ATTR_*`) to set on a mount.
pub(crate) const ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub(crate) const ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub(crate) const ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_NOEXEC`.
pub(crate) const ATTR_NOEXEC: u64 = 0x8;

/// `mount_setattr(fd, "", AT_EMPTY_PATH [| AT_RECURSIVE], …)`: set the
/// attributes `set` on the mount `fd` refers to (and every mount below it
/// when `recursive`), and make it private (no propagation to or from the host).
pub(crate) fn mount_setattr(fd: impl AsFd, recursive: bool, set: u64) -> io::Result<()> {
    let mut attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: 0,
    };
    let flags = libc::AT_EMPTY_PATH | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: the path is a valid NUL-terminated empty string, `attr` is a
    // live, properly sized and aligned `struct mount_attr` that the kernel
    // only reads during the call, and `fd` is borrowed for the whole call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_fd().as_raw_fd(),
            c"".as_ptr(),
            flags,
            &mut attr as *mut MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
