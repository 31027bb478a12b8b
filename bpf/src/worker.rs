//! The MCP worker's seccomp program (`openagenda-mcp`'s `worker::sandbox`),
//! written out instruction by instruction.
//!
//! seccompiler spends about 4.5 instructions per denied syscall (a compare
//! and two jumps per rule chain) and its program for the worker's deny list
//! is about 340 instructions long. Installing a filter costs time linear in
//! its length twice over: the kernel converts and JITs it, and it runs the
//! program once per syscall number to build its per-syscall "always allowed"
//! cache, walking the whole chain for every allowed number. Each worker
//! installs its filter once, so this is paid per execute.
//!
//! The program here decides the same way with about a quarter of the
//! instructions: it checks the architecture (any other kills the process),
//! refuses the x32 range on x86_64, then walks a small binary search tree of
//! the denied numbers (a `jge` per inner node, a short `jeq` chain per leaf),
//! so the cache builder visits about 8 instructions per syscall instead of
//! up to 340. `tgkill` is allowed only when its first argument (low 32 bits,
//! like seccompiler's `Dword` comparison) is the worker's own pid.
//!
//! Invariant, checked by `openagenda-mcp`'s tests against seccompiler's
//! program through the BPF interpreter ([`crate::interp`]): for every architecture value, every syscall number and
//! the `tgkill` argument cases, both programs return the same action, except
//! that this one also refuses x32 syscalls, which seccompiler's allows.

use crate::BpfError;
#[cfg(target_arch = "x86_64")]
use crate::arch::X32_SYSCALL_BIT;
use crate::arch::{AUDIT_ARCH, JEQ, JGE, LD_W_ABS, OFFSET_ARCH, OFFSET_ARG0_LO, OFFSET_NR, RET};
use crate::asm::{Ins, Target, jump, resolve, stmt, tree};
use seccompiler::BpfProgram;

/// The filter's answers.
pub const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
/// `EPERM` for a denied syscall.
pub const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
/// A foreign architecture (e.g. `int 0x80` on x86_64) kills the process.
pub const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// The program's labelled instructions.
#[derive(Clone, Copy)]
enum Label {
    Allow,
    Deny,
    Tgkill,
}

/// Builds the program: `denied` syscalls return EPERM, `tgkill` is allowed
/// only on `own_pid`, everything else of the native architecture is allowed.
pub fn program(denied: &[libc::c_long], own_pid: u32) -> Result<BpfProgram, BpfError> {
    let mut keys = Vec::with_capacity(denied.len() + 1);
    for &nr in denied.iter().chain(std::iter::once(&libc::SYS_tgkill)) {
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
        Target::To(Label::Deny),
        Target::Next,
    ));
    let hit = |k: u32| {
        Target::To(if k == libc::SYS_tgkill as u32 {
            Label::Tgkill
        } else {
            Label::Deny
        })
    };
    tree(&mut code, &keys, &hit, Target::To(Label::Allow));
    let tgkill = code.len();
    code.push(stmt(LD_W_ABS, OFFSET_ARG0_LO));
    code.push(jump(
        JEQ,
        own_pid,
        Target::To(Label::Allow),
        Target::To(Label::Deny),
    ));
    let allow = code.len();
    code.push(stmt(RET, RET_ALLOW));
    let deny = code.len();
    code.push(stmt(RET, RET_EPERM));
    resolve(&code, |l| match l {
        Label::Allow => allow,
        Label::Deny => deny,
        Label::Tgkill => tgkill,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{data, run};

    #[test]
    fn out_of_range_numbers_and_long_jumps_fail_closed() {
        assert!(program(&[-1], 1).is_err());
        let many: Vec<libc::c_long> = (0..2000).collect();
        assert!(program(&many, 1).is_err());
        let allowed = |p: &BpfProgram| run(p, &data(AUDIT_ARCH, 0, [0; 6])) == RET_ALLOW;
        assert!(program(&[], 1).is_ok_and(|p| allowed(&p)));
    }
}
