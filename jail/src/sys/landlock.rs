//! The two Landlock calls pid 1 makes on a ruleset the supervisor built.
//!
//! Raw syscalls: the landlock crate cannot adopt a ruleset descriptor that
//! arrived over a socket (it only hands one out), so pid 1 adds its few
//! jail-side rules and restricts itself with the kernel ABI directly.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `LANDLOCK_RULE_PATH_BENEATH` from `<linux/landlock.h>`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Allow `access` (kernel `LANDLOCK_ACCESS_FS_*` bits) beneath `parent`.
pub(crate) fn add_path_rule(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    access: u64,
) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: both descriptors are borrowed, so open for the call; the
    // kernel reads `size_of::<PathBeneathAttr>()` bytes from `attr`, which
    // lives on this stack frame until the call returns, and writes nothing.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            std::ptr::from_ref(&attr),
            0 as libc::c_uint,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Enforce `ruleset` on the calling thread (pid 1 is single-threaded, and
/// its children inherit the domain). Needs no_new_privs first.
pub(crate) fn restrict_self(ruleset: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the descriptor is borrowed (open) and flags are 0; the call
    // reads no user memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset.as_raw_fd(),
            0 as libc::c_uint,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct landlock_ruleset_attr` as of ABI 6.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// A ruleset that handles no access right, only the scopes `scoped`
/// (`LANDLOCK_SCOPE_*`, ABI 6). Raw and allocation-free: the command makes
/// it while it still shares pid 1's memory (`sys::process::spawn_shared`).
pub(crate) fn create_scoped_ruleset(scoped: u64) -> io::Result<OwnedFd> {
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped,
    };
    // SAFETY: the kernel reads `size_of::<RulesetAttr>()` bytes from
    // `attr`, which lives on this stack frame until the call returns; flags
    // are 0.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<RulesetAttr>(),
            0 as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the call returns a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as libc::c_int) })
}
