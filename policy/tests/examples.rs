//! Every example policy: snapshots of its canonical JSON, hash, warnings and
//! srt output, and round trips through both formats under perturbation.

// Helpers outside #[test] functions panic on purpose: a broken fixture is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::Policy;
use oajail_policy::srt::Loaded;
use serde_json::Value;
use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/policies")
}

/// (file stem, text) of every example, sorted by name.
fn examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((stem, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out.sort();
    assert!(out.len() >= 6, "examples missing: {out:?}");
    out
}

fn load(text: &str, origin: &str) -> Loaded {
    Policy::from_settings_json(text, origin).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn default_example_is_the_builtin_default_in_srt_form() {
    let text = std::fs::read_to_string(examples_dir().join("default.json")).unwrap();
    let policy = Policy::builtin_default();
    assert_eq!(load(&text, "default.json").policy, policy);
    // The file is exactly what `oajail policy print --format srt` prints.
    let expected = serde_json::to_string_pretty(&policy.to_srt_json()).unwrap() + "\n";
    assert_eq!(text, expected, "regenerate examples/policies/default.json");
}

#[test]
fn snapshots_of_every_example() {
    for (stem, text) in examples() {
        let loaded = load(&text, &stem);
        let canonical: Value = serde_json::from_str(&loaded.policy.canonical_json()).unwrap();
        let report = format!(
            "sha256: {}\nwarnings:\n{}\ncanonical:\n{}",
            loaded.policy.sha256(),
            loaded
                .warnings
                .iter()
                .map(|w| format!("  {w}\n"))
                .collect::<String>(),
            serde_json::to_string_pretty(&canonical).unwrap(),
        );
        let srt = serde_json::to_string_pretty(&loaded.policy.to_srt_json()).unwrap();
        // An absolute snapshot path: insta otherwise finds the workspace with
        // `cargo metadata`, which the unprivileged CI run has no cargo for.
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"));
        settings.bind(|| {
            insta::assert_snapshot!(format!("{stem}.canonical"), report);
            insta::assert_snapshot!(format!("{stem}.srt"), srt);
        });
    }
}

#[test]
fn srt_output_round_trips_without_warnings() {
    for (stem, text) in examples() {
        let policy = load(&text, &stem).policy;
        let again = load(&policy.to_srt_json().to_string(), &stem);
        assert_eq!(again.policy, policy, "{stem}");
        assert!(again.warnings.is_empty(), "{stem}: {:?}", again.warnings);
    }
}

#[test]
fn srt_output_has_srt_required_keys_and_no_oajail_keys_outside_the_oajail_object() {
    let allowed_top = [
        "network",
        "filesystem",
        "credentials",
        "enableWeakerNestedSandbox",
        "allowNestedUserNamespaces",
        "git",
        "oajail",
    ];
    for (stem, text) in examples() {
        let srt = load(&text, &stem).policy.to_srt_json();
        let root = srt.as_object().unwrap();
        for key in root.keys() {
            assert!(allowed_top.contains(&key.as_str()), "{stem}: {key}");
        }
        for key in ["allowedDomains", "deniedDomains"] {
            assert!(srt["network"][key].is_array(), "{stem}: network.{key}");
        }
        for key in ["denyRead", "allowWrite", "denyWrite"] {
            assert!(
                srt["filesystem"][key].is_array(),
                "{stem}: filesystem.{key}"
            );
        }
        if let Some(oajail) = root.get("oajail") {
            assert!(
                !oajail.as_object().unwrap().is_empty(),
                "{stem}: empty oajail object"
            );
        }
    }
}

#[test]
fn canonical_json_round_trips_with_and_without_its_hash() {
    for (stem, text) in examples() {
        let policy = load(&text, &stem).policy;
        let canonical = policy.canonical_json();
        let again = load(&canonical, &stem);
        assert_eq!(again.policy, policy, "{stem}");
        assert_eq!(again.policy.canonical_json(), canonical, "{stem}");
        let mut with_hash: Value = serde_json::from_str(&canonical).unwrap();
        with_hash["policySha256"] = Value::String(policy.sha256());
        assert_eq!(load(&with_hash.to_string(), &stem).policy, policy, "{stem}");
        with_hash["policySha256"] = Value::String("0".repeat(64));
        let err = Policy::from_settings_json(&with_hash.to_string(), "p").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p: policySha256: does not match the policy"),
            "{err}"
        );
    }
}

/// JSON text of `value` with every object's keys in reverse order and every
/// array reversed, with its first element repeated at the end.
fn perturbed(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let mut parts: Vec<String> = items.iter().rev().map(perturbed).collect();
            if let Some(first) = items.first() {
                parts.push(perturbed(first));
            }
            format!("[{}]", parts.join(", "))
        }
        Value::Object(members) => {
            let parts: Vec<String> = members
                .iter()
                .rev()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), perturbed(v)))
                .collect();
            format!("{{\n{}\n}}", parts.join(",\n"))
        }
        scalar => scalar.to_string(),
    }
}

#[test]
fn hash_ignores_key_order_list_order_duplicates_and_format() {
    for (stem, text) in examples() {
        let policy = load(&text, &stem).policy;
        let hash = policy.sha256();
        let original: Value = serde_json::from_str(&text).unwrap();
        let canonical: Value = serde_json::from_str(&policy.canonical_json()).unwrap();
        let variants = [
            perturbed(&original),
            perturbed(&policy.to_srt_json()),
            perturbed(&canonical),
            serde_json::to_string_pretty(&canonical).unwrap(),
        ];
        for (i, variant) in variants.iter().enumerate() {
            let again = load(variant, &stem).policy;
            assert_eq!(again.sha256(), hash, "{stem} variant {i}:\n{variant}");
            assert_eq!(again, policy, "{stem} variant {i}");
        }
    }
}
