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

/// A compiled filter, ready to install (compiled once in the supervisor, so
/// the jail only loads it). Serialized as `[code, jt, jf, k]` quadruples to
/// cross into the jail.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(into = "Vec<(u16, u8, u8, u32)>", from = "Vec<(u16, u8, u8, u32)>")]
pub struct SeccompProgram(BpfProgram);

impl From<SeccompProgram> for Vec<(u16, u8, u8, u32)> {
    fn from(p: SeccompProgram) -> Self {
        p.0.into_iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect()
    }
}

impl From<Vec<(u16, u8, u8, u32)>> for SeccompProgram {
    fn from(v: Vec<(u16, u8, u8, u32)>) -> Self {
        SeccompProgram(
            v.into_iter()
                .map(|(code, jt, jf, k)| sock_filter { code, jt, jf, k })
                .collect(),
        )
    }
}

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
pub(crate) const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
pub(crate) const X32_SYSCALL_BIT: u32 = 0x4000_0000;

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

#[cfg(test)]
pub(crate) mod tests {
    //! The compiled program is run through a small classic-BPF interpreter
    //! over hand-made `seccomp_data`, so the filter's decisions (including
    //! the hand-written prefix's jump offsets) are checked without a kernel.
    use super::*;
    use oajail_policy::Policy;
    use oajail_policy::compile::HostFacts;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    /// `struct seccomp_data` as the kernel lays it out (little endian).
    pub(crate) fn data(arch: u32, nr: u32, args: [u64; 6]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend(nr.to_le_bytes());
        d.extend(arch.to_le_bytes());
        d.extend(0u64.to_le_bytes());
        for a in args {
            d.extend(a.to_le_bytes());
        }
        d
    }

