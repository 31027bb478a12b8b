//! The jail's seccomp prefix, put in front of seccompiler's deny list
//! (`oajail-jail`'s `seccomp.rs`), because seccompiler can express neither
//! of these:
//! - the x32 check: on x86_64 a call number with bit 30 set
//!   (`__X32_SYSCALL_BIT`) reaches the same kernel entry points as the 64-bit
//!   call of the same low number, so a deny list keyed on 64-bit numbers would
//!   be bypassed (rust-vmm/seccompiler#74); we kill the process instead;
//! - a second action (`clone3` → ENOSYS, so libc falls back to `clone`,
//!   whose flags the deny list can inspect; clone3 passes them in memory).
//!
//! Prefix (all jumps relative, self-contained):
//! ```text
//! 0: ld  [arch]
//! 1: jeq NATIVE_ARCH, 0, <kill>   foreign arch (i386 int 0x80 …) → kill
//! 2: ld  [nr]
//! 3: jge 0x40000000, <kill>, 0    x86_64 only: x32 bit → kill
//! 4: jeq clone3, <enosys>, 0      one pair per ENOSYS call
//! …: ja  <rest>
//!    ret ERRNO|ENOSYS
//!    ret KILL_PROCESS
//! rest: seccompiler's program (arch check again, then the deny chains)
//! ```

use crate::arch::{
    AUDIT_ARCH, JA, JEQ, JGE, LD_W_ABS, OFFSET_ARCH, OFFSET_NR, RET, X32_SYSCALL_BIT,
};
use seccompiler::{BpfProgram, sock_filter};

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The hand-written prefix described in the module docs: `x32` adds the
/// x32 check, `enosys` the calls answered with ENOSYS. Falls through to
/// whatever program is appended.
pub fn seccomp_prefix(x32: bool, enosys: &[i64]) -> BpfProgram {
    // After the checks come `ja rest` at index J, `ret ENOSYS` at J+1 and
    // `ret KILL` at J+2, where J = 3 + x32 + enosys.len(). A BPF jump offset
    // counts from the next instruction, so from index i: KILL is J+1-i away
    // and ENOSYS one less.
    let ja_at = 3 + usize::from(x32) + enosys.len();
    let to_kill = |i: usize| (ja_at + 1 - i) as u8;
    let mut p = vec![stmt(LD_W_ABS, OFFSET_ARCH)];
    p.push(jump(JEQ, AUDIT_ARCH, 0, to_kill(1)));
    p.push(stmt(LD_W_ABS, OFFSET_NR));
    if x32 {
        let i = p.len();
        p.push(jump(JGE, X32_SYSCALL_BIT, to_kill(i), 0));
    }
    for nr in enosys {
        let i = p.len();
        p.push(jump(JEQ, *nr as u32, to_kill(i) - 1, 0));
    }
    p.push(stmt(JA, 2));
    p.push(stmt(RET, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    p.push(stmt(RET, libc::SECCOMP_RET_KILL_PROCESS));
    p
}
