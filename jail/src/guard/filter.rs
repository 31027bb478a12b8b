//! The guard's BPF program, built by hand from the [`FilterShape`]
//! (seccompiler has no USER_NOTIF action).
//!
//! ```text
//!    ld  [arch]
//!    jeq NATIVE_ARCH, 0, <kill>      foreign arch → kill (as the deny filter)
//!    ld  [nr]
//!    jge 0x40000000, <kill>, 0       x86_64 only: x32 bit → kill
//!    jeq openat2, <enosys>, 0        one per ENOSYS call
//!    jeq mkdirat, <notify>, 0        one per always-notified call
//!    jeq openat, 0, 2                one triple per flag-notified call
//!    ld  [args[2] low word]
//!    jset WRITE_FLAGS, <notify>, <allow>
//!    jeq utimensat, 0, 4             one per call notified when it names a path
//!    ld  [args[1] low word]
//!    jeq 0, 0, <notify>
//!    ld  [args[1] high word]
//!    jeq 0, <allow>, <notify>
//!    ret ALLOW
//!    ret USER_NOTIF
//!    ret ERRNO|ENOSYS
//!    ret KILL_PROCESS
//! ```
//! The kernel runs every installed filter and the most severe answer wins
//! (KILL > ERRNO > USER_NOTIF > ALLOW), so the deny filter's EPERMs still
//! hold for a notified call.

use crate::seccomp::{AUDIT_ARCH, X32_SYSCALL_BIT};
use oajail_policy::compile::guard::{FilterShape, RISKY_MODE, WRITE_FLAGS};

/// Where a jump of the program lands.
#[derive(Clone, Copy)]
enum To {
    Next,
    /// Over this many following instructions.
    Skip(usize),
    Allow,
    Notify,
    Enosys,
    Kill,
}

/// BPF opcodes (linux/bpf_common.h) and the seccomp_data layout.
const LD_W_ABS: u16 = 0x20;
const JMP_JEQ_K: u16 = 0x15;
const JMP_JGE_K: u16 = 0x35;
const JMP_JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARGS: u32 = 16;

/// Instructions before the final four returns, with symbolic targets.
struct Draft(Vec<(u16, u32, To, To)>);

impl Draft {
    fn op(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.0.push((code, k, jt, jf));
    }

    /// Resolve the targets: the returns follow in the order Allow, Notify,
    /// Enosys, Kill; a jump offset counts from the next instruction.
    fn finish(self) -> Result<Vec<libc::sock_filter>, String> {
        let end = self.0.len();
        let at = |i: usize, to: To| -> Result<u8, String> {
            let target = match to {
                To::Next => i + 1,
                To::Skip(n) => i + 1 + n,
                To::Allow => end,
                To::Notify => end + 1,
                To::Enosys => end + 2,
                To::Kill => end + 3,
            };
            u8::try_from(target - i - 1).map_err(|_| "guard filter jump too long".to_owned())
        };
        let mut out = Vec::with_capacity(end + 4);
        for (i, (code, k, jt, jf)) in self.0.iter().enumerate() {
            let (jt, jf) = if *code == RET_K || *code == LD_W_ABS {
                (0, 0)
            } else {
                (at(i, *jt)?, at(i, *jf)?)
            };
            out.push(libc::sock_filter {
                code: *code,
                jt,
                jf,
                k: *k,
            });
        }
        for k in [
            libc::SECCOMP_RET_ALLOW,
            libc::SECCOMP_RET_USER_NOTIF,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
            libc::SECCOMP_RET_KILL_PROCESS,
        ] {
            out.push(libc::sock_filter {
                code: RET_K,
                jt: 0,
                jf: 0,
                k,
            });
        }
        Ok(out)
    }
}

