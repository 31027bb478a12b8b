//! The container tier's plans: the same policy, compiled for a jail that has
//! no namespace and no mount view of its own (a container whose engine
//! refuses user namespaces), so that Landlock, seccomp and the guard hold
//! what the mounts and the network namespace hold in the full jail.
//!
//! [`adapt`] turns plans compiled for the full jail into the container
//! tier's (pure; snapshot-tested):
//! - **Landlock**: the private `/tmp` the mounts would give becomes the
//!   run's own directory (`TMPDIR`, the only writable tmp); the host's
//!   `/tmp` gets no right at all (its files, sockets and credential caches
//!   stay out of reach: the read complement already left it out). `/dev` is
//!   the container's, so only the harmless nodes get rights: no listing,
//!   no `/dev/shm` and no `/dev/pts` (other terminals of the container).
//!   TCP connect is granted to the proxy's real ports only (pid 1 makes
//!   every connect; the command never reaches a port itself).
//! - **seccomp**: sockets limited to what the policy allows, for a jail
//!   whose network is the container's: TCP only (no UDP, raw, packet,
//!   netlink or other family; unix only with `allowAllUnixSockets`, and
//!   else `socketpair` only for streams, whose address cannot be changed
//!   after the fact), and no TCP Fast Open (`MSG_FASTOPEN` connects from
//!   `sendto`/`sendmsg`, around `connect`).
//! - **guard**: `connect`, `bind` and `listen` go to pid 1 too (its connect
//!   hand-off), and the run's directory is private (not guarded: it is
//!   removed at exit).

use super::CompiledPolicy;
use super::landlock::{FsAccess, FsRule, READ, WRITE};
use super::rules::TMP;
use super::seccomp::{AF_INET, AF_INET6, AF_UNIX, ArgCmp, ArgOp, SyscallDeny};
use std::collections::BTreeSet;

/// What a container-tier run adds to the plans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInputs<'a> {
    /// The run's private, writable temporary directory (`TMPDIR`).
    pub tmpdir: &'a str,
    /// A directory of the run the command may read but not write (the
    /// trust bundle), if any.
    pub readonly: Option<&'a str>,
    /// The ports the proxy listens on (in the container's network).
    pub proxy_ports: &'a [u16],
    /// `allowAllUnixSockets`.
    pub allow_unix: bool,
}

/// The calls pid 1 makes for the command in the container tier.
pub const HANDED_OFF: [&str; 3] = ["connect", "bind", "listen"];

/// `SOCK_STREAM`.
const SOCK_STREAM: u32 = 1;
/// The socket type bits of `socket`'s and `socketpair`'s type argument.
const SOCK_TYPE_MASK: u32 = 0xf;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: u32 = 6;
/// `MSG_FASTOPEN`: `sendto`/`sendmsg` connect a TCP socket themselves.
const MSG_FASTOPEN: u32 = 0x2000_0000;
/// Device nodes that keep their rights.
const DEVICES: [&str; 6] = ["null", "zero", "full", "tty", "random", "urandom"];

/// Turn plans compiled for the full jail into the container tier's.
pub fn adapt(plans: &mut CompiledPolicy, inputs: &ContainerInputs<'_>) {
    landlock(plans, inputs);
    seccomp(&mut plans.seccomp, inputs.allow_unix);
    let filter = &mut plans.guard.filter;
    for call in HANDED_OFF {
        if !filter.notify.iter().any(|n| n == call) {
            filter.notify.push(call.to_owned());
        }
    }
    plans.guard.private.retain(|p| p != TMP);
    plans.guard.private.push(inputs.tmpdir.to_owned());
}

