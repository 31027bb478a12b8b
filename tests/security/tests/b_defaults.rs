//! Family B, protection by default for what no list names: a writable home
//! keeps its configuration (tool files no list names: a pager's, a
//! debugger's, docker's CLI plugins, a terminal's, another agent's, ssh's
//! known hosts, a dot file nobody has heard of, the XDG data directory),
//! an explicitly allowed `~/.npm` or `~/.cargo` keeps `_npx` and
//! `config.toml`, a `denyWrite` project keeps what its tools read from its
//! parent, project files are refused by family (every spelling, any depth),
//! and metadata changed through a read-only descriptor (POSIX ACLs, extended
//! attributes) is judged as its path form.
mod common;
use common::*;

/// The workspace and the whole home writable.
const HOME_WRITABLE: &str = "attack-home-writable.json";
/// The same, with `~/.npm` and `~/.cargo` named explicitly.
const HOME_NPM: &str = "attack-home-npm.json";
/// `allowWrite ["~/src"]`, `denyWrite ["~/src/safe"]`.
const DENY_PROJECT: &str = "attack-deny-project.json";

/// Run `write-file MODE <home>/REL` under `fixture`; require a block. The
/// global post-condition compares the fake home byte for byte as well.
fn home_write(id: &str, fixture: &str, mode: &str, rel: &str, setup: &[&str]) {
    let mut lab = Lab::new(id);
    for dir in setup {
        std::fs::create_dir_all(lab.home(dir))
            .unwrap_or_else(|e| panic!("plant ~/{dir} in the fake home: {e}"));
    }
    if setup.contains(&"src/safe") {
        for f in ["src/safe/Cargo.toml", "src/safe/package.json"] {
            std::fs::write(lab.home(f), "{}\n")
                .unwrap_or_else(|e| panic!("plant the project's {f}: {e}"));
        }
    }
    lab.rebaseline_home();
    let path = lab.home(rel);
    let run = lab.jailed(
        fixture,
        &["write-file", mode, &path],
        &RunOptions::default(),
    );
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_lesskey() {
    home_write("B1-home-lesskey", HOME_WRITABLE, "create", ".lesskey", &[]);
}

#[test]
fn blocks_gdbinit() {
    home_write("B1-home-gdbinit", HOME_WRITABLE, "create", ".gdbinit", &[]);
}

#[test]
fn blocks_docker_cli_plugin() {
    home_write(
        "B1-home-docker-cli-plugin",
        HOME_WRITABLE,
        "mkdirs",
        ".docker/cli-plugins/docker-buildx",
        &[],
    );
}

#[test]
fn blocks_terminal_config() {
    home_write(
        "B1-home-terminal",
        HOME_WRITABLE,
        "mkdirs",
        ".config/kitty/kitty.conf",
        &[],
    );
}

#[test]
fn blocks_another_agents_mcp_config() {
    home_write(
        "B1-home-agent-mcp",
        HOME_WRITABLE,
        "mkdirs",
        ".gemini/settings.json",
        &[],
    );
}

#[test]
fn blocks_known_hosts() {
    home_write(
        "B1-home-known-hosts",
        HOME_WRITABLE,
        "create",
        ".ssh/known_hosts",
        &[],
    );
}

#[test]
fn blocks_a_dot_file_no_list_names() {
    home_write(
        "B1-home-unknown-dotfile",
        HOME_WRITABLE,
        "create",
        ".newtoolrc",
        &[],
    );
}

#[test]
fn blocks_the_xdg_data_directory() {
    home_write(
        "B1-home-xdg-data",
        HOME_WRITABLE,
        "mkdirs",
        ".local/share/newtool/plugin.sh",
        &[],
    );
}

#[test]
fn blocks_npx_inside_an_allowed_npm() {
    home_write(
        "B1-home-npx",
        HOME_NPM,
        "mkdirs",
        ".npm/_npx/6f1ec2/node_modules/.bin/cowsay",
        &[".npm"],
    );
}

#[test]
fn blocks_cargo_config_inside_an_allowed_cargo() {
    home_write(
        "B1-home-cargo-config-open",
        HOME_NPM,
        "append",
        ".cargo/config.toml",
        &[],
    );
}

#[test]
fn blocks_cargo_config_above_a_deny_write_project() {
    home_write(
        "B1-above-cargo-config",
        DENY_PROJECT,
        "mkdirs",
        "src/.cargo/config.toml",
        &["src/safe"],
    );
}

#[test]
fn blocks_npmrc_above_a_deny_write_project() {
    home_write(
        "B1-above-npmrc",
        DENY_PROJECT,
        "create",
        "src/.npmrc",
        &["src/safe"],
    );
}

#[test]
fn blocks_rust_toolchain_above_a_deny_write_project() {
    home_write(
        "B1-above-rust-toolchain",
        DENY_PROJECT,
        "create",
        "src/rust-toolchain.toml",
        &["src/safe"],
    );
}

#[test]
fn blocks_go_work_above_a_deny_write_project() {
    home_write(
        "B1-above-go-work",
        DENY_PROJECT,
        "create",
        "src/go.work",
        &["src/safe"],
    );
}

fn ws_write(id: &str, mode: &str, rel: &str) {
    expect_blocked(id, HOME_READABLE, |l| argv!["write-file", mode, l.ws(rel)]);
}

#[test]
fn blocks_lefthook_local() {
    ws_write("B2-family-lefthook-local", "create", "lefthook-local.yml");
}

#[test]
fn blocks_lefthook_toml_nine_levels_down() {
    ws_write(
        "B2-family-lefthook-toml-deep",
        "mkdirs",
        "a/b/c/d/e/f/g/h/lefthook.toml",
    );
}

#[test]
fn blocks_devcontainer_json() {
    ws_write(
        "B2-family-devcontainer-json",
        "create",
        ".devcontainer.json",
    );
}

#[test]
fn blocks_another_agents_project_directory_nine_levels_down() {
    ws_write(
        "B2-family-agent-dir-deep",
        "mkdirs",
        "a/b/c/d/e/f/g/h/.gemini/settings.json",
    );
}

#[test]
fn blocks_a_code_workspace_file() {
    ws_write(
        "B2-family-code-workspace",
        "create",
        "project.code-workspace",
    );
}

#[test]
fn blocks_an_acl_that_makes_a_disabled_hook_executable() {
    expect_blocked("B6-fd-acl-hook", HOME_READABLE, |l| {
        argv!["fd-meta", "acl-exec", l.ws(".git/hooks/post-merge")]
    });
}

#[test]
fn blocks_an_acl_that_makes_bashrc_world_writable() {
    expect_blocked("B6-fd-acl-bashrc", HOME_WRITABLE, |l| {
        argv!["fd-meta", "acl-world", l.home(".bashrc")]
    });
}

#[test]
fn blocks_an_extended_attribute_through_a_descriptor() {
    expect_blocked("B6-fd-xattr-bashrc", HOME_WRITABLE, |l| {
        argv!["fd-meta", "xattr", l.home(".bashrc")]
    });
}