/// Compile the filter shape for the running architecture.
pub(crate) fn compile(plan: &FilterShape) -> Result<Vec<libc::sock_filter>, String> {
    let legacy = cfg!(target_arch = "x86_64");
    let mut d = Draft(Vec::new());
    d.op(LD_W_ABS, OFFSET_ARCH, To::Next, To::Next);
    d.op(JMP_JEQ_K, AUDIT_ARCH, To::Next, To::Kill);
    d.op(LD_W_ABS, OFFSET_NR, To::Next, To::Next);
    if legacy {
        d.op(JMP_JGE_K, X32_SYSCALL_BIT, To::Kill, To::Next);
    }
    for name in &plan.enosys {
        d.op(JMP_JEQ_K, number(name)?, To::Enosys, To::Next);
    }
    let always = plan
        .notify
        .iter()
        .chain(plan.legacy.iter().filter(|_| legacy));
    for name in always.chain(&plan.watch) {
        d.op(JMP_JEQ_K, number(name)?, To::Notify, To::Next);
    }
    for c in plan.notify_if_write.iter().filter(|c| legacy || !c.legacy) {
        // Another call skips the load and the test. The low word of the
        // little-endian argument is the one the kernel reads as `int flags`.
        d.op(JMP_JEQ_K, number(&c.syscall)?, To::Next, To::Skip(2));
        let arg = OFFSET_ARGS + 8 * u32::from(c.flags_arg);
        d.op(LD_W_ABS, arg, To::Next, To::Next);
        d.op(JMP_JSET_K, WRITE_FLAGS, To::Notify, To::Allow);
    }
    for c in &plan.notify_if_mode {
        d.op(JMP_JEQ_K, number(&c.syscall)?, To::Next, To::Skip(2));
        let arg = OFFSET_ARGS + 8 * u32::from(c.mode_arg);
        d.op(LD_W_ABS, arg, To::Next, To::Next);
        d.op(JMP_JSET_K, RISKY_MODE, To::Notify, To::Allow);
    }
    for c in plan.notify_if_path.iter().filter(|c| legacy || !c.legacy) {
        // A pointer is NULL when both of its words are zero.
        d.op(JMP_JEQ_K, number(&c.syscall)?, To::Next, To::Skip(4));
        let arg = OFFSET_ARGS + 8 * u32::from(c.path_arg);
        d.op(LD_W_ABS, arg, To::Next, To::Next);
        d.op(JMP_JEQ_K, 0, To::Next, To::Notify);
        d.op(LD_W_ABS, arg + 4, To::Next, To::Next);
        d.op(JMP_JEQ_K, 0, To::Allow, To::Notify);
    }
    d.finish()
}

