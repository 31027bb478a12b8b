//! Kernel feature probes that need raw syscalls (used by `doctor` and the
//! fail-closed checks before launching).

/// The Landlock ABI version the kernel offers, or `None` when Landlock is
/// missing or disabled.
///
/// Raw syscall: the landlock crate does not expose the numeric ABI version.
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the
    // call only returns the ABI number; it creates no descriptor.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(ret).ok().filter(|v| *v > 0)
}

/// Whether seccomp filters with `SECCOMP_RET_KILL_PROCESS` and
/// `SECCOMP_RET_ERRNO` are available.
pub(crate) fn seccomp_filter_available() -> bool {
    action_available(libc::SECCOMP_RET_KILL_PROCESS) && action_available(libc::SECCOMP_RET_ERRNO)
}

/// `SECCOMP_GET_ACTION_AVAIL` for one action.
///
/// Raw syscall: no crate wraps `SECCOMP_GET_ACTION_AVAIL`.
fn action_available(action: u32) -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    // SAFETY: the kernel reads one u32 from the valid pointer to `action`
    // and changes nothing.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            &action as *const u32,
        )
    };
    ret == 0
}

/// Whether the new mount API the mount plan uses is there: `open_tree`,
/// `move_mount`, `fsopen`, `fsmount` (Linux 5.2) and `mount_setattr`
/// (5.12, the last of them).
/// Probed with invalid descriptors or a null name: a present call fails
/// with `EBADF`, `EFAULT` or `EINVAL`, a missing one with `ENOSYS`.
///
/// Raw syscall: probing for `ENOSYS` needs the bare call.
pub(crate) fn mount_api_available() -> bool {
    [
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_mount_setattr,
    ]
    .iter()
    .all(|nr| {
        // SAFETY: the first argument is -1 (an invalid descriptor, or for
        // `fsopen` an unmapped name pointer the kernel's copy refuses with
        // EFAULT), the rest null or zero: each call fails without changing
        // any state or writing memory.
        let ret = unsafe { libc::syscall(*nr, -1, std::ptr::null::<libc::c_char>(), 0, 0, 0) };
        ret == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS)
    })
}

/// Whether seccomp user notification with `SECCOMP_IOCTL_NOTIF_ADDFD`
/// (Linux 5.9) is available. The action is probed with
/// `SECCOMP_GET_ACTION_AVAIL`; the ioctl cannot be probed without a
/// listener (which needs a filter installed for good), so its kernel version
/// is read from `uname` instead.
pub(crate) fn user_notif_addfd_available() -> bool {
    action_available(libc::SECCOMP_RET_USER_NOTIF) && release_at_least(5, 9)
}

/// Whether the running kernel's release is at least `major.minor`.
fn release_at_least(major: u32, minor: u32) -> bool {
    let Ok(uts) = nix::sys::utsname::uname() else {
        return false;
    };
    let release = uts.release().to_string_lossy().into_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
