//! Unit tests of the filesystem plans on a fake filesystem.

use super::mounts::{MountPlan, MountStep};
use super::*;
use crate::guard;
use crate::{PathEntry, Policy};
use std::path::Path;

fn facts() -> HostFacts {
    HostFacts {
        settings_path: Some("/home/u/.srt-settings.json".into()),
        mem_total_bytes: Some(8 << 30),
        ..HostFacts::with_dirs("/home/u", "/home/u/ws")
    }
}

fn fake() -> MemFs {
    MemFs::new()
        .dirs(&[
            "/usr/bin",
            "/etc",
            "/proc",
            "/dev",
            "/sys",
            "/tmp",
            "/run/user/1000",
            "/home/u/ws/src/a/b",
        ])
        .files(&[
            "/usr/bin/oajail",
            "/home/u/.srt-settings.json",
            "/home/u/.ssh/id_ed25519",
            "/home/u/.bashrc",
        ])
        .files(&[
            "/home/u/ws/src/a/b/.bashrc",
            "/home/u/ws/.git/HEAD",
            "/home/u/ws/.git/hooks/pre-commit",
        ])
        .files(&["/home/u/notes.txt"])
}

fn entries(paths: &[&str]) -> Vec<PathEntry> {
    paths
        .iter()
        .map(|p| PathEntry {
            path: (*p).to_owned(),
            literal: false,
        })
        .collect()
}

fn policy(
    deny_read: &[&str],
    allow_read: &[&str],
    allow_write: &[&str],
    deny_write: &[&str],
) -> Policy {
    let mut p = Policy::builtin_default();
    p.filesystem.deny_read = entries(deny_read);
    p.filesystem.allow_read = entries(allow_read);
    p.filesystem.allow_write = entries(allow_write);
    p.filesystem.deny_write = entries(deny_write);
    p
}

fn plan(p: &Policy, fs: &MemFs) -> MountPlan {
    match compile_filesystem(p, &facts(), fs) {
        Ok((m, _)) => m,
        Err(e) => panic!("compile failed: {e}"),
    }
}

fn step<'a>(plan: &'a MountPlan, path: &str) -> Option<&'a MountStep> {
    plan.steps.iter().find(|s| s.path() == path)
}

#[test]
fn deny_read_dir_is_masked_and_reallow_is_bound_from_the_host() {
    let p = policy(&["~/.ssh"], &["~/.ssh/known_hosts"], &[], &[]);
    let fs = fake().files(&["/home/u/.ssh/known_hosts"]);
    let m = plan(&p, &fs);
    match step(&m, "/home/u/.ssh") {
        Some(MountStep::MaskDir { skeleton, .. }) => assert_eq!(skeleton.len(), 1),
        other => panic!("expected a mask, got {other:?}"),
    }
    assert!(matches!(
        step(&m, "/home/u/.ssh/known_hosts"),
        Some(MountStep::Bind {
            writable: false,
            ..
        })
    ));
}

#[test]
fn deny_write_beats_allow_write_even_from_an_ancestor() {
    let p = policy(&[], &[], &["~/ws/src"], &["~/ws"]);
    let m = plan(&p, &fake());
    assert!(step(&m, "/home/u/ws/src").is_none(), "{m:#?}");
}

#[test]
fn mandatory_denies_are_the_guards_alone() {
    // No scan, no placeholder, no mask: the workspace is one writable bind
    // and the guard decides every write below it.
    let p = policy(&[], &[], &["."], &["./locked.txt", "./missing/out"]);
    let compiled = compile(&p, &facts(), &fake()).unwrap();
    let m = &compiled.mounts;
    let under_ws: Vec<&str> = m
        .steps
        .iter()
        .map(MountStep::path)
        .filter(|p| p.starts_with("/home/u/ws"))
        .collect();
    assert_eq!(under_ws, vec!["/home/u/ws"], "{m:#?}");
    let g = &compiled.guard;
    assert_eq!(g.roots, vec!["/home/u/ws".to_owned()]);
    assert!(g.deny_write.contains(&"/home/u/ws/missing/out".to_owned()));
    assert_eq!(g.home, "/home/u");
    assert_eq!(g.private, vec!["/dev".to_owned(), "/tmp".to_owned()]);
}

