//! Command line, settings lookup, environment and fail-closed behaviour of
//! the real `oajail` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::process::Command;
use support::*;

#[test]
fn secrets_are_scrubbed_and_oajail_variables_set() {
    let o = oajail("env", &["--", "env"])
        .env("GITHUB_TOKEN", "ghp_canary")
        .env("AWS_SECRET_ACCESS_KEY", "aws_canary")
        .env("MY_PASSWORD", "pw_canary")
        .env("SSH_AUTH_SOCK", "/tmp/agent.sock")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1/bus")
        .env("HARMLESS_VALUE", "kept")
        .output()
        .unwrap();
    let env = ok(o);
    for canary in [
        "ghp_canary",
        "aws_canary",
        "pw_canary",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION",
    ] {
        assert!(!env.contains(canary), "{canary} leaked:\n{env}");
    }
    for set in [
        "SANDBOX_RUNTIME=1",
        "OAJAIL=1",
        "TMPDIR=/tmp",
        "HARMLESS_VALUE=kept",
    ] {
        assert!(env.lines().any(|l| l == set), "{set} missing:\n{env}");
    }
    let hash = ok(oajail("env-h", &["policy", "hash"]).output().unwrap());
    let want = format!("OAJAIL_POLICY_SHA256={}", hash.trim());
    assert!(env.lines().any(|l| l == want), "{want} missing:\n{env}");
}

#[test]
fn env_keep_keeps_a_named_secret() {
    let o = oajail("keep", &["--env-keep", "GITHUB_TOKEN", "--", "env"])
        .env("GITHUB_TOKEN", "ghp_kept")
        .output()
        .unwrap();
    assert!(ok(o).lines().any(|l| l == "GITHUB_TOKEN=ghp_kept"));
}

