//! seccomp: compile a [`SeccompPlan`] to BPF and install it.
//!
//! seccompiler builds the EPERM deny list (with its own architecture check).
//! In front of it goes the hand-written prefix of
//! [`oajail_bpf::prefix`] (the x32 check and `clone3` → ENOSYS, which
//! seccompiler cannot express).

use oajail_policy::compile::seccomp::{ArgOp, SeccompPlan};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

/// A compiled filter, ready to install (compiled once in the supervisor, so
/// the jail only loads it). Crosses into the jail as one hex string
/// (`wire::bpf`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct SeccompProgram(BpfProgram);

impl From<SeccompProgram> for String {
    fn from(p: SeccompProgram) -> Self {
        let quads: Vec<_> = p.0.into_iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect();
        crate::wire::bpf::to_hex(&quads)
    }
}

impl TryFrom<String> for SeccompProgram {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let quads = crate::wire::bpf::from_hex(&text)?;
        Ok(SeccompProgram(
            quads
                .into_iter()
                .map(|(code, jt, jf, k)| sock_filter { code, jt, jf, k })
                .collect(),
        ))
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
    Backend(#[source] seccompiler::BackendError),
    /// A hand-written program (`oajail-bpf`) could not be built.
    #[error("seccomp: {0}")]
    Filter(#[source] oajail_bpf::BpfError),
}

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
impl SeccompProgram {
    /// Compile `plan` for the running architecture: the prefix decides
    /// every call but those denied only under conditions on their
    /// arguments, which seccompiler's chains decide.
    pub fn compile(plan: &SeccompPlan) -> Result<Self, SeccompError> {
        let (always, conditional): (BTreeMap<_, _>, BTreeMap<_, _>) = deny_rules(plan)?
            .into_iter()
            .partition(|(_, rules)| rules.is_empty());
        let always: Vec<i64> = always.into_keys().collect();
        let checked: Vec<i64> = conditional.keys().copied().collect();
        let enosys = plan
            .enosys
            .iter()
            .map(|s| syscall_number(s))
            .collect::<Result<Vec<_>, _>>()?;
        let mut program = oajail_bpf::prefix::seccomp_prefix(
            plan.kill_x32 && cfg!(target_arch = "x86_64"),
            &enosys,
            &always,
            &checked,
        )
        .map_err(SeccompError::Filter)?;
        program.extend(chains(conditional)?);
        Ok(SeccompProgram(program))
    }

    /// A filter that answers `calls` with ENOSYS and allows everything
    /// else (a foreign architecture is killed, as by the main filter). It
    /// is stacked on the main filter only in runs that need it, so the
    /// main filter (and every run's start-up) stays as it is: the
    /// shared-memory calls of a run no cgroup holds
    /// (`limits::SharedMemory`).
    pub fn enosys_only(calls: &[String]) -> Result<Self, SeccompError> {
        let numbers = (calls.iter())
            .map(|c| syscall_number(c))
            .collect::<Result<Vec<_>, _>>()?;
        let mut program = oajail_bpf::prefix::seccomp_prefix(false, &numbers, &[], &[])
            .map_err(SeccompError::Filter)?;
        // The prefix ends by falling through to the program after it.
        program.push(sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        });
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

/// The plan's deny rules by syscall number; an empty list denies the call
/// whatever its arguments.
fn deny_rules(plan: &SeccompPlan) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut always = Vec::new();
    for deny in &plan.deny {
        let nr = syscall_number(&deny.syscall)?;
        if deny.when.is_empty() {
            always.push(nr);
        }
        let mut chain = Vec::new();
        for conds in &deny.when {
            let conds = conds
                .iter()
                .map(|c| condition(c.arg, c.op, c.value))
                .collect::<Result<Vec<_>, _>>()?;
            chain.push(SeccompRule::new(conds).map_err(SeccompError::Backend)?);
        }
        rules.entry(nr).or_default().extend(chain);
    }
    // One unconditional entry makes the call denied outright.
    for nr in always {
        rules.insert(nr, Vec::new());
    }
    Ok(rules)
}

/// seccompiler's EPERM chains for `rules`.
fn chains(rules: BTreeMap<i64, Vec<SeccompRule>>) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(SeccompError::Backend)?;
    filter.try_into().map_err(SeccompError::Backend)
}

fn condition(arg: u8, op: ArgOp, value: u32) -> Result<SeccompCondition, SeccompError> {
    let op = match op {
        ArgOp::Eq => SeccompCmpOp::Eq,
        ArgOp::Ne => SeccompCmpOp::Ne,
        ArgOp::MaskedEq { mask } => SeccompCmpOp::MaskedEq(u64::from(mask)),
    };
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, u64::from(value))
        .map_err(SeccompError::Backend)
}

