//! `openagenda-mcp-syscall-probe`: a worker whose script is a syscall probe.
//!
//! A test tool, never shipped (the Debian package and docs/install.md list
//! the server and its worker only). It runs exactly the worker's code
//! ([`openagenda_mcp::worker::child::run_with`]: rlimits, the QuickJS world,
//! the seccomp filter, `ready`, `exec`), but in place of the script it makes
//! raw system calls, one or more per class, and reports what each returned:
//! once just before the filter is installed (only calls that are harmless
//! when they succeed) and once after it. `tests/hostile.rs` puts it beside
//! a copy of the server under the name `openagenda-mcp-worker`, so the real
//! server, bare or under `--jail`, starts it as its worker. The code `abort`
//! makes it call `abort()` after the filter instead (the worker must still
//! die of SIGABRT).
//!
//! Every call is made so that, if it were allowed, it would fail with some
//! other error than `ENOSYS` or succeed harmlessly (a path that does not
//! exist, a bad descriptor, an invalid flag), except those marked
//! after-only, which are only tried once the filter must refuse them.
// The probe's raw syscalls: the only unsafe code of this crate, in a
// binary that is not shipped.
#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

use std::ffi::CStr;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(openagenda_mcp::worker::main_with(&args, Some(probe)));
}

const NOWHERE: &CStr = c"/nonexistent-oajail-probe/x";
const NOWHERE2: &CStr = c"/nonexistent-oajail-probe/y";
const XATTR: &CStr = c"user.oajail-probe";
const BLANK: &CStr = c"";
const FNEG: usize = usize::MAX; // -1 as a descriptor
const CWD: usize = libc::AT_FDCWD as isize as usize;

/// One call: its class, name, number, arguments, and whether it may be
/// made before the filter.
struct Try {
    class: &'static str,
    name: &'static str,
    nr: libc::c_long,
    args: [usize; 6],
    before: bool,
}

fn t(class: &'static str, name: &'static str, nr: libc::c_long, args: [usize; 6]) -> Try {
    Try {
        class,
        name,
        nr,
        args,
        before: true,
    }
}

/// A call only made after the filter (harmful if it succeeded).
fn after(class: &'static str, name: &'static str, nr: libc::c_long, args: [usize; 6]) -> Try {
    Try {
        before: false,
        ..t(class, name, nr, args)
    }
}

fn p(c: &CStr) -> usize {
    c.as_ptr() as usize
}

