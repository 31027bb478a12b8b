//! Compiled filesystem plans (mounts and Landlock) for every example policy,
//! on a fixed fake host, so the snapshots do not depend on the machine.

// Helpers outside #[test] functions panic on purpose: a broken fixture is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::Policy;
use oajail_policy::compile::mounts::MountStep;
use oajail_policy::compile::{FsView, HostFacts, MemFs, compile, compile_filesystem};
use std::path::PathBuf;

fn facts() -> HostFacts {
    HostFacts {
        exe: "/usr/local/bin/oajail".into(),
        settings_path: Some("/home/dev/.srt-settings.json".into()),
        ssh_auth_sock: Some("/tmp/ssh-XXXX/agent.1".into()),
        mem_total_bytes: Some(2 << 30),
        ..HostFacts::with_dirs("/home/dev", "/home/dev/project")
    }
}

/// A small developer machine: merged /usr, systemd-resolved, a project with
/// a git repository, a nested repository at depth 4 and editor settings.
fn host() -> MemFs {
    MemFs::new()
        .dirs(&[
            "/usr/bin",
            "/usr/lib",
            "/etc",
            "/proc",
            "/dev",
            "/sys",
            "/tmp/ssh-XXXX",
            "/var/tmp",
            "/opt",
        ])
        .dirs(&["/run/user/1000", "/run/dbus", "/run/systemd/resolve"])
        .link("/bin", "usr/bin")
        .link("/lib", "usr/lib")
        .link("/var/run", "../run")
        .link(
            "/etc/resolv.conf",
            "../run/systemd/resolve/stub-resolv.conf",
        )
        .files(&[
            "/run/systemd/resolve/stub-resolv.conf",
            "/usr/local/bin/oajail",
            "/etc/passwd",
        ])
        .others(&[
            "/run/dbus/system_bus_socket",
            "/run/user/1000/bus",
            "/tmp/ssh-XXXX/agent.1",
        ])
        .files(&[
            "/home/dev/.srt-settings.json",
            "/home/dev/.bashrc",
            "/home/dev/.gitconfig",
        ])
        .files(&[
            "/home/dev/.ssh/id_ed25519",
            "/home/dev/.ssh/known_hosts",
            "/home/dev/.aws/credentials",
        ])
        .files(&[
            "/home/dev/.cache/pip/x",
            "/home/dev/.cargo/registry/index/y",
            "/home/dev/.netrc",
        ])
        .files(&[
            "/home/dev/project/.git/HEAD",
            "/home/dev/project/.git/config",
        ])
        .files(&[
            "/home/dev/project/.git/hooks/pre-commit.sample",
            "/home/dev/project/src/main.rs",
        ])
        .files(&[
            "/home/dev/project/.env",
            "/home/dev/project/.vscode/settings.json",
        ])
        .files(&[
            "/home/dev/project/vendor/a/b/lib/.git/HEAD",
            "/home/dev/project/vendor/a/b/lib/.git/config",
        ])
        .files(&[
            "/home/dev/project/secrets/prod.pem",
            "/home/dev/project/secrets/README",
        ])
        .link("/home/dev/project/docs-link", "/home/dev/.ssh")
        .files(&["/home/dev/other/.env"])
}

fn examples() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/policies");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((stem, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out.sort();
    assert!(!out.is_empty());
    out
}

fn load(text: &str) -> Policy {
    Policy::from_settings_json(text, "test")
        .unwrap_or_else(|e| panic!("{e}"))
        .policy
}

#[test]
fn snapshots_of_every_example_plan() {
    for (stem, text) in examples() {
        let (mounts, landlock) = compile_filesystem(&load(&text), &facts(), &host())
            .unwrap_or_else(|e| panic!("{stem}: {e}"));
        insta::assert_json_snapshot!(format!("{stem}.mounts"), mounts);
        insta::assert_json_snapshot!(format!("{stem}.landlock"), landlock);
        let compiled = compile(&load(&text), &facts(), &host()).unwrap();
        insta::assert_json_snapshot!(format!("{stem}.guard"), compiled.guard);
    }
}

#[test]
fn plans_are_ordered_shallow_to_deep_after_the_base_steps() {
    for (stem, text) in examples() {
        let (mounts, _) = compile_filesystem(&load(&text), &facts(), &host()).unwrap();
        let depths: Vec<usize> = mounts.steps[3..]
            .iter()
            .map(|s| s.path().matches('/').count())
            .collect();
        assert!(
            depths.windows(2).all(|w| w[0] <= w[1]),
            "{stem}: {depths:?}"
        );
        assert!(matches!(mounts.steps[0], MountStep::RootBind), "{stem}");
    }
}

/// An [`FsView`] that records every directory listed.
struct Listing<'a> {
    fs: &'a MemFs,
    listed: std::cell::RefCell<Vec<std::path::PathBuf>>,
}

impl FsView for Listing<'_> {
    fn kind(&self, path: &std::path::Path) -> Option<oajail_policy::compile::FileKind> {
        self.fs.kind(path)
    }
    fn read_dir(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Vec<(String, oajail_policy::compile::FileKind)>> {
        self.listed.borrow_mut().push(path.to_path_buf());
        self.fs.read_dir(path)
    }
    fn read_link(&self, path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        self.fs.read_link(path)
    }
}

#[test]
fn a_large_writable_tree_is_never_listed() {
    let mut fs = MemFs::new().dirs(&["/home/dev/project", "/tmp"]);
    let names: Vec<String> = (0..300_000)
        .map(|i| format!("/home/dev/project/d{}/.git/hooks/f{i}", i % 500))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    fs = fs.files(&refs);
    let policy = load(
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
        "filesystem":{"denyRead":[],"allowWrite":["."],"denyWrite":[]}}"#,
    );
    let listing = Listing {
        fs: &fs,
        listed: Default::default(),
    };
    let compiled = compile(&policy, &facts(), &listing).unwrap();
    let listed = listing.listed.borrow();
    assert!(
        !listed.iter().any(|p| p.starts_with("/home/dev/project")),
        "{listed:?}"
    );
    assert_eq!(compiled.guard.roots, vec!["/home/dev/project".to_owned()]);
}
