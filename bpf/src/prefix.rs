//! The jail's seccomp prefix, put in front of seccompiler's deny list
//! (`oajail-jail`'s `seccomp.rs`), for what seccompiler can express neither
//! of, and for speed:
//! - the x32 check: on x86_64 a call number with bit 30 set
//!   (`__X32_SYSCALL_BIT`) reaches the same kernel entry points as the 64-bit
//!   call of the same low number, so a deny list keyed on 64-bit numbers would
//!   be bypassed (rust-vmm/seccompiler#74); we kill the process instead;
//! - a second action (`clone3` → ENOSYS, so libc falls back to `clone`,
//!   whose flags the deny list can inspect; clone3 passes them in memory);
//! - a search tree over every number the plan names: a call denied whatever
//!   its arguments gets EPERM right there, one with conditions on its
//!   arguments goes on to the rest of the program, and any other number is
//!   allowed. seccompiler's deny chains are linear, and the kernel runs the
//!   program once per syscall number when it installs it (its "always
//!   allowed" cache), so without the tree the install walked the whole chain
//!   for each of the ~370 allowed numbers (≈ 0.2 ms on pid 1's path;
//!   `asm.rs`); and the chains need only the conditional calls.
//!
//! Prefix (all jumps forward):
//! ```text
//! 0: ld  [arch]
//! 1: jeq NATIVE_ARCH, 0, <kill>   foreign arch (i386 int 0x80 …) → kill
//! 2: ld  [nr]
//! 3: jge 0x40000000, <kill>, 0    x86_64 only: x32 bit → kill
//! …: search tree over the numbers the plan names:
//!    ENOSYS number → <enosys>, always denied → <eperm>,
//!    denied under conditions → <rest>, any other → <allow>
//! rest: ja <after the returns>
//!    ret ALLOW
//!    ret ERRNO|ENOSYS
//!    ret ERRNO|EPERM
//!    ret KILL_PROCESS
//! seccompiler's program (arch check again, then the deny chains)
//! ```

use crate::BpfError;
use crate::arch::{
    AUDIT_ARCH, JA, JEQ, JGE, LD_W_ABS, OFFSET_ARCH, OFFSET_NR, RET, X32_SYSCALL_BIT,
};
use crate::asm::{Ins, Target, jump, resolve, stmt, tree};
use seccompiler::BpfProgram;

#[derive(Clone, Copy)]
enum Label {
    Rest,
    Allow,
    Enosys,
    Eperm,
    Kill,
}

/// The prefix described in the module docs: `x32` adds the x32 check,
/// `enosys` the calls answered with ENOSYS, `eperm` those denied whatever
/// their arguments, `checked` those the appended program decides (every
/// other number is allowed by the prefix). Falls through to whatever
/// program is appended.
pub fn seccomp_prefix(
    x32: bool,
    enosys: &[i64],
    eperm: &[i64],
    checked: &[i64],
) -> Result<BpfProgram, BpfError> {
    let numbers = |list: &[i64]| -> Result<Vec<u32>, BpfError> {
        list.iter()
            .map(|nr| u32::try_from(*nr).map_err(|_| BpfError::SyscallNumber(*nr)))
            .collect()
    };
    let (enosys, eperm) = (numbers(enosys)?, numbers(eperm)?);
    let mut keys = numbers(checked)?;
    keys.extend(&enosys);
    keys.extend(&eperm);
    keys.sort_unstable();
    keys.dedup();
    let mut code: Vec<Ins<Label>> = vec![
        stmt(LD_W_ABS, OFFSET_ARCH),
        jump(JEQ, AUDIT_ARCH, Target::Next, Target::To(Label::Kill)),
        stmt(LD_W_ABS, OFFSET_NR),
    ];
    if x32 {
        let kill = Target::To(Label::Kill);
        code.push(jump(JGE, X32_SYSCALL_BIT, kill, Target::Next));
    }
    // ENOSYS first: a call both answered with ENOSYS and denied gets ENOSYS,
    // as the prefix's checks always ran before the deny list.
    let hit = |k: u32| {
        Target::To(if enosys.contains(&k) {
            Label::Enosys
        } else if eperm.contains(&k) {
            Label::Eperm
        } else {
            Label::Rest
        })
    };
    tree(&mut code, &keys, &hit, Target::To(Label::Allow));
    let rest = code.len();
    code.push(jump(JA, 0, Target::At(rest + 5), Target::At(rest + 5)));
    code.push(stmt(RET, libc::SECCOMP_RET_ALLOW));
    code.push(stmt(RET, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    code.push(stmt(RET, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32));
    code.push(stmt(RET, libc::SECCOMP_RET_KILL_PROCESS));
    resolve(&code, |l| match l {
        Label::Rest => rest,
        Label::Allow => rest + 1,
        Label::Enosys => rest + 2,
        Label::Eperm => rest + 3,
        Label::Kill => rest + 4,
    })
}