#[test]
fn cwd_tmp_is_refused_and_allow_write_tmp_shares_the_host_tmp() {
    let mut f = facts();
    f.cwd = "/tmp".into();
    let fs = fake().dirs(&["/tmp/.X11-unix", "/tmp/ssh-abc", "/tmp/work"]);
    let err = compile(&policy(&[], &[], &[], &[]), &f, &fs).unwrap_err();
    assert!(err.to_string().contains("private"), "{err}");
    let shared = policy(&[], &[], &["/tmp"], &[]);
    let compiled = compile(&shared, &f, &fs).unwrap();
    let m = &compiled.mounts;
    assert!(
        matches!(
            step(m, "/tmp"),
            Some(MountStep::Bind { writable: true, .. })
        ),
        "{m:#?}"
    );
    assert!(matches!(
        step(m, "/tmp/.X11-unix"),
        Some(MountStep::MaskDir { .. })
    ));
    assert!(matches!(
        step(m, "/tmp/ssh-abc"),
        Some(MountStep::MaskDir { .. })
    ));
    assert!(step(m, "/tmp/work").is_none());
    assert_eq!(compiled.guard.private, vec!["/dev".to_owned()]);
    assert!(compiled.guard.roots.contains(&"/tmp".to_owned()));
}

#[test]
fn symlinked_allow_write_is_dropped() {
    let p = policy(&[], &[], &["./build"], &[]);
    let fs = fake().link("/home/u/ws/build", "/home/u");
    let m = plan(&p, &fs);
    assert!(step(&m, "/home/u").is_none());
    assert!(
        m.warnings.iter().any(|w| w.contains("symlink")),
        "{:?}",
        m.warnings
    );
}

#[test]
fn host_socket_dirs_are_masked_and_tmp_is_private() {
    let m = plan(&policy(&[], &[], &[], &[]), &fake());
    assert!(matches!(step(&m, "/run"), Some(MountStep::MaskDir { .. })));
    assert!(
        matches!(step(&m, "/tmp"), Some(MountStep::Tmpfs { size_bytes, .. }) if *size_bytes == 1 << 30)
    );
}

#[test]
fn landlock_grants_read_on_the_complement_of_a_denied_dir() {
    let p = policy(&["~/.ssh"], &[], &["."], &[]);
    let (_, ll) = match compile_filesystem(&p, &facts(), &fake()) {
        Ok(plans) => plans,
        Err(e) => panic!("{e}"),
    };
    let rule = |path: &str| {
        ll.fs_rules
            .iter()
            .find(|r| r.path == path)
            .map(|r| r.access.clone())
    };
    assert!(rule("/home/u/.ssh").is_none());
    assert_eq!(rule("/home/u").map(|a| a.len()), Some(1));
    assert!(rule("/home/u/notes.txt").is_some());
    assert!(rule("/usr").is_some());
    assert!(rule("/home/u/ws").is_some_and(|a| a.contains(&landlock::FsAccess::MakeReg)));
    assert!(Path::new("/").is_absolute());
}

/// The guard's verdict on `op` at `path` for a policy compiled on `fs`.
fn guard_allows(p: &Policy, fs: &MemFs, path: &str, op: guard::Op<'_>) -> bool {
    let compiled = compile(p, &facts(), fs).unwrap();
    let mut g = guard::Guard::new(compiled.guard);
    let path = Path::new(path);
    let existing = guard::GuardFs::lstat(fs, path);
    let req = guard::Request { path, op, existing };
    g.decide(fs, &req) == guard::Verdict::Allow
}

#[test]
fn submodule_git_dirs_inside_dot_git_are_protected() {
    let p = policy(&[], &[], &["."], &[]);
    let fs = fake().files(&[
        "/home/u/ws/.git/modules/lib/HEAD",
        "/home/u/ws/.git/modules/lib/config",
    ]);
    let write = guard::Op::Write;
    let hook = guard::Op::Create(FileKind::File);
    assert!(!guard_allows(
        &p,
        &fs,
        "/home/u/ws/.git/modules/lib/config",
        write
    ));
    assert!(!guard_allows(
        &p,
        &fs,
        "/home/u/ws/.git/modules/lib/hooks/post-checkout",
        hook
    ));
    assert!(guard_allows(
        &p,
        &fs,
        "/home/u/ws/.git/modules/lib/index",
        write
    ));
}

#[test]
fn allowing_a_protected_name_itself_does_not_lift_the_mandatory_deny() {
    let p = policy(&[], &[], &["~/.bashrc", "./.git"], &[]);
    let fs = fake();
    assert!(!guard_allows(&p, &fs, "/home/u/.bashrc", guard::Op::Write));
    let hook = guard::Op::Create(FileKind::File);
    assert!(!guard_allows(
        &p,
        &fs,
        "/home/u/ws/.git/hooks/post-merge",
        hook
    ));
    assert!(guard_allows(&p, &fs, "/home/u/ws/.git/index", hook));
}

