//! seccomp: compile a [`SeccompPlan`] to BPF and install it.
//!
//! seccompiler builds the EPERM deny list (with its own architecture check).
//! In front of it we put a short hand-written prefix, because seccompiler can
//! express neither of these:
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

use oajail_policy::compile::seccomp::{ArgOp, SeccompPlan};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

/// A compiled filter, ready to install (compiled once in the supervisor,
/// before the clone, so the jail only loads it).
#[derive(Debug, Clone)]
pub struct SeccompProgram(BpfProgram);

/// Why a plan could not be compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// The plan names a call this architecture does not have.
    #[error("seccomp: unknown system call {0}")]
    UnknownSyscall(String),
    /// seccompiler refused the rules.
    #[error("seccomp: {0}")]
    Backend(String),
}

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// BPF opcodes (linux/bpf_common.h) and seccomp_data offsets (linux/seccomp.h).
/// BPF_LD | BPF_W | BPF_ABS (BPF_LD and BPF_W are 0).
const LD_W_ABS: u16 = 0x20;
const JMP_JEQ_K: u16 = 0x05 | 0x10;
const JMP_JGE_K: u16 = 0x05 | 0x30;
const JMP_JA: u16 = 0x05;
const RET_K: u16 = 0x06;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

impl SeccompProgram {
    /// Compile `plan` for the running architecture.
    pub fn compile(plan: &SeccompPlan) -> Result<Self, SeccompError> {
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for deny in &plan.deny {
            let nr = syscall_number(&deny.syscall)?;
            let mut chain = Vec::new();
            for conds in &deny.when {
                let conds = conds
                    .iter()
                    .map(|c| condition(c.arg, c.op, c.value))
                    .collect::<Result<Vec<_>, _>>()?;
                chain.push(SeccompRule::new(conds).map_err(backend)?);
            }
            rules.entry(nr).or_default().extend(chain);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            ARCH,
        )
        .map_err(backend)?;
        let body: BpfProgram = filter.try_into().map_err(backend)?;
        let enosys = plan
            .enosys
            .iter()
            .map(|s| syscall_number(s))
            .collect::<Result<Vec<_>, _>>()?;
        let mut program = prefix(plan.kill_x32 && cfg!(target_arch = "x86_64"), &enosys);
        program.extend(body);
        Ok(SeccompProgram(program))
    }

    /// Number of BPF instructions (for `oajail explain`).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the program is empty (never, for a compiled plan).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Install on the calling thread (no_new_privs must already be set).
    pub(crate) fn install(&self) -> Result<(), crate::error::Failure> {
        seccompiler::apply_filter(&self.0).map_err(|e| crate::error::Failure::msg(e.to_string()))
    }
}

fn backend(e: impl std::fmt::Display) -> SeccompError {
    SeccompError::Backend(e.to_string())
}

fn condition(arg: u8, op: ArgOp, value: u32) -> Result<SeccompCondition, SeccompError> {
    let op = match op {
        ArgOp::Eq => SeccompCmpOp::Eq,
        ArgOp::Ne => SeccompCmpOp::Ne,
        ArgOp::MaskedEq { mask } => SeccompCmpOp::MaskedEq(u64::from(mask)),
    };
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, u64::from(value)).map_err(backend)
}

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

/// The hand-written prefix described in the module docs.
fn prefix(x32: bool, enosys: &[i64]) -> BpfProgram {
    // After the checks come `ja rest` at index J, `ret ENOSYS` at J+1 and
    // `ret KILL` at J+2, where J = 3 + x32 + enosys.len(). A BPF jump offset
    // counts from the next instruction, so from index i: KILL is J+1-i away
    // and ENOSYS one less.
    let ja_at = 3 + usize::from(x32) + enosys.len();
    let to_kill = |i: usize| (ja_at + 1 - i) as u8;
    let mut p = vec![stmt(LD_W_ABS, OFFSET_ARCH)];
    p.push(jump(JMP_JEQ_K, AUDIT_ARCH, 0, to_kill(1)));
    p.push(stmt(LD_W_ABS, OFFSET_NR));
    if x32 {
        let i = p.len();
        p.push(jump(JMP_JGE_K, X32_SYSCALL_BIT, to_kill(i), 0));
    }
    for nr in enosys {
        let i = p.len();
        p.push(jump(JMP_JEQ_K, *nr as u32, to_kill(i) - 1, 0));
    }
    p.push(stmt(JMP_JA, 2));
    p.push(stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    p.push(stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS));
    p
}

/// The number of a system call on this architecture.
fn syscall_number(name: &str) -> Result<i64, SeccompError> {
    SYSCALLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, nr)| nr)
        .ok_or_else(|| SeccompError::UnknownSyscall(name.into()))
}

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
];

struct Table;
static SYSCALLS: Table = Table;

impl Table {
    fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> {
        SYSCALL_TABLE
            .iter()
            .map(|(n, nr)| (n.strip_prefix("SYS_").unwrap_or(n), *nr))
    }
}
