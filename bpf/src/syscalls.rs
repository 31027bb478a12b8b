//! The two syscall tables, by kernel name: the calls the seccomp deny list
//! may name and the calls the create-guard's filter may name, each with
//! this architecture's number (from libc, so a typo or a call missing on
//! this arch is an error of the caller, not a silently absent rule).

macro_rules! syscalls {
    ($($sys:ident),* $(,)?) => {
        &[$((stringify!($sys), libc::$sys)),*]
    };
}

/// Every call a plan may name, by kernel name, with this architecture's
/// number from libc (so a typo or a call missing on this arch is an error,
/// not a silently absent rule).
const SYSCALL_TABLE: &[(&str, i64)] = syscalls![
    SYS_socket,
    SYS_socketpair,
    SYS_sendto,
    SYS_sendmsg,
    SYS_sendmmsg,
    SYS_ioctl,
    SYS_clone,
    SYS_clone3,
    SYS_unshare,
    SYS_setns,
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_pidfd_getfd,
    SYS_kcmp,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_name_to_handle_at,
    SYS_open_by_handle_at,
    SYS_acct,
    SYS_swapon,
    SYS_swapoff,
    SYS_reboot,
    SYS_syslog,
    SYS_quotactl,
    SYS_vhangup,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_mount_setattr,
    // Memory RLIMIT_AS does not count (limits::SharedMemory).
    SYS_memfd_create,
    SYS_shmget,
];

/// The number of a call the deny list may name, on this architecture.
pub fn deny_listed(name: &str) -> Option<i64> {
    SYSCALL_TABLE
        .iter()
        .map(|(n, nr)| (n.strip_prefix("SYS_").unwrap_or(n), *nr))
        .find(|(n, _)| *n == name)
        .map(|(_, nr)| nr)
}

// Numbers of calls newer than the libc crate's tables: the same on every
// architecture (the shared table of Linux 5.1 and later).
/// `fchmodat2` (Linux 6.6).
pub const SYS_FCHMODAT2: i64 = 452;
/// `setxattrat` (Linux 6.13).
pub const SYS_SETXATTRAT: i64 = 463;
/// `removexattrat` (Linux 6.13).
pub const SYS_REMOVEXATTRAT: i64 = 466;

/// The number of a call the create-guard's filter may name, on this
/// architecture (the legacy x86_64 calls only there).
pub fn guarded(name: &str) -> Option<i64> {
    let nr = match name {
        "mkdirat" => libc::SYS_mkdirat,
        "umask" => libc::SYS_umask,
        "chdir" => libc::SYS_chdir,
        "fchdir" => libc::SYS_fchdir,
        "unlinkat" => libc::SYS_unlinkat,
        "truncate" => libc::SYS_truncate,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => SYS_FCHMODAT2,
        "fchownat" => libc::SYS_fchownat,
        "utimensat" => libc::SYS_utimensat,
        "setxattr" => libc::SYS_setxattr,
        "lsetxattr" => libc::SYS_lsetxattr,
        "removexattr" => libc::SYS_removexattr,
        "lremovexattr" => libc::SYS_lremovexattr,
        "setxattrat" => SYS_SETXATTRAT,
        "removexattrat" => SYS_REMOVEXATTRAT,
        "fchmod" => libc::SYS_fchmod,
        "fchown" => libc::SYS_fchown,
        "fsetxattr" => libc::SYS_fsetxattr,
        "fremovexattr" => libc::SYS_fremovexattr,
        "mknodat" => libc::SYS_mknodat,
        "linkat" => libc::SYS_linkat,
        "symlinkat" => libc::SYS_symlinkat,
        "renameat" => libc::SYS_renameat,
        "renameat2" => libc::SYS_renameat2,
        "openat" => libc::SYS_openat,
        "openat2" => libc::SYS_openat2,
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        // The container tier's connect hand-off (pid 1 makes them).
        "connect" => libc::SYS_connect,
        "bind" => libc::SYS_bind,
        "listen" => libc::SYS_listen,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "mkdir" => libc::SYS_mkdir,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        #[cfg(target_arch = "x86_64")]
        "link" => libc::SYS_link,
        #[cfg(target_arch = "x86_64")]
        "symlink" => libc::SYS_symlink,
        #[cfg(target_arch = "x86_64")]
        "rename" => libc::SYS_rename,
        #[cfg(target_arch = "x86_64")]
        "unlink" => libc::SYS_unlink,
        #[cfg(target_arch = "x86_64")]
        "rmdir" => libc::SYS_rmdir,
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "chown" => libc::SYS_chown,
        #[cfg(target_arch = "x86_64")]
        "lchown" => libc::SYS_lchown,
        #[cfg(target_arch = "x86_64")]
        "utime" => libc::SYS_utime,
        #[cfg(target_arch = "x86_64")]
        "utimes" => libc::SYS_utimes,
        #[cfg(target_arch = "x86_64")]
        "futimesat" => libc::SYS_futimesat,
        _ => return None,
    };
    Some(nr)
}
