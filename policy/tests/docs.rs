//! docs/policy-format.md lists the built-in default's denied paths and the environment rules exactly.

// Helpers outside #[test] functions panic on purpose: a missing doc is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::DEFAULT_DENY_READ;

fn policy_format() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/policy-format.md");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn default_deny_list_matches_the_docs() {
    let docs = policy_format();
    let section = docs
        .split("## 9.")
        .nth(1)
        .unwrap()
        .split("## 10.")
        .next()
        .unwrap();
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), DEFAULT_DENY_READ.len(), "rows in section 9");
    for (path, reason) in DEFAULT_DENY_READ {
        let row = format!("| `{path}` | {reason} |");
        assert!(rows.contains(&row.as_str()), "missing row: {row}");
    }
}

#[test]
fn environment_rules_match_the_docs() {
    use oajail_policy::env::{SECRET_PREFIXES, SECRET_SEGMENTS, SECRET_SUBSTRINGS, SOCKET_NAMES};
    let docs = policy_format();
    let section = docs.split("## 10.").nth(1).unwrap();
    let lists = [
        SECRET_SUBSTRINGS,
        SECRET_SEGMENTS,
        SECRET_PREFIXES,
        SOCKET_NAMES,
    ];
    for name in lists.iter().flat_map(|l| l.iter()) {
        assert!(
            section.contains(&format!("`{name}")),
            "{name} is not in section 10"
        );
    }
}
