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

/// Whether seccomp filters with `SECCOMP_RET_KILL_PROCESS`,
/// `SECCOMP_RET_ERRNO` and `SECCOMP_RET_USER_NOTIF` (the create-guard) are
/// available.
///
/// Raw syscall: no crate wraps `SECCOMP_GET_ACTION_AVAIL`.
pub(crate) fn seccomp_filter_available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    [
        libc::SECCOMP_RET_KILL_PROCESS,
        libc::SECCOMP_RET_ERRNO,
        libc::SECCOMP_RET_USER_NOTIF,
    ]
    .iter()
    .all(|action| {
        // SAFETY: the kernel reads one u32 from the valid pointer `action`
        // and changes nothing.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_GET_ACTION_AVAIL,
                0 as libc::c_uint,
                action as *const u32,
            )
        };
        ret == 0
    })
}
