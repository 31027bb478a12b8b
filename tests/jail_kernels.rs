//! The layer negotiation on older kernels, run on this one: the
//! `test-layers` build of oajail with `OAJAIL_TEST_LANDLOCK_ABI=n` probes
//! Landlock as ABI n and builds its ruleset with only that ABI's rights,
//! which this kernel enforces exactly as an ABI-n kernel would (`refer`
//! included: a domain that does not handle it refuses every cross-directory
//! rename). The real old kernels run in `.ci/kernel-matrix`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::*;

/// `target/test-layers/<profile>/oajail`, built by
/// `cargo build -p oajail --features test-layers --target-dir target/test-layers`.
fn test_build() -> PathBuf {
    let exe = Path::new(OAJAIL);
    let profile = exe.parent().unwrap();
    let p = profile
        .parent()
        .unwrap()
        .join("test-layers")
        .join(profile.file_name().unwrap())
        .join("oajail");
    assert!(
        p.is_file(),
        "{} not found: build it with `cargo build -p oajail --features test-layers \
         --target-dir target/test-layers`",
        p.display()
    );
    p
}

/// A scratch workspace under /var/tmp (the jail's /tmp is private) holding
/// `policy.json`; `oajail -s policy.json ARGS` runs with it as the cwd.
struct Workspace(PathBuf);

