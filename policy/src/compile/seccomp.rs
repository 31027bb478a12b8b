//! seccomp plan: which system calls the jailed command may not make.
//!
//! The plan is a deny list over a default of "allow": the jail runs arbitrary
//! developer tools, so an allow list would break them, and the filesystem and
//! network are already held by mounts, Landlock and the netns. The list aims
//! at kernel attack surface and at escapes around the other layers.
//!
//! Shape of the filter the jail builds from this plan (`jail/src/seccomp.rs`):
//! 1. a foreign architecture (i386 `int 0x80` on x86_64, for example) kills the
//!    process, and on x86_64 so does any call with the x32 bit (`nr >=
//!    0x40000000`), which seccompiler cannot express;
//! 2. [`SeccompPlan::enosys`] calls return ENOSYS (`clone3`, so libc falls back
//!    to `clone`, whose flags a filter can see);
//! 3. [`SeccompPlan::deny`] calls return EPERM when one of their
//!    conditions matches (or always, when they have none).
//!
//! Every comparison is on the low 32 bits of the argument (`Dword`): the
//! kernel truncates these arguments to `int`, so a 64-bit comparison could be
//! bypassed by setting high bits (CVE-2019-10063 in flatpak).
//!
//! Numbers below are the Linux uapi values, identical on x86_64 and aarch64
//! (the two architectures oajail supports); the jail checks them against libc.

use super::{CompileError, HostFacts};
use crate::Policy;
use serde::{Deserialize, Serialize};

/// How one argument is compared (32-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "op")]
pub enum ArgOp {
    /// `arg == value`.
    Eq,
    /// `arg != value`.
    Ne,
    /// `arg & mask == value`.
    MaskedEq {
        /// The bits compared.
        mask: u32,
    },
}

/// One comparison on one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgCmp {
    /// Argument index, 0-based.
    pub arg: u8,
    /// Comparison.
    #[serde(flatten)]
    pub op: ArgOp,
    /// Right-hand value.
    pub value: u32,
}

/// One denied system call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyscallDeny {
    /// Kernel name of the system call (as in `SYS_<name>`).
    pub syscall: String,
    /// Denied when any condition matches (each one is an AND of comparisons);
    /// an empty list means always denied.
    pub when: Vec<Vec<ArgCmp>>,
    /// Why it is denied.
    pub why: String,
}

/// The compiled seccomp plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeccompPlan {
    /// Kill the process on any architecture but the native one.
    pub kill_foreign_arch: bool,
    /// x86_64: kill the process on an x32 call (`nr & 0x40000000`).
    pub kill_x32: bool,
    /// Calls answered with ENOSYS.
    pub enosys: Vec<String>,
    /// Calls answered with EPERM, in the order listed.
    pub deny: Vec<SyscallDeny>,
    /// Socket families `socket(2)` may create.
    pub allowed_socket_families: Vec<String>,
}