    /// Run `prog` on `data`; panics on an opcode the filter should not use.
    pub(crate) fn run(prog: &[sock_filter], data: &[u8]) -> u32 {
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = &prog[pc];
            pc += 1;
            let jump = |cond: bool| {
                if cond {
                    usize::from(i.jt)
                } else {
                    usize::from(i.jf)
                }
            };
            match i.code {
                0x20 => {
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                }
                0x54 => acc &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(acc == i.k),
                0x25 => pc += jump(acc > i.k),
                0x35 => pc += jump(acc >= i.k),
                0x45 => pc += jump(acc & i.k != 0),
                0x06 => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn program(policy: &Policy) -> SeccompProgram {
        let facts = HostFacts {
            home: "/h".into(),
            cwd: "/h".into(),
            uid: 1,
            gid: 1,
            exe: "/x".into(),
            settings_path: None,
            ssh_auth_sock: None,
            mem_total_bytes: None,
            xdg_config_home: None,
        };
        let plan = oajail_policy::compile::seccomp::compile(policy, &facts).unwrap();
        SeccompProgram::compile(&plan).unwrap()
    }

    fn call(p: &SeccompProgram, nr: i64, args: [u64; 6]) -> u32 {
        run(&p.0, &data(AUDIT_ARCH, nr as u32, args))
    }

    #[test]
    fn ordinary_calls_pass_and_denied_calls_get_eperm() {
        let p = program(&Policy::builtin_default());
        assert_eq!(call(&p, libc::SYS_read, [0; 6]), ALLOW);
        assert_eq!(call(&p, libc::SYS_openat, [0; 6]), ALLOW);
        assert_eq!(call(&p, libc::SYS_ptrace, [0; 6]), EPERM);
        assert_eq!(call(&p, libc::SYS_io_uring_setup, [0; 6]), EPERM);
        assert_eq!(call(&p, libc::SYS_fsopen, [0; 6]), EPERM);
        assert_eq!(call(&p, libc::SYS_clone3, [0; 6]), ENOSYS);
    }

    #[test]
    fn socket_families() {
        let p = program(&Policy::builtin_default());
        let sock = |fam: u64, proto: u64| call(&p, libc::SYS_socket, [fam, 1, proto, 0, 0, 0]);
        assert_eq!(sock(libc::AF_INET as u64, 0), ALLOW);
        assert_eq!(sock(libc::AF_INET6 as u64, 0), ALLOW);
        assert_eq!(sock(libc::AF_NETLINK as u64, 0), ALLOW);
        assert_eq!(sock(libc::AF_NETLINK as u64, 9), EPERM);
        assert_eq!(sock(libc::AF_UNIX as u64, 0), EPERM);
        assert_eq!(sock(libc::AF_VSOCK as u64, 0), EPERM);
        assert_eq!(sock(libc::AF_PACKET as u64, 0), EPERM);
        // High bits are ignored by the kernel and by the 32-bit compare.
        assert_eq!(sock((1 << 32) | libc::AF_UNIX as u64, 0), EPERM);
        let mut open = Policy::builtin_default();
        open.network.allow_all_unix_sockets = true;
        let p = program(&open);
        assert_eq!(
            call(&p, libc::SYS_socket, [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            call(&p, libc::SYS_socket, [libc::AF_VSOCK as u64, 1, 0, 0, 0, 0]),
            EPERM
        );
    }

    #[test]
    fn clone_flags_and_terminal_ioctls() {
        let p = program(&Policy::builtin_default());
        let clone = |flags: u64| call(&p, libc::SYS_clone, [flags, 0, 0, 0, 0, 0]);
        assert_eq!(clone(libc::SIGCHLD as u64), ALLOW);
        assert_eq!(clone((libc::CLONE_VM | libc::CLONE_THREAD) as u64), ALLOW);
        assert_eq!(
            clone(libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64),
            EPERM
        );
        assert_eq!(clone(libc::CLONE_NEWNET as u64), EPERM);
        let ioctl = |req: u64| call(&p, libc::SYS_ioctl, [0, req, 0, 0, 0, 0]);
        assert_eq!(ioctl(libc::TIOCSTI), EPERM);
        assert_eq!(ioctl((1 << 32) | libc::TIOCSTI), EPERM);
        assert_eq!(ioctl(libc::TIOCLINUX), EPERM);
        assert_eq!(ioctl(libc::TIOCGWINSZ), ALLOW);
        for req in [
            libc::TIOCEXCL,
            libc::TIOCSETD,
            libc::TIOCSCTTY,
            libc::TIOCCONS,
        ] {
            assert_eq!(ioctl(req), EPERM, "{req:#x}");
        }
        for req in [
            libc::TCSETS,
            libc::TIOCSWINSZ,
            libc::TIOCNXCL,
            libc::TIOCGPGRP,
        ] {
            assert_eq!(ioctl(req), ALLOW, "{req:#x}");
        }
    }

    #[test]
    fn foreign_arch_and_x32_are_killed() {
        let p = program(&Policy::builtin_default());
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(run(&p.0, &data(AUDIT_ARCH_I386, 20, [0; 6])), KILL);
        if cfg!(target_arch = "x86_64") {
            let x32_getpid = X32_SYSCALL_BIT | libc::SYS_getpid as u32;
            assert_eq!(run(&p.0, &data(AUDIT_ARCH, x32_getpid, [0; 6])), KILL);
        }
    }

    #[test]
    fn nested_user_namespaces_allow_clone_flags_but_keep_the_rest() {
        let mut policy = Policy::builtin_default();
        policy.process.allow_nested_user_namespaces = true;
        let p = program(&policy);
        assert_eq!(
            call(
                &p,
                libc::SYS_clone,
                [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0]
            ),
            ALLOW
        );
        assert_eq!(call(&p, libc::SYS_ptrace, [0; 6]), EPERM);
        assert_eq!(call(&p, libc::SYS_clone3, [0; 6]), ENOSYS);
    }

    #[test]
    fn plan_constants_match_libc() {
        use oajail_policy::compile::seccomp as plan;
        assert_eq!(plan::AF_UNIX, libc::AF_UNIX as u32);
        assert_eq!(plan::AF_INET, libc::AF_INET as u32);
        assert_eq!(plan::AF_INET6, libc::AF_INET6 as u32);
        assert_eq!(plan::AF_NETLINK, libc::AF_NETLINK as u32);
        assert_eq!(plan::TIOCSTI as u64, libc::TIOCSTI);
        assert_eq!(plan::TIOCLINUX as u64, libc::TIOCLINUX);
        let libc_values = [
            libc::TIOCEXCL,
            libc::TIOCSETD,
            libc::TIOCSCTTY,
            libc::TIOCCONS,
            libc::TIOCVHANGUP,
            0x5457, // TIOCSLCKTRMIOS: not in the libc crate
        ];
        for ((v, name), want) in plan::TERMINAL_STATE_IOCTLS.iter().zip(libc_values) {
            assert_eq!(u64::from(*v), want, "{name}");
        }
    }
}