fn landlock(plans: &mut CompiledPolicy, inputs: &ContainerInputs<'_>) {
    let private_tmp = plans.guard.private.iter().any(|p| p == TMP);
    let plan = &mut plans.landlock;
    let device = |path: &str| {
        DEVICES
            .iter()
            .any(|d| path.strip_prefix("/dev/") == Some(*d))
    };
    plan.fs_rules.retain(|r| {
        let under_dev = r.path == "/dev" || r.path.starts_with("/dev/");
        let tmp = private_tmp && r.path == TMP;
        !tmp && (!under_dev || device(&r.path))
    });
    let all = |rights: &[&[FsAccess]]| -> BTreeSet<FsAccess> {
        rights.iter().flat_map(|r| r.iter().copied()).collect()
    };
    plan.fs_rules.push(FsRule {
        path: inputs.tmpdir.to_owned(),
        access: all(&[READ, WRITE]),
    });
    if let Some(dir) = inputs.readonly {
        plan.fs_rules.push(FsRule {
            path: dir.to_owned(),
            access: all(&[READ]),
        });
    }
    plan.fs_rules.sort_by(|a, b| a.path.cmp(&b.path));
    if plan.restrict_tcp {
        plan.tcp_connect = inputs.proxy_ports.to_vec();
    }
}

fn seccomp(plan: &mut super::seccomp::SeccompPlan, allow_unix: bool) {
    let cmp = |arg, op, value| ArgCmp { arg, op, value };
    let mut socket = Vec::new();
    let mut allowed = vec![AF_INET, AF_INET6];
    if allow_unix {
        allowed.push(AF_UNIX);
    }
    socket.push(allowed.iter().map(|f| cmp(0, ArgOp::Ne, *f)).collect());
    for family in [AF_INET, AF_INET6] {
        socket.extend(other_types().map(|t| vec![cmp(0, ArgOp::Eq, family), t]));
        socket.push(vec![
            cmp(0, ArgOp::Eq, family),
            cmp(2, ArgOp::Ne, 0),
            cmp(2, ArgOp::Ne, IPPROTO_TCP),
        ]);
    }
    plan.deny.retain(|d| d.syscall != "socket");
    plan.deny.insert(
        0,
        SyscallDeny {
            syscall: "socket".into(),
            when: socket,
            why: "the container tier's network is the container's: tcp only (no udp, raw, \
                  packet, netlink or other family)"
                .into(),
        },
    );
    if !allow_unix {
        // Stricter than the full jail's rule (streams only), so it replaces it.
        plan.deny.retain(|d| d.syscall != "socketpair");
        let mut pair: Vec<Vec<ArgCmp>> = vec![vec![cmp(0, ArgOp::Ne, AF_UNIX)]];
        pair.extend(other_types().map(|t| vec![t]));
        plan.deny.push(SyscallDeny {
            syscall: "socketpair".into(),
            when: pair,
            why: "only stream pairs: a datagram pair can send to any unix address".into(),
        });
    }
    let fast_open = |syscall: &str, arg: u8| SyscallDeny {
        syscall: syscall.into(),
        when: vec![vec![cmp(
            arg,
            ArgOp::MaskedEq { mask: MSG_FASTOPEN },
            MSG_FASTOPEN,
        )]],
        why: "tcp fast open connects around connect(), which pid 1 makes".into(),
    };
    plan.deny.push(fast_open("sendto", 3));
    plan.deny.push(fast_open("sendmsg", 2));
    plan.deny.push(fast_open("sendmmsg", 3));
    let mut families = vec!["AF_INET (tcp)", "AF_INET6 (tcp)"];
    if allow_unix {
        families.insert(0, "AF_UNIX");
    }
    plan.allowed_socket_families = families.into_iter().map(String::from).collect();
}

