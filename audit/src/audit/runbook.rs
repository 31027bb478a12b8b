//! The audit's runbook: which probe invocation exercises which catalogue
//! attack against a user's policy, and what each one targets.
//!
//! Rows come from [`crate::catalog`] (id, family, title) wherever the suite
//! has the attack; the probe arguments are the ones the suite's tests use,
//! with lab paths as placeholders. Attacks the suite cannot have (its own
//! policies never allow a domain a secret could reach) are the audit's
//! exfiltration family `X`: every canary the command can read, sent through
//! one channel each.
//!
//! Rows that need more from the lab (a terminal, a keyring, a daemon
//! check, user namespaces taken away, a planted symlink) are in
//! [`super::staged`].

use super::channels::exfiltration;
pub use super::channels::{EXFIL_FAMILY, allowed_names};
use super::sources::{at, secret_sources};
use super::{Case, Kind, Loc, Stage, Target, row};
use crate::canary::SECRET_ENV;
use crate::labspec::{ALLOWED_V4, DNS_V4, EVIL_V4, EVIL_V6, METADATA_V4, PUBLIC_DNS_V4};
use oajail_policy::Policy;

/// Every case the audit runs against `policy`, in catalogue order.
pub fn cases(policy: &Policy) -> Vec<Case> {
    let mut out = secrets(policy);
    out.extend(persistence());
    out.extend(isolation());
    out.extend(egress(policy));
    out.extend(resources());
    out.extend(exfiltration(policy));
    out.extend(super::staged::cases(policy));
    // Catalogue family order (A…I), the audit's own X last; stable.
    out.sort_by_key(|c| {
        if c.family == EXFIL_FAMILY.0 {
            'Z'
        } else {
            c.family
        }
    });
    out
}

fn secrets(policy: &Policy) -> Vec<Case> {
    let mut out = Vec::new();
    for (_, loc) in secret_sources(policy) {
        let shown = loc.shown();
        if let Some(mut c) = row(
            "A2-default-policy",
            Kind::SecretRead,
            Target::Read(loc.clone()),
            &["read-file", &at(&loc)],
        ) {
            c.id = format!("A2-secret-store:{shown}");
            c.title = format!("read {shown}");
            out.push(c);
        }
    }
    let key = Target::Read(Loc::Home(".ssh/id_ed25519".into()));
    let never = Target::Never;
    let rows: &[(&str, &Target, &[&str])] = &[
        (
            "A1-sendfile",
            &key,
            &["sendfile-file", "@HOME@/.ssh/id_ed25519"],
        ),
        ("A2-grep-home", &never, &["read-tree", "@HOME@"]),
        (
            "A3-symlink-in-workspace",
            &key,
            &["symlink-read", "@HOME@/.ssh/id_ed25519", "@WS@/link"],
        ),
        (
            "A6-hardlink-into-workspace",
            &key,
            &["hardlink-read", "@HOME@/.ssh/id_ed25519", "@WS@/hard"],
        ),
        (
            "A7-proc-cwd-host-process",
            &never,
            &["read-file", "/proc/@PID@/cwd/secret.txt"],
        ),
        (
            "A7-proc-root-host-process",
            &never,
            &["read-file", "/proc/@PID@/root@HOME@/.ssh/id_ed25519"],
        ),
        ("A8-mountinfo", &never, &["mountinfo-scan"]),
        ("G1-secret-env", &Target::Env, &["env-scan"]),
        ("C1-proc-environ", &never, &["proc-environ-scan"]),
    ];
    out.extend(
        rows.iter()
            .filter_map(|(id, t, p)| row(id, Kind::SecretRead, (*t).clone(), p)),
    );
    // A recursive read of the home is judged per canary it prints nowhere:
    // the probe only says whether any was readable, which the policy may
    // allow (a deny list) or not; its target is the whole home.
    if let Some(c) = out.iter_mut().find(|c| c.id == "A2-grep-home") {
        c.target = Target::Read(Loc::Home(String::new()));
    }
    out
}