/// `AF_UNIX`.
pub const AF_UNIX: u32 = 1;
/// `AF_INET`.
pub const AF_INET: u32 = 2;
/// `AF_INET6`.
pub const AF_INET6: u32 = 10;
/// `AF_NETLINK`.
pub const AF_NETLINK: u32 = 16;
/// `NETLINK_ROUTE`: the only netlink protocol allowed (glibc's
/// `getaddrinfo(AI_ADDRCONFIG)` and `getifaddrs` use it; it only sees the
/// jail's own netns, which holds nothing but `lo`).
pub const NETLINK_ROUTE: u32 = 0;
/// `TIOCSTI`: push a byte into a terminal's input queue.
pub const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX`: console ioctls, including a selection paste into input.
pub const TIOCLINUX: u32 = 0x541C;
/// Terminal ioctls whose effect outlives the process and that ordinary
/// programs never need (`docs/threat-model.md`, "Terminal"): the supervisor
/// restores termios after the run, but these it cannot undo reliably, so
/// they are refused. Editors, pagers and readline only use `TCSETS*`,
/// `TIOCSWINSZ` and `TIOCGPGRP`, which stay allowed.
pub const TERMINAL_STATE_IOCTLS: [(u32, &str); 6] = [
    // Exclusive mode: sudo, ssh and pinentry then fail to open the terminal.
    (0x540C, "TIOCEXCL"),
    // Line discipline: swapped for a serial or network discipline.
    (0x5423, "TIOCSETD"),
    // Steal a controlling terminal (the command has none after setsid).
    (0x540E, "TIOCSCTTY"),
    // Redirect console output to this terminal.
    (0x541D, "TIOCCONS"),
    // Hang up every process on the terminal, the user's shell included.
    (0x5437, "TIOCVHANGUP"),
    // Lock termios fields so the user's shell cannot restore them.
    (0x5457, "TIOCSLCKTRMIOS"),
];

/// `CLONE_NEW*` flags valid for both `clone` and `unshare`.
const CLONE_NEW: [(u32, &str); 7] = [
    (0x0002_0000, "CLONE_NEWNS"),
    (0x0200_0000, "CLONE_NEWCGROUP"),
    (0x0400_0000, "CLONE_NEWUTS"),
    (0x0800_0000, "CLONE_NEWIPC"),
    (0x1000_0000, "CLONE_NEWUSER"),
    (0x2000_0000, "CLONE_NEWPID"),
    (0x4000_0000, "CLONE_NEWNET"),
];
/// `CLONE_NEWTIME` (unshare only: for `clone` the bit is part of the exit signal).
const CLONE_NEWTIME: u32 = 0x80;

/// Compile the seccomp plan for `policy` (host facts do not change it; the
/// parameter keeps every compiler's signature alike).
pub fn compile(policy: &Policy, _facts: &HostFacts) -> Result<SeccompPlan, CompileError> {
    let unix = policy.network.allow_all_unix_sockets;
    let nested = policy.process.allow_nested_user_namespaces;
    let mut deny = vec![socket_rule(unix)];
    if !unix {
        deny.push(socketpair_rule());
    }
    deny.extend(always(KERNEL_SURFACE));
    if !nested {
        deny.extend(namespace_rules());
    }
    let state = TERMINAL_STATE_IOCTLS.iter().map(|(v, _)| *v);
    deny.push(SyscallDeny {
        syscall: "ioctl".into(),
        when: [TIOCSTI, TIOCLINUX]
            .into_iter()
            .chain(state)
            .map(|v| vec![cmp(1, ArgOp::Eq, v)])
            .collect(),
        why: "TIOCSTI/TIOCLINUX inject input into a terminal; TIOCEXCL, TIOCSETD, TIOCSCTTY, \
              TIOCCONS, TIOCVHANGUP, TIOCSLCKTRMIOS change terminal state that outlives the run"
            .into(),
    });
    let mut families = vec!["AF_INET", "AF_INET6", "AF_NETLINK (NETLINK_ROUTE only)"];
    if unix {
        families.insert(0, "AF_UNIX");
    }
    Ok(SeccompPlan {
        kill_foreign_arch: true,
        kill_x32: true,
        enosys: vec!["clone3".into()],
        deny,
        allowed_socket_families: families.into_iter().map(String::from).collect(),
    })
}

fn cmp(arg: u8, op: ArgOp, value: u32) -> ArgCmp {
    ArgCmp { arg, op, value }
}

/// `socket(family, …)` for any family outside the allow list, and netlink
/// with any protocol but NETLINK_ROUTE. AF_VSOCK stays denied even with
/// `allowAllUnixSockets` (srt unblocks it there; oajail has no VM use for it).
fn socket_rule(allow_unix: bool) -> SyscallDeny {
    let mut allowed = vec![AF_INET, AF_INET6, AF_NETLINK];
    if allow_unix {
        allowed.push(AF_UNIX);
    }
    let other_family = allowed.iter().map(|&f| cmp(0, ArgOp::Ne, f)).collect();
    let netlink_other = vec![
        cmp(0, ArgOp::Eq, AF_NETLINK),
        cmp(2, ArgOp::Ne, NETLINK_ROUTE),
    ];
    SyscallDeny {
        syscall: "socket".into(),
        when: vec![other_family, netlink_other],
        why: "socket family not allowed (unix sockets reach host services; vsock, packet, \
              bluetooth, alg, xdp… are kernel attack surface)"
            .into(),
    }
}

/// `SOCK_DGRAM` and `SOCK_RAW` (which unix sockets read as datagram): the
/// unix socket types that are not connection-mode (`unix_create` knows
/// only these and `SOCK_STREAM`, `SOCK_SEQPACKET`, whose pairs stay bound
/// to each other: the kernel ignores or refuses an address in `sendto`).
const DATAGRAM_TYPES: [u32; 2] = [2, 3];
/// The socket type bits of `socket`'s and `socketpair`'s type argument.
const SOCK_TYPE_MASK: u32 = 0xf;

/// `socketpair(AF_UNIX, …)` of a datagram type, when unix sockets are
/// off. A datagram pair is not tied to its peer: `sendto` with a path
/// reaches any datagram socket the jail can see (a read-only mount does
/// not stop it), so without this rule `socket(AF_UNIX)`'s deny would not
/// hold host sockets at all (`docs/enforcement.md`). A run whose guard
/// runs moves it to pid 1, which reports the refusal (`src/plans.rs`).
pub fn socketpair_rule() -> SyscallDeny {
    let when = DATAGRAM_TYPES
        .iter()
        .map(|&t| {
            vec![
                cmp(0, ArgOp::Eq, AF_UNIX),
                cmp(
                    1,
                    ArgOp::MaskedEq {
                        mask: SOCK_TYPE_MASK,
                    },
                    t,
                ),
            ]
        })
        .collect();
    SyscallDeny {
        syscall: "socketpair".into(),
        when,
        why: "unix sockets are off: only stream and seqpacket pairs (a datagram pair can \
              sendto any unix socket path in view)"
            .into(),
    }
}

/// Calls denied whatever the policy says, grouped by reason.
const KERNEL_SURFACE: &[(&[&str], &str)] = &[
    (
        &["io_uring_setup", "io_uring_enter", "io_uring_register"],
        "io_uring bypasses per-syscall filtering",
    ),
    (
        &[
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "pidfd_getfd",
            "kcmp",
        ],
        "reads or changes other processes",
    ),
    (
        &["bpf", "perf_event_open", "userfaultfd"],
        "kernel attack surface",
    ),
    (
        &["keyctl", "add_key", "request_key"],
        "the kernel keyring is not namespaced",
    ),
    (
        &[
            "init_module",
            "finit_module",
            "delete_module",
            "kexec_load",
            "kexec_file_load",
        ],
        "kernel modules and kexec",
    ),
    (
        &["name_to_handle_at", "open_by_handle_at"],
        "file handles bypass path-based checks",
    ),
    (
        &[
            "acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "vhangup",
        ],
        "host administration",
    ),
];

/// The namespace and mount rules (off with `allowNestedUserNamespaces`, as in srt).
fn namespace_rules() -> Vec<SyscallDeny> {
    let bits = |extra: &[u32]| -> Vec<Vec<ArgCmp>> {
        CLONE_NEW
            .iter()
            .map(|(bit, _)| *bit)
            .chain(extra.iter().copied())
            .map(|bit| vec![cmp(0, ArgOp::MaskedEq { mask: bit }, bit)])
            .collect()
    };
    let why = "new namespaces (nested user namespaces regain capabilities)";
    let mut rules = vec![
        SyscallDeny {
            syscall: "clone".into(),
            when: bits(&[]),
            why: why.into(),
        },
        SyscallDeny {
            syscall: "unshare".into(),
            when: bits(&[CLONE_NEWTIME]),
            why: why.into(),
        },
    ];
    rules.extend(always(&[
        (&["setns"], "joining other namespaces"),
        (
            &[
                "mount",
                "umount2",
                "pivot_root",
                "chroot",
                "open_tree",
                "move_mount",
                "fsopen",
                "fsconfig",
                "fsmount",
                "fspick",
                "mount_setattr",
            ],
            "the mount API could undo the jail's filesystem view",
        ),
    ]));
    rules
}

fn always(groups: &[(&[&str], &str)]) -> Vec<SyscallDeny> {
    groups
        .iter()
        .flat_map(|(names, why)| {
            names.iter().map(move |n| SyscallDeny {
                syscall: (*n).into(),
                when: vec![],
                why: (*why).into(),
            })
        })
        .collect()
}

/// The names of every `CLONE_NEW*` flag the plan checks (for `oajail explain`).
pub fn clone_flag_names() -> Vec<&'static str> {
    CLONE_NEW
        .iter()
        .map(|(_, n)| *n)
        .chain(["CLONE_NEWTIME (unshare)"])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn facts() -> HostFacts {
        HostFacts::with_dirs("/home/u", "/home/u/ws")
    }

    fn examples() -> Vec<(String, Policy)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/policies");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let loaded = Policy::from_settings_json(&text, &stem).unwrap();
            out.push((stem, loaded.policy));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(out.len() >= 6, "examples missing");
        out
    }

    #[test]
    fn snapshot_of_every_example() {
        for (stem, policy) in examples() {
            let plan = compile(&policy, &facts()).unwrap();
            insta::assert_json_snapshot!(format!("seccomp__{stem}"), plan);
        }
    }

    fn denied(plan: &SeccompPlan) -> Vec<&str> {
        plan.deny.iter().map(|d| d.syscall.as_str()).collect()
    }

    #[test]
    fn default_denies_every_listed_class() {
        let plan = compile(&Policy::builtin_default(), &facts()).unwrap();
        let names = denied(&plan);
        for must in [
            "socket",
            "io_uring_setup",
            "ptrace",
            "process_vm_readv",
            "pidfd_getfd",
            "kcmp",
            "clone",
            "unshare",
            "setns",
            "mount",
            "fsopen",
            "mount_setattr",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "keyctl",
            "add_key",
            "request_key",
            "init_module",
            "kexec_load",
            "kexec_file_load",
            "ioctl",
        ] {
            assert!(names.contains(&must), "{must} not denied");
        }
        assert_eq!(plan.enosys, vec!["clone3".to_string()]);
        assert!(plan.kill_foreign_arch && plan.kill_x32);
    }

    #[test]
    fn unix_sockets_only_with_allow_all_unix_sockets() {
        let mut policy = Policy::builtin_default();
        let socket = |p: &SeccompPlan| {
            p.deny
                .iter()
                .find(|d| d.syscall == "socket")
                .cloned()
                .unwrap()
        };
        let strict = socket(&compile(&policy, &facts()).unwrap());
        assert!(strict.when[0].contains(&cmp(0, ArgOp::Ne, AF_INET)));
        assert!(!strict.when[0].contains(&cmp(0, ArgOp::Ne, AF_UNIX)));
        policy.network.allow_all_unix_sockets = true;
        let loose = socket(&compile(&policy, &facts()).unwrap());
        assert!(loose.when[0].contains(&cmp(0, ArgOp::Ne, AF_UNIX)));
        // AF_VSOCK (40) is never in the allow list.
        assert!(!loose.when[0].contains(&cmp(0, ArgOp::Ne, 40)));
    }

    #[test]
    fn nested_user_namespaces_lift_only_the_namespace_rules() {
        let mut policy = Policy::builtin_default();
        policy.process.allow_nested_user_namespaces = true;
        let plan = compile(&policy, &facts()).unwrap();
        let names = denied(&plan);
        for gone in ["clone", "unshare", "setns", "mount", "fsopen"] {
            assert!(!names.contains(&gone), "{gone} still denied");
        }
        for kept in ["ptrace", "io_uring_setup", "bpf", "socket", "ioctl"] {
            assert!(names.contains(&kept), "{kept} no longer denied");
        }
    }

    #[test]
    fn clone_rules_never_test_the_exit_signal_bits() {
        let plan = compile(&Policy::builtin_default(), &facts()).unwrap();
        let clone = plan.deny.iter().find(|d| d.syscall == "clone").unwrap();
        for cond in &clone.when {
            for c in cond {
                assert_eq!(c.value & 0xff, 0, "clone rule tests CSIGNAL: {c:?}");
            }
        }
        let unshare = plan.deny.iter().find(|d| d.syscall == "unshare").unwrap();
        assert!(
            unshare
                .when
                .iter()
                .flatten()
                .any(|c| c.value == CLONE_NEWTIME)
        );
    }
}
