//! Family B, the guard as the only holder of the mandatory write denies:
//! every kind of write to a protected file nine levels down in
//! `node_modules`, a `denyWrite` entry whose name holds brackets, pid 1
//! (which performs the guarded calls) asked to open its own descriptors
//! for the command, and the twins of the protected shell and git files in
//! a writable home (git's XDG configuration, Debian's `.bash_aliases`,
//! Fedora's `.bashrc.d`, fish, zsh's other start-up files and `$ZDOTDIR`,
//! desktop autostart, PAM's environment, sshd's `~/.ssh/rc`, a crate
//! unpacked under `~/.cargo/registry` whose `build.rs` runs on the host's
//! next build).
mod common;
use common::*;
use oajail_security::plant;

/// Run `args` after `setup` prepared the lab; require a block.
fn expect_with_setup(id: &str, setup: fn(&Lab), args: impl FnOnce(&Lab) -> Vec<String>) {
    let mut lab = Lab::new(id);
    setup(&lab);
    let argv = args(&lab);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(HOME_READABLE, &argv, &RunOptions::default());
    assert_blocked(&mut lab, id, &run);
}

fn deep(lab: &Lab) {
    plant::deep_bashrc(lab);
}

#[test]
fn blocks_append_to_a_deep_protected_file() {
    expect_with_setup("B2-deep-nm-append", deep, |l| {
        argv!["write-file", "append", l.ws(plant::DEEP_BASHRC)]
    });
}

#[test]
fn blocks_truncate_of_a_deep_protected_file() {
    expect_with_setup("B2-deep-nm-truncate", deep, |l| {
        argv!["write-file", "truncate", l.ws(plant::DEEP_BASHRC)]
    });
}

#[test]
fn blocks_chmod_of_a_deep_protected_file() {
    expect_with_setup("B2-deep-nm-chmod", deep, |l| {
        argv!["metadata", "chmod", l.ws(plant::DEEP_BASHRC)]
    });
}

#[test]
fn blocks_rename_over_a_deep_protected_file() {
    expect_with_setup("B2-deep-nm-rename-over", deep, |l| {
        argv!["rename-over", l.ws("staging"), l.ws(plant::DEEP_BASHRC)]
    });
}

#[test]
fn blocks_unlink_and_recreate_of_a_deep_protected_file() {
    expect_with_setup("B2-deep-nm-unlink-recreate", deep, |l| {
        argv!["unlink-recreate", l.ws(plant::DEEP_BASHRC)]
    });
}

#[test]
fn blocks_write_to_a_bracket_named_deny_write_entry() {
    let id = "B2-deny-write-bracket";
    let mut lab = Lab::new(id);
    std::fs::write(lab.ws("[locked]"), "the user's file\n").expect("plant ws/[locked]");
    let target = lab.ws("[locked]");
    let run = lab.jailed(
        "attack-brackets.json",
        &["write-file", "append", &target],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

// pid 1 as a confused deputy: it performs the guarded calls with its own
// descriptors at hand. Each probe run reports `succeeded` only when an
// open hands the command an object that is not one of its own.

#[test]
fn blocks_o_creat_open_of_pid1_descriptors() {
    expect_blocked("B4-proc1-fd-create", HOME_READABLE, |_| {
        argv!["deputy-open", "direct", "/proc/1/fd/{n}"]
    });
}

#[test]
fn blocks_other_spellings_of_pid1_descriptors() {
    expect_blocked("B4-proc1-fd-other-spellings", HOME_READABLE, |_| {
        argv![
            "deputy-open",
            "direct",
            "/proc/1/task/1/fd/{n} /proc/self/../1/fd/{n} //proc/self/fd/{n} \
             /dev//fd/{n} /proc/thread-self/../../1/fd/{n}"
        ]
    });
}

#[test]
fn blocks_symlink_to_proc_self_followed_by_pid1() {
    expect_blocked("B4-proc-self-symlink-deputy", HOME_READABLE, |_| {
        argv![
            "deputy-open",
            "via-link",
            "/proc/self/fd/{n} /proc/thread-self/fd/{n} /dev/fd/{n}"
        ]
    });
}

// Twins of the protected shell and git files in a writable home
// (`allowWrite: ["~"]`): the mounts and Landlock let the whole home be
// written, so only the guard stands between the command and them. The
// global post-condition compares the fake home byte for byte as well.

/// The policy: the workspace and the whole home writable.
const HOME_WRITABLE: &str = "attack-home-writable.json";

fn twin(id: &str, mode: &'static str, rel: &'static str) {
    twin_with(id, mode, rel, Vec::new());
}

/// As [`twin`], with extra environment for the run (`ZDOTDIR`…): oajail
/// reads it from its own environment, as it would from the user's shell.
fn twin_with(id: &str, mode: &'static str, rel: &'static str, env: Vec<(&str, &str)>) {
    let lab_env = |l: &Lab| {
        env.iter()
            .map(|(k, v)| ((*k).to_owned(), l.home(v)))
            .collect::<Vec<_>>()
    };
    let mut lab = Lab::new(id);
    let opts = RunOptions {
        env: lab_env(&lab),
        ..RunOptions::default()
    };
    let path = lab.home(rel);
    let run = lab.jailed(HOME_WRITABLE, &["write-file", mode, &path], &opts);
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_xdg_git_config() {
    twin("B1-twin-git-xdg-config", "mkdirs", ".config/git/config");
}

#[test]
fn blocks_bash_aliases() {
    twin("B1-twin-bash-aliases", "create", ".bash_aliases");
}

#[test]
fn blocks_bashrc_d() {
    twin("B1-twin-bashrc-d", "mkdirs", ".bashrc.d/evil.sh");
}

#[test]
fn blocks_fish_config() {
    twin("B1-twin-fish-config", "append", ".config/fish/config.fish");
}

#[test]
fn blocks_fish_conf_d() {
    twin(
        "B1-twin-fish-conf-d",
        "mkdirs",
        ".config/fish/conf.d/evil.fish",
    );
}

#[test]
fn blocks_zshenv() {
    twin("B1-twin-zshenv", "create", ".zshenv");
}

#[test]
fn blocks_zprofile() {
    twin("B1-twin-zprofile", "create", ".zprofile");
}

#[test]
fn blocks_zlogin() {
    twin("B1-twin-zlogin", "create", ".zlogin");
}

#[test]
fn blocks_zshrc_in_zdotdir() {
    let env = vec![("ZDOTDIR", ".config/zsh")];
    twin_with("B1-twin-zdotdir", "mkdirs", ".config/zsh/.zshrc", env);
}

#[test]
fn blocks_git_config_under_xdg_config_home() {
    let env = vec![("XDG_CONFIG_HOME", "xdg")];
    twin_with(
        "B1-twin-xdg-config-home-git",
        "mkdirs",
        "xdg/git/config",
        env,
    );
}

#[test]
fn blocks_autostart_in_a_writable_home() {
    twin(
        "B1-twin-autostart",
        "mkdirs",
        ".config/autostart/evil.desktop",
    );
}

#[test]
fn blocks_pam_environment() {
    twin("B1-twin-pam-environment", "create", ".pam_environment");
}

#[test]
fn blocks_ssh_rc() {
    twin("B1-twin-ssh-rc", "create", ".ssh/rc");
}

#[test]
fn blocks_build_rs_of_an_unpacked_crate() {
    twin(
        "B1-twin-cargo-build-rs",
        "mkdirs",
        ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/evil-1.0.0/build.rs",
    );
}
