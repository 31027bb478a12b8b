//! The create-guard's BPF program (`oajail-jail`'s `guard`), built by hand
//! from the [`FilterShape`] (seccompiler has no USER_NOTIF action).
//!
//! ```text
//!    ld  [arch]
//!    jeq NATIVE_ARCH, 0, <kill>      foreign arch → kill (as the deny filter)
//!    ld  [nr]
//!    jge 0x40000000, <kill>, 0       x86_64 only: x32 bit → kill
//!    search tree over the numbers below: any other → <allow>
//!    jeq openat2, <enosys>, 0        one per ENOSYS call
//!    jeq mkdirat, <notify>, 0        one per always-notified call
//!    jeq openat, 0, 2                one triple per flag-notified call
//!    ld  [args[2] low word]
//!    jset WRITE_FLAGS, <notify>, <allow>
//!    jeq fchmodat, 0, 2              the same per mode-notified call
//!    ld  [args[2] low word]
//!    jset RISKY_MODE, <notify>, <allow>
//!    jeq fchownat, 0, 6              one per owner-notified call
//!    ld  [args[2] low word]          the uid: own or -1 goes on to the gid
//!    jeq UID, 2, 0
//!    jeq 0xffffffff, 0, <notify>
//!    ld  [args[3] low word]          the gid: own or -1 changes nothing
//!    jeq GID, <allow>, 0
//!    jeq 0xffffffff, <allow>, <notify>
//!    ret ALLOW
//!    ret USER_NOTIF
//!    ret ERRNO|ENOSYS
//!    ret KILL_PROCESS
//! ```
//! The kernel runs every installed filter and the most severe answer wins
//! (KILL > ERRNO > USER_NOTIF > ALLOW), so the deny filter's EPERMs still
//! hold for a notified call.

use crate::BpfError;
use crate::arch::{
    AUDIT_ARCH, JEQ, JGE, JSET, LD_W_ABS, OFFSET_ARCH, OFFSET_ARGS, OFFSET_NR, RET, X32_SYSCALL_BIT,
};
use crate::asm::{Ins, Target, jump, resolve, stmt, tree};
use oajail_policy::guard::{FilterShape, RISKY_MODE, WRITE_FLAGS};
use seccompiler::BpfProgram;

/// The program's labelled instructions: the start of the per-call chain and
/// the four returns at the end.
#[derive(Clone, Copy)]
enum Label {
    Chain,
    Allow,
    Notify,
    Enosys,
    Kill,
}

const ALLOW: Target<Label> = Target::To(Label::Allow);
const NOTIFY: Target<Label> = Target::To(Label::Notify);
const NEXT: Target<Label> = Target::Next;

/// Compile the filter shape for the running architecture.
///
/// A search tree over every guarded number comes first, so that any other
/// call is allowed after a few instructions (the kernel runs the program
/// once per syscall number when the command installs it: `asm.rs`); the
/// chain of the module docs follows for the guarded ones.
pub fn compile(plan: &FilterShape) -> Result<BpfProgram, BpfError> {
    let legacy = cfg!(target_arch = "x86_64");
    let mut code: Vec<Ins<Label>> = vec![
        stmt(LD_W_ABS, OFFSET_ARCH),
        jump(JEQ, AUDIT_ARCH, NEXT, Target::To(Label::Kill)),
        stmt(LD_W_ABS, OFFSET_NR),
    ];
    if legacy {
        code.push(jump(JGE, X32_SYSCALL_BIT, Target::To(Label::Kill), NEXT));
    }
    let mut chain = Vec::new();
    let keys = guarded_chain(plan, legacy, &mut chain)?;
    tree(&mut code, &keys, &|_| Target::To(Label::Chain), ALLOW);
    let start = code.len();
    // The chain's own jumps count from its start.
    code.extend(chain.into_iter().map(|ins| Ins {
        jt: shift(ins.jt, start),
        jf: shift(ins.jf, start),
        ..ins
    }));
    let end = code.len();
    for k in [
        libc::SECCOMP_RET_ALLOW,
        libc::SECCOMP_RET_USER_NOTIF,
        libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        libc::SECCOMP_RET_KILL_PROCESS,
    ] {
        code.push(stmt(RET, k));
    }
    resolve(&code, |l| match l {
        Label::Chain => start,
        Label::Allow => end,
        Label::Notify => end + 1,
        Label::Enosys => end + 2,
        Label::Kill => end + 3,
    })
}

fn shift(t: Target<Label>, by: usize) -> Target<Label> {
    match t {
        Target::At(i) => Target::At(i + by),
        other => other,
    }
}