fn persistence() -> Vec<Case> {
    let home = |r: &str| Target::Write(Loc::Home(r.into()));
    let rows: Vec<(&str, Target, Vec<&str>)> = vec![
        (
            "B1-bashrc-append",
            home(".bashrc"),
            vec!["write-file", "append", "@HOME@/.bashrc"],
        ),
        (
            "B1-profile-truncate",
            home(".profile"),
            vec!["write-file", "truncate", "@HOME@/.profile"],
        ),
        (
            "B1-authorized-keys",
            home(".ssh/authorized_keys2"),
            vec!["write-file", "create", "@HOME@/.ssh/authorized_keys2"],
        ),
        (
            "B1-systemd-user-unit",
            home(".config/systemd/user/evil.service"),
            vec![
                "write-file",
                "mkdirs",
                "@HOME@/.config/systemd/user/evil.service",
            ],
        ),
        (
            "B1-autostart",
            home(".config/autostart/evil.desktop"),
            vec![
                "write-file",
                "mkdirs",
                "@HOME@/.config/autostart/evil.desktop",
            ],
        ),
        (
            "B1-path-shim",
            home(".local/bin/git"),
            vec!["write-file", "create", "@HOME@/.local/bin/git"],
        ),
        (
            "B1-gitconfig",
            home(".gitconfig"),
            vec!["write-file", "append", "@HOME@/.gitconfig"],
        ),
        (
            "B6-chmod",
            home(".bashrc"),
            vec!["metadata", "chmod", "@HOME@/.bashrc"],
        ),
        (
            "B2-git-config",
            Target::Write(Loc::Ws(".git/config".into())),
            vec!["write-file", "append", "@WS@/.git/config"],
        ),
        (
            "B2-git-hook",
            Target::Never,
            vec!["write-file", "create", "@WS@/.git/hooks/pre-commit"],
        ),
        (
            "B2-nested-repo-hook",
            Target::Never,
            vec![
                "write-file",
                "mkdirs",
                "@WS@/vendor/lib/.git/hooks/post-checkout",
            ],
        ),
        (
            "B2-vscode-settings",
            Target::Never,
            vec!["write-file", "truncate", "@WS@/.vscode/settings.json"],
        ),
        (
            "B2-mcp-json",
            Target::Never,
            vec!["write-file", "create", "@WS@/.mcp.json"],
        ),
        (
            "B2-claude-commands",
            Target::Never,
            vec!["write-file", "mkdirs", "@WS@/.claude/commands/x.md"],
        ),
        (
            "B2-gitmodules",
            Target::Never,
            vec!["write-file", "create", "@WS@/.gitmodules"],
        ),
        (
            "B4-policy-file",
            Target::Never,
            vec!["open-write", "@LAB@/policy.json"],
        ),
    ];
    let mut out: Vec<Case> = rows
        .into_iter()
        .filter_map(|(id, t, p)| row(id, Kind::Persistence, t, &p))
        .collect();
    // Writes the guard does not protect by name, so only the policy
    // decides (audit-only rows: the suite's policies never allow them).
    let own = |id: &str, title: &str, rel: &str, mode: &str| Case {
        id: id.to_owned(),
        family: 'B',
        title: title.to_owned(),
        kind: Kind::Persistence,
        target: Target::Write(Loc::Home(rel.to_owned())),
        probe: vec!["write-file".into(), mode.into(), format!("@HOME@/{rel}")],
        stage: Stage::default(),
    };
    out.push(own(
        "B8-audit-other-project",
        "plant a Makefile in another project of the home (runs on its next build)",
        "projects/other/Makefile",
        "create",
    ));
    out.push(own(
        "B8-audit-home-file",
        "create a new file in the home",
        ".oaj-audit-planted",
        "create",
    ));
    out
}

fn isolation() -> Vec<Case> {
    let n = Target::Never;
    let unix = Target::UnixSockets;
    let userns = Target::NestedUserNamespaces;
    let rows: Vec<(&str, Target, Vec<&str>)> = vec![
        (
            "C2-ptrace-host-canary",
            n.clone(),
            vec!["ptrace-attach", "@PID@"],
        ),
        ("C2-proc-mem", n.clone(), vec!["proc-mem", "all"]),
        (
            "C2-process-vm-readv",
            n.clone(),
            vec!["process-vm-read", "all"],
        ),
        ("C2-pidfd-getfd", n.clone(), vec!["pidfd-getfd", "all"]),
        ("C2-kcmp", n.clone(), vec!["kcmp"]),
        ("C3-kill-host-canary", n.clone(), vec!["kill", "@PID@"]),
        ("C3-kill-all", n.clone(), vec!["kill-all"]),
        (
            "C4-ssh-agent",
            unix.clone(),
            vec!["unix-connect", "@LAB@/run/ssh-agent.sock"],
        ),
        (
            "C4-dbus",
            unix.clone(),
            vec!["unix-connect", "@LAB@/run/bus"],
        ),
        (
            "C4-docker",
            unix.clone(),
            vec!["unix-connect", "@LAB@/run/docker.sock"],
        ),
        ("C4-unix-socket-create", unix, vec!["socket-family", "1"]),
        (
            "C5-abstract",
            n.clone(),
            vec!["abstract-connect", "@ABSTRACT@"],
        ),
        ("C8-tioclinux", n.clone(), vec!["tioclinux"]),
        ("D1-io-uring-setup", n.clone(), vec!["io-uring-setup"]),
        ("D4-unshare-user", userns.clone(), vec!["unshare-user"]),
        ("D4-unshare-mount", userns, vec!["unshare-mount"]),
        ("D4-clone3", n.clone(), vec!["clone3"]),
        ("D4-setns", n.clone(), vec!["setns"]),
        ("D5-umount-mask", n.clone(), vec!["umount", "@HOME@"]),
        (
            "D5-mount-bind",
            n.clone(),
            vec!["mount-bind", "/", "@WS@/tmp"],
        ),
        ("D5-open-tree", n.clone(), vec!["open-tree", "/"]),
        ("D5-fsopen", n.clone(), vec!["fsopen"]),
        ("D6-bpf", n.clone(), vec!["bpf"]),
        ("D6-perf-event-open", n.clone(), vec!["perf-event-open"]),
        ("D6-userfaultfd", n.clone(), vec!["userfaultfd"]),
        ("D7-keyctl", n.clone(), vec!["keyctl"]),
        ("D8-no-new-privs", n.clone(), vec!["nnp"]),
        ("D9-capabilities", n, vec!["caps"]),
    ];
    rows.into_iter()
        .filter_map(|(id, t, p)| row(id, Kind::Isolation, t, &p))
        .collect()
}

