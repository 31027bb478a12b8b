//! The canonical hash: the worked example of docs/policy-format.md, and
//! invariance under spelling, key order, list order and input format.

// Helpers outside #[test] functions panic on purpose: a broken fixture is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::Policy;

/// The worked example in docs/policy-format.md ("Canonical form and hash").
const WORKED_EXAMPLE: &str = r#"{
  "network": {"allowedDomains": ["example.com"], "deniedDomains": []},
  "filesystem": {"denyRead": ["~/.ssh/"], "allowWrite": ["."], "denyWrite": []}
}"#;

const WORKED_CANONICAL: &str = concat!(
    r#"{"filesystem":{"allowGitConfig":false,"allowRead":[],"allowWrite":[{"literal":false,"path":"."}],"#,
    r#""denyRead":[{"literal":false,"path":"~/.ssh"}],"denyWrite":[]},"#,
    r#""network":{"allowAllUnixSockets":false,"allowLocalBinding":false,"allowedDomains":["example.com"],"#,
    r#""deniedDomainReasons":{},"deniedDomains":[],"deniedResolvedAddresses":[],"httpProxyPort":null,"socksProxyPort":null},"#,
    r#""oajail":{"allowDegraded":false,"allowPrivateDestinations":[],"envDeny":[],"envKeep":[],"#,
    r#""limits":{"addressSpaceBytes":null,"coreBytes":0,"cpuSeconds":null,"fileSizeBytes":null,"#,
    r#""openFiles":null,"processes":null,"tmpSizeBytes":null,"wallSeconds":null},"strict":false},"#,
    r#""process":{"allowNestedUserNamespaces":false,"enableWeakerNestedSandbox":false,"gitSafeDirectories":[]}}"#,
);

const WORKED_SHA256: &str = "40f14a60f7f601da6f7ef8ce0db142e267f97c0ed6706371ea41ffd506081160";

fn hash(text: &str) -> String {
    Policy::from_settings_json(text, "t")
        .unwrap_or_else(|e| panic!("{e}"))
        .policy
        .sha256()
}

#[test]
fn worked_example_is_pinned() {
    let policy = Policy::from_settings_json(WORKED_EXAMPLE, "t")
        .unwrap()
        .policy;
    assert_eq!(policy.canonical_json(), WORKED_CANONICAL);
    assert_eq!(policy.sha256(), WORKED_SHA256);
    assert_eq!(
        oajail_policy::hash::sha256_hex(WORKED_CANONICAL.as_bytes()),
        WORKED_SHA256
    );
}

#[test]
fn equivalent_spellings_hash_equally() {
    let variants = [
        // Key order, list order, duplicates, spelling of paths.
        r#"{"filesystem": {"denyWrite": [], "allowWrite": ["./", "."], "denyRead": ["~/.ssh", "~//.ssh/."]},
            "network": {"deniedDomains": [], "allowedDomains": ["example.com", "example.com"]}}"#,
        // Optional srt keys at their defaults, and ignored keys.
        r#"{"network": {"allowedDomains": ["example.com"], "deniedDomains": [], "allowLocalBinding": false,
            "strictAllowlist": true, "allowMachLookup": []},
            "filesystem": {"denyRead": ["~/.ssh"], "allowRead": [], "allowWrite": ["."], "denyWrite": [],
            "allowGitConfig": false}, "mandatoryDenySearchDepth": 3, "git": {"safeDirectories": []}}"#,
        // The oajail object spelled out at its defaults.
        r#"{"network": {"allowedDomains": ["example.com"], "deniedDomains": []},
            "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": ["."], "denyWrite": []},
            "oajail": {"limits": {"coreBytes": 0}, "envKeep": [], "envDeny": [], "allowDegraded": false,
            "allowPrivateDestinations": []}}"#,
        // The core limit is never inherited: null is 0.
        r#"{"network": {"allowedDomains": ["example.com"], "deniedDomains": []},
            "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": ["."], "denyWrite": []},
            "oajail": {"limits": {"coreBytes": null}}}"#,
        // A literal entry without glob characters is a plain entry.
        r#"{"network": {"allowedDomains": ["example.com"], "deniedDomains": []},
            "filesystem": {"denyRead": [{"path": "~/.ssh", "literal": true}], "allowWrite": ["."], "denyWrite": []}}"#,
        WORKED_CANONICAL,
    ];
    for variant in variants {
        assert_eq!(hash(variant), WORKED_SHA256, "{variant}");
    }
}

#[test]
fn different_policies_hash_differently() {
    let changed = [
        WORKED_EXAMPLE.replace("example.com", "example.org"),
        WORKED_EXAMPLE.replace(r#""allowWrite": ["."]"#, r#""allowWrite": []"#),
        WORKED_EXAMPLE.replace("~/.ssh/", "/.ssh"),
        WORKED_EXAMPLE.replace(
            r#""denyWrite": []"#,
            r#""denyWrite": [], "allowGitConfig": true"#,
        ),
        WORKED_EXAMPLE.replace(
            r#""deniedDomains": []"#,
            r#""deniedDomains": [], "allowLocalBinding": true"#,
        ),
        WORKED_EXAMPLE.replace(
            "}\n}",
            "},\n \"oajail\": {\"limits\": {\"coreBytes\": 1}}\n}",
        ),
        WORKED_EXAMPLE.replace(
            r#""denyRead": ["~/.ssh/"]"#,
            r#""denyRead": [{"path": "~/.ssh/*", "literal": true}]"#,
        ),
        WORKED_EXAMPLE.replace(r#""denyRead": ["~/.ssh/"]"#, r#""denyRead": ["~/.ssh/*"]"#),
    ];
    let mut seen = vec![WORKED_SHA256.to_owned()];
    for text in &changed {
        let h = hash(text);
        assert!(!seen.contains(&h), "collision for {text}");
        seen.push(h);
    }
}

#[test]
fn builtin_default_hash_is_stable() {
    let policy = Policy::builtin_default();
    let from_canonical = Policy::from_settings_json(&policy.canonical_json(), "t")
        .unwrap()
        .policy;
    assert_eq!(from_canonical.sha256(), policy.sha256());
    assert_eq!(policy.sha256().len(), 64);
    assert!(
        policy
            .sha256()
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
}
