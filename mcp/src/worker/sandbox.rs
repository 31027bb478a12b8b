//! The worker's own confinement: rlimits and a seccomp filter.
//!
//! Applied by the worker to itself after its QuickJS context is built and
//! before it reads any code. The filter is a deny list on top of whatever
//! the outer jail already enforces: the worker only needs read/write on its
//! inherited pipes, memory management and exit, so anything that reaches
//! files, sockets, other processes or new programs fails with EPERM. Signals
//! are limited to the worker itself (abort() uses tgkill on its own pid).
//! The program itself is built by hand in [`oajail_bpf::worker`] (a quarter of
//! seccompiler's length, so cheaper to install in every worker) and also
//! refuses x32 syscalls; seccompiler still installs it and compiles the
//! reference it is tested against.

use crate::McpError;
use nix::sys::resource::{Resource, setrlimit};
use seccompiler::BpfProgram;

/// Address-space headroom above the QuickJS heap cap: the binary, libc,
/// stacks and allocator slack.
const AS_HEADROOM_MB: u64 = 192;

/// Sets the worker's rlimits: address space, CPU seconds, no core files, no
/// file growth, no new descriptors beyond stdin/stdout/stderr.
pub fn apply_rlimits(memory_mb: u64, cpu_secs: u64) -> Result<(), McpError> {
    let err = |step: &'static str| move |source: nix::Error| McpError::WorkerCall { step, source };
    let bytes = (memory_mb + AS_HEADROOM_MB) * 1024 * 1024;
    setrlimit(Resource::RLIMIT_AS, bytes, bytes).map_err(err("rlimit as"))?;
    setrlimit(Resource::RLIMIT_CPU, cpu_secs, cpu_secs + 1).map_err(err("rlimit cpu"))?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(err("rlimit core"))?;
    setrlimit(Resource::RLIMIT_FSIZE, 0, 0).map_err(err("rlimit fsize"))?;
    setrlimit(Resource::RLIMIT_NOFILE, 3, 3).map_err(err("rlimit nofile"))?;
    Ok(())
}

/// Syscalls the worker never needs; each returns EPERM.
pub(crate) fn denied() -> Vec<libc::c_long> {
    let mut list = vec![
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept4,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_clone,
        libc::SYS_clone3,
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_send_signal,
        libc::SYS_pidfd_getfd,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
        libc::SYS_mkdirat,
        libc::SYS_unlinkat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_fchmodat,
        libc::SYS_fchownat,
        libc::SYS_mknodat,
        libc::SYS_truncate,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_chroot,
        libc::SYS_pivot_root,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_memfd_create,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_kexec_load,
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_accept,
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_mknod,
    ]);
    list
}

/// Builds the worker's seccomp program (see [`oajail_bpf::worker`]).
pub fn build_filter(own_pid: u32) -> Result<BpfProgram, McpError> {
    oajail_bpf::worker::program(&denied(), own_pid).map_err(McpError::WorkerFilter)
}

/// The same policy compiled by seccompiler: the reference the hand-built
/// program is checked against.
#[cfg(test)]
pub(crate) fn reference_filter(own_pid: u32) -> Result<BpfProgram, McpError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    use std::collections::BTreeMap;
    let err = |e: seccompiler::BackendError| McpError::WorkerSeccomp(e.into());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied().into_iter().map(|nr| (nr, Vec::new())).collect();
    // tgkill is allowed only on the worker's own thread group.
    let other_pid = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        u64::from(own_pid),
    )
    .map_err(err)?;
    rules.insert(
        libc::SYS_tgkill,
        vec![SeccompRule::new(vec![other_pid]).map_err(err)?],
    );
    let arch = std::env::consts::ARCH.try_into().map_err(err)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    filter.try_into().map_err(err)
}

/// Installs the filter (seccompiler also sets no_new_privs).
pub fn apply_seccomp() -> Result<(), McpError> {
    let program = build_filter(std::process::id())?;
    seccompiler::apply_filter(&program).map_err(McpError::WorkerSeccomp)
}

/// `argv[1]` of the self-test: applies the worker's confinement to this
/// process, then tries what it must forbid and prints one JSON line.
pub const SELFTEST_ARG: &str = "__sandbox-selftest";

