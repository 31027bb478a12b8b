//! oajail warns, before running and in `policy check`, when an `allowRead`
//! entry re-opens all of a denied region from where it runs (issue 12: the
//! old openagenda-mcp policy `denyRead ["~"]` + `allowRead ["."]` started
//! from `~` denied nothing), and only then: an allow of an ancestor of a
//! deny leaves the deeper deny in force, so it does not warn.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use support::*;

const DOT_UNDER_HOME: &str = r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
    "filesystem":{"denyRead":["~"],"allowRead":["."],"allowWrite":[],"denyWrite":[]}}"#;

fn write_settings(tag: &str) -> String {
    let path = scratch_home(tag).join("settings.json");
    std::fs::write(&path, DOT_UNDER_HOME).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn policy_check_reports_dot_reopening_home_from_home() {
    let s = write_settings("reopen-check");
    // `oajail()` runs with cwd = HOME.
    let o = oajail("reopen-check", &["-s", &s, "policy", "check"])
        .output()
        .unwrap();
    let text = out(&o);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        text.contains(r#"warning: filesystem.allowRead: "." resolves to"#)
            && text.contains(r#"re-opens all of denyRead "~""#),
        "{text}"
    );
}

#[test]
fn a_run_from_home_prints_the_warning_and_a_subdirectory_does_not() {
    let s = write_settings("reopen-run");
    let o = oajail("reopen-run", &["-s", &s, "-c", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("oajail: warning: filesystem.allowRead"),
        "{}",
        err(&o)
    );
    let sub = scratch_home("reopen-run").join("project");
    std::fs::create_dir_all(&sub).unwrap();
    let o = oajail("reopen-run", &["-s", &s, "policy", "check"])
        .current_dir(&sub)
        .output()
        .unwrap();
    assert!(!out(&o).contains("re-opens"), "{}", out(&o));
}

#[test]
fn an_allow_of_an_ancestor_does_not_warn_and_the_deeper_deny_holds() {
    let home = scratch_home("reopen-ancestor");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_test"), "SECRET-KEY\n").unwrap();
    std::fs::write(home.join("notes.txt"), "plain\n").unwrap();
    let s = home.join("settings.json");
    std::fs::write(
        &s,
        r#"{"network":{"allowedDomains":[],"deniedDomains":[]},
        "filesystem":{"denyRead":["~/.ssh"],"allowRead":["."],"allowWrite":[],"denyWrite":[]}}"#,
    )
    .unwrap();
    let s = s.to_str().unwrap();
    let o = oajail("reopen-ancestor", &["-s", s, "policy", "check"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert!(!out(&o).contains("re-opens"), "{}", out(&o));
    let script = "cat notes.txt; cat .ssh/id_test 2>/dev/null || echo denied";
    let o = oajail("reopen-ancestor", &["-s", s, "-c", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert!(!err(&o).contains("re-opens"), "{}", err(&o));
    assert_eq!(out(&o), "plain\ndenied\n", "{}", err(&o));
}