#[test]
fn a_missing_named_settings_file_is_refused() {
    let o = oajail(
        "nofile",
        &["-s", "/nonexistent/oajail.json", "--", "/bin/true"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = err(&o);
    assert!(e.starts_with("oajail: /nonexistent/oajail.json:"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let o = oajail("nofile2", &["--", "/bin/true"])
        .env("OAJAIL_SETTINGS", "/nonexistent/env.json")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}

#[test]
fn a_bad_settings_file_is_refused_naming_the_file() {
    let home = scratch_home("bad");
    let path = home.join("bad.json");
    std::fs::write(&path, "{ not json").unwrap();
    let o = oajail("bad", &["-s", path.to_str().unwrap(), "--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("bad.json"), "{}", err(&o));
}

#[test]
fn no_command_is_a_usage_error() {
    let o = oajail("nocmd", &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn policy_subcommands_agree() {
    let hash = ok(oajail("ph", &["policy", "hash"]).output().unwrap());
    assert_eq!(hash.trim().len(), 64);
    let json = ok(oajail("pj", &["policy", "print", "--format", "json"])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["policySha256"].as_str(), Some(hash.trim()));
    ok(oajail("pc", &["policy", "check"]).output().unwrap());
    let srt = ok(oajail("ps", &["policy", "print"]).output().unwrap());
    serde_json::from_str::<serde_json::Value>(&srt).unwrap();
}

#[test]
fn settings_flag_works_before_and_after_a_subcommand() {
    let home = scratch_home("sflag");
    let path = home.join("p.json");
    std::fs::write(&path, r#"{"network":{"allowedDomains":["example.com"],"deniedDomains":[]},"filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]}}"#).unwrap();
    let p = path.to_str().unwrap();
    let before = ok(oajail("sflag1", &["-s", p, "policy", "hash"])
        .output()
        .unwrap());
    let after = ok(oajail("sflag2", &["policy", "hash", "-s", p])
        .output()
        .unwrap());
    let default = ok(oajail("sflag3", &["policy", "hash"]).output().unwrap());
    assert_eq!(before, after);
    assert_ne!(before, default);
    let o = oajail("sflag4", &["policy", "hash", "--", "ls"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn run_only_options_are_refused_with_a_subcommand() {
    for (args, option) in [
        (&["--timeout", "3", "doctor"][..], "--timeout"),
        (&["--env-keep", "X", "explain"][..], "--env-keep"),
        (
            &["--log-json", "/dev/null", "policy", "hash"][..],
            "--log-json",
        ),
    ] {
        let o = oajail("runonly", args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(option) && err.lines().count() == 1, "{err}");
    }
}

#[test]
fn explain_json_has_every_plan() {
    let json = ok(oajail("ex", &["explain", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for key in [
        "mounts", "landlock", "seccomp", "guard", "limits", "egress", "env",
    ] {
        assert!(v.get(key).is_some(), "{key} missing");
    }
    assert_eq!(v["seccomp"]["enosys"][0], "clone3");
}

#[test]
fn doctor_reports_kernel_features() {
    let o = oajail("doc", &["doctor"]).output().unwrap();
    let text = out(&o);
    for field in [
        "place: ",
        "landlock:",
        "seccomp filters:",
        "step user and pid namespaces (clone): works",
        "step a fresh /proc for the jail's pid namespace: works",
        "step seccomp filter with a user-notification listener: works",
        "apparmor_restrict_unprivileged_userns",
        "tier: namespaces (the full jail)",
    ] {
        assert!(text.contains(field), "{field} missing:\n{text}");
    }
    // The plans are written for Landlock ABI 6: below it (Debian 12's 6.1
    // has ABI 2) other layers hold what Landlock would, and doctor says so.
    let abi: u32 = (text.lines())
        .find_map(|l| l.strip_prefix("landlock: abi "))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no landlock abi:\n{text}"));
    let verdict = if abi >= 6 {
        "verdict: every layer at its planned level; runs\n"
    } else {
        "verdict: every rule held by at least one layer; runs (--strict would refuse)\n"
    };
    assert!(
        text.contains(verdict),
        "abi {abi}: {verdict} missing:\n{text}"
    );
}

/// Run oajail under a seccomp filter (`support::oajail_under_filter`), to
/// simulate a kernel without some feature.
fn under_filter(tag: &str, prog: &str, args: &[&str]) -> std::process::Output {
    oajail_under_filter(tag, prog, args).output().unwrap()
}

/// `landlock_create_ruleset` (444) → ENOSYS: a kernel without Landlock.
const NO_LANDLOCK: &str =
    "[(0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7fff0000)]";

/// `clone` (56) with CLONE_NEWUSER → EPERM: user namespaces disabled.
const NO_USERNS: &str = "[(0x20, 0, 0, 0), (0x15, 0, 3, 56), (0x20, 0, 0, 16), \
    (0x45, 0, 1, 0x10000000), (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7fff0000)]";

fn without_landlock(tag: &str, args: &[&str]) -> std::process::Output {
    under_filter(tag, NO_LANDLOCK, args)
}

/// Refused in one line that names the refused step, what the tier it
/// allows loses, srt's key and the flag that accept it.
#[test]
fn missing_user_namespaces_are_refused_with_a_hint() {
    let o = under_filter("nouserns", NO_USERNS, &["--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    for part in [
        "refuses user and pid namespaces (clone) (EPERM",
        "host processes hidden",
        "\"enableWeakerNestedSandbox\": true",
        "--allow-degraded",
        "for the full jail: ",
    ] {
        assert!(err(&o).contains(part), "{part}: {}", err(&o));
    }
}

#[test]
fn allow_degraded_without_user_namespaces_runs_the_container_tier() {
    let marker = format!("6{}.5", std::process::id());
    let script = format!(
        "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; (setsid sleep {marker} &); echo done"
    );
    let o = under_filter("degrns", NO_USERNS, &["--allow-degraded", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("Seccomp:\t2") && text.contains("NoNewPrivs:\t1"),
        "{text}"
    );
    // The container tier: only the process list is not held in full.
    for part in [
        "DEGRADED",
        "tier: container",
        "NOT ENFORCED in full: host processes hidden",
    ] {
        assert!(err(&o).contains(part), "{part}: {}", err(&o));
    }
    assert!(!err(&o).contains("private /tmp"), "{}", err(&o));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let alive = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&marker))
            .unwrap_or(false)
    });
    assert!(!alive, "a background process outlived a degraded jail");
}

/// Without Landlock every rule class but one still has a complete holder
/// (the mounts, the namespaces, seccomp and the guard). The exception is
/// read deny: the mounts lose a denied file the host replaces during the
/// run (attack A14), which only Landlock's read complement holds. So the run
/// is refused naming it; `--allow-degraded` runs on the other layers after
/// the banner, and `--strict` (which excludes the flag) names the layer.
#[test]
fn missing_landlock_is_refused_for_read_denies_and_runs_degraded_on_the_other_layers() {
    let o = without_landlock("noll", &["--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains(
            "oajail: kernel: no layer holds read deny (denyRead) (needs landlock abi 1; \
             here only mounts (not a denied file the host creates, replaces or makes again"
        ),
        "{}",
        err(&o)
    );
    let o = without_landlock("nolldeg", &["-d", "--allow-degraded", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    for part in [
        "landlock: None",
        "layer landlock: off: not offered",
        "DEGRADED",
        "NOT ENFORCED in full: read deny (denyRead): a denied file the host creates",
    ] {
        assert!(err(&o).contains(part), "{part}: {}", err(&o));
    }
    assert!(!err(&o).contains("NOT ENFORCED: "), "{}", err(&o));
    let o = without_landlock("nollstrict", &["--strict", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("strict: landlock is off: not offered by the kernel"),
        "{}",
        err(&o)
    );
}

#[test]
fn debug_output_reports_what_is_enforced() {
    let o = oajail("dbg", &["-d", "--", "/bin/true"]).output().unwrap();
    let e = err(&o);
    assert!(o.status.success(), "{e}");
    let (landlock, layer) = match landlock_level() {
        6 => (
            "landlock: Full".to_owned(),
            "layer landlock: full (abi 6)".to_owned(),
        ),
        0 => (
            "landlock: None".to_owned(),
            "layer landlock: off".to_owned(),
        ),
        v => (
            format!("landlock: Partial, landlock_abi: {v}"),
            format!("layer landlock: abi {v}"),
        ),
    };
    for part in [
        "namespaces: true",
        "mounts: true",
        &landlock,
        &layer,
        "rule private /tmp: mounts",
        "caps: true",
        "seccomp: true",
    ] {
        assert!(e.contains(part), "{part} missing:\n{e}");
    }
}

#[test]
fn git_ssh_command_uses_the_helper_or_is_dropped_with_a_warning() {
    let o = ok(sh("ssh1", "echo \"$GIT_SSH_COMMAND\""));
    assert!(o.contains(&format!("{OAJAIL} ssh-proxy %h %p")), "{o}");
    // A policy that hides the oajail binary: the variable is dropped, loudly.
    let home = scratch_home("ssh2");
    let dir = std::path::Path::new(OAJAIL)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let path = home.join("hide.json");
    let policy = serde_json::json!({
        "network": {"allowedDomains": [], "deniedDomains": []},
        "filesystem": {"denyRead": [dir], "allowWrite": [], "denyWrite": []}
    });
    std::fs::write(&path, policy.to_string()).unwrap();
    let o = oajail(
        "ssh2",
        &[
            "-s",
            path.to_str().unwrap(),
            "-c",
            "echo \"[$GIT_SSH_COMMAND]\"",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out(&o).trim(), "[]", "{}", err(&o));
    assert!(err(&o).contains("GIT_SSH_COMMAND not set"), "{}", err(&o));
}

#[test]
fn ssh_proxy_helper_reaches_the_proxy_from_inside_the_jail() {
    // The default policy has no network: the proxy answers 403 and the
    // helper fails with exit status 1, naming the refusal.
    let script = format!("{OAJAIL} ssh-proxy example.com 22 </dev/null; echo rc=$?");
    let o = sh("sshp", &script);
    assert!(out(&o).contains("rc=1"), "{}{}", out(&o), err(&o));
    assert!(err(&o).contains("403"), "{}", err(&o));
}

#[test]
fn a_dangling_default_settings_link_is_an_error_not_the_default() {
    let home = scratch_home("dangling");
    let link = home.join(".srt-settings.json");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(home.join("missing.json"), &link).unwrap();
    let o = oajail("dangling", &["policy", "hash"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(".srt-settings.json"), "{err}");
    std::fs::remove_file(&link).unwrap();
    let o = oajail("dangling", &["policy", "hash"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "absent file means the default");
}

#[test]
fn completions_and_the_man_page_come_from_the_cli_definitions() {
    let bash = ok(oajail("compl", &["completions", "bash"]).output().unwrap());
    for word in ["doctor", "explain", "--strict", "--allow-degraded"] {
        assert!(bash.contains(word), "{word} missing in the bash completion");
    }
    let script = scratch_home("compl").join("oajail.bash");
    std::fs::write(&script, &bash).unwrap();
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", err(&check));
    let zsh = ok(oajail("compl-z", &["completions", "zsh"]).output().unwrap());
    assert!(zsh.starts_with("#compdef oajail"), "{zsh}");
    let man = ok(oajail("man", &["man"]).output().unwrap());
    assert!(man.contains(".TH oajail 1"), "{man}");
    assert!(man.contains("\\-\\-strict"), "{man}");
    let o = oajail("compl-bad", &["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}