fn egress(policy: &Policy) -> Vec<Case> {
    let n = Target::Never;
    let allowed = allowed_names(policy).into_iter().next();
    let front = allowed.clone().unwrap_or_else(|| "allowed.test".into());
    let evil = Target::Domain("evil.test".into());
    let rows: Vec<(&str, Target, Vec<String>)> = vec![
        (
            "E1-tcp-public-v4",
            n.clone(),
            vec!["tcp-connect".into(), EVIL_V4.into(), "443".into()],
        ),
        (
            "E1-tcp-allowed-host-direct",
            n.clone(),
            vec!["tcp-connect".into(), ALLOWED_V4.into(), "443".into()],
        ),
        (
            "E1-tcp-public-v6",
            n.clone(),
            vec!["tcp-connect".into(), EVIL_V6.into(), "443".into()],
        ),
        (
            "E1-tcp-metadata",
            n.clone(),
            vec!["tcp-connect".into(), METADATA_V4.into(), "80".into()],
        ),
        (
            "E2-udp-public",
            n.clone(),
            vec!["udp-send".into(), EVIL_V4.into(), "443".into()],
        ),
        (
            "E2-udp-ntp",
            n.clone(),
            vec!["udp-send".into(), PUBLIC_DNS_V4.into(), "123".into()],
        ),
        (
            "E3-dns-public-resolver",
            n.clone(),
            vec![
                "dns-query".into(),
                PUBLIC_DNS_V4.into(),
                "@TOKEN@.exfil.test".into(),
            ],
        ),
        (
            "E3-dns-lab-resolver",
            n.clone(),
            vec![
                "dns-query".into(),
                DNS_V4.into(),
                "@TOKEN@.exfil.test".into(),
            ],
        ),
        (
            "E3-system-resolver",
            n.clone(),
            vec!["resolve".into(), "@TOKEN@.exfil.test".into()],
        ),
        (
            "E4-icmp",
            n.clone(),
            vec!["icmp-ping".into(), EVIL_V4.into()],
        ),
        (
            "E6-packet",
            n.clone(),
            vec!["socket-family".into(), "17".into()],
        ),
        (
            "E7-host-loopback",
            n.clone(),
            vec!["tcp-connect".into(), "127.0.0.1".into(), "9999".into()],
        ),
        (
            "F1-sni-mismatch",
            n.clone(),
            vec![
                "proxy-connect".into(),
                format!("{front}:443"),
                "evil.test".into(),
            ],
        ),
        (
            "F3-ip-literal",
            Target::Domain(ALLOWED_V4.into()),
            vec![
                "proxy-connect".into(),
                format!("{ALLOWED_V4}:443"),
                front.clone(),
            ],
        ),
        (
            "F7-metadata-literal",
            n,
            vec![
                "proxy-connect".into(),
                format!("{METADATA_V4}:80"),
                "-".into(),
            ],
        ),
        (
            "F14-socks-denied",
            evil,
            vec!["socks".into(), "connect".into(), "evil.test:443".into()],
        ),
    ];
    rows.into_iter()
        .filter_map(|(id, t, p)| {
            let p: Vec<&str> = p.iter().map(String::as_str).collect();
            row(id, Kind::Egress, t, &p)
        })
        .collect()
}

fn resources() -> Vec<Case> {
    let rows: Vec<(&str, Target, Vec<&str>)> = vec![
        (
            "H2-memory",
            Target::Limit("addressSpaceBytes".into(), 256 << 20),
            vec!["alloc", "256"],
        ),
        (
            "H3-tmp-fill",
            Target::Limit("tmpSizeBytes".into(), 64 << 20),
            // The jail's private tmp: /tmp, or the container tier's TMPDIR.
            vec!["fill-file", "$TMPDIR/fill", "64"],
        ),
        // Memory RLIMIT_AS does not count: a memory cgroup holds it, or the
        // jail refuses the calls (limits::SharedMemory).
        (
            "H9-memfd-whole-jail",
            Target::Limit("addressSpaceBytes".into(), 256 << 20),
            vec!["memfd-fill", "256"],
        ),
        (
            "H10-sysv-whole-jail",
            Target::Limit("addressSpaceBytes".into(), 256 << 20),
            vec!["sysv-fill", "256"],
        ),
    ];
    rows.into_iter()
        .filter_map(|(id, t, p)| row(id, Kind::Resources, t, &p))
        .collect()
}

/// The secret-named environment variables every lab run carries.
pub fn secret_env() -> &'static [&'static str] {
    SECRET_ENV
}