/// Numbers of calls newer than the libc crate's tables: the same on every
/// architecture (the shared table of Linux 5.1 and later).
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// The number of a guarded call on this architecture.
fn number(name: &str) -> Result<u32, String> {
    let nr = match name {
        "mkdirat" => libc::SYS_mkdirat,
        "umask" => libc::SYS_umask,
        "unlinkat" => libc::SYS_unlinkat,
        "truncate" => libc::SYS_truncate,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => SYS_FCHMODAT2,
        "fchownat" => libc::SYS_fchownat,
        "utimensat" => libc::SYS_utimensat,
        "setxattr" => libc::SYS_setxattr,
        "lsetxattr" => libc::SYS_lsetxattr,
        "removexattr" => libc::SYS_removexattr,
        "lremovexattr" => libc::SYS_lremovexattr,
        "setxattrat" => SYS_SETXATTRAT,
        "removexattrat" => SYS_REMOVEXATTRAT,
        "fchmod" => libc::SYS_fchmod,
        "fchown" => libc::SYS_fchown,
        "fsetxattr" => libc::SYS_fsetxattr,
        "fremovexattr" => libc::SYS_fremovexattr,
        "mknodat" => libc::SYS_mknodat,
        "linkat" => libc::SYS_linkat,
        "symlinkat" => libc::SYS_symlinkat,
        "renameat" => libc::SYS_renameat,
        "renameat2" => libc::SYS_renameat2,
        "openat" => libc::SYS_openat,
        "openat2" => libc::SYS_openat2,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "mkdir" => libc::SYS_mkdir,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        #[cfg(target_arch = "x86_64")]
        "link" => libc::SYS_link,
        #[cfg(target_arch = "x86_64")]
        "symlink" => libc::SYS_symlink,
        #[cfg(target_arch = "x86_64")]
        "rename" => libc::SYS_rename,
        #[cfg(target_arch = "x86_64")]
        "unlink" => libc::SYS_unlink,
        #[cfg(target_arch = "x86_64")]
        "rmdir" => libc::SYS_rmdir,
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "chown" => libc::SYS_chown,
        #[cfg(target_arch = "x86_64")]
        "lchown" => libc::SYS_lchown,
        #[cfg(target_arch = "x86_64")]
        "utime" => libc::SYS_utime,
        #[cfg(target_arch = "x86_64")]
        "utimes" => libc::SYS_utimes,
        #[cfg(target_arch = "x86_64")]
        "futimesat" => libc::SYS_futimesat,
        other => return Err(format!("guard: unknown system call {other}")),
    };
    Ok(nr as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::tests::{data, run};

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    fn program() -> Vec<libc::sock_filter> {
        let fs = oajail_policy::compile::MemFs::new().dirs(&["/h/w", "/tmp"]);
        let facts = oajail_policy::compile::HostFacts {
            home: "/h".into(),
            cwd: "/h/w".into(),
            uid: 1,
            gid: 1,
            exe: "/x".into(),
            settings_path: None,
            ssh_auth_sock: None,
            mem_total_bytes: None,
            xdg_config_home: None,
        };
        let policy = oajail_policy::Policy::builtin_default();
        let compiled = oajail_policy::compile::compile(&policy, &facts, &fs).unwrap();
        compile(&compiled.guard.filter).unwrap()
    }

    /// The program in the type the shared BPF interpreter takes.
    fn interpretable(p: &[libc::sock_filter]) -> Vec<seccompiler::sock_filter> {
        p.iter()
            .map(|i| seccompiler::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }

    fn call(p: &[libc::sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        run(&interpretable(p), &data(AUDIT_ARCH, nr as u32, args))
    }

    #[test]
    fn writing_calls_notify_and_the_rest_pass() {
        let p = program();
        let creat = libc::O_CREAT as u64;
        for nr in [
            libc::SYS_unlinkat,
            libc::SYS_truncate,
            libc::SYS_fchmodat,
            libc::SYS_fchownat,
            libc::SYS_setxattr,
            libc::SYS_lremovexattr,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), NOTIFY, "{nr}");
        }
        for nr in [
            libc::SYS_fchown,
            libc::SYS_fsetxattr,
            libc::SYS_fremovexattr,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), ALLOW, "{nr}");
        }
        // utimensat with a path is notified; without one (futimens) it passes.
        assert_eq!(
            call(&p, libc::SYS_utimensat, [3, 0x7fff_0000_1000, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            call(&p, libc::SYS_utimensat, [3, 0x1000, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            call(&p, libc::SYS_utimensat, [3, 0x7fff_0000_0000, 0, 0, 0, 0]),
            NOTIFY
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
            libc::SYS_unlink,
            libc::SYS_rmdir,
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_utime,
            libc::SYS_utimes,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), NOTIFY, "{nr}");
        }
        assert_eq!(
            call(&p, libc::SYS_futimesat, [3, 0x1000, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(call(&p, libc::SYS_futimesat, [3, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, libc::SYS_open, [0, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, libc::SYS_open, [0, creat, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(call(&p, libc::SYS_open, [0, 1, 0, 0, 0, 0]), NOTIFY);
        // open's flags are argument 1: O_CREAT in argument 2 is its mode.
        assert_eq!(call(&p, libc::SYS_open, [0, 0, creat, 0, 0, 0]), ALLOW);
        let x32_mkdir = X32_SYSCALL_BIT as i64 | libc::SYS_mkdir;
        assert_eq!(call(&p, x32_mkdir, [0; 6]), KILL);
    }

    #[test]
    fn foreign_arch_is_killed() {
        let p = interpretable(&program());
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(run(&p, &data(AUDIT_ARCH_I386, 39, [0; 6])), KILL);
    }
}
