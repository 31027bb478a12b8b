//! Raw syscalls for the security suite's attack probe (`oajail-probe`)
//! and the lab's keyring canary (`oajail-lab`, which includes this file by
//! path). They live here, test-side, and not in the audited jail crate: the
//! jail never calls them and no library links them. The module is the only
//! place of this crate allowed `unsafe` (`#[allow(unsafe_code)]` on its
//! `mod` line in both binaries); every block carries a `// SAFETY:` comment.
//!
//! Why raw: the probe must issue exactly the calls an attacker would, with
//! arguments nix/std never produce (x32 numbers, `int 0x80`, NULL
//! parameter blocks, fd -1). Most calls here use the try-syscall technique:
//! arguments that make an unfiltered kernel fail harmlessly (EBADF, EFAULT,
//! EINVAL) without side effects, so EPERM/ENOSYS/SIGSYS can be attributed
//! to the filter. Every pointer passed is either NULL or points at memory
//! owned by the function for the whole call.

use nix::errno::Errno;
use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// x32 ABI syscall bit (x86_64): `nr | X32_SYSCALL_BIT` selects the x32 table.
const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;
/// `KEY_SPEC_SESSION_KEYRING`.
const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;

fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

/// Wrap a returned descriptor number.
fn owned(ret: libc::c_long) -> Result<OwnedFd, Errno> {
    let fd = i32::try_from(check(ret)?).map_err(|_| Errno::EOVERFLOW)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor of this
    // process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `io_uring_setup(entries, NULL)`: EFAULT when unfiltered; creates nothing.
pub fn io_uring_setup_null(entries: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: a NULL params pointer makes the kernel fail with EFAULT before
    // it allocates anything; no memory of ours is touched.
    owned(unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, std::ptr::null::<u8>()) })
}

/// `io_uring_enter(-1, …)`: EBADF when unfiltered.
pub fn io_uring_enter_badfd() -> Result<libc::c_long, Errno> {
    // SAFETY: fd -1 fails with EBADF before any argument is dereferenced.
    check(unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            -1,
            0u32,
            0u32,
            0u32,
            std::ptr::null::<u8>(),
            0usize,
        )
    })
}

/// `io_uring_register(-1, …)`: EBADF when unfiltered.
pub fn io_uring_register_badfd() -> Result<libc::c_long, Errno> {
    // SAFETY: fd -1 fails with EBADF before the NULL argument is used.
    check(unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            -1,
            0u32,
            std::ptr::null::<u8>(),
            0u32,
        )
    })
}

/// `bpf(cmd, NULL, 0)`: EINVAL/EFAULT (or the sysctl's EPERM) when unfiltered.
pub fn bpf_null(cmd: i32) -> Result<libc::c_long, Errno> {
    // SAFETY: a NULL attribute pointer with size 0 is rejected by the kernel
    // without reading or writing memory.
    check(unsafe { libc::syscall(libc::SYS_bpf, cmd, std::ptr::null::<u8>(), 0u32) })
}

/// `perf_event_open(NULL, 0, -1, -1, 0)`: EFAULT when unfiltered.
pub fn perf_event_open_null() -> Result<libc::c_long, Errno> {
    // SAFETY: a NULL attr pointer fails with EFAULT; nothing is created.
    check(unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::null::<u8>(),
            0,
            -1,
            -1,
            0u64,
        )
    })
}

/// `userfaultfd(flags)`: a real descriptor when unfiltered (closed on drop).
pub fn userfaultfd(flags: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: takes only an integer flag word; the result is a new fd we own.
    owned(unsafe { libc::syscall(libc::SYS_userfaultfd, flags | libc::O_CLOEXEC) })
}

/// `kcmp(self, self, KCMP_FILE, 0, 0)`: compares two fds of our own process.
pub fn kcmp_self() -> Result<libc::c_long, Errno> {
    const KCMP_FILE: libc::c_int = 0;
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: integer arguments only; the call reads kernel state.
    check(unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, 0u64, 0u64) })
}

