//! The MCP worker's seccomp program (`openagenda-mcp`'s `worker::sandbox`):
//! an allow list, written out instruction by instruction.
//!
//! After its filter is installed a worker only runs QuickJS on one script
//! and talks to the server over its inherited pipes. What that needs is
//! [`ALLOWED`]: read and write (the pipes; no other descriptor exists and
//! none can be made), memory management (without executable mappings),
//! futex, clocks and random bytes, the signal calls of `abort()` and of
//! Rust's stack-overflow handler, and exit. Every other call, including
//! calls this list has never heard of (a kernel newer than this code), gets
//! `ENOSYS`: "no such call here", which is also what glibc and Rust expect
//! from a call a kernel lacks, and which the worker's syscall probe can
//! tell apart from the `EPERM` of another layer (the jail's filter, a
//! missing capability). Before issue 32 this was a deny list, and code in
//! the worker could still call `fchmodat2`, `open_tree`, `fsopen`,
//! `setxattr`, `utimensat`, `shmget`, `setsid` or clear its parent-death
//! signal with `prctl`.
//!
//! Arguments are checked where a call is allowed only in part: `mmap` and
//! `mprotect` only without `PROT_EXEC` (QuickJS has no JIT; nothing in the
//! worker ever needs new code), `tgkill` only on the worker's own pid (what
//! `abort()` sends). A foreign architecture (e.g. `int 0x80` on x86_64) kills
//! the process; x32 numbers are refused.
//!
//! Shape: the architecture check, the x32 check, then a small binary search
//! tree over the allowed numbers (a `jge` per inner node, a short `jeq`
//! chain per leaf), so the kernel's per-syscall "always allowed" cache is
//! built visiting a handful of instructions per number. `openagenda-mcp`'s
//! tests check it against seccompiler's compilation of the same policy
//! through the interpreter ([`crate::interp`]), for every architecture value,
//! every syscall number and the argument cases.

use crate::BpfError;
#[cfg(target_arch = "x86_64")]
use crate::arch::X32_SYSCALL_BIT;
use crate::arch::{
    AUDIT_ARCH, JEQ, JGE, JSET, LD_W_ABS, OFFSET_ARCH, OFFSET_ARG0_LO, OFFSET_ARGS, OFFSET_NR, RET,
};
use crate::asm::{Ins, Target, jump, resolve, stmt, tree};
use seccompiler::BpfProgram;

/// The filter's answers.
pub const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
/// Every call not allowed: `ENOSYS`.
pub const RET_REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
/// A foreign architecture (e.g. `int 0x80` on x86_64) kills the process.
pub const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// Every call a worker may make once its filter is installed (`mmap`,
/// `mprotect` and `tgkill` under the argument checks of the module docs).
pub const ALLOWED: &[(&str, libc::c_long)] = &[
    // The pipes to the server.
    ("read", libc::SYS_read),
    ("write", libc::SYS_write),
    // Memory.
    ("brk", libc::SYS_brk),
    ("mmap", libc::SYS_mmap),
    ("munmap", libc::SYS_munmap),
    ("mremap", libc::SYS_mremap),
    ("mprotect", libc::SYS_mprotect),
    ("madvise", libc::SYS_madvise),
    // Locks, time, randomness (when the vDSO cannot answer).
    ("futex", libc::SYS_futex),
    ("clock_gettime", libc::SYS_clock_gettime),
    ("clock_getres", libc::SYS_clock_getres),
    ("gettimeofday", libc::SYS_gettimeofday),
    ("getrandom", libc::SYS_getrandom),
    // abort() and Rust's stack-overflow handler: a worker that runs out of
    // address space must die of SIGABRT (reported as memory_limit), not of
    // whatever a refused signal call leaves.
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask),
    ("rt_sigaction", libc::SYS_rt_sigaction),
    ("rt_sigreturn", libc::SYS_rt_sigreturn),
    ("sigaltstack", libc::SYS_sigaltstack),
    ("getpid", libc::SYS_getpid),
    ("gettid", libc::SYS_gettid),
    ("tgkill", libc::SYS_tgkill),
    // The end.
    ("exit", libc::SYS_exit),
    ("exit_group", libc::SYS_exit_group),
    ("restart_syscall", libc::SYS_restart_syscall),
];

/// `PROT_EXEC`, refused in `mmap` and `mprotect`.
pub const PROT_EXEC: u32 = libc::PROT_EXEC as u32;