#[test]
fn deny_root_keeps_top_level_links_and_allow_read_resolves_links_above_the_last_component() {
    let p = policy(&["/"], &["/usr", "/lib/x", "/home/u/ws/keylink"], &[], &[]);
    let fs = fake()
        .dirs(&["/usr/lib/x"])
        .link("/lib", "usr/lib")
        .link("/home/u/ws/keylink", "/home/u/.ssh/id_ed25519");
    let m = plan(&p, &fs);
    assert!(step(&m, "/lib").is_none(), "{m:#?}");
    assert!(
        !matches!(step(&m, "/usr"), Some(MountStep::MaskDir { .. })),
        "{m:#?}"
    );
    assert!(
        matches!(step(&m, "/home"), Some(MountStep::MaskDir { .. })),
        "{m:#?}"
    );
    assert!(step(&m, "/home/u/.ssh/id_ed25519").is_none(), "{m:#?}");
    assert!(
        m.warnings.iter().any(|w| w.contains("keylink")),
        "{:?}",
        m.warnings
    );
}

/// A host where `/home` cannot be listed (mode 0711) but can be traversed.
struct UnlistableHome(MemFs);

impl FsView for UnlistableHome {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        self.0.kind(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(String, FileKind)>> {
        if path == Path::new("/home") {
            return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        }
        self.0.read_dir(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<std::path::PathBuf> {
        self.0.read_link(path)
    }
}

#[test]
fn landlock_complement_descends_through_an_unlistable_directory() {
    let p = policy(&["~/.ssh"], &[], &[], &[]);
    let fs = UnlistableHome(fake());
    let (_, ll) = compile_filesystem(&p, &facts(), &fs).unwrap_or_else(|e| panic!("{e}"));
    let has = |path: &str| ll.fs_rules.iter().any(|r| r.path == path);
    assert!(has("/home/u/notes.txt"), "{ll:#?}");
    assert!(!has("/home/u/.ssh"));
}

#[test]
fn a_denied_file_with_other_hard_links_is_reported() {
    let p = policy(&["~/.ssh"], &[], &[], &[]);
    let fs = fake().link_counts(&[("/home/u/.ssh/id_ed25519", 2)]);
    let m = plan(&p, &fs);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.contains("/home/u/.ssh/id_ed25519") && w.contains("hard links")),
        "{:?}",
        m.warnings
    );
    assert!(plan(&p, &fake()).warnings.is_empty());
}

#[test]
fn a_denied_path_inside_a_writable_root_is_reported() {
    let fs = fake().files(&["/home/u/ws/.env"]);
    let warned = |p: &Policy| {
        let m = plan(p, &fs);
        (m.warnings.iter())
            .any(|w| w.contains("/home/u/ws/.env is inside the writable root /home/u/ws"))
    };
    assert!(warned(&policy(&["~/ws/.env"], &[], &["~/ws"], &[])));
    assert!(!warned(&policy(&["~/ws/.env"], &[], &["~/ws/src"], &[])));
    assert!(!warned(&policy(&["~/ws/.env"], &[], &[], &[])));
}

#[test]
fn bracket_names_that_exist_are_read_literally() {
    let fs = fake()
        .dirs(&["/home/u/[private]", "/home/u/p"])
        .files(&["/home/u/ws/[locked]", "/home/u/ws/l"]);
    let p = policy(&["~/[private]"], &[], &["."], &["./[locked]"]);
    let compiled = compile(&p, &facts(), &fs).unwrap();
    let m = &compiled.mounts;
    assert!(
        matches!(
            step(m, "/home/u/[private]"),
            Some(MountStep::MaskDir { .. })
        ),
        "{m:#?}"
    );
    assert!(
        matches!(
            step(m, "/home/u/ws/[locked]"),
            Some(MountStep::Bind {
                writable: false,
                ..
            })
        ),
        "{m:#?}"
    );
    assert!(
        compiled
            .guard
            .deny_write
            .contains(&"/home/u/ws/[locked]".to_owned())
    );
    // The glob meaning stays for deny lists: `[private]` also matches `p`.
    assert!(
        matches!(step(m, "/home/u/p"), Some(MountStep::MaskDir { .. })),
        "{m:#?}"
    );
    // For an allow list the literal path alone.
    let a = policy(&["~"], &["~/[private]"], &[], &[]);
    let m = plan(&a, &fs);
    assert!(
        matches!(step(&m, "/home/u/[private]"), Some(MountStep::Bind { .. })),
        "{m:#?}"
    );
    assert!(step(&m, "/home/u/p").is_none(), "{m:#?}");
}
