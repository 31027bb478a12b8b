//! What a refusal line says, on a fake host: the rule and the entry that
//! would allow it, or why none can.

use super::*;
use crate::compile::MemFs;

fn facts() -> HostFacts {
    HostFacts {
        settings_path: Some("/home/u/.srt-settings.json".into()),
        ..HostFacts::with_dirs("/home/u", "/home/u/ws")
    }
}

fn fs() -> MemFs {
    MemFs::new()
        .dirs(&[
            "/usr/bin",
            "/etc",
            "/tmp",
            "/run/user/1000",
            "/var/tmp",
            "/home/u/ws/src",
            "/home/u/.npm",
            "/home/u/.cache/git",
            "/home/u/.config/gcloud",
            "/home/u/.cargo/registry",
            "/home/u/private/docs",
        ])
        .files(&[
            "/usr/bin/oajail",
            "/home/u/.srt-settings.json",
            "/home/u/.ssh/id_ed25519",
            "/home/u/.bashrc",
            "/home/u/private/docs/a.txt",
            "/home/u/private/key.pem",
        ])
}

/// A settings file with `filesystem` as given and no network.
fn policy(filesystem: &str) -> Policy {
    let json = format!(
        r#"{{"network":{{"allowedDomains":[],"deniedDomains":[]}},"filesystem":{filesystem}}}"#
    );
    Policy::from_settings_json(&json, "test").unwrap().policy
}

fn explainer(json: &str) -> Explainer {
    Explainer::new(&policy(json), &facts(), &fs()).unwrap()
}

fn default() -> Explainer {
    Explainer::new(&Policy::builtin_default(), &facts(), &fs()).unwrap()
}

fn add(field: &'static str, value: &str, exists: bool) -> Fix {
    add_as(field, value, exists, true)
}

fn add_as(field: &'static str, value: &str, exists: bool, dir: bool) -> Fix {
    Fix::Add {
        field,
        value: value.into(),
        exists,
        dir,
    }
}

fn none_why(e: &Explanation) -> &str {
    match &e.fix {
        Fix::None { why } => why,
        other => panic!("expected no fix, got {other:?}"),
    }
}

#[test]
fn a_write_outside_the_writable_roots_proposes_the_tools_own_directory() {
    let e = default();
    let fs = fs();
    let w = |p: &str, dir| e.write(&fs, Path::new(p), dir);
    let x = w("/home/u/.npm/_cacache/index", false);
    assert!(x.by_policy);
    assert_eq!(x.reason, "outside_allow_write");
    assert_eq!(x.fix, add("filesystem.allowWrite", "~/.npm", true));
    assert_eq!(x.fix.text(), "add \"~/.npm\" to filesystem.allowWrite");
    // Under a container: the tool's directory, made if missing.
    let x = w("/home/u/.cache/pip/http/a/b", false);
    assert_eq!(x.fix, add("filesystem.allowWrite", "~/.cache/pip", false));
    assert_eq!(
        x.fix.text(),
        "create ~/.cache/pip and add \"~/.cache/pip\" to filesystem.allowWrite"
    );
    assert_eq!(
        w("/home/u/.local/share/mytool/db", false).fix,
        add("filesystem.allowWrite", "~/.local/share/mytool", false)
    );
    // A new dot directory in the home: itself.
    assert_eq!(
        w("/home/u/.newtool", true).fix,
        add("filesystem.allowWrite", "~/.newtool", false)
    );
    // Outside the home: the directory written into, or the path itself in
    // a system directory.
    assert_eq!(
        w("/var/tmp/build/out.o", false).fix,
        add("filesystem.allowWrite", "/var/tmp/build", false)
    );
    assert_eq!(
        w("/var/tmp/cache", true).fix,
        add("filesystem.allowWrite", "/var/tmp/cache", false)
    );
}

