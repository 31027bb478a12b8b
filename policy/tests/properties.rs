//! Property-style tests over generated policies: round trips through srt
//! JSON and canonical JSON, and hash invariance under reordering,
//! duplication and equivalent spellings.
//!
//! The generator is a small fixed-seed xorshift, so every run checks the
//! same cases and a failure names the seed to replay.

// Helpers outside #[test] functions panic on purpose: a failed check is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::Policy;
use serde_json::{Map, Value, json};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a>(&mut self, pool: &[&'a str]) -> &'a str {
        pool[self.below(pool.len())]
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

const HOSTS: &[&str] = &[
    "example.com",
    "api.example.com",
    "*.example.org",
    "github.com:22",
    "localhost",
    "10.1.2.3",
    "[::1]:8080",
    "registry.npmjs.org",
    "*.cdn.example.net",
];
const DENY_HOSTS: &[&str] = &[
    "evil.example.com",
    "*:22",
    "*.evil.example",
    "169.254.169.254",
    "*",
];
const PARTS: &[&str] = &[
    "a",
    "b",
    ".ssh",
    "src",
    "node_modules",
    "*.pem",
    "**",
    "x?",
    "[0-9]",
    "..",
    ".",
];
const ANCHORS: &[&str] = &["/", "~/", "", "./"];
const ENV: &[&str] = &["AWS_*", "CARGO_HOME", "GH_TOKEN", "X_*"];
const ADDRESSES: &[&str] = &["10.0.0.0/8", "192.168.1.7", "fd00::/8", "100.64.0.0/10"];

fn path(rng: &mut Rng) -> String {
    let mut text = rng.pick(ANCHORS).to_owned();
    let depth = 1 + rng.below(3);
    let parts: Vec<&str> = (0..depth).map(|_| rng.pick(PARTS)).collect();
    text.push_str(&parts.join("/"));
    text
}

fn entry(rng: &mut Rng) -> Value {
    let text = path(rng);
    if rng.chance(20) {
        json!({"path": text, "literal": true})
    } else {
        Value::String(text)
    }
}

fn list(rng: &mut Rng, max: usize, item: impl Fn(&mut Rng) -> Value) -> Value {
    let n = rng.below(max + 1);
    Value::Array((0..n).map(|_| item(rng)).collect())
}

fn strings(rng: &mut Rng, pool: &[&str], max: usize) -> Value {
    list(rng, max, |r| Value::String(r.pick(pool).to_owned()))
}

/// A random valid srt settings document.
fn document(rng: &mut Rng) -> Value {
    let mut doc = json!({
        "network": {"allowedDomains": strings(rng, HOSTS, 4), "deniedDomains": strings(rng, DENY_HOSTS, 2)},
        "filesystem": {
            "denyRead": list(rng, 4, entry), "allowWrite": list(rng, 3, entry),
            "denyWrite": list(rng, 3, entry),
        }
    });
    if rng.chance(50) {
        doc["filesystem"]["allowRead"] = list(rng, 3, entry);
    }
    for key in ["allowLocalBinding", "allowAllUnixSockets"] {
        if rng.chance(30) {
            doc["network"][key] = Value::Bool(rng.chance(50));
        }
    }
    if rng.chance(30) {
        doc["network"]["deniedResolvedAddresses"] = strings(rng, ADDRESSES, 2);
    }
    if rng.chance(30) {
        doc["network"]["httpProxyPort"] = json!(1 + rng.below(65535));
    }
    if rng.chance(30) {
        doc["git"] = json!({"safeDirectories": strings(rng, &["/repo", "/work/*", "*"], 2)});
    }
    if rng.chance(40) {
        doc["oajail"] = oajail(rng);
    }
    doc
}

fn oajail(rng: &mut Rng) -> Value {
    let mut out = Map::new();
    if rng.chance(50) {
        out.insert("envKeep".into(), strings(rng, ENV, 2));
    }
    if rng.chance(50) {
        out.insert("envDeny".into(), strings(rng, &["HISTFILE", "DB_URL"], 2));
    }
    if rng.chance(50) {
        let limit = if rng.chance(20) {
            Value::Null
        } else {
            json!(rng.below(1 << 20))
        };
        out.insert(
            "limits".into(),
            json!({"coreBytes": limit, "openFiles": 1 + rng.below(4096)}),
        );
    }
    if rng.chance(30) {
        out.insert(
            "allowPrivateDestinations".into(),
            strings(rng, ADDRESSES, 2),
        );
    }
    Value::Object(out)
}

/// The same document with lists shuffled and partly repeated, path
/// entries respelled, and object keys in another order.
fn respelled(value: &Value, rng: &mut Rng, under_paths: bool) -> Value {
    match value {
        Value::Array(items) => {
            let mut out: Vec<Value> = items
                .iter()
                .map(|v| respelled(v, rng, under_paths))
                .collect();
            if let Some(first) = out.first().cloned().filter(|_| rng.chance(50)) {
                out.push(first);
            }
            rng.shuffle(&mut out);
            Value::Array(out)
        }
        Value::String(text) if under_paths => Value::String(respell_path(text, rng)),
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            rng.shuffle(&mut keys);
            let mut out = Map::new();
            for key in keys {
                let paths = under_paths
                    || matches!(
                        key.as_str(),
                        "denyRead" | "allowRead" | "allowWrite" | "denyWrite"
                    );
                out.insert(
                    key.clone(),
                    respelled(&members[key], rng, paths && key != "literal"),
                );
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// An equivalent spelling of a path entry.
fn respell_path(text: &str, rng: &mut Rng) -> String {
    let glob = text.contains(['*', '?', '[', ']']);
    match rng.below(4) {
        0 if !text.starts_with('~') && !text.starts_with('/') => format!("./{text}"),
        1 if !glob => format!("{text}/"),
        2 => text.replacen('/', "//", 1),
        _ => text.to_owned(),
    }
}

fn load(text: &str, seed: u64) -> Policy {
    match Policy::from_settings_json(text, "gen") {
        Ok(loaded) => loaded.policy,
        Err(err) => panic!("seed {seed}: {err}\n{text}"),
    }
}

#[test]
fn generated_policies_round_trip_and_hash_stably() {
    let mut distinct = std::collections::BTreeSet::new();
    for seed in 1..=400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let doc = document(&mut rng);
        let policy = load(&doc.to_string(), seed);
        let hash = policy.sha256();
        distinct.insert(hash.clone());

        let srt = load(&policy.to_srt_json().to_string(), seed);
        assert_eq!(srt, policy, "seed {seed}: srt round trip");
        let canonical = load(&policy.canonical_json(), seed);
        assert_eq!(canonical, policy, "seed {seed}: canonical round trip");

        for round in 0..3 {
            let variant = respelled(&doc, &mut rng, false);
            let again = load(&variant.to_string(), seed);
            assert_eq!(
                again.sha256(),
                hash,
                "seed {seed} round {round}:\n{doc}\n{variant}"
            );
        }
        let canonical_value: Value = serde_json::from_str(&policy.canonical_json()).unwrap();
        let variant = respelled(&canonical_value, &mut rng, false);
        assert_eq!(
            load(&variant.to_string(), seed).sha256(),
            hash,
            "seed {seed}: canonical variant"
        );
    }
    // The generator really produces different policies.
    assert!(distinct.len() > 350, "{}", distinct.len());
}