/// `socket(family, ty | SOCK_CLOEXEC, proto)` for any family number.
pub fn socket_raw(family: i32, ty: i32, proto: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: integer arguments; the result is a new fd we own.
    owned(unsafe { libc::syscall(libc::SYS_socket, family, ty | libc::SOCK_CLOEXEC, proto) })
}

/// `socket()` through the x32 syscall table (ENOSYS when the kernel has no x32).
pub fn x32_socket(family: i32, ty: i32, proto: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: integer arguments; on an x32-capable kernel this is socket().
    owned(unsafe {
        libc::syscall(
            X32_SYSCALL_BIT | libc::SYS_socket,
            family,
            ty | libc::SOCK_CLOEXEC,
            proto,
        )
    })
}

/// `getpid()` through the x32 syscall table.
pub fn x32_getpid() -> Result<libc::c_long, Errno> {
    // SAFETY: getpid takes no arguments and has no side effects.
    check(unsafe { libc::syscall(X32_SYSCALL_BIT | libc::SYS_getpid) })
}

/// i386 `getpid` (nr 20) through `int 0x80`; returns the raw result
/// (a pid, or a negative errno).
#[cfg(target_arch = "x86_64")]
pub fn int80_getpid() -> i64 {
    let mut ret: i64 = 20;
    // SAFETY: `int 0x80` enters the kernel's 32-bit compat table; getpid
    // reads nothing from user memory. The compat entry clobbers r8-r11 on
    // some kernels, so they are declared clobbered; the stack is untouched.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inout("rax") ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    ret
}

/// i386 `socketcall(SYS_SOCKET, {AF_INET, SOCK_STREAM, 0})` through `int 0x80`.
/// The socket, if created, is closed before returning.
#[cfg(target_arch = "x86_64")]
pub fn int80_socket_inet() -> i64 {
    // The compat ABI reads 32-bit pointers: the argument block must sit below
    // 4 GiB, which heap, stack and statics of a PIE do not guarantee, so it
    // goes in a page mapped with MAP_32BIT.
    // SAFETY: an anonymous private mapping of one page; no existing memory
    // is affected and the result is checked before use.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return -(Errno::last() as i64);
    }
    let args = page.cast::<u32>();
    // SAFETY: `page` is a fresh, writable, page-aligned mapping of 4096
    // bytes; three u32 fit at its start.
    unsafe {
        args.write(libc::AF_INET as u32);
        args.add(1).write(libc::SOCK_STREAM as u32);
        args.add(2).write(0);
    }
    let mut ret: i64 = 102; // __NR_socketcall (i386)
    // SAFETY: socketcall(SYS_SOCKET=1, args) reads three u32 from the page
    // mapped above, alive until the munmap below and below 2 GiB
    // (MAP_32BIT). LLVM reserves rbx, so the call number is swapped into it
    // and rbx restored right after; other registers as in `int80_getpid`.
    unsafe {
        std::arch::asm!(
            "xchg {call}, rbx",
            "int 0x80",
            "xchg {call}, rbx",
            call = inout(reg) 1u64 => _,
            inout("rax") ret,
            in("rcx") page as u64,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    // SAFETY: unmapping exactly the page mapped above; nothing refers to it.
    unsafe { libc::munmap(page, 4096) };
    if let Ok(fd) = i32::try_from(ret)
        && fd >= 0
    {
        // SAFETY: the kernel returned `fd` as a new descriptor we own.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    ret
}

/// `clone3(NULL, 0)`: EINVAL when unfiltered (libc expects ENOSYS from a jail).
pub fn clone3_null() -> Result<libc::c_long, Errno> {
    // SAFETY: size 0 is rejected before the NULL pointer is read; no process
    // is created.
    check(unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) })
}

