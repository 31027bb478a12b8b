//! The audit's staged attacks: catalogue rows that need more from the lab
//! than a fake home and sinks (a terminal, a keyring, a daemon check, user
//! namespaces taken away, a symlink planted before the run, an oajail flag).
//!
//! Each row uses the suite's own probe invocation and lab switch for the
//! same catalogue id ([`super::Stage`] is the suite's `RunOptions`), so the
//! audit proves under the user's policy what the suite proves under its
//! fixtures. What stays suite-only needs the test build's layer switches
//! (`I1-no-landlock`, `I1-no-seccomp`, `I1-no-guard`), a host-side git run
//! (the guard's git attacks), 40 racing runs (A5) or a code-mode server (G2).

use super::channels::allowed_names;
use super::{Case, Kind, Loc, Refusal, Stage, Target, row};
use crate::verdict::EXIT_BLOCKED;
use oajail_policy::{PathEntry, Policy};

/// At most this many writable workspace roots get a planted symlink (A4).
const MAX_SYMLINK_ROOTS: usize = 4;

fn staged(id: &str, kind: Kind, target: Target, probe: &[&str], stage: Stage) -> Option<Case> {
    let mut c = row(id, kind, target, probe)?;
    c.stage = stage;
    Some(c)
}

/// Every staged case the audit runs against `policy`.
pub fn cases(policy: &Policy) -> Vec<Case> {
    let mut out = terminal_keyring_daemons();
    out.extend(fail_closed(policy));
    out.extend(symlinked_write_roots(policy));
    out
}

/// C7/C10 on a pty, D7 against a keyring canary, B7 and H6 against pid 1.
fn terminal_keyring_daemons() -> Vec<Case> {
    let pty = || Stage {
        pty: true,
        ..Stage::default()
    };
    let rows: Vec<(&str, Kind, &[&str], Stage)> = vec![
        ("C7-tiocsti", Kind::Isolation, &["tiocsti"], pty()),
        (
            "C7-tiocsti-high-bits",
            Kind::Isolation,
            &["tiocsti-high"],
            pty(),
        ),
        (
            "C10-tty-exclusive",
            Kind::Isolation,
            &["tty-ioctl", "excl"],
            pty(),
        ),
        (
            "C10-tty-line-discipline",
            Kind::Isolation,
            &["tty-ioctl", "setd"],
            pty(),
        ),
        (
            "C10-tty-restored-after-kill",
            Kind::Isolation,
            &["tty-scramble"],
            pty(),
        ),
        (
            "D7-keyring-canary",
            Kind::SecretRead,
            &["keyctl-read", "oaj_canary_@TOKEN@"],
            Stage {
                keyring: true,
                ..Stage::default()
            },
        ),
        (
            "B7-daemonize",
            Kind::Persistence,
            &["daemonize", "oajail-daemon-@TOKEN@"],
            Stage {
                daemon: true,
                ..Stage::default()
            },
        ),
        (
            "H6-reap-orphans",
            Kind::Resources,
            &["reap-orphans", "20"],
            Stage {
                exit_code: Some(EXIT_BLOCKED),
                ..Stage::default()
            },
        ),
    ];
    rows.into_iter()
        .filter_map(|(id, kind, probe, stage)| staged(id, kind, Target::Never, probe, stage))
        .collect()
}

/// I1: what oajail needs and cannot have must refuse the run, under this
/// policy, never run the command less confined.
fn fail_closed(policy: &Policy) -> Vec<Case> {
    let refuse = |stage: Stage| Stage {
        refusal: Refusal::Required,
        ..stage
    };
    let no_userns = Stage {
        no_userns: true,
        ..Stage::default()
    };
    // With enableWeakerNestedSandbox the command runs, in the container
    // tier (allowed by that key); a refusal is then stricter than asked.
    let (target, stage) = match policy.process.enable_weaker_nested_sandbox {
        true => (
            Target::ContainerTier,
            Stage {
                refusal: Refusal::Blocks,
                ..no_userns
            },
        ),
        false => (Target::Never, refuse(no_userns)),
    };
    let mut out: Vec<Case> = staged(
        "I1-no-user-namespaces",
        Kind::Isolation,
        target,
        &["nnp"],
        stage,
    )
    .into_iter()
    .collect();
    // The proxy only starts when the policy lets some domain through; with
    // its decision log unopenable it cannot, and even `--allow-degraded`
    // must not run the command without it.
    if let Some(front) = allowed_names(policy).into_iter().next() {
        out.extend(staged(
            "I1-proxy-fails-to-start",
            Kind::Egress,
            Target::Never,
            &["proxy-connect", &format!("{front}:443"), &front],
            refuse(Stage {
                oajail_args: vec![
                    "--allow-degraded".into(),
                    "--log-json".into(),
                    "@LAB@/no-such-dir/decisions.jsonl".into(),
                ],
                ..Stage::default()
            }),
        ));
    }
    out
}

/// A4: each writable root the policy names inside the workspace is planted
/// as a symlink to the home before the run (a previous run's leftover); a
/// write of `.bashrc` through it must fail, or oajail must refuse the root.
/// Allowed only when the policy makes `~/.bashrc` writable by itself.
fn symlinked_write_roots(policy: &Policy) -> Vec<Case> {
    policy
        .filesystem
        .allow_write
        .iter()
        .filter_map(workspace_root)
        .take(MAX_SYMLINK_ROOTS)
        .filter_map(|rel| {
            let mut c = staged(
                "A4-symlinked-write-root",
                Kind::Persistence,
                Target::Write(Loc::Home(".bashrc".into())),
                &["write-file", "append", &format!("@WS@/{rel}/.bashrc")],
                Stage {
                    symlink_to_home: Some(rel.clone()),
                    refusal: Refusal::Blocks,
                    ..Stage::default()
                },
            )?;
            c.id = format!("A4-symlinked-write-root:./{rel}");
            c.title = format!("write ~/.bashrc through ./{rel} planted as a symlink to the home");
            Some(c)
        })
        .collect()
}

/// `build` for `./build`, `build/out` or `./build/**`; none for the
/// workspace itself, globs in the middle, home or absolute paths.
fn workspace_root(entry: &PathEntry) -> Option<String> {
    let p = entry.path.as_str();
    if p.starts_with('/') || p.starts_with('~') {
        return None;
    }
    let p = p.strip_prefix("./").unwrap_or(p);
    let p = p.strip_suffix("/**").unwrap_or(p).trim_end_matches('/');
    let glob = p.contains(['*', '?', '[']) && !entry.literal;
    if p.is_empty() || p == "." || glob || p.split('/').any(|c| c == "..") {
        return None;
    }
    Some(p.to_owned())
}
