//! Family A: reading secrets (direct, tricks through links and /proc).
mod common;
use common::*;

#[test]
fn blocks_ssh_key_read() {
    expect_blocked("A1-ssh-key", DENY_HOME, |l| {
        argv!["read-file", l.home(".ssh/id_ed25519")]
    });
}

#[test]
fn blocks_aws_credentials_read() {
    expect_blocked("A1-aws-credentials", DENY_HOME, |l| {
        argv!["read-file", l.home(".aws/credentials")]
    });
}

#[test]
fn blocks_other_project_env_read() {
    expect_blocked("A1-other-project-env", DENY_HOME, |l| {
        argv!["read-file", l.home("projects/other/.env")]
    });
}

#[test]
fn blocks_sendfile_of_secret() {
    expect_blocked("A1-sendfile", DENY_HOME, |l| {
        argv!["sendfile-file", l.home(".ssh/id_ed25519")]
    });
}

#[test]
fn blocks_copy_to_workspace() {
    expect_blocked("A1-copy-to-workspace", DENY_HOME, |l| {
        argv!["copy-to-ws", l.home(".ssh/id_ed25519"), l.ws("stolen")]
    });
}

#[test]
fn blocks_grep_of_home() {
    expect_blocked("A2-grep-home", DENY_HOME, |l| {
        argv!["read-tree", l.home("")]
    });
}

/// Secret stores the built-in default policy documents as denied
/// (docs/policy-format.md section 9); agent credentials and project `.env`
/// files are handled by their own tests.
const DEFAULT_DENIED: &[&str] = &[
    ".ssh/id_ed25519",
    ".ssh/id_rsa",
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".docker/config.json",
    ".kube/config",
    ".netrc",
    ".git-credentials",
    ".config/gcloud/application_default_credentials.json",
    ".azure/accessTokens.json",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".gnupg/private-keys-v1.d/k.key",
    ".password-store/bank.gpg",
    ".local/share/keyrings/login.keyring",
];

fn read_under_default(id: &str, rels: &[&str]) -> (Lab, oajail_security::lab::Run) {
    let lab = Lab::new(id);
    let mut args = vec!["read-files".to_owned()];
    args.extend(rels.iter().map(|r| lab.home(r)));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = lab.jailed_default(&argv, &RunOptions::default());
    (lab, run)
}

#[test]
fn blocks_secret_stores_under_default_policy() {
    let (mut lab, run) = read_under_default("A2-default-policy", DEFAULT_DENIED);
    assert_blocked(&mut lab, "A2-default-policy", &run);
}