/// `type & SOCK_TYPE_MASK == t` for every socket type but a stream.
fn other_types() -> impl Iterator<Item = ArgCmp> {
    (0..=SOCK_TYPE_MASK)
        .filter(|t| *t != SOCK_STREAM)
        .map(|t| ArgCmp {
            arg: 1,
            op: ArgOp::MaskedEq {
                mask: SOCK_TYPE_MASK,
            },
            value: t,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::compile::{HostFacts, MemFs, compile};

    /// The built-in default policy with `allowWrite`, compiled on a fake host.
    fn plans(allow_write: &[&str], allow_unix: bool) -> CompiledPolicy {
        let mut policy = crate::Policy::builtin_default();
        policy.filesystem.allow_write = allow_write
            .iter()
            .map(|p| crate::PathEntry {
                path: (*p).to_owned(),
                literal: false,
            })
            .collect();
        policy.network.allow_all_unix_sockets = allow_unix;
        let fs = MemFs::new()
            .dirs(&[
                "/home/u/ws",
                "/tmp",
                "/dev/shm",
                "/dev/pts",
                "/etc",
                "/run/user",
            ])
            .files(&["/dev/null", "/dev/zero", "/dev/tty", "/dev/sda"]);
        compile(&policy, &HostFacts::with_dirs("/home/u", "/home/u/ws"), &fs).unwrap()
    }

    const INPUTS: ContainerInputs<'static> = ContainerInputs {
        tmpdir: "/tmp/oajail-1000-abc/tmp",
        readonly: Some("/tmp/oajail-1000-abc/etc"),
        proxy_ports: &[41000, 41001],
        allow_unix: false,
    };

    #[test]
    fn landlock_keeps_tmp_and_dev_out_of_reach() {
        let mut p = plans(&["."], false);
        adapt(&mut p, &INPUTS);
        let paths: Vec<&str> = p
            .landlock
            .fs_rules
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        for gone in ["/tmp", "/dev", "/dev/shm", "/dev/pts", "/dev/sda"] {
            assert!(!paths.contains(&gone), "{gone}: {paths:?}");
        }
        for kept in ["/dev/null", "/dev/tty", "/home/u/ws", INPUTS.tmpdir] {
            assert!(paths.contains(&kept), "{kept}: {paths:?}");
        }
        let tmp = p.landlock.fs_rules.iter().find(|r| r.path == INPUTS.tmpdir);
        assert!(tmp.is_some_and(|r| r.access.contains(&FsAccess::MakeReg)));
        let ro = p
            .landlock
            .fs_rules
            .iter()
            .find(|r| r.path == "/tmp/oajail-1000-abc/etc");
        assert!(ro.is_some_and(|r| !r.access.contains(&FsAccess::WriteFile)));
        assert_eq!(p.landlock.tcp_connect, [41000, 41001]);
        assert!(p.guard.private.contains(&INPUTS.tmpdir.to_owned()));
        assert!(!p.guard.private.contains(&"/tmp".to_owned()));
        for call in HANDED_OFF {
            assert!(p.guard.filter.notify.iter().any(|n| n == call), "{call}");
        }
    }

    /// `allowWrite: ["/tmp"]` binds the host's `/tmp` in the full jail: the
    /// container tier keeps the policy's grant on it.
    #[test]
    fn a_policy_grant_on_tmp_stays() {
        let mut p = plans(&["/tmp"], false);
        adapt(&mut p, &INPUTS);
        let tmp = p.landlock.fs_rules.iter().find(|r| r.path == "/tmp");
        assert!(tmp.is_some_and(|r| r.access.contains(&FsAccess::WriteFile)));
    }

    #[test]
    fn seccomp_snapshot() {
        let mut p = plans(&[], false);
        adapt(&mut p, &INPUTS);
        insta::assert_json_snapshot!("container_seccomp", p.seccomp);
        let mut unix = plans(&[], true);
        adapt(
            &mut unix,
            &ContainerInputs {
                allow_unix: true,
                ..INPUTS
            },
        );
        assert!(unix.seccomp.deny.iter().all(|d| d.syscall != "socketpair"));
        let socket = &unix.seccomp.deny[0];
        assert_eq!(socket.syscall, "socket");
        assert!(socket.when[0].iter().any(|c| c.value == AF_UNIX));
    }
}