/// The number of a system call on this architecture.
fn syscall_number(name: &str) -> Result<i64, SeccompError> {
    oajail_bpf::syscalls::deny_listed(name).ok_or_else(|| SeccompError::UnknownSyscall(name.into()))
}

#[cfg(test)]
mod tests {
    //! The compiled program is run through the classic-BPF interpreter of
    //! `oajail-bpf` over hand-made `seccomp_data`, so the filter's decisions
    //! (including the hand-written prefix's jump offsets) are checked
    //! without a kernel.
    use super::*;
    use oajail_bpf::arch::{AUDIT_ARCH, X32_SYSCALL_BIT};
    use oajail_bpf::interp::{data, run};
    use oajail_policy::Policy;
    use oajail_policy::compile::HostFacts;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    fn program(policy: &Policy) -> SeccompProgram {
        let facts = HostFacts::with_dirs("/h", "/h");
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
    fn the_shared_memory_filter_answers_its_calls_enosys_and_allows_the_rest() {
        let calls = ["memfd_create".to_owned(), "shmget".to_owned()];
        let p = SeccompProgram::enosys_only(&calls).unwrap();
        assert_eq!(call(&p, libc::SYS_memfd_create, [0; 6]), ENOSYS);
        assert_eq!(call(&p, libc::SYS_shmget, [0; 6]), ENOSYS);
        for nr in [
            libc::SYS_read,
            libc::SYS_mmap,
            libc::SYS_shmat,
            libc::SYS_openat,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), ALLOW, "{nr}");
        }
        let foreign = run(&p.0, &data(AUDIT_ARCH ^ 1, libc::SYS_read as u32, [0; 6]));
        assert_eq!(foreign, KILL);
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
    fn only_connection_mode_unix_pairs_without_allow_all_unix_sockets() {
        let unix = libc::AF_UNIX as u64;
        let pair =
            |p: &_, kind: i32| call(p, libc::SYS_socketpair, [unix, kind as u64, 0, 0, 0, 0]);
        let p = program(&Policy::builtin_default());
        assert_eq!(pair(&p, libc::SOCK_STREAM), ALLOW);
        assert_eq!(pair(&p, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC), ALLOW);
        // A datagram pair can sendto any unix socket path in view.
        assert_eq!(pair(&p, libc::SOCK_DGRAM), EPERM);
        assert_eq!(pair(&p, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC), EPERM);
        assert_eq!(pair(&p, libc::SOCK_RAW), EPERM);
        let inet = [libc::AF_INET as u64, libc::SOCK_DGRAM as u64, 0, 0, 0, 0];
        assert_eq!(call(&p, libc::SYS_socketpair, inet), ALLOW);
        let mut open = Policy::builtin_default();
        open.network.allow_all_unix_sockets = true;
        assert_eq!(pair(&program(&open), libc::SOCK_DGRAM), ALLOW);
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

    /// The prefix (its search tree and its outright denials) decides no
    /// number differently from seccompiler's chains over the whole deny
    /// list (`clone3` aside, which it answers with ENOSYS), whatever the
    /// arguments, for each shape of the list.
    #[test]
    fn the_prefix_answers_as_the_deny_chains_over_every_rule_do() {
        let mut open = Policy::builtin_default();
        open.network.allow_all_unix_sockets = true;
        open.process.allow_nested_user_namespaces = true;
        for policy in [Policy::builtin_default(), open] {
            let facts = HostFacts::with_dirs("/h", "/h");
            let plan = oajail_policy::compile::seccomp::compile(&policy, &facts).unwrap();
            let rules = deny_rules(&plan).unwrap();
            assert!(rules.values().filter(|r| r.is_empty()).count() > 20);
            assert!(rules.values().filter(|r| !r.is_empty()).count() >= 2);
            let reference = chains(rules).unwrap();
            let full = SeccompProgram::compile(&plan).unwrap();
            assert!(
                full.len() < reference.len(),
                "{} {}",
                full.len(),
                reference.len()
            );
            let args = [
                [0; 6],
                [u64::MAX; 6],
                [libc::CLONE_NEWUSER as u64, 0x5412, 16, 0, 0, 0],
                [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            ];
            for nr in 0..600u32 {
                for a in args {
                    let want = if i64::from(nr) == libc::SYS_clone3 {
                        ENOSYS
                    } else {
                        run(&reference, &data(AUDIT_ARCH, nr, a))
                    };
                    assert_eq!(run(&full.0, &data(AUDIT_ARCH, nr, a)), want, "{nr} {a:?}");
                }
            }
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
