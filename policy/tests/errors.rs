//! Bad settings and the exact one-line error each one gives.

// Helpers outside #[test] functions panic on purpose: a broken fixture is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::{Policy, PolicyError};
use serde_json::{Value, json};

/// The smallest valid srt settings, to break one field at a time.
fn minimal() -> Value {
    json!({
        "network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
    })
}

fn with(pointer: &str, value: Value) -> String {
    let mut doc = minimal();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        &mut doc
    } else {
        doc.pointer_mut(parent).unwrap()
    };
    target
        .as_object_mut()
        .unwrap()
        .insert(key.to_owned(), value);
    doc.to_string()
}

fn without(pointer: &str) -> String {
    let mut doc = minimal();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        &mut doc
    } else {
        doc.pointer_mut(parent).unwrap()
    };
    target.as_object_mut().unwrap().remove(key);
    doc.to_string()
}

fn error(text: &str) -> String {
    match Policy::from_settings_json(text, "s.json") {
        Ok(loaded) => panic!("accepted: {text}\n{:?}", loaded.policy),
        Err(err) => err.to_string(),
    }
}

#[test]
fn table_of_bad_inputs() {
    let cases: Vec<(String, &str)> = vec![
        ("".into(), "s.json: (root): empty file"),
        ("  \n".into(), "s.json: (root): empty file"),
        (
            "{".into(),
            "s.json: line 1 column 1: invalid json: EOF while parsing an object",
        ),
        (
            "{\"network\": }".into(),
            "s.json: line 1 column 13: invalid json: expected value",
        ),
        (
            "{} x".into(),
            "s.json: line 1 column 4: invalid json: trailing characters",
        ),
        (
            r#"{"a":1,"a":1}"#.into(),
            "s.json: line 1 column 10: invalid json: duplicate key \"a\"",
        ),
        (
            "[]".into(),
            "s.json: (root): expected an object, found array",
        ),
        (
            "null".into(),
            "s.json: (root): expected an object, found null",
        ),
        ("{}".into(), "s.json: network: required key is missing"),
        (
            without("/network/deniedDomains"),
            "s.json: network.deniedDomains: required key is missing",
        ),
        (
            without("/network/allowedDomains"),
            "s.json: network.allowedDomains: required key is missing",
        ),
        (
            without("/filesystem"),
            "s.json: filesystem: required key is missing",
        ),
        (
            without("/filesystem/denyWrite"),
            "s.json: filesystem.denyWrite: required key is missing",
        ),
        (
            without("/filesystem/allowWrite"),
            "s.json: filesystem.allowWrite: required key is missing",
        ),
        (
            with("/network", json!([])),
            "s.json: network: expected an object, found array",
        ),
        (
            with("/network/allowedDomains", json!("x.com")),
            "s.json: network.allowedDomains: expected an array, found string",
        ),
        (
            with("/network/allowedDomains", json!(["a.com", 1])),
            "s.json: network.allowedDomains[1]: expected a string, found number",
        ),
        (
            with("/filesystem/denyRead", json!(["/a", ""])),
            "s.json: filesystem.denyRead[1]: empty path",
        ),
        (
            with("/filesystem/denyRead", json!([{"path": ""}])),
            "s.json: filesystem.denyRead[0].path: empty path",
        ),
        (
            with("/filesystem/denyRead", json!([{"path": "/x"}])),
            "s.json: filesystem.denyRead[0].literal: required key is missing",
        ),
        (
            with(
                "/filesystem/denyRead",
                json!([{"path": "/x", "literal": false}]),
            ),
            "s.json: filesystem.denyRead[0].literal: must be true (write the path as a plain string otherwise)",
        ),
        (
            with(
                "/filesystem/denyRead",
                json!([{"path": "/x", "literal": true, "x": 1}]),
            ),
            "s.json: filesystem.denyRead[0].x: unknown key",
        ),
        (
            with("/filesystem/denyRead", json!([true])),
            "s.json: filesystem.denyRead[0]: expected a path, or {\"path\": \"<path>\", \"literal\": true}, found boolean",
        ),
        (
            with("/filesystem/allowWrite", json!(["~bob/x"])),
            "s.json: filesystem.allowWrite[0]: \"~bob/x\" names another user's home, which is not supported; write the path out",
        ),
        (
            with("/filesystem/denyWrite", json!(["/x/*/"])),
            "s.json: filesystem.denyWrite[0]: glob \"/x/*/\" ends in \"/\", so it can match no path; remove the \"/\" or end it with \"**\"",
        ),
        (
            with("/filesystem/denyRead", json!(["/a\u{0}b"])),
            "s.json: filesystem.denyRead[0]: path contains a nul character",
        ),
        (
            with("/filesystem/allowGitConfig", json!("yes")),
            "s.json: filesystem.allowGitConfig: expected a boolean, found string",
        ),
        (
            with("/mandatoryDenySearchDepth", json!(0)),
            "s.json: mandatoryDenySearchDepth: must be an integer from 1 to 10, found 0",
        ),
        (
            with("/mandatoryDenySearchDepth", json!(11)),
            "s.json: mandatoryDenySearchDepth: must be an integer from 1 to 10, found 11",
        ),
        (
            with("/network/httpProxyPort", json!(0)),
            "s.json: network.httpProxyPort: must be an integer from 1 to 65535, found 0",
        ),
        (
            with("/network/socksProxyPort", json!(65536)),
            "s.json: network.socksProxyPort: must be an integer from 1 to 65535, found 65536",
        ),
        (
            with("/network/httpProxyPort", json!(80.5)),
            "s.json: network.httpProxyPort: must be an integer from 1 to 65535, found 80.5",
        ),
        (
            with("/network/httpProxyPort", json!("80")),
            "s.json: network.httpProxyPort: expected an integer, found string",
        ),
        (
            with("/network/deniedResolvedAddresses", json!(["10.0.0.0/33"])),
            "s.json: network.deniedResolvedAddresses[0]: \"10.0.0.0/33\" is not an ip address or cidr range",
        ),
        (
            with("/network/filterRequest", json!("x => x")),
            "s.json: network.filterRequest: filterRequest must be a function, which json cannot hold",
        ),
        (
            with(
                "/network/mitmProxy",
                json!({"socketPath": "/s", "domains": []}),
            ),
            "s.json: network.mitmProxy.domains: must not be empty",
        ),
        (
            with("/credentials", json!({"files": [], "extra": 1})),
            "s.json: credentials.extra: unknown key",
        ),
        (
            with(
                "/credentials",
                json!({"envVars": [{"name": "A-B", "mode": "deny"}]}),
            ),
            "s.json: credentials.envVars[0].name: \"A-B\" is not an environment variable name (letters, digits and _, not starting with a digit)",
        ),
        (
            with(
                "/credentials",
                json!({"files": [{"path": "~/.aws/", "mode": "mask"}]}),
            ),
            "s.json: credentials.files[0].path: credential mode \"mask\" applies to a single file, not a directory; use mode \"deny\" for \"~/.aws/\"",
        ),
        (
            with(
                "/credentials",
                json!({"files": [{"path": "/k", "mode": "hide"}]}),
            ),
            "s.json: credentials.files[0].mode: must be one of \"deny\", \"mask\", found \"hide\"",
        ),
        (
            with("/git", json!({"safeDirectories": [""]})),
            "s.json: git.safeDirectories[0]: empty entry (git would read it as a reset of the list)",
        ),
        (
            with("/bwrapPath", json!("bin/bwrap")),
            "s.json: bwrapPath: must be an absolute path",
        ),
        (
            with("/oajail", json!({"bogus": 1})),
            "s.json: oajail.bogus: unknown key",
        ),
        (
            with("/oajail", json!([])),
            "s.json: oajail: expected an object, found array",
        ),
        (
            with("/oajail", json!({"limits": {"openFiles": 0}})),
            "s.json: oajail.limits.openFiles: must be an integer from 1 to 9007199254740991, found 0",
        ),
        (
            with("/oajail", json!({"limits": {"coreBytes": -1}})),
            "s.json: oajail.limits.coreBytes: must be an integer from 0 to 9007199254740991, found -1",
        ),
        (
            with("/oajail", json!({"limits": {"wallSeconds": "1h"}})),
            "s.json: oajail.limits.wallSeconds: expected an integer or null, found string",
        ),
        (
            with("/oajail", json!({"envKeep": ["*"]})),
            "s.json: oajail.envKeep[0]: \"*\" is not an environment variable name (optionally ending in *)",
        ),
        (
            with("/oajail", json!({"envKeep": ["X"], "envDeny": ["X"]})),
            "s.json: oajail.envDeny[0]: \"X\" is also in oajail.envKeep",
        ),
        (
            with("/oajail", json!({"allowPrivateDestinations": ["intranet"]})),
            "s.json: oajail.allowPrivateDestinations[0]: \"intranet\" is not an ip address or cidr range",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(error(&input), expected, "input: {input}");
    }
}

#[test]
fn a_literal_entry_may_end_in_a_slash_after_glob_characters() {
    let text = with(
        "/filesystem/denyRead",
        json!([{"path": "/x/*/", "literal": true}]),
    );
    let policy = Policy::from_settings_json(&text, "s.json").unwrap().policy;
    assert_eq!(policy.filesystem.deny_read[0].path, "/x/*");
    assert!(policy.filesystem.deny_read[0].literal);
}

#[test]
fn domain_errors_are_prefixed_with_origin_and_path() {
    let text = with(
        "/network/allowedDomains",
        json!(["a.example.com", "b.example.com", "*.com"]),
    );
    let err = error(&text);
    assert!(
        err.starts_with("s.json: network.allowedDomains[2]: \"*.com\""),
        "{err}"
    );
    let text = with("/network/allowedDomains", json!(["*"]));
    assert!(
        error(&text).starts_with("s.json: network.allowedDomains[0]: "),
        "{}",
        error(&text)
    );
    let text = with("/network/deniedDomains", json!(["https://x.com/"]));
    assert!(error(&text).starts_with("s.json: network.deniedDomains[0]: "));
}

#[test]
fn conflicting_reasons_for_one_entry_are_refused() {
    let mut doc = minimal();
    doc["network"]["deniedDomains"] = json!(["evil.example.com"]);
    doc["network"]["deniedDomainReasons"] =
        json!({"EVIL.example.com": "a", "evil.example.com": "b"});
    assert_eq!(
        error(&doc.to_string()),
        "s.json: network.deniedDomainReasons[\"evil.example.com\"]: conflicts with another reason for \"evil.example.com\""
    );
}

#[test]
fn every_error_is_one_line_and_has_no_trailing_period() {
    let texts = [
        "",
        "{",
        "[]",
        "{}",
        &with("/filesystem/denyRead", json!(["a\nb\u{0}"])),
    ];
    for text in texts {
        let err = Policy::from_settings_json(text, "s.json").unwrap_err();
        let line = err.to_string();
        assert!(!line.contains('\n') && !line.ends_with('.'), "{line:?}");
    }
}

#[test]
fn errors_expose_their_parts() {
    let err = Policy::from_settings_json("{}", "s.json").unwrap_err();
    let PolicyError::Invalid {
        origin,
        path,
        problem,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (origin.as_str(), path.to_string().as_str(), problem.as_str()),
        ("s.json", "network", "required key is missing")
    );
}

#[test]
fn canonical_input_is_strict() {
    let canonical: Value =
        serde_json::from_str(&Policy::builtin_default().canonical_json()).unwrap();
    let mut extra = canonical.clone();
    extra["network"]["bogus"] = json!(1);
    let err = error(&extra.to_string());
    assert!(err.starts_with("s.json: network"), "{err}");
    assert!(err.contains("unknown field `bogus`"), "{err}");
    let mut missing = canonical.clone();
    missing["filesystem"]
        .as_object_mut()
        .unwrap()
        .remove("allowGitConfig");
    assert!(error(&missing.to_string()).contains("missing field `allowGitConfig`"));
    let mut null_dropped = canonical.clone();
    null_dropped["oajail"]["limits"]
        .as_object_mut()
        .unwrap()
        .remove("wallSeconds");
    assert_eq!(
        error(&null_dropped.to_string()),
        "s.json: oajail.limits.wallSeconds: required key is missing"
    );
    let mut bad_path = canonical.clone();
    bad_path["filesystem"]["allowWrite"] = json!([{"path": "", "literal": false}]);
    assert_eq!(
        error(&bad_path.to_string()),
        "s.json: filesystem.allowWrite[0].path: empty path"
    );
    let mut bad_port = canonical;
    bad_port["network"]["httpProxyPort"] = json!(0);
    assert_eq!(
        error(&bad_port.to_string()),
        "s.json: network.httpProxyPort: must be an integer from 1 to 65535, found 0"
    );
}

#[test]
fn warnings_name_the_key_once() {
    let text = with("/network/allowMachLookup", json!(["com.x.*"]));
    let loaded = Policy::from_settings_json(&text, "s.json").unwrap();
    assert_eq!(
        loaded.warnings,
        ["network.allowMachLookup: accepted but not implemented on linux (ignored)"]
    );
    let text = with("/fooBar", json!({"nested": {"deep": 1}}));
    let loaded = Policy::from_settings_json(&text, "s.json").unwrap();
    assert_eq!(
        loaded.warnings,
        ["fooBar: unknown key (ignored, as srt does)"]
    );
    let mut doc = minimal();
    doc["network"]["deniedDomains"] = json!(["a.example.com"]);
    doc["network"]["deniedDomainReasons"] = json!({"b.example.com": "why"});
    let loaded = Policy::from_settings_json(&doc.to_string(), "s.json").unwrap();
    assert_eq!(
        loaded.warnings,
        [
            "network.deniedDomainReasons[\"b.example.com\"]: no deniedDomains entry is \"b.example.com\" (ignored)"
        ]
    );
    assert!(loaded.policy.network.denied_domain_reasons.is_empty());
}