/// A settings file that names no secret store (`denyRead: []`): the
/// built-in stores are kept denied under every settings file
/// (docs/srt-compatibility.md), so the same reads fail as under the
/// default.
#[test]
fn blocks_secret_stores_under_a_settings_file_that_omits_them() {
    let id = "A2-settings-file-secret-stores";
    let mut lab = Lab::new(id);
    let mut args = vec!["read-files".to_owned()];
    args.extend(DEFAULT_DENIED.iter().map(|r| lab.home(r)));
    args.push(lab.home(".bash_history"));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = lab.jailed("attack-settings-bare.json", &argv, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}

/// Documented residual (docs/threat-model.md): the built-in default is a
/// deny list of secret stores, so another project's `.env` stays readable.
/// The test asserts exactly that, so a change in either direction is seen.
#[test]
fn residual_default_policy_reads_other_project_env() {
    let (lab, run) = read_under_default("A2-default-policy-project-env", &["projects/other/.env"]);
    assert_still_residual(&run);
    drop(lab);
}

#[test]
fn blocks_agent_credentials_under_default_policy() {
    let mut lab = Lab::new("A2-default-policy-agent-credentials");
    let (codex, claude) = (
        lab.home(".codex/auth.json"),
        lab.home(".claude/.credentials.json"),
    );
    let run = lab.jailed_default(&["read-files", &codex, &claude], &RunOptions::default());
    assert_blocked(&mut lab, "A2-default-policy-agent-credentials", &run);
}

#[test]
fn blocks_symlink_in_workspace() {
    expect_blocked("A3-symlink-in-workspace", DENY_HOME, |l| {
        argv!["symlink-read", l.home(".ssh/id_ed25519"), l.ws("link")]
    });
}

#[test]
fn blocks_hardlink_into_workspace() {
    expect_blocked("A6-hardlink-into-workspace", DENY_HOME, |l| {
        argv!["hardlink-read", l.home(".ssh/id_ed25519"), l.ws("hard")]
    });
}

#[test]
fn blocks_proc_cwd_of_host_process() {
    expect_blocked("A7-proc-cwd-host-process", DENY_HOME, |l| {
        argv![
            "read-file",
            format!("/proc/{}/cwd/secret.txt", l.canary_pid())
        ]
    });
}

#[test]
fn blocks_proc_root_of_host_process() {
    expect_blocked("A7-proc-root-host-process", DENY_HOME, |l| {
        argv![
            "read-file",
            format!("/proc/{}/root{}", l.canary_pid(), l.home(".ssh/id_ed25519"))
        ]
    });
}

#[test]
fn blocks_canary_in_mount_tables() {
    expect_blocked("A8-mountinfo", DENY_HOME, |_| argv!["mountinfo-scan"]);
}

/// A4: a previous run left `ws/build -> $HOME`; this run's policy makes
/// `./build` writable. Writing `.bashrc` through it must fail (or oajail
/// must refuse the symlinked root); the home stays unchanged.
#[test]
fn blocks_policy_time_symlink_plant() {
    let id = "A4-symlinked-write-root";
    let mut lab = Lab::new(id);
    std::os::unix::fs::symlink(lab.home(""), lab.ws("build")).expect("plant ws/build -> home");
    let target = lab.ws("build/.bashrc");
    let run = lab.jailed(
        "attack-symlinked-root.json",
        &["write-file", "append", &target],
        &RunOptions::default(),
    );
    oajail_security::judge::assert_blocked_or_refused(&mut lab, id, &run);
}

/// A6b, documented residual (docs/threat-model.md): a hardlink made BEFORE
/// the run inside a readable tree aliases a denied file, and path rules
/// cannot see it. The test asserts that the alias is readable, so a future
/// defence (refusal or warning) shows up here.
#[test]
fn residual_preexisting_hardlink_is_readable() {
    let lab = Lab::new("A6b-preexisting-hardlink");
    std::fs::create_dir_all(lab.ws(".cache")).expect("mkdir ws/.cache");
    std::fs::hard_link(lab.home(".ssh/id_ed25519"), lab.ws(".cache/k")).expect("plant hardlink");
    let alias = lab.ws(".cache/k");
    let run = lab.jailed(
        "attack-symlinked-root.json",
        &["read-file", &alias],
        &RunOptions::default(),
    );
    assert_still_residual(&run);
}

/// A5: while oajail starts, a racer keeps swapping the writable root
/// `ws/sub` between a directory and a symlink to `$HOME` (RENAME_EXCHANGE,
/// atomic). Whatever oajail resolved, the write must never land in the
/// home: 40 runs, each with a fresh lab and the full post-condition.
#[test]
fn blocks_setup_race_on_writable_root() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let id = "A5-setup-race";
    for round in 0..40 {
        let mut lab = Lab::new(&format!("{id}-{round}"));
        std::fs::create_dir_all(lab.ws("sub")).expect("mkdir ws/sub");
        std::os::unix::fs::symlink(lab.home(""), lab.ws("sub.alt"))
            .expect("plant ws/sub.alt -> home");
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b, flag) = (lab.ws("sub"), lab.ws("sub.alt"), stop.clone());
        let racer = std::thread::spawn(move || {
            use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
            while !flag.load(Ordering::Relaxed) {
                let _ = renameat2(
                    AT_FDCWD,
                    a.as_str(),
                    AT_FDCWD,
                    b.as_str(),
                    RenameFlags::RENAME_EXCHANGE,
                );
            }
        });
        let target = lab.ws("sub/x.txt");
        let run = lab.jailed(
            "attack-racy-root.json",
            &["write-file", "create", &target],
            &RunOptions::default(),
        );
        stop.store(true, Ordering::Relaxed);
        racer.join().expect("racer thread");
        // Only the last round is recorded; any earlier escape fails at once.
        if round == 39 {
            oajail_security::judge::assert_host_unchanged(&mut lab, id, &run);
        } else {
            let v = oajail_security::judge::postconditions(&mut lab, &run, false);
            assert!(v.is_empty(), "{id} round {round}: {v:?}\n{}", run.stderr);
        }
    }
}