/// The per-call chain (jump indexes relative to its start); returns the
/// sorted numbers it tests.
fn guarded_chain(
    plan: &FilterShape,
    legacy: bool,
    d: &mut Vec<Ins<Label>>,
) -> Result<Vec<u32>, BpfError> {
    let mut keys = Vec::new();
    let mut test = |d: &mut Vec<Ins<Label>>, name: &str, jt, skip: usize| -> Result<(), BpfError> {
        let nr = number(name)?;
        keys.push(nr);
        let jf = if skip == 0 {
            NEXT
        } else {
            Target::At(d.len() + 1 + skip)
        };
        d.push(jump(JEQ, nr, jt, jf));
        Ok(())
    };
    for name in &plan.enosys {
        test(d, name, Target::To(Label::Enosys), 0)?;
    }
    let always = plan
        .notify
        .iter()
        .chain(plan.legacy.iter().filter(|_| legacy));
    for name in always.chain(&plan.watch) {
        test(d, name, NOTIFY, 0)?;
    }
    for c in plan.notify_if_write.iter().filter(|c| legacy || !c.legacy) {
        // Another call skips the load and the test. The low word of the
        // little-endian argument is the one the kernel reads as `int flags`.
        test(d, &c.syscall, NEXT, 2)?;
        d.push(stmt(LD_W_ABS, OFFSET_ARGS + 8 * u32::from(c.flags_arg)));
        d.push(jump(JSET, WRITE_FLAGS, NOTIFY, ALLOW));
    }
    for c in plan.notify_if_mode.iter().filter(|c| legacy || !c.legacy) {
        test(d, &c.syscall, NEXT, 2)?;
        d.push(stmt(LD_W_ABS, OFFSET_ARGS + 8 * u32::from(c.mode_arg)));
        d.push(jump(JSET, RISKY_MODE, NOTIFY, ALLOW));
    }
    for c in &plan.notify_if_eq {
        // The low word, as the kernel reads an `int` argument.
        test(d, &c.syscall, NEXT, 2)?;
        d.push(stmt(LD_W_ABS, OFFSET_ARGS + 8 * u32::from(c.arg)));
        d.push(jump(JEQ, c.value, NOTIFY, ALLOW));
    }
    for c in plan
        .notify_unless_owner
        .iter()
        .filter(|c| legacy || !c.legacy)
    {
        // uid_t and gid_t are the low words; -1 leaves an owner unchanged.
        test(d, &c.syscall, NEXT, 6)?;
        let uid = OFFSET_ARGS + 8 * u32::from(c.uid_arg);
        d.push(stmt(LD_W_ABS, uid));
        d.push(jump(JEQ, plan.ids.uid, Target::At(d.len() + 2), NEXT));
        d.push(jump(JEQ, u32::MAX, NEXT, NOTIFY));
        d.push(stmt(LD_W_ABS, uid + 8));
        d.push(jump(JEQ, plan.ids.gid, ALLOW, NEXT));
        d.push(jump(JEQ, u32::MAX, ALLOW, NOTIFY));
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// The number of a guarded call on this architecture.
fn number(name: &str) -> Result<u32, BpfError> {
    crate::syscalls::guarded(name)
        .map(|nr| nr as u32)
        .ok_or_else(|| BpfError::UnknownGuardedCall(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{data, run};
    use crate::syscalls::{SYS_FCHMODAT2, SYS_REMOVEXATTRAT, SYS_SETXATTRAT};
    use seccompiler::sock_filter;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    fn program() -> BpfProgram {
        program_for(oajail_policy::Policy::builtin_default())
    }

    /// The default policy with the workspace writable, and with a
    /// `denyWrite` entry in it or not.
    fn program_with_workspace(deny_write: bool) -> BpfProgram {
        let mut policy = oajail_policy::Policy::builtin_default();
        let entry = |p: &str| oajail_policy::PathEntry::parse(p, false).unwrap();
        policy.filesystem.allow_write.push(entry("."));
        if deny_write {
            policy.filesystem.deny_write.push(entry("./locked"));
        }
        program_for(policy)
    }

    fn program_for(policy: oajail_policy::Policy) -> BpfProgram {
        let fs = oajail_policy::compile::MemFs::new().dirs(&["/h/w", "/tmp"]);
        let facts = oajail_policy::compile::HostFacts::with_dirs("/h", "/h/w");
        let compiled = oajail_policy::compile::compile(&policy, &facts, &fs).unwrap();
        compile(&compiled.guard.filter).unwrap()
    }

    fn call(p: &[sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        run(p, &data(AUDIT_ARCH, nr as u32, args))
    }

    #[test]
    fn writing_calls_notify_and_the_rest_pass() {
        let p = program();
        let creat = libc::O_CREAT as u64;
        // Extended attributes through a descriptor too: an ACL set on a
        // read-only descriptor makes a file executable or world-writable.
        for nr in [
            libc::SYS_truncate,
            libc::SYS_setxattr,
            libc::SYS_lremovexattr,
            libc::SYS_fsetxattr,
            libc::SYS_fremovexattr,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), NOTIFY, "{nr}");
        }
        // fchown to the command's own ids (1000 here, or -1) changes
        // nothing a host tool trusts; to another owner it is decided.
        let own = [3, 1000, 1000, 0, 0, 0];
        assert_eq!(call(&p, libc::SYS_fchown, own), ALLOW);
        assert_eq!(call(&p, libc::SYS_fchown, [3, 0, 0, 0, 0, 0]), NOTIFY);
        // Timestamps never reach pid 1, with or without a path.
        assert_eq!(
            call(&p, libc::SYS_utimensat, [3, 0x7fff_0000_1000, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(call(&p, libc::SYS_utimensat, [3, 0, 0, 0, 0, 0]), ALLOW);
        for flags in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_TRUNC,
            libc::O_WRONLY | libc::O_APPEND,
        ] {
            assert_eq!(
                call(&p, libc::SYS_openat, [0, 0, flags as u64, 0, 0, 0]),
                NOTIFY
            );
        }
        for nr in [SYS_FCHMODAT2, SYS_SETXATTRAT, SYS_REMOVEXATTRAT] {
            assert_eq!(call(&p, nr, [0; 6]), ENOSYS, "{nr}");
        }
        assert_eq!(call(&p, libc::SYS_mkdirat, [0; 6]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_renameat2, [0; 6]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_linkat, [0; 6]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_symlinkat, [0; 6]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_mknodat, [0; 6]), NOTIFY);
        assert_eq!(
            call(&p, libc::SYS_openat, [0, 0, libc::O_RDONLY as u64, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            call(&p, libc::SYS_openat, [0, 0, creat | 1, 0o644, 0, 0]),
            NOTIFY
        );
        // O_TMPFILE needs write access: pid 1 makes the unnamed file.
        assert_eq!(
            call(
                &p,
                libc::SYS_openat,
                [0, 0, libc::O_TMPFILE as u64 | 2, 0, 0, 0]
            ),
            NOTIFY
        );
        assert_eq!(
            call(
                &p,
                libc::SYS_openat,
                [0, 0, (libc::O_RDONLY | libc::O_PATH) as u64, 0, 0, 0]
            ),
            ALLOW
        );
        // High bits of the flags word do not hide O_CREAT.
        assert_eq!(
            call(&p, libc::SYS_openat, [0, 0, (1 << 40) | creat, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(call(&p, libc::SYS_openat2, [0; 6]), ENOSYS);
        assert_eq!(call(&p, libc::SYS_read, [0; 6]), ALLOW);
        assert_eq!(call(&p, libc::SYS_write, [0, 0, creat, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, libc::SYS_ftruncate, [0; 6]), ALLOW);
    }

    #[test]
    fn modes_and_owners_reach_pid_one_only_when_they_could_matter() {
        let p = program();
        let at = |mode: u64| call(&p, libc::SYS_fchmodat, [3, 0x1000, mode, 0, 0, 0]);
        for mode in [0o644, 0o600, 0o444, 0] {
            assert_eq!(at(mode), ALLOW, "{mode:o}");
        }
        for mode in [0o755, 0o4644, 0o2644, 0o1644, 0o664, 0o646, 0o744] {
            assert_eq!(at(mode), NOTIFY, "{mode:o}");
        }
        assert_eq!(call(&p, libc::SYS_fchmod, [3, 0o755, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_fchmod, [3, 0o644, 0, 0, 0, 0]), ALLOW);
        // The default facts' command is uid 1000, gid 1000.
        let none = u64::from(u32::MAX);
        let own = |uid: u64, gid: u64| call(&p, libc::SYS_fchownat, [3, 0x1000, uid, gid, 0, 0]);
        for (uid, gid) in [(1000, 1000), (none, none), (1000, none), (none, 1000)] {
            assert_eq!(own(uid, gid), ALLOW, "{uid} {gid}");
        }
        // The kernel reads 32-bit ids: a high word changes nothing.
        assert_eq!(own((1 << 32) | 1000, 1000), ALLOW);
        for (uid, gid) in [(0, 1000), (1000, 0), (none, 5), (1001, none), (0, 0)] {
            assert_eq!(own(uid, gid), NOTIFY, "{uid} {gid}");
        }
    }

    #[test]
    fn removals_reach_pid_one_by_path_or_all_when_a_deny_write_entry_can_refuse_them() {
        let free = program_with_workspace(false);
        let decided = program_with_workspace(true);
        let cwd = (-100i32) as u32 as u64;
        for flags in [0, libc::AT_REMOVEDIR as u64] {
            // From the working directory or absolute: for the report of
            // the kernel's refusal outside the roots.
            let by_path = [cwd, 0x1000, flags, 0, 0, 0];
            assert_eq!(call(&free, libc::SYS_unlinkat, by_path), NOTIFY);
            // The kernel reads an int: a high word changes nothing.
            let high = [cwd | (7 << 32), 0x1000, flags, 0, 0, 0];
            assert_eq!(call(&free, libc::SYS_unlinkat, high), NOTIFY);
            // Relative to a descriptor (each entry of an rm -rf): through.
            let by_fd = [3, 0x1000, flags, 0, 0, 0];
            assert_eq!(call(&free, libc::SYS_unlinkat, by_fd), ALLOW);
            for args in [by_path, by_fd] {
                assert_eq!(call(&decided, libc::SYS_unlinkat, args), NOTIFY);
            }
        }
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_unlink, libc::SYS_rmdir] {
            assert_eq!(call(&free, nr, [0x1000, 0, 0, 0, 0, 0]), ALLOW);
            assert_eq!(call(&decided, nr, [0x1000, 0, 0, 0, 0, 0]), NOTIFY);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn legacy_x86_64_calls() {
        let p = program();
        let creat = libc::O_CREAT as u64;
        for nr in [
            libc::SYS_mkdir,
            libc::SYS_creat,
            libc::SYS_link,
            libc::SYS_symlink,
            libc::SYS_rename,
            libc::SYS_mknod,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), NOTIFY, "{nr}");
        }
        assert_eq!(
            call(&p, libc::SYS_chmod, [0x1000, 0o755, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            call(&p, libc::SYS_chmod, [0x1000, 0o644, 0, 0, 0, 0]),
            ALLOW
        );
        for nr in [libc::SYS_chown, libc::SYS_lchown] {
            assert_eq!(call(&p, nr, [0x1000, 0, 1000, 0, 0, 0]), NOTIFY, "{nr}");
            assert_eq!(call(&p, nr, [0x1000, 1000, 1000, 0, 0, 0]), ALLOW, "{nr}");
        }
        for nr in [libc::SYS_utime, libc::SYS_utimes, libc::SYS_futimesat] {
            assert_eq!(call(&p, nr, [3, 0x1000, 0, 0, 0, 0]), ALLOW, "{nr}");
        }
        assert_eq!(call(&p, libc::SYS_open, [0, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, libc::SYS_open, [0, creat, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_open, [0, 1, 0, 0, 0, 0]), NOTIFY);
        // open's flags are argument 1: O_CREAT in argument 2 is its mode.
        assert_eq!(call(&p, libc::SYS_open, [0, 0, creat, 0, 0, 0]), ALLOW);
        let x32_mkdir = X32_SYSCALL_BIT as i64 | libc::SYS_mkdir;
        assert_eq!(call(&p, x32_mkdir, [0; 6]), KILL);
    }

    #[test]
    fn a_call_notified_on_one_argument_value() {
        let fs = oajail_policy::compile::MemFs::new().dirs(&["/h/w", "/tmp"]);
        let facts = oajail_policy::compile::HostFacts::with_dirs("/h", "/h/w");
        let policy = oajail_policy::Policy::builtin_default();
        let mut plan = oajail_policy::compile::compile(&policy, &facts, &fs)
            .unwrap()
            .guard;
        plan.filter.notify_if_eq.push(oajail_policy::guard::ArgEq {
            syscall: "socket".into(),
            arg: 0,
            value: libc::AF_UNIX as u32,
        });
        let p = compile(&plan.filter).unwrap();
        let unix = libc::AF_UNIX as u64;
        assert_eq!(call(&p, libc::SYS_socket, [unix, 1, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(
            call(&p, libc::SYS_socket, [(7 << 32) | unix, 1, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            call(&p, libc::SYS_socket, [libc::AF_INET as u64, 1, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(call(&p, libc::SYS_socketpair, [unix, 1, 0, 0, 0, 0]), ALLOW);
        // Without the entry, socket is not in the filter at all.
        assert_eq!(
            call(&program(), libc::SYS_socket, [unix, 1, 0, 0, 0, 0]),
            ALLOW
        );
    }

    #[test]
    fn foreign_arch_is_killed() {
        let p = program();
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(run(&p, &data(AUDIT_ARCH_I386, 39, [0; 6])), KILL);
    }
}