/// `setns(-1, 0)`: EBADF when unfiltered.
pub fn setns_badfd() -> Result<libc::c_long, Errno> {
    // SAFETY: integer arguments; fd -1 fails with EBADF.
    check(unsafe { libc::syscall(libc::SYS_setns, -1, 0) })
}

/// `open_tree(AT_FDCWD, path, OPEN_TREE_CLONE)`: a detached copy of a mount.
pub fn open_tree_clone(path: &str) -> Result<OwnedFd, Errno> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let c = CString::new(path).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `c` is a valid NUL-terminated string alive for the call.
    owned(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
        )
    })
}

/// `fsopen(fstype, FSOPEN_CLOEXEC)`.
pub fn fsopen(fstype: &str) -> Result<OwnedFd, Errno> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    let c = CString::new(fstype).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `c` is a valid NUL-terminated string alive for the call.
    owned(unsafe { libc::syscall(libc::SYS_fsopen, c.as_ptr(), FSOPEN_CLOEXEC) })
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: integer arguments; the result is a new fd we own.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })
}

/// `pidfd_getfd(pidfd, target_fd, 0)`: duplicate another process's fd.
pub fn pidfd_getfd(pidfd: &OwnedFd, target_fd: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: `pidfd` is a live descriptor we own; the result is a new fd.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0u32) })
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, 0)` of a descriptor known by number only
/// (listed in /proc/self/fd): a copy that reaches the same open file
/// without opening it again by path.
pub fn dup_number(fd: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: integer arguments; the result is a new fd we own.
    owned(unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// `ioctl(fd, TIOCSTI, &byte)`; with `high_bits` the request word also has
/// bit 32 set (CVE-2019-10063: filters comparing 64 bits miss it, the tty
/// layer only looks at the low 32).
pub fn tiocsti(fd: BorrowedFd<'_>, byte: u8, high_bits: bool) -> Result<(), Errno> {
    let mut req: u64 = libc::TIOCSTI;
    if high_bits {
        req |= 1 << 32;
    }
    // SAFETY: the kernel reads one byte from `&byte`, which is alive for the
    // call; `fd` is borrowed from a live descriptor. Using syscall() keeps
    // the full 64-bit request word (libc::ioctl's prototype truncates it).
    check(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), req, &byte as *const u8) })
        .map(drop)
}

/// `ioctl(-1, TIOCLINUX, &subcode)`: EBADF when unfiltered.
pub fn tioclinux_badfd() -> Result<libc::c_long, Errno> {
    let subcode: u8 = 2; // TIOCL_SETSEL
    // SAFETY: fd -1 fails with EBADF before the pointer (to a live local) is read.
    check(unsafe { libc::syscall(libc::SYS_ioctl, -1, libc::TIOCLINUX, &subcode as *const u8) })
}

/// `keyctl(KEYCTL_GET_KEYRING_ID, @s, 0)`.
pub fn keyctl_session_id() -> Result<libc::c_long, Errno> {
    // SAFETY: integer arguments only.
    check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            libc::KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_SESSION_KEYRING,
            0,
        )
    })
}

/// `keyctl(KEYCTL_SEARCH, @s, "user", desc, 0)`: the key's serial.
pub fn keyctl_search_session(desc: &str) -> Result<i32, Errno> {
    let ty = CString::new("user").map_err(|_| Errno::EINVAL)?;
    let d = CString::new(desc).map_err(|_| Errno::EINVAL)?;
    // SAFETY: both strings are valid NUL-terminated and alive for the call.
    let ret = check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            libc::KEYCTL_SEARCH,
            KEY_SPEC_SESSION_KEYRING,
            ty.as_ptr(),
            d.as_ptr(),
            0,
        )
    })?;
    i32::try_from(ret).map_err(|_| Errno::EOVERFLOW)
}

/// `keyctl(KEYCTL_READ, key, buf, len)`: the key's payload (up to 4 KiB).
pub fn keyctl_read(key: i32) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` is a live, writable allocation of exactly `buf.len()` bytes.
    let n = check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            libc::KEYCTL_READ,
            key,
            buf.as_mut_ptr(),
            buf.len(),
        )
    })?;
    buf.truncate(usize::try_from(n).unwrap_or(0).min(4096));
    Ok(buf)
}