/// A `denyRead` entry naming an existing directory whose name holds a
/// bracket set: read literally (as srt does), not as a glob that matches
/// nothing.
#[test]
fn blocks_read_of_a_bracket_named_deny_read_entry() {
    let id = "A1-bracket-deny-read";
    let mut lab = Lab::new(id);
    let secret = lab.home("[private]/secret.txt");
    let text = oajail_security::canary::canary(&lab.token, "bracket");
    oajail_security::canary::plant(std::path::Path::new(&secret), &text).expect("plant");
    lab.rebaseline_home();
    let run = lab.jailed(
        "attack-brackets.json",
        &["read-file", &secret],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

/// A9: system secrets the built-in default denies, readable when oajail
/// runs as root (the paths that exist on the CI host; the list is in
/// `policy/src/defaults.rs`). As root the same read without the jail must
/// succeed first, so the row cannot pass on a host that has none of them.
#[test]
fn blocks_system_secrets_under_default_policy_as_root() {
    let id = "A9-root-system-secrets";
    let mut lab = Lab::new(id);
    let paths = [
        "read-any",
        "/etc/shadow-",
        "/etc/gshadow-",
        "/etc/ssl/private",
        "/etc/security/opasswd",
    ];
    if nix::unistd::geteuid().is_root() {
        let control = lab.unjailed(&paths, &RunOptions::default());
        let verdict = control.report.as_ref().map(|r| r.verdict);
        assert_eq!(
            verdict,
            Some(oajail_security::verdict::Verdict::Succeeded),
            "control: root cannot read any of the secrets here: {}",
            control.stdout
        );
    }
    let run = lab.jailed_default(&paths, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}

/// A9: the jail's own procfs lists the host's keys in /proc/keys (their
/// descriptions: here the lab's session-keyring canary key) and key users
/// in /proc/key-users; both are masked. Without the jail the probe must
/// find the key, so the row can fail.
#[test]
fn blocks_proc_keys() {
    let id = "A9-proc-keys";
    let mut lab = Lab::new(id);
    let desc = format!("oaj_canary_{}", lab.token);
    let opts = RunOptions {
        keyring_desc: Some(desc.clone()),
        ..RunOptions::default()
    };
    let control = lab.unjailed(&["proc-keys", &desc], &opts);
    assert_eq!(
        control.report.as_ref().map(|r| r.verdict),
        Some(oajail_security::verdict::Verdict::Succeeded),
        "control: /proc/keys does not show the canary key: {}",
        control.stdout
    );
    let run = lab.jailed(DENY_HOME, &["proc-keys", &desc], &opts);
    assert_blocked(&mut lab, id, &run);
}

/// A10: the fake home is mounted a second time at `<lab>/home-alias` (a
/// bind, as `/home` bound elsewhere): `denyRead: ["~"]` masks the home,
/// and the jail must mask the second mount's view of it too.
#[test]
fn blocks_a_second_mount_of_a_denied_directory() {
    let opts = RunOptions {
        alias_home: true,
        ..RunOptions::default()
    };
    expect_blocked_with("A10-second-mount", DENY_HOME, &opts, |l| {
        argv!["read-file", l.path("home-alias/.ssh/id_ed25519")]
    });
}

/// A11: the TLS-termination CA comes from `caCertPath`/`caKeyPath` in the
/// lab directory (the workspace's parent, not denied by the policy); a
/// canary line follows the key's PEM block. The proxy loads the key; the
/// jail must not read it.
#[test]
fn blocks_reading_the_tls_ca_key() {
    let id = "A11-tls-ca-key";
    let mut lab = Lab::new(id);
    let dir = lab.dir.join("ca");
    std::fs::create_dir_all(&dir).unwrap();
    let o = std::process::Command::new("openssl")
        .current_dir(&dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=lab-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let key = dir.join("ca.key");
    let mut text = std::fs::read_to_string(&key).unwrap();
    text.push_str(&oajail_security::canary::canary(&lab.token, "ca-key"));
    text.push('\n');
    std::fs::write(&key, text).unwrap();
    let path = key.display().to_string();
    let run = lab.jailed(
        "attack-tls-ca-key.json",
        &["read-file", &path],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

/// A12: a token file (a canary line) masked by srt `credentials.files[]`
/// with `mode: "mask"`: the jail reads the per-run sentinel at its path,
/// and the canary must not be readable there (`/proc/self/root`, an
/// `O_PATH` reopen and the line ending are checked in credentials_e2e.rs).
#[test]
fn blocks_reading_a_masked_files_real_content() {
    const MASK: &str = "attack-credentials-mask-file.json";
    let id = "A12-masked-file";
    let mut lab = Lab::new(id);
    let dir = lab.dir.join("cred");
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    let canary = oajail_security::canary::canary(&lab.token, "masked-file");
    std::fs::write(&token, format!("{canary}\n")).unwrap();
    let path = token.display().to_string();
    let opts = RunOptions::default();
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        lab.policy(MASK),
        "-c".into(),
        format!("cut -c1-14 {path}"),
    ];
    let pre = lab.run(argv, &opts);
    assert_eq!(pre.stdout.trim(), "oajail_masked_", "{}", pre.stderr);
    let run = lab.jailed(MASK, &["read-file", &path], &opts);
    assert_blocked(&mut lab, id, &run);
}

/// A12 through a second mount: the token (a canary line) is in the fake
/// home, masked, and the home is mounted again at `<lab>/home-alias`; the
/// alias must show neither the real content nor anything but the mask.
#[test]
fn blocks_reading_a_masked_file_through_a_second_mount() {
    const MASK: &str = "attack-credentials-mask-home-file.json";
    let id = "A12-masked-file-second-mount";
    let mut lab = Lab::new(id);
    let dir = std::path::PathBuf::from(lab.home(".config/oa"));
    std::fs::create_dir_all(&dir).unwrap();
    let canary = oajail_security::canary::canary(&lab.token, "masked-home-file");
    std::fs::write(dir.join("token"), format!("{canary}\n")).unwrap();
    lab.rebaseline_home();
    let opts = RunOptions {
        alias_home: true,
        ..RunOptions::default()
    };
    let alias = lab.path("home-alias/.config/oa/token");
    let argv = vec![
        lab.tools.oajail.display().to_string(),
        "-s".into(),
        lab.policy(MASK),
        "-c".into(),
        "cut -c1-14 ~/.config/oa/token".into(),
    ];
    let pre = lab.run(argv, &opts);
    assert_eq!(pre.stdout.trim(), "oajail_masked_", "{}", pre.stderr);
    let run = lab.jailed(MASK, &["read-file", &alias], &opts);
    assert_blocked(&mut lab, id, &run);
}