#[test]
fn no_write_proposal_widens_to_a_protection() {
    let e = default();
    let fs = fs();
    let w = |p: &str, dir| e.write(&fs, Path::new(p), dir);
    // ~/.cache holds a secret store: creating it gets no entry.
    let why = none_why(&w("/home/u/.cache", true)).to_owned();
    assert!(why.contains("~/.cache/git/credential"), "{why}");
    // Inside a mandatory protection.
    let why = none_why(&w("/home/u/.cargo/registry/x", false)).to_owned();
    assert!(why.contains("mandatory protection"), "{why}");
    // A file straight in the home: itself, never the home.
    let x = w("/home/u/notes.md", false);
    assert_eq!(
        x.fix,
        add_as("filesystem.allowWrite", "~/notes.md", false, false)
    );
    // The home itself, a top-level directory.
    assert!(none_why(&w("/home/u", true)).contains("whole home"));
    assert!(none_why(&w("/srv", true)).contains("system directory"));
    assert!(none_why(&w("/dev/foo", false)).contains("jail's own"));
    // A start-up file anywhere.
    let why = none_why(&w("/home/u/.bashrc", false)).to_owned();
    assert!(why.contains(".bashrc"), "{why}");
}

#[test]
fn a_write_to_a_hidden_path_names_the_deny() {
    let e = default();
    let x = e.write(&fs(), Path::new("/home/u/.ssh/known_hosts"), false);
    assert_eq!(x.reason, "deny_read");
    assert_eq!(x.rule, "filesystem.denyRead \"~/.ssh\"");
    assert!(none_why(&x).contains("hides"));
}

#[test]
fn writes_the_policy_allows_are_not_its_refusals() {
    let e = explainer(r#"{"denyRead":[],"allowWrite":["."],"denyWrite":[]}"#);
    let x = e.write(&fs(), Path::new("/home/u/ws/src/readonly.txt"), false);
    assert!(!x.by_policy);
}

#[test]
fn guard_refusals_name_the_deny_write_entry_or_the_protection() {
    let e = explainer(r#"{"denyRead":[],"allowWrite":["."],"denyWrite":["./src"]}"#);
    let x = e.guard(&fs(), Path::new("/home/u/ws/src/a"), "denyWrite", false);
    assert_eq!(x.reason, "deny_write");
    assert_eq!(x.rule, "filesystem.denyWrite \"src\"");
    let x = e.guard(
        &fs(),
        Path::new("/home/u/.srt-settings.json"),
        "denyWrite",
        false,
    );
    assert!(none_why(&x).contains("settings file"));
    let x = e.guard(
        &fs(),
        Path::new("/home/u/ws/.bashrc"),
        "bash start-up file",
        false,
    );
    assert_eq!(x.reason, "mandatory");
    assert_eq!(x.rule, "a mandatory protection: bash start-up file");
    assert!(none_why(&x).contains("whatever the settings say"));
    // The default protection of the home's configuration yields to an
    // entry naming the tool's own directory: that is the proposal.
    let rule = crate::guard::DEFAULT_RULE;
    let x = e.guard(&fs(), Path::new("/home/u/.npm/_cacache/index"), rule, false);
    assert_eq!(x.reason, "home_configuration");
    assert_eq!(x.fix, add("filesystem.allowWrite", "~/.npm", true));
}

#[test]
fn reads_of_secret_stores_get_no_proposal() {
    let e = default();
    let x = e.read(&fs(), Path::new("/home/u/.ssh/id_ed25519"));
    assert!(x.by_policy);
    assert_eq!(x.rule, "filesystem.denyRead \"~/.ssh\"");
    let why = none_why(&x);
    assert!(
        why.contains("secret store") && why.contains("never"),
        "{why}"
    );
    let x = e.read(&fs(), Path::new("/run/user/1000/bus"));
    assert_eq!(x.reason, "host_mask");
    assert!(e.read(&fs(), Path::new("/etc/hostname")).fix != add("", "", true));
    assert!(!e.read(&fs(), Path::new("/etc/hostname")).by_policy);
}

#[test]
fn a_read_carved_out_of_a_broad_deny_is_proposed_by_name() {
    let e = explainer(r#"{"denyRead":["~/private"],"allowWrite":[],"denyWrite":[]}"#);
    let x = e.read(&fs(), Path::new("/home/u/private/docs/a.txt"));
    assert_eq!(x.rule, "filesystem.denyRead \"~/private\"");
    assert_eq!(
        x.fix,
        add_as("filesystem.allowRead", "~/private/docs/a.txt", true, false)
    );
    // The denied path itself: the user wrote that deny.
    let x = e.read(&fs(), Path::new("/home/u/private"));
    assert!(none_why(&x).contains("denied by name"));
}