/// `add_key("user", desc, payload, @s)`: the harness plants a canary key.
pub fn add_key_session(desc: &str, payload: &[u8]) -> Result<i32, Errno> {
    let ty = CString::new("user").map_err(|_| Errno::EINVAL)?;
    let d = CString::new(desc).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the strings are NUL-terminated and `payload` is a live slice of
    // `payload.len()` bytes; the kernel copies all of them during the call.
    let ret = check(unsafe {
        libc::syscall(
            libc::SYS_add_key,
            ty.as_ptr(),
            d.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            KEY_SPEC_SESSION_KEYRING,
        )
    })?;
    i32::try_from(ret).map_err(|_| Errno::EOVERFLOW)
}

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`: a fresh anonymous session keyring.
pub fn join_new_session_keyring() -> Result<i32, Errno> {
    // SAFETY: a NULL name asks for an anonymous keyring; nothing is read.
    let ret = check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            libc::KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<u8>(),
        )
    })?;
    i32::try_from(ret).map_err(|_| Errno::EOVERFLOW)
}

/// `ioctl(fd, req, &arg)` with an `int` argument (TIOCSETD) or none that
/// the kernel reads (TIOCEXCL ignores it).
pub fn tty_ioctl_int(fd: BorrowedFd<'_>, req: u64, arg: i32) -> Result<(), Errno> {
    // SAFETY: the kernel reads at most one int from `&arg`, alive for the
    // call; `fd` is borrowed from a live descriptor.
    check(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), req, &arg as *const i32) })
        .map(drop)
}

/// One SysV segment of `bytes`: `shmget(IPC_PRIVATE)`, `shmat`, every byte
/// written, `shmdt`. The segment is left in place (it is the attack: its
/// pages outlive the mapping); the jail's IPC namespace removes it.
pub fn sysv_segment_fill(bytes: usize) -> Result<(), (&'static str, Errno)> {
    // SAFETY: shmget only makes a segment and returns its id; no memory of
    // ours is involved.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, bytes, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return Err(("shmget", Errno::last()));
    }
    // SAFETY: NULL lets the kernel choose the address; nothing of ours is
    // overwritten.
    let addr = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    if addr as isize == -1 {
        return Err(("shmat", Errno::last()));
    }
    // SAFETY: `addr..addr + bytes` is the writable segment mapped just
    // above, used by nothing else until the `shmdt` below.
    unsafe { std::ptr::write_bytes(addr.cast::<u8>(), 0x5a, bytes) };
    // SAFETY: `addr` came from the `shmat` above and is detached once.
    unsafe { libc::shmdt(addr) };
    Ok(())
}

/// `SHM_STAT` and `SHM_INFO` (linux/shm.h; not in the libc crate).
const SHM_STAT: libc::c_int = 13;
const SHM_INFO: libc::c_int = 14;

/// Remove every SysV segment of this IPC namespace (`shmctl(SHM_STAT)` over
/// the kernel's index, then `IPC_RMID`), without allocating: the parent
/// probe's clean-up after `sysv-fill`.
pub fn sysv_remove_all() {
    // SAFETY: an all-zero `shmid_ds` is valid, and it is larger than the
    // `shm_info` SHM_INFO writes into it; the kernel writes our stack copy
    // and returns the highest index in use.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    let max = unsafe { libc::shmctl(0, SHM_INFO, &raw mut ds) };
    for index in 0..=max {
        // SAFETY: SHM_STAT fills our `ds` and returns the segment's id.
        let id = unsafe { libc::shmctl(index, SHM_STAT, &raw mut ds) };
        if id >= 0 {
            // SAFETY: IPC_RMID takes no buffer.
            unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        }
    }
}