fn probe(after_filter: bool, code: &str) -> String {
    if after_filter && code.trim() == "abort" {
        std::process::abort();
    }
    let mut buf = vec![0u8; 4096];
    let b = buf.as_mut_ptr() as usize;
    let ppid = std::os::unix::process::parent_id() as usize;
    let mut out = serde_json::Map::new();
    for c in tries(b, ppid) {
        if !after_filter && !c.before {
            continue;
        }
        let [a, b2, c2, d, e, f] = c.args;
        let r = unsafe { libc::syscall(c.nr, a, b2, c2, d, e, f) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if r == 0 && (c.name.starts_with("fork") || c.name == "vfork") {
            // A child of a filter that failed: leave at once.
            unsafe { libc::_exit(0) };
        }
        let seen = if r >= 0 {
            "ok".to_owned()
        } else {
            format!("errno {errno}")
        };
        out.insert(
            c.name.to_owned(),
            serde_json::json!({"class": c.class, "got": seen}),
        );
    }
    drop(buf);
    serde_json::Value::Object(out).to_string()
}

/// The calls, by class. `b` is a 4 KiB scratch buffer, `ppid` the server.
#[allow(clippy::too_many_lines)] // one table
fn tries(b: usize, ppid: usize) -> Vec<Try> {
    use libc::*;
    let rw = (PROT_READ | PROT_WRITE) as usize;
    let anon = (MAP_PRIVATE | MAP_ANONYMOUS) as usize;
    let mut v = vec![
        // Controls: what a worker needs stays allowed.
        t("control", "getpid", SYS_getpid, [0; 6]),
        t("control", "write-empty", SYS_write, [2, b, 0, 0, 0, 0]),
        t("control", "getrandom", SYS_getrandom, [b, 16, 0, 0, 0, 0]),
        t(
            "control",
            "clock_gettime",
            SYS_clock_gettime,
            [CLOCK_MONOTONIC as usize, b, 0, 0, 0, 0],
        ),
        t("control", "mmap-rw", SYS_mmap, [0, 4096, rw, anon, FNEG, 0]),
        t(
            "control",
            "futex-wake",
            SYS_futex,
            [b, FUTEX_WAKE as usize, 1, 0, 0, 0],
        ),
        // File modes, owners, times and attributes (the guard's classes).
        t(
            "file-metadata",
            "fchmodat2",
            452,
            [CWD, p(NOWHERE), 0o755, 0, 0, 0],
        ),
        t(
            "file-metadata",
            "fchmodat",
            SYS_fchmodat,
            [CWD, p(NOWHERE), 0o755, 0, 0, 0],
        ),
        t(
            "file-metadata",
            "fchmod",
            SYS_fchmod,
            [FNEG, 0o755, 0, 0, 0, 0],
        ),
        t(
            "file-metadata",
            "fchownat",
            SYS_fchownat,
            [CWD, p(NOWHERE), 0, 0, 0, 0],
        ),
        t("file-metadata", "fchown", SYS_fchown, [FNEG, 0, 0, 0, 0, 0]),
        t(
            "file-metadata",
            "utimensat",
            SYS_utimensat,
            [CWD, p(NOWHERE), 0, 0, 0, 0],
        ),
        t(
            "file-metadata",
            "setxattr",
            SYS_setxattr,
            [p(NOWHERE), p(XATTR), b, 1, 0, 0],
        ),
        t(
            "file-metadata",
            "lsetxattr",
            SYS_lsetxattr,
            [p(NOWHERE), p(XATTR), b, 1, 0, 0],
        ),
        t(
            "file-metadata",
            "fsetxattr",
            SYS_fsetxattr,
            [FNEG, p(XATTR), b, 1, 0, 0],
        ),
        t(
            "file-metadata",
            "removexattr",
            SYS_removexattr,
            [p(NOWHERE), p(XATTR), 0, 0, 0, 0],
        ),
        t(
            "file-metadata",
            "setxattrat",
            463,
            [CWD, p(NOWHERE), 0, p(XATTR), 0, 0],
        ),
        t(
            "file-metadata",
            "getxattr",
            SYS_getxattr,
            [p(NOWHERE), p(XATTR), b, 64, 0, 0],
        ),
        // Names in the file system.
        t(
            "file-names",
            "mkdirat",
            SYS_mkdirat,
            [CWD, p(NOWHERE), 0o755, 0, 0, 0],
        ),
        t(
            "file-names",
            "unlinkat",
            SYS_unlinkat,
            [CWD, p(NOWHERE), 0, 0, 0, 0],
        ),
        t(
            "file-names",
            "renameat2",
            SYS_renameat2,
            [CWD, p(NOWHERE), CWD, p(NOWHERE2), 0, 0],
        ),
        t(
            "file-names",
            "linkat",
            SYS_linkat,
            [CWD, p(NOWHERE), CWD, p(NOWHERE2), 0, 0],
        ),
        t(
            "file-names",
            "symlinkat",
            SYS_symlinkat,
            [p(NOWHERE), CWD, p(NOWHERE2), 0, 0, 0],
        ),
        t(
            "file-names",
            "mknodat",
            SYS_mknodat,
            [CWD, p(NOWHERE), 0o600, 0, 0, 0],
        ),
        t(
            "file-names",
            "truncate",
            SYS_truncate,
            [p(NOWHERE), 0, 0, 0, 0, 0],
        ),
        t(
            "file-names",
            "ftruncate",
            SYS_ftruncate,
            [FNEG, 0, 0, 0, 0, 0],
        ),
        // Opening and reading the file system.
        t(
            "file-read",
            "openat",
            SYS_openat,
            [CWD, p(c"/"), O_RDONLY as usize, 0, 0, 0],
        ),
        t(
            "file-read",
            "openat2",
            SYS_openat2,
            [CWD, p(c"/"), 0, 0, 0, 0],
        ),
        t(
            "file-read",
            "open_by_handle_at",
            SYS_open_by_handle_at,
            [FNEG, 0, 0, 0, 0, 0],
        ),
        t(
            "file-read",
            "name_to_handle_at",
            SYS_name_to_handle_at,
            [CWD, p(NOWHERE), 0, 0, 0, 0],
        ),
        t(
            "file-read",
            "newfstatat",
            SYS_newfstatat,
            [CWD, p(c"/"), b, 0, 0, 0],
        ),
        t(
            "file-read",
            "statx",
            SYS_statx,
            [CWD, p(c"/"), 0, 0x7ff, b, 0],
        ),
        t(
            "file-read",
            "readlinkat",
            SYS_readlinkat,
            [CWD, p(c"/proc/self/exe"), b, 64, 0, 0],
        ),
        t(
            "file-read",
            "getdents64",
            SYS_getdents64,
            [FNEG, b, 4096, 0, 0, 0],
        ),
        t(
            "file-read",
            "faccessat",
            SYS_faccessat,
            [CWD, p(c"/"), 0, 0, 0, 0],
        ),
        t("file-read", "getcwd", SYS_getcwd, [b, 256, 0, 0, 0, 0]),
        t("file-read", "chdir", SYS_chdir, [p(c"/"), 0, 0, 0, 0, 0]),
        // Mounts, the new mount API included.
        after("mount", "mount", SYS_mount, [0, p(NOWHERE), 0, 0, 0, 0]),
        t("mount", "umount2", SYS_umount2, [p(NOWHERE), 0, 0, 0, 0, 0]),
        t(
            "mount",
            "open_tree",
            SYS_open_tree,
            [FNEG, p(BLANK), AT_EMPTY_PATH as usize, 0, 0, 0],
        ),
        t(
            "mount",
            "move_mount",
            SYS_move_mount,
            [FNEG, p(BLANK), FNEG, p(BLANK), 4, 0],
        ),
        t("mount", "fsopen", SYS_fsopen, [0, 0, 0, 0, 0, 0]),
        t("mount", "fsconfig", SYS_fsconfig, [FNEG, 0, 0, 0, 0, 0]),
        t("mount", "fsmount", SYS_fsmount, [FNEG, 0, 0, 0, 0, 0]),
        t("mount", "fspick", SYS_fspick, [FNEG, p(BLANK), 0, 0, 0, 0]),
        t(
            "mount",
            "mount_setattr",
            SYS_mount_setattr,
            [FNEG, p(BLANK), 0, 0, 0, 0],
        ),
        t(
            "mount",
            "pivot_root",
            SYS_pivot_root,
            [p(NOWHERE), p(NOWHERE2), 0, 0, 0, 0],
        ),
        t("mount", "chroot", SYS_chroot, [p(NOWHERE), 0, 0, 0, 0, 0]),
        t("mount", "statmount", 457, [0, 0, 0, 0, 0, 0]),
        t("mount", "listmount", 458, [0, 0, 0, 0, 0, 0]),
        // Namespaces and new processes.
        t(
            "process",
            "unshare",
            SYS_unshare,
            [0x8000_0000, 0, 0, 0, 0, 0],
        ),
        t("process", "setns", SYS_setns, [FNEG, 0, 0, 0, 0, 0]),
        t("process", "clone3", SYS_clone3, [0, 0, 0, 0, 0, 0]),
        t(
            "process",
            "clone",
            SYS_clone,
            [CLONE_SIGHAND as usize, 0, 0, 0, 0, 0],
        ),
        t("process", "execve", SYS_execve, [p(NOWHERE), 0, 0, 0, 0, 0]),
        t(
            "process",
            "execveat",
            SYS_execveat,
            [FNEG, p(BLANK), 0, 0, AT_EMPTY_PATH as usize, 0],
        ),
        // Other processes: signals, tracing, memory, descriptors.
        t("other-process", "kill", SYS_kill, [ppid, 0, 0, 0, 0, 0]),
        t("other-process", "tkill", SYS_tkill, [ppid, 0, 0, 0, 0, 0]),
        t(
            "other-process",
            "tgkill-other",
            SYS_tgkill,
            [ppid, ppid, 0, 0, 0, 0],
        ),
        t(
            "other-process",
            "rt_sigqueueinfo",
            SYS_rt_sigqueueinfo,
            [ppid, 0, b, 0, 0, 0],
        ),
        t(
            "other-process",
            "pidfd_open",
            SYS_pidfd_open,
            [ppid, 0, 0, 0, 0, 0],
        ),
        t(
            "other-process",
            "pidfd_send_signal",
            SYS_pidfd_send_signal,
            [FNEG, 0, 0, 0, 0, 0],
        ),
        t(
            "other-process",
            "pidfd_getfd",
            SYS_pidfd_getfd,
            [FNEG, 0, 0, 0, 0, 0],
        ),
        t(
            "other-process",
            "ptrace",
            SYS_ptrace,
            [0xffff, 0, 0, 0, 0, 0],
        ),
        t(
            "other-process",
            "process_vm_readv",
            SYS_process_vm_readv,
            [ppid, 0, 0, 0, 0, 1],
        ),
        t("other-process", "kcmp", SYS_kcmp, [ppid, ppid, 0, 0, 0, 0]),
        t(
            "other-process",
            "prlimit64-parent",
            SYS_prlimit64,
            [ppid, RLIMIT_CPU as usize, 0, b, 0, 0],
        ),
        // The worker's own process state.
        after(
            "self",
            "prctl-pdeathsig-0",
            SYS_prctl,
            [PR_SET_PDEATHSIG as usize, 0, 0, 0, 0, 0],
        ),
        t(
            "self",
            "prctl-get-pdeathsig",
            SYS_prctl,
            [PR_GET_PDEATHSIG as usize, b, 0, 0, 0, 0],
        ),
        after("self", "setsid", SYS_setsid, [0; 6]),
        after("self", "setpgid", SYS_setpgid, [0; 6]),
        t(
            "self",
            "setresuid-noop",
            SYS_setresuid,
            [FNEG, FNEG, FNEG, 0, 0, 0],
        ),
        t(
            "self",
            "setrlimit-core",
            SYS_setrlimit,
            [RLIMIT_CORE as usize, b, 0, 0, 0, 0],
        ),
        t(
            "self",
            "personality-query",
            SYS_personality,
            [0xffff_ffff, 0, 0, 0, 0, 0],
        ),
        after(
            "self",
            "fork-clone-vm",
            SYS_clone,
            [SIGCHLD as usize, 0, 0, 0, 0, 0],
        ),
        // System V and POSIX IPC.
        t(
            "ipc",
            "shmget",
            SYS_shmget,
            [IPC_PRIVATE as usize, 0, 0, 0, 0, 0],
        ),
        t("ipc", "shmat", SYS_shmat, [FNEG, 0, 0, 0, 0, 0]),
        t(
            "ipc",
            "shmctl",
            SYS_shmctl,
            [FNEG, IPC_RMID as usize, 0, 0, 0, 0],
        ),
        t("ipc", "msgget", SYS_msgget, [0x0a7a_1234, 0, 0, 0, 0, 0]),
        t("ipc", "semget", SYS_semget, [0x0a7a_1234, 0, 0, 0, 0, 0]),
        t("ipc", "mq_open", SYS_mq_open, [0, 0, 0, 0, 0, 0]),
        // The network.
        t(
            "network",
            "socket",
            SYS_socket,
            [AF_INET as usize, SOCK_DGRAM as usize, 0, 0, 0, 0],
        ),
        t(
            "network",
            "socketpair",
            SYS_socketpair,
            [AF_UNIX as usize, SOCK_STREAM as usize, 0, b, 0, 0],
        ),
        t("network", "connect", SYS_connect, [FNEG, 0, 0, 0, 0, 0]),
        t("network", "bind", SYS_bind, [FNEG, 0, 0, 0, 0, 0]),
        t("network", "sendto", SYS_sendto, [FNEG, 0, 0, 0, 0, 0]),
        // Kernel interfaces.
        t("kernel", "bpf", SYS_bpf, [0xffff, 0, 0, 0, 0, 0]),
        t(
            "kernel",
            "perf_event_open",
            SYS_perf_event_open,
            [0, 0, FNEG, FNEG, 0, 0],
        ),
        t(
            "kernel",
            "userfaultfd",
            SYS_userfaultfd,
            [0x8000_0000, 0, 0, 0, 0, 0],
        ),
        t(
            "kernel",
            "io_uring_setup",
            SYS_io_uring_setup,
            [0, 0, 0, 0, 0, 0],
        ),
        t("kernel", "keyctl", SYS_keyctl, [0xffff, 0, 0, 0, 0, 0]),
        t("kernel", "add_key", SYS_add_key, [0, 0, 0, 0, 0, 0]),
        t(
            "kernel",
            "memfd_create",
            SYS_memfd_create,
            [0, 0, 0, 0, 0, 0],
        ),
        t("kernel", "init_module", SYS_init_module, [0, 0, 0, 0, 0, 0]),
        t(
            "kernel",
            "finit_module",
            SYS_finit_module,
            [FNEG, 0, 0, 0, 0, 0],
        ),
        t(
            "kernel",
            "kexec_load",
            SYS_kexec_load,
            [0, 0, 0, 0xffff_0000, 0, 0],
        ),
        t("kernel", "reboot", SYS_reboot, [0, 0, 0, 0, 0, 0]),
        t("kernel", "syslog-read", SYS_syslog, [3, 0, 0, 0, 0, 0]),
        t("kernel", "cachestat", 451, [FNEG, 0, 0, 0, 0, 0]),
        t("kernel", "lsm_get_self_attr", 459, [0, 0, 0, 0xffff, 0, 0]),
        // Memory that can run code, and descriptors that can be made.
        t(
            "exec-memory",
            "mmap-exec",
            SYS_mmap,
            [0, 4096, (PROT_READ | PROT_EXEC) as usize, anon, FNEG, 0],
        ),
        t(
            "exec-memory",
            "pkey_mprotect",
            SYS_pkey_mprotect,
            [0, 0, 0, 0, 0, 0],
        ),
        t("descriptors", "dup", SYS_dup, [0, 0, 0, 0, 0, 0]),
        t("descriptors", "pipe2", SYS_pipe2, [b, 0, 0, 0, 0, 0]),
        t("descriptors", "eventfd2", SYS_eventfd2, [0, 0, 0, 0, 0, 0]),
        t(
            "descriptors",
            "ioctl-fionread",
            SYS_ioctl,
            [0, FIONREAD as usize, b, 0, 0, 0],
        ),
        t(
            "descriptors",
            "fcntl",
            SYS_fcntl,
            [0, F_GETFL as usize, 0, 0, 0, 0],
        ),
        t("descriptors", "close-99", SYS_close, [99, 0, 0, 0, 0, 0]),
        // Information about the host.
        t("host-info", "uname", SYS_uname, [b, 0, 0, 0, 0, 0]),
        t("host-info", "sysinfo", SYS_sysinfo, [b, 0, 0, 0, 0, 0]),
        t("host-info", "getrusage", SYS_getrusage, [0, b, 0, 0, 0, 0]),
        t(
            "host-info",
            "sched_getaffinity",
            SYS_sched_getaffinity,
            [0, 128, b, 0, 0, 0],
        ),
        t("time", "nanosleep", SYS_nanosleep, [0, 0, 0, 0, 0, 0]),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        t(
            "file-metadata",
            "chmod",
            SYS_chmod,
            [p(NOWHERE), 0o755, 0, 0, 0, 0],
        ),
        t("file-read", "open", SYS_open, [p(c"/"), 0, 0, 0, 0, 0]),
        t(
            "file-names",
            "creat",
            SYS_creat,
            [p(NOWHERE), 0o600, 0, 0, 0, 0],
        ),
        after("process", "fork", SYS_fork, [0; 6]),
        after("process", "vfork", SYS_vfork, [0; 6]),
    ]);
    v
}
