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

use super::abspaths::{MAX_ABSOLUTE_PATHS, planted_abs};
pub use super::channels::allowed_names;
use super::channels::exfiltration;
use super::{Case, Kind, Loc, Stage, Target};
use crate::canary::{HOME_SECRETS, SECRET_ENV};
use crate::catalog;
use crate::labspec::{ALLOWED_V4, DNS_V4, EVIL_V4, EVIL_V6, METADATA_V4, PUBLIC_DNS_V4};
use oajail_policy::PathEntry;
use oajail_policy::Policy;

/// Family letter of the audit-only exfiltration attacks.
pub const EXFIL_FAMILY: (char, &str) = ('X', "exfiltration through every channel");

/// The workspace's own `.env`: (path relative to the workspace, slug).
pub const WS_SECRET: (&str, &str) = (".env", "ws-env");

/// At most this many paths named by the policy get a planted canary.
const MAX_POLICY_PATHS: usize = 24;

/// Every place a canary secret lives in an audit lab: (slug, where). The
/// home's secret stores, the workspace `.env`, every plain `~/…` or `./…`
/// path the policy's read rules name (so a store the user cares about is
/// planted even when the suite's fake home lacks it), and every absolute
/// one the lab can fake ([`super::abspaths`]).
pub fn secret_sources(policy: &Policy) -> Vec<(String, Loc)> {
    let mut out: Vec<(String, Loc)> = HOME_SECRETS
        .iter()
        .map(|(rel, slug)| ((*slug).to_owned(), Loc::Home((*rel).to_owned())))
        .collect();
    out.push((WS_SECRET.1.into(), Loc::Ws(WS_SECRET.0.into())));
    for (n, loc) in named(policy)
        .filter_map(planted_loc)
        .take(MAX_POLICY_PATHS)
        .enumerate()
    {
        if !out.iter().any(|(_, l)| *l == loc) {
            out.push((format!("policy-{n}"), loc));
        }
    }
    let base = super::session::default_base();
    let absolute = named(policy)
        .filter(|e| !e.is_glob() && e.path.starts_with('/'))
        .filter_map(|e| planted_abs(&e.path, &base));
    for (n, loc) in absolute.take(MAX_ABSOLUTE_PATHS).enumerate() {
        if !out.iter().any(|(_, l)| *l == loc) {
            out.push((format!("policy-abs-{n}"), loc));
        }
    }
    out
}

/// The paths the policy's read rules name (denyRead first).
fn named(policy: &Policy) -> impl Iterator<Item = &PathEntry> {
    let fs = &policy.filesystem;
    fs.deny_read.iter().chain(&fs.allow_read)
}

/// Where the canary for a policy path goes: the path itself when it names
/// a file, `<dir>/.oaj-canary` when the fake home already has it as a
/// directory (a secret store below it). Globs and absolute paths: none
/// here (absolute ones are [`planted_abs`]'s).
fn planted_loc(entry: &PathEntry) -> Option<Loc> {
    if entry.is_glob() && !entry.literal {
        return None;
    }
    let p = entry.path.as_str();
    let (rel, home) = match p.strip_prefix("~/") {
        Some(r) => (r, true),
        None if p.starts_with('/') || p.starts_with('~') || p == "." => return None,
        None => (p.strip_prefix("./").unwrap_or(p), false),
    };
    let is_dir = HOME_SECRETS
        .iter()
        .any(|(s, _)| home && s.starts_with(&format!("{rel}/")));
    let rel = if is_dir {
        format!("{rel}/.oaj-canary")
    } else {
        rel.to_owned()
    };
    Some(if home { Loc::Home(rel) } else { Loc::Ws(rel) })
}

/// The lab path placeholder for a location.
pub(super) fn at(loc: &Loc) -> String {
    match loc {
        Loc::Home(r) => format!("@HOME@/{r}"),
        Loc::Ws(r) => format!("@WS@/{r}"),
        Loc::Abs(p) => p.clone(),
    }
}

/// The catalogue row `id` as an audit case (`None`: not in the catalogue).
pub(super) fn row(id: &str, kind: Kind, target: Target, probe: &[&str]) -> Option<Case> {
    let a = catalog::attack(id)?;
    Some(Case {
        id: id.to_owned(),
        family: a.family,
        title: a.title.to_owned(),
        kind,
        target,
        probe: probe.iter().map(|s| (*s).to_owned()).collect(),
        stage: Stage::default(),
    })
}

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
            vec!["fill-file", "/tmp/fill", "64"],
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