/// Offset of the low 32 bits of the third argument (`prot`).
#[cfg(target_endian = "little")]
const OFFSET_ARG2_LO: u32 = OFFSET_ARGS + 16;
#[cfg(target_endian = "big")]
const OFFSET_ARG2_LO: u32 = OFFSET_ARGS + 20;

/// The program's labelled instructions.
#[derive(Clone, Copy)]
enum Label {
    Allow,
    Refuse,
    Tgkill,
    NoExec,
}

/// Builds the program: [`ALLOWED`] calls pass (`tgkill` only on `own_pid`,
/// `mmap`/`mprotect` only without `PROT_EXEC`), everything else of the
/// native architecture gets `ENOSYS`, a foreign architecture is killed.
pub fn program(own_pid: u32) -> Result<BpfProgram, BpfError> {
    let mut keys = Vec::with_capacity(ALLOWED.len());
    for &(_, nr) in ALLOWED {
        keys.push(u32::try_from(nr).map_err(|_| BpfError::SyscallNumber(nr))?);
    }
    keys.sort_unstable();
    keys.dedup();
    let mut code: Vec<Ins<Label>> = vec![
        stmt(LD_W_ABS, OFFSET_ARCH),
        jump(JEQ, AUDIT_ARCH, Target::At(3), Target::Next),
        stmt(RET, RET_KILL),
        stmt(LD_W_ABS, OFFSET_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    code.push(jump(
        JGE,
        X32_SYSCALL_BIT,
        Target::To(Label::Refuse),
        Target::Next,
    ));
    let hit = |k: u32| {
        let nr = libc::c_long::from(k);
        Target::To(match nr {
            libc::SYS_tgkill => Label::Tgkill,
            libc::SYS_mmap | libc::SYS_mprotect => Label::NoExec,
            _ => Label::Allow,
        })
    };
    tree(&mut code, &keys, &hit, Target::To(Label::Refuse));
    let tgkill = code.len();
    code.push(stmt(LD_W_ABS, OFFSET_ARG0_LO));
    code.push(jump(
        JEQ,
        own_pid,
        Target::To(Label::Allow),
        Target::To(Label::Refuse),
    ));
    let no_exec = code.len();
    code.push(stmt(LD_W_ABS, OFFSET_ARG2_LO));
    code.push(jump(
        JSET,
        PROT_EXEC,
        Target::To(Label::Refuse),
        Target::To(Label::Allow),
    ));
    let allow = code.len();
    code.push(stmt(RET, RET_ALLOW));
    let refuse = code.len();
    code.push(stmt(RET, RET_REFUSE));
    resolve(&code, |l| match l {
        Label::Allow => allow,
        Label::Refuse => refuse,
        Label::Tgkill => tgkill,
        Label::NoExec => no_exec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{data, run};

    fn answer(p: &BpfProgram, nr: libc::c_long, args: [u64; 6]) -> u32 {
        run(p, &data(AUDIT_ARCH, nr as u32, args))
    }

    #[test]
    fn only_the_allow_list_passes_and_its_checks_hold() {
        let p = program(4242).unwrap();
        assert!(p.len() < 60, "{} instructions", p.len());
        for &(name, nr) in ALLOWED {
            let args = [4242, 0, 3, 0, 0, 0];
            assert_eq!(answer(&p, nr, args), RET_ALLOW, "{name}");
        }
        let prot = |nr, prot| answer(&p, nr, [0, 4096, prot, 0, 0, 0]);
        for nr in [libc::SYS_mmap, libc::SYS_mprotect] {
            assert_eq!(prot(nr, 3), RET_ALLOW);
            assert_eq!(prot(nr, 4 | 1), RET_REFUSE);
            assert_eq!(prot(nr, u64::from(u32::MAX)), RET_REFUSE);
        }
        assert_eq!(
            answer(&p, libc::SYS_tgkill, [4243, 0, 6, 0, 0, 0]),
            RET_REFUSE
        );
        for nr in [
            libc::SYS_openat,
            libc::SYS_fchmodat,
            452, // fchmodat2
            libc::SYS_open_tree,
            libc::SYS_fsopen,
            libc::SYS_setxattr,
            libc::SYS_utimensat,
            libc::SYS_shmget,
            libc::SYS_prctl,
            libc::SYS_setsid,
            libc::SYS_pkey_mprotect,
            libc::SYS_close,
            1000, // not a call (yet)
        ] {
            assert_eq!(answer(&p, nr, [0; 6]), RET_REFUSE, "nr {nr}");
        }
        assert_eq!(run(&p, &data(0x4000_0003, 0, [0; 6])), RET_KILL);
    }
}
