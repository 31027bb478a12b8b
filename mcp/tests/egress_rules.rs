//! The egress policy's credential masking, TLS termination and request
//! rules (issue 14): the printed JSON (snapshot), the rules against the
//! spec read independently, what `oajail explain` makes of the policy, and
//! the boot check refusing a wrapper whose policy lacks any of them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use oajail_policy::host::Host;
use oajail_policy::l7::{RequestFacts, RuleVerdict};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::process::Stdio;
use support::command;

const API: &str = "https://api.openagenda.com";

fn policy(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["print-egress-policy", "--format", "srt"]);
    let out = command(&[], &all).stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn hash(v: &Value) -> String {
    try_hash(v).unwrap()
}

/// The policy hash, or `None` when oajail refuses the policy itself.
fn try_hash(v: &Value) -> Option<String> {
    let text = serde_json::to_string_pretty(v).unwrap();
    oajail_policy::Policy::from_settings_json(&text, "test")
        .ok()
        .map(|l| l.policy.sha256())
}

/// The policy with the machine-specific binary paths named generically.
fn portable(mut v: Value) -> Value {
    let bin = std::fs::canonicalize(support::BIN).unwrap();
    let worker = bin.with_file_name("openagenda-mcp-worker");
    assert_eq!(
        v["filesystem"]["allowRead"],
        json!([bin.display().to_string(), worker.display().to_string()])
    );
    v["filesystem"]["allowRead"] = json!(["<bin>/openagenda-mcp", "<bin>/openagenda-mcp-worker"]);
    v
}

#[test]
fn the_emitted_policy_masks_the_key_and_holds_read_only_mode() {
    insta::assert_json_snapshot!("egress_policy_read_only", portable(policy(&[])));
    insta::assert_json_snapshot!(
        "egress_policy_allow_writes",
        portable(policy(&["--allow-writes"]))
    );
}

/// `examples/policies/mcp-server.json` is the emitted policy of the Debian
/// package's binaries, so its hash is the one the boot check wants there.
#[test]
fn the_example_policy_is_what_the_packaged_server_emits() {
    let mut emitted = portable(policy(&[]));
    emitted["filesystem"]["allowRead"] =
        json!(["/usr/bin/openagenda-mcp", "/usr/bin/openagenda-mcp-worker"]);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/policies/mcp-server.json"
    );
    let example: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(hash(&example), hash(&emitted), "regenerate {path}");
}

/// `(method, rule path)` of every operation of the built-in spec, read with
/// a YAML parser rather than the server's loader.
fn spec_operations() -> Vec<(String, String)> {
    let text = include_str!("../src/spec/openagenda-v3/openapi.yaml");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        let path = path.as_str().unwrap();
        let mut pattern = String::new();
        for segment in path.split('/').skip(1) {
            let seg = if segment.starts_with('{') && segment.ends_with('}') {
                "*"
            } else {
                segment
            };
            pattern.push('/');
            pattern.push_str(seg);
        }
        for method in ["get", "put", "post", "delete", "patch"] {
            if item.get(method).is_some() {
                out.push((method.to_uppercase(), format!("/v3{pattern}")));
            }
        }
    }
    out
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_rules_are_exactly_the_specs_operations() {
    let ops = spec_operations();
    let rule = |(m, p): &(String, String)| format!("{m} {API}{p}");
    let reads: BTreeSet<String> = ops.iter().filter(|(m, _)| m == "GET").map(rule).collect();
    let all: BTreeSet<String> = ops.iter().map(rule).collect();
    assert!(reads.len() >= 10 && all.len() > reads.len(), "{ops:?}");
    let write_methods: BTreeSet<String> = ops
        .iter()
        .filter(|(m, _)| m != "GET")
        .map(|(m, _)| format!("{m} {API}/**"))
        .collect();

    let ro = policy(&[]);
    assert_eq!(strings(&ro["oajail"]["httpRules"]["allow"]), reads);
    assert_eq!(strings(&ro["oajail"]["httpRules"]["deny"]), write_methods);
    let rw = policy(&["--allow-writes"]);
    assert_eq!(strings(&rw["oajail"]["httpRules"]["allow"]), all);
    assert_eq!(rw["oajail"]["httpRules"].get("deny"), None);
}

