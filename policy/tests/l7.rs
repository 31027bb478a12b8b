//! `network.tlsTerminate` and `oajail.httpRules`: the exact error line of
//! each bad input, round trips through both formats, the hash, and a
//! snapshot of the compiled egress plan.

// Helpers outside #[test] functions panic on purpose: a broken fixture is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::Policy;
use oajail_policy::egress::EgressPlan;
use oajail_policy::host::canonicalize;
use serde_json::{Value, json};

fn doc(tls: Option<Value>, rules: Option<Value>) -> String {
    let mut d = json!({
        "network": {"allowedDomains": ["api.openagenda.com", "*.example.com"], "deniedDomains": []},
        "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
    });
    if let Some(t) = tls {
        d["network"]["tlsTerminate"] = t;
    }
    if let Some(r) = rules {
        d["oajail"] = json!({"httpRules": r});
    }
    d.to_string()
}

fn error(text: &str) -> String {
    Policy::from_settings_json(text, "p.json")
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_inputs_name_the_json_path() {
    let cases = [
        (
            doc(None, Some(json!({"allow": ["get https://a.test/"]}))),
            "p.json: oajail.httpRules.allow[0]: method \"get\" must be upper-case letters or *",
        ),
        (
            doc(None, Some(json!({"deny": ["GET https://a.test/x/../y"]}))),
            "p.json: oajail.httpRules.deny[0]: the path pattern must not contain . or .. segments",
        ),
        (
            doc(None, Some(json!({"allow": ["GET ftp://a.test/"]}))),
            "p.json: oajail.httpRules.allow[0]: the url must start with https:// or http://",
        ),
        (
            doc(None, Some(json!({"allow": [], "other": []}))),
            "p.json: oajail.httpRules.other: unknown key",
        ),
        (
            doc(Some(json!({"caCertPath": "/ca.pem"})), None),
            "p.json: network.tlsTerminate.caCertPath: caCertPath and caKeyPath must be given together (or neither, for a per-run ca)",
        ),
        (
            doc(
                Some(json!({"excludeDomains": ["*.openagenda.com", "api.openagenda.com"]})),
                Some(json!({"allow": ["GET https://api.openagenda.com/v3/**"]})),
            ),
            "p.json: network.tlsTerminate.excludeDomains[0]: excludes a host that oajail.httpRules governs (\"GET https://api.openagenda.com/v3/**\"); its requests could not be checked",
        ),
        (
            doc(Some(json!({"maxTunnels": 0})), None),
            "p.json: network.tlsTerminate.maxTunnels: must be an integer from 1 to 65536, found 0",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(error(&input), want, "{input}");
    }
}

fn sample() -> Policy {
    let text = doc(
        Some(json!({"excludeDomains": ["pinned.example.com"], "maxTunnels": 8})),
        Some(json!({
            "allow": ["GET https://api.openagenda.com:443/v3/**", "HEAD https://api.openagenda.com/v3/**"],
            "deny": ["* https://api.openagenda.com/v3/me/**"]
        })),
    );
    Policy::from_settings_json(&text, "p.json").unwrap().policy
}

#[test]
fn both_formats_round_trip_and_the_hash_covers_the_keys() {
    let policy = sample();
    let srt = policy.to_srt_json().to_string();
    let again = Policy::from_settings_json(&srt, "srt").unwrap().policy;
    assert_eq!(again, policy);
    let canonical = Policy::from_settings_json(&policy.canonical_json(), "c")
        .unwrap()
        .policy;
    assert_eq!(canonical, policy);
    assert!(policy.canonical_json().contains("\"httpRules\""));
    let plain = Policy::from_settings_json(&doc(None, None), "p")
        .unwrap()
        .policy;
    assert!(!plain.canonical_json().contains("httpRules"));
    assert!(!plain.canonical_json().contains("tlsTerminate"));
    let mut fewer = policy.clone();
    fewer.oajail.http_rules.deny.clear();
    assert_ne!(fewer.sha256(), policy.sha256());
}

#[test]
fn egress_plan_snapshot_and_termination() {
    let plan = EgressPlan::from_policy(&sample()).unwrap();
    insta::assert_json_snapshot!("l7.egress", plan);
    let api = canonicalize("api.openagenda.com").unwrap();
    let pinned = canonicalize("pinned.example.com").unwrap();
    let other = canonicalize("www.example.com").unwrap();
    assert!(plan.terminates(&api, 443));
    assert!(!plan.terminates(&pinned, 443));
    assert!(plan.terminates(&other, 443));
    let rules_only = Policy::from_settings_json(
        &doc(
            None,
            Some(json!({"allow": ["GET https://api.openagenda.com/**"]})),
        ),
        "p",
    )
    .unwrap()
    .policy;
    let plan = EgressPlan::from_policy(&rules_only).unwrap();
    assert!(plan.needs_ca());
    assert!(plan.terminates(&api, 443));
    assert!(!plan.terminates(&other, 443));
}