impl Workspace {
    fn new(tag: &str, policy: serde_json::Value) -> Self {
        let dir = PathBuf::from(format!("/var/tmp/oajail-kern-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
        Workspace(dir)
    }

    fn run(&self, abi: Option<u8>, args: &[&str]) -> Output {
        let mut cmd = Command::new(test_build());
        cmd.arg("-s")
            .arg(self.0.join("policy.json"))
            .args(args)
            .env("HOME", self.0.join("home"))
            .env_remove("OAJAIL_SETTINGS")
            .env_remove("OAJAIL_TEST_DISABLE")
            .current_dir(&self.0);
        match abi {
            Some(v) => cmd.env("OAJAIL_TEST_LANDLOCK_ABI", v.to_string()),
            None => cmd.env_remove("OAJAIL_TEST_LANDLOCK_ABI"),
        };
        cmd.output().unwrap()
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn no_writes() -> serde_json::Value {
    serde_json::json!({
        "network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": ["~/secret"], "allowWrite": [], "denyWrite": []}
    })
}

fn write_dot() -> serde_json::Value {
    serde_json::json!({
        "network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": ["~/secret"], "allowWrite": ["."], "denyWrite": []}
    })
}

/// Renames and links across directories with the bare calls (`mv` would
/// fall back to copying on `EXDEV` and hide the refusal), then with `mv`.
const MOVES: &str = "mkdir -p a/sub b && echo x > a/f && echo y > a/sub/g && \
    python3 -c 'import os; os.rename(\"a/f\", \"b/f\"); os.link(\"b/f\", \"a/f2\"); \
    os.rename(\"a/sub\", \"b/sub\")' && mv b/f a/ && mv b/sub a/ && cat a/f a/sub/g a/f2";

/// The level the negotiation picks when the probe is capped at `abi`: the
/// real kernel's ABI caps it too (this test also runs on old kernels).
fn level(abi: u8) -> u8 {
    abi.min(landlock_level().max(1))
}

#[test]
fn every_older_landlock_abi_runs_fully_without_a_flag() {
    let ws = Workspace::new("abis", write_dot());
    let real = landlock_level();
    for abi in (1..=6u8).filter(|a| *a <= real.max(1)) {
        let o = ws.run(Some(abi), &["-d", "--", "/bin/true"]);
        let e = err(&o);
        assert_eq!(o.status.code(), Some(0), "abi {abi}: {e}");
        assert!(!e.contains("DEGRADED"), "abi {abi}: {e}");
        let (want, report) = match abi {
            6 => (
                "layer landlock: full (abi 6)".to_owned(),
                "landlock: Full, landlock_abi: 6".to_owned(),
            ),
            v => (
                format!("layer landlock: abi {v}: no "),
                format!("landlock: Partial, landlock_abi: {v}"),
            ),
        };
        assert!(e.contains(&want), "abi {abi}: {want} missing in {e}");
        assert!(e.contains(&report), "abi {abi}: {report} missing in {e}");
    }
}

#[test]
fn cross_directory_renames_and_links_work_in_a_writable_root_on_every_abi() {
    let ws = Workspace::new("mv", write_dot());
    for abi in [1, 2, 3, 6] {
        let _ = std::fs::remove_dir_all(ws.0.join("a"));
        let _ = std::fs::remove_dir_all(ws.0.join("b"));
        let o = ws.run(Some(abi), &["-c", MOVES]);
        assert_eq!(out(&o), "x\ny\nx\n", "abi {abi}: {}", err(&o));
        assert!(ws.0.join("a/sub/g").is_file(), "abi {abi}");
        let o = ws.run(Some(abi), &["-d", "--", "/bin/true"]);
        let want = format!("landlock_abi: {}", level(abi));
        assert!(err(&o).contains(&want), "abi {abi}: {want}: {}", err(&o));
    }
}

#[test]
fn the_rules_landlock_leaves_hold_on_every_abi() {
    let ws = Workspace::new("hold", write_dot());
    std::fs::create_dir_all(ws.0.join("home/secret")).unwrap();
    std::fs::write(ws.0.join("home/secret/key"), "canary").unwrap();
    for abi in [1, 2, 4, 6] {
        let script = "cat ~/secret/key; echo w > /var/tmp/oajail-kern-out-$$ && echo WROTE; \
                      truncate -s 0 /etc/hostname && echo TRUNC; echo done";
        let o = ws.run(Some(abi), &["-c", script]);
        let text = out(&o);
        assert!(text.ends_with("done\n"), "abi {abi}: {text} {}", err(&o));
        for leak in ["canary", "WROTE", "TRUNC"] {
            assert!(!text.contains(leak), "abi {abi}: {leak}: {text}");
        }
    }
}

#[test]
fn strict_refuses_an_older_abi_from_the_flag_or_the_settings() {
    // No writes: `.` here holds the test's home, which `--strict` refuses
    // on its own (a writable home), before the ABI is looked at.
    let ws = Workspace::new("strict", no_writes());
    let o = ws.run(Some(2), &["--strict", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("oajail: strict: landlock runs at abi 2, the plan is written for abi 6"),
        "{}",
        err(&o)
    );
    // Full strictness is reachable only where the kernel has ABI 6.
    let full = ws.run(Some(6), &["--strict", "--", "/bin/true"]);
    assert_eq!(
        full.status.success(),
        landlock_level() == 6,
        "{}",
        err(&full)
    );
    let mut policy = no_writes();
    policy["oajail"] = serde_json::json!({"strict": true});
    let strict = Workspace::new("strict-key", policy);
    let o = strict.run(Some(4), &["--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    // ABI 4 asked, capped by the real kernel's (ABI 2 on Debian 12's 6.1).
    let want = format!("strict: landlock runs at abi {}", level(4));
    assert!(err(&o).contains(&want), "{want}: {}", err(&o));
}

#[test]
fn a_malformed_strict_key_is_refused_with_its_json_path() {
    for bad in [
        serde_json::json!("yes"),
        serde_json::json!(1),
        serde_json::json!(null),
    ] {
        let mut policy = write_dot();
        policy["oajail"] = serde_json::json!({ "strict": bad });
        let ws = Workspace::new("strict-bad", policy);
        let o = ws.run(None, &["--", "/bin/true"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", err(&o));
        assert!(err(&o).contains("oajail.strict"), "{bad}: {}", err(&o));
    }
}

#[test]
fn doctor_and_explain_show_the_holders_of_each_rule() {
    let ws = Workspace::new("doctor", write_dot());
    let o = ws.run(Some(2), &["doctor"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", err(&o));
    for line in [
        "landlock: abi 2",
        "layer landlock: abi 2: no truncate (abi 3)",
        "rule cross-directory rename and link: mounts, landlock abi 2",
        "rule truncate only in allowWrite: mounts; not running here: landlock abi 3",
        "verdict: every rule held by at least one layer; runs (--strict would refuse)",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    let o = ws.run(Some(2), &["explain"]);
    assert!(
        out(&o).contains(
            "rule signals stay inside the jail: namespaces; not running here: landlock abi 6"
        ),
        "{}",
        out(&o)
    );
}