#[test]
fn the_policy_crate_judges_requests_as_read_only_mode_means() {
    let text = serde_json::to_string(&policy(&[])).unwrap();
    let loaded = oajail_policy::Policy::from_settings_json(&text, "test").unwrap();
    let rules = &loaded.policy.oajail.http_rules;
    let host = Host::Name("api.openagenda.com".into());
    let judge = |method: &str, path: &str| {
        rules.judge(&RequestFacts {
            https: true,
            host: &host,
            port: 443,
            method,
            path,
        })
    };
    let allowed = |v: RuleVerdict| matches!(v, RuleVerdict::Allowed(_));
    assert!(allowed(judge("GET", "/v3/agendas?search=x")));
    assert!(allowed(judge("GET", "/v3/agendas/12/events")));
    assert!(allowed(judge("GET", "/v3/agendas/12/events/34")));
    // One segment per parameter, and nothing but the spec's paths.
    for path in [
        "/v3/agendas/12/events/34/extra",
        "/v3/agendas/12/secrets",
        "/v3/me",
        "/v2/agendas",
        "/v3/agendas/12%2Fevents",
    ] {
        assert!(!allowed(judge("GET", path)), "{path}");
    }
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        match judge(method, "/v3/agendas/12/events") {
            RuleVerdict::Refused(why) => assert!(why.contains(".deny"), "{why}"),
            other => panic!("{method}: {other:?}"),
        }
    }
    assert!(!allowed(judge("HEAD", "/v3/agendas")));
    // The termination: a CA made per run, none from files.
    let tls = loaded.policy.network.tls_terminate.as_ref().unwrap();
    assert_eq!(
        (tls.ca_cert_path.as_ref(), tls.ca_key_path.as_ref()),
        (None, None)
    );
}

#[test]
fn oajail_explain_shows_the_rules_and_the_termination() {
    let Some(oajail) = support::oajail_binary() else {
        return;
    };
    let v = policy(&[]);
    let dir = support::mock::TempDir::new_in(&["/var/tmp".into()], "explain");
    let file = dir.0.join("policy.json");
    std::fs::write(&file, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let out = std::process::Command::new(oajail)
        .args(["explain", "--json", "--settings"])
        .arg(&file)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &dir.0)
        .env("OA_API_KEY", "oa_sk_explain")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let egress = &plan["egress"];
    assert_eq!(egress["allow"], json!(["api.openagenda.com"]), "{plan}");
    assert_eq!(egress["http_rules"], v["oajail"]["httpRules"]);
    assert_eq!(egress["tls_terminate"]["caCertPath"], Value::Null);
    assert_eq!(egress["tls_terminate"]["caKeyPath"], Value::Null);
    assert_eq!(egress["tls_terminate"]["excludeDomains"], json!([]));
    // The real key never reaches the jail's environment as it is.
    let env = plan["env"].to_string();
    assert!(!env.contains("oa_sk_explain"), "{env}");
}

/// Boots the server as if under a wrapper enforcing `theirs`.
fn boot_with(theirs: &str) -> (Option<i32>, String) {
    let out = command(
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "wrapper"),
            ("OAJAIL_POLICY_SHA256", theirs),
        ],
        &[],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_boot_check_refuses_a_wrapper_without_the_new_keys() {
    let ours = policy(&[]);
    let our_hash = hash(&ours);
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 6] = [
        ("no tlsTerminate", |v| {
            v["network"].as_object_mut().unwrap().remove("tlsTerminate");
        }),
        ("a CA from files", |v| {
            v["network"]["tlsTerminate"] =
                json!({"caCertPath": "/etc/ca.pem", "caKeyPath": "/etc/ca.key"});
        }),
        ("no httpRules", |v| {
            v.as_object_mut().unwrap().remove("oajail");
        }),
        ("no deny rules", |v| {
            v["oajail"]["httpRules"]
                .as_object_mut()
                .unwrap()
                .remove("deny");
        }),
        ("a wider allow rule", |v| {
            v["oajail"]["httpRules"]["allow"]
                .as_array_mut()
                .unwrap()
                .push(json!("GET https://api.openagenda.com/**"));
        }),
        ("no masked credential", |v| {
            v.as_object_mut().unwrap().remove("credentials");
        }),
    ];
    for (what, edit) in edits {
        let mut theirs = ours.clone();
        edit(&mut theirs);
        // An oajail that masks variables refuses a masked variable without
        // `tlsTerminate` outright: no wrapper can run that policy at all.
        let Some(their_hash) = try_hash(&theirs) else {
            assert_eq!(what, "no tlsTerminate", "only that edit is invalid");
            continue;
        };
        assert_ne!(their_hash, our_hash, "{what}: the hash must cover it");
        let (code, err) = boot_with(&their_hash);
        assert_eq!(code, Some(2), "{what}: {err}");
        assert!(err.contains("policy mismatch"), "{what}: {err}");
    }
}
