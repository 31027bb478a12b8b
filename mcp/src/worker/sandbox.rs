//! The worker's own confinement: rlimits and a seccomp filter.
//!
//! Applied by the worker to itself after its QuickJS context is built and
//! before it reads any code. The filter is an allow list
//! ([`oajail_bpf::worker::ALLOWED`]): read and write on the inherited pipes,
//! memory management without executable mappings, futex, clocks, random
//! bytes, the signal calls of `abort()` (signals only to the worker itself)
//! and exit. Every other call, new ones included, fails with `ENOSYS`; it
//! is a layer of its own, whatever the outer jail enforces. The program is
//! written by hand in [`oajail_bpf::worker`] (a third of seccompiler's length,
//! so cheaper to install in every worker); seccompiler still installs it
//! and compiles the reference it is tested against.

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

/// Builds the worker's seccomp program (see [`oajail_bpf::worker`]).
pub fn build_filter(own_pid: u32) -> Result<BpfProgram, McpError> {
    oajail_bpf::worker::program(own_pid).map_err(McpError::WorkerFilter)
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
    let only = |arg, op| -> Result<Vec<SeccompRule>, McpError> {
        let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, 0).map_err(err)?;
        Ok(vec![SeccompRule::new(vec![cond]).map_err(err)?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &(_, nr) in oajail_bpf::worker::ALLOWED {
        rules.insert(nr, Vec::new());
    }
    // tgkill only on the worker's own thread group.
    let own = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        u64::from(own_pid),
    )
    .map_err(err)?;
    rules.insert(
        libc::SYS_tgkill,
        vec![SeccompRule::new(vec![own]).map_err(err)?],
    );
    // mmap and mprotect only without PROT_EXEC.
    let no_exec = SeccompCmpOp::MaskedEq(u64::from(oajail_bpf::worker::PROT_EXEC));
    rules.insert(libc::SYS_mmap, only(2, no_exec.clone())?);
    rules.insert(libc::SYS_mprotect, only(2, no_exec)?);
    let arch = std::env::consts::ARCH.try_into().map_err(err)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
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
/// start a program and signal the parent; returns what each attempt gave
/// (each must be the filter's `ENOSYS`, given as `refused`).
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
        "refused": libc::ENOSYS,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oajail_bpf::arch::AUDIT_ARCH;
    use oajail_bpf::interp;
    use oajail_bpf::worker::{RET_ALLOW, RET_KILL, RET_REFUSE};
    use seccompiler::sock_filter;

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

    /// Argument cases for the calls allowed under conditions.
    fn cases(nr: u32, pid: u32) -> Vec<[u64; 6]> {
        let pid = u64::from(pid);
        let mut out = vec![[pid; 6], [0; 6]];
        let nr = i64::from(nr);
        if nr == libc::SYS_tgkill {
            for a0 in [
                0,
                1,
                pid - 1,
                pid,
                pid + 1,
                pid | 1 << 32,
                u64::MAX,
                u64::from(u32::MAX),
            ] {
                out.push([a0, pid, 6, 0, 0, 0]);
            }
        }
        if nr == libc::SYS_mmap || nr == libc::SYS_mprotect {
            for prot in [0, 1, 2, 3, 4, 5, 7, 8, 4 | 1 << 32, 1 << 32, u64::MAX] {
                out.push([0, 4096, prot, 0x22, u64::MAX, 0]);
            }
        }
        out
    }

    #[test]
    fn the_program_decides_like_seccompilers_for_every_syscall() {
        for pid in [1u32, 4242, 0x7FFF_FFFE] {
            let ours = build_filter(pid).unwrap();
            let reference = reference_filter(pid).unwrap();
            let mut compared = 0;
            for arch in FOREIGN_ARCHES.into_iter().chain([AUDIT_ARCH]) {
                for nr in numbers() {
                    for args in cases(nr, pid) {
                        let (got, want) =
                            (run(&ours, nr, arch, args), run(&reference, nr, arch, args));
                        compared += 1;
                        assert_eq!(got, want, "arch {arch:#x} nr {nr} args {args:?}");
                    }
                }
            }
            assert!(compared > 10_000);
        }
    }

    #[test]
    fn the_answers_are_the_intended_ones() {
        let p = build_filter(777).unwrap();
        let native =
            |nr: libc::c_long, a0: u64| run(&p, nr as u32, AUDIT_ARCH, [a0, 0, 3, 0, 0, 0]);
        for &(name, nr) in oajail_bpf::worker::ALLOWED {
            assert_eq!(native(nr, 777), RET_ALLOW, "{name}");
        }
        let allowed: Vec<i64> = oajail_bpf::worker::ALLOWED
            .iter()
            .map(|(_, nr)| *nr)
            .collect();
        let refused = (0..=1100).filter(|nr| !allowed.contains(nr)).count();
        for nr in (0..=1100).filter(|nr| !allowed.contains(nr)) {
            assert_eq!(native(nr, 0), RET_REFUSE, "nr {nr}");
        }
        assert!(refused > 300);
        assert_eq!(native(libc::SYS_tgkill, 778), RET_REFUSE);
        assert_eq!(run(&p, 0, 0x4000_0003, [0; 6]), RET_KILL);
    }

    #[test]
    fn the_program_is_shorter_than_seccompilers() {
        let ours = build_filter(1).unwrap().len();
        let reference = reference_filter(1).unwrap().len();
        assert!(ours * 2 < reference, "{ours} vs {reference} instructions");
        assert!(ours < 60, "{ours} instructions");
    }
}