/// Applies the worker sandbox, then tries to open a file, open a socket,
/// start a program and signal the parent; returns what each attempt gave.
pub fn selftest() -> Result<serde_json::Value, McpError> {
    apply_rlimits(64, 5)?;
    apply_seccomp()?;
    let outcome = |r: std::io::Result<()>| match r {
        Ok(()) => "allowed".to_owned(),
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| e.to_string(), |c| format!("errno {c}")),
    };
    let file = std::fs::File::open("/proc/self/status").map(drop);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").map(drop);
    let exec = std::process::Command::new("/bin/true").status().map(drop);
    let kill = nix::sys::signal::kill(nix::unistd::getppid(), None).map_err(std::io::Error::from);
    let status = std::fs::read_to_string("/proc/self/status").map(drop);
    Ok(serde_json::json!({
        "open": outcome(file),
        "socket": outcome(socket),
        "exec": outcome(exec),
        "signal_parent": outcome(kill),
        "read_status": outcome(status),
        "eperm": libc::EPERM,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oajail_bpf::arch::AUDIT_ARCH;
    use oajail_bpf::interp;
    use oajail_bpf::worker::{RET_ALLOW, RET_EPERM, RET_KILL};
    use seccompiler::sock_filter;

    #[test]
    fn the_filter_compiles_for_this_architecture() {
        assert!(build_filter(1).is_ok_and(|p| !p.is_empty()));
        assert!(denied().contains(&libc::SYS_openat) && denied().contains(&libc::SYS_execve));
    }

    /// The audit values of other architectures a syscall can arrive with.
    const FOREIGN_ARCHES: [u32; 5] = [
        0x4000_0003, // i386 (int 0x80 on x86_64)
        0xC000_003E, // x86_64
        0xC000_00B7, // aarch64
        0x4000_0028, // arm
        0,
    ];

    /// Runs a classic BPF program over one `seccomp_data`.
    fn run(prog: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        interp::run(prog, &interp::data(arch, nr, args))
    }

    /// Syscall numbers to try: all small ones, the x32 range, the edges.
    fn numbers() -> Vec<u32> {
        let mut nrs: Vec<u32> = (0..=1100).collect();
        nrs.extend((0..=1100).map(|n| n | 0x4000_0000));
        nrs.extend([0x3FFF_FFFF, 0x7FFF_FFFF, 0x8000_0000, 0xBFFF_FFFF, u32::MAX]);
        nrs
    }

    fn tgkill_args(pid: u32) -> Vec<[u64; 6]> {
        let pid = u64::from(pid);
        [
            0,
            1,
            pid - 1,
            pid,
            pid + 1,
            pid | 1 << 32,
            u64::MAX,
            u64::from(u32::MAX),
        ]
        .into_iter()
        .map(|a0| [a0, pid, 6, 0, 0, 0])
        .collect()
    }

    fn x32(nr: u32) -> bool {
        cfg!(target_arch = "x86_64") && nr >= 0x4000_0000
    }

    #[test]
    fn the_program_decides_like_seccompilers_for_every_syscall() {
        for pid in [1u32, 4242, 0x7FFF_FFFE] {
            let ours = build_filter(pid).unwrap();
            let reference = reference_filter(pid).unwrap();
            let mut compared = 0;
            for arch in FOREIGN_ARCHES.into_iter().chain([AUDIT_ARCH]) {
                for nr in numbers() {
                    let mut cases = vec![[u64::from(pid); 6], [0; 6]];
                    if i64::from(nr) == libc::SYS_tgkill {
                        cases.extend(tgkill_args(pid));
                    }
                    for args in cases {
                        let (got, want) =
                            (run(&ours, nr, arch, args), run(&reference, nr, arch, args));
                        compared += 1;
                        if arch == AUDIT_ARCH && x32(nr) {
                            // seccompiler lets x32 numbers through; ours refuses them.
                            assert_eq!((got, want), (RET_EPERM, RET_ALLOW), "x32 nr {nr:#x}");
                        } else {
                            assert_eq!(got, want, "arch {arch:#x} nr {nr} args {args:?}");
                        }
                    }
                }
            }
            assert!(compared > 10_000);
        }
    }

    #[test]
    fn the_answers_are_the_intended_ones() {
        let pid = 777;
        let p = build_filter(pid).unwrap();
        let native =
            |nr: libc::c_long, a0: u64| run(&p, nr as u32, AUDIT_ARCH, [a0, 0, 0, 0, 0, 0]);
        for nr in denied() {
            assert_eq!(native(nr, 0), RET_EPERM, "nr {nr}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_mmap,
            libc::SYS_exit_group,
            libc::SYS_futex,
        ] {
            assert_eq!(native(nr, 0), RET_ALLOW, "nr {nr}");
        }
        assert_eq!(native(libc::SYS_tgkill, 777), RET_ALLOW);
        assert_eq!(native(libc::SYS_tgkill, 778), RET_EPERM);
        assert_eq!(run(&p, 0, 0x4000_0003, [0; 6]), RET_KILL);
    }

    #[test]
    fn the_program_is_about_a_quarter_of_seccompilers() {
        let ours = build_filter(1).unwrap().len();
        let reference = reference_filter(1).unwrap().len();
        assert!(ours * 3 < reference, "{ours} vs {reference} instructions");
        assert!(ours < 120, "{ours} instructions");
    }
}
