//! Protection by default for what no list names, through the real binary:
//! a writable home keeps its configuration (tool files no list names, and
//! every way of planting them) while the user's visible files and an
//! explicitly allowed dot entry stay writable, with the mandatory entries
//! inside it still held; configuration tools read from above a `denyWrite`
//! project; every entry of the catalogue of names at any depth (families
//! included) at depth 1 and at depth 9; and metadata changed through a
//! descriptor (POSIX ACLs, extended attributes, mode, owner) judged as its
//! path form. Runs as root and as an unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// `t NAME CMD…`: runs CMD quietly, prints `NAME=ok` or `NAME=fail`.
const T: &str = r#"t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=fail"; fi; }
"#;

/// `t` of a shell line that makes the parent directories and appends to
/// `$HOME/<rel>` (or `./<rel>`).
fn plant(name: &str, path: &str) -> String {
    format!(
        "t '{name}' sh -c 'mkdir -p \"$(dirname \"{path}\")\" 2>/dev/null; echo planted >> \"{path}\"'\n"
    )
}

/// Tool configuration no list of srt's names, in a writable home: shells,
/// pagers, debuggers, terminals, docker's CLI plugins, agents, ssh.
const HOME_PLANTS: &[&str] = &[
    ".lesskey",
    ".config/lesskey",
    ".gdbinit",
    ".lldbinit",
    ".tcshrc",
    ".kshrc",
    ".bash_completion",
    ".config/nushell/config.nu",
    ".local/share/bash-completion/completions/git",
    ".config/kitty/kitty.conf",
    ".config/alacritty/alacritty.toml",
    ".wezterm.lua",
    ".config/ghostty/config",
    ".docker/cli-plugins/docker-buildx",
    ".docker/config.json",
    ".claude.json",
    ".claude/settings.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".cursor/mcp.json",
    ".config/opencode/opencode.json",
    ".ssh/known_hosts",
    ".psqlrc",
    ".newtoolrc",
    ".config/newtool/config.toml",
    ".local/share/newtool/plugin.sh",
    ".local/state/newtool/x",
    // Inside the explicitly allowed entries: the mandatory ones.
    ".npm/_npx/1a2b/node_modules/.bin/cowsay",
    ".cargo/config.toml",
    ".cargo/bin/cargo-evil",
    ".cargo/env",
    ".cargo/registry/src/index.crates.io/x-1.0.0/build.rs",
    ".cargo/registry/cache/index.crates.io/x-1.0.0.crate",
];

#[test]
fn a_writable_home_keeps_its_configuration() {
    let lab = Lab::new("dg-home");
    for f in [".gdbinit", ".ssh/known_hosts", ".screenrc", "notes.txt"] {
        lab.file(&format!("home/{f}"), "ORIG\n");
    }
    lab.file("home/staging", "planted\n");
    lab.dir("home/.npm/_cacache");
    // An allowWrite entry that does not exist is ignored (as in srt).
    lab.dir("home/.myapp");
    lab.dir("home/.cargo");
    let fs = json!({
        "denyRead": [],
        "allowWrite": ["~", ".", "~/.myapp", "~/.npm", "~/.cargo"],
        "denyWrite": [],
    });
    let mut script = String::from(T);
    for (i, rel) in HOME_PLANTS.iter().enumerate() {
        script.push_str(&plant(&format!("p{i}"), &format!("$HOME/{rel}")));
    }
    script.push_str(
        "t chmod chmod 755 $HOME/.gdbinit
         t renameonto mv $HOME/staging $HOME/.gdbinit
         t link ln $HOME/notes.txt $HOME/.newlink
         t symlink ln -s /tmp $HOME/.newdir
         t rm rm $HOME/.screenrc
         t recreate sh -c 'echo planted > $HOME/.screenrc'
         t notes sh -c 'echo more >> $HOME/notes.txt'
         t project sh -c 'mkdir -p $HOME/projects/a && echo x > $HOME/projects/a/b.txt'
         t myapp sh -c 'mkdir -p $HOME/.myapp/cache && echo x > $HOME/.myapp/cache/state'
         t cacache sh -c 'echo x > $HOME/.npm/_cacache/index'
         t pkgcache sh -c 'echo x > $HOME/.cargo/.package-cache'
         t workspace sh -c 'echo x > ./file'
",
    );
    let o = lab.run(fs, &script);
    for (i, rel) in HOME_PLANTS.iter().enumerate() {
        let line = format!("p{i}=fail");
        assert!(
            stdout(&o).lines().any(|l| l == line),
            "{rel} was planted\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let on_host = std::fs::read_to_string(lab.home.join(rel)).unwrap_or_default();
        assert!(!on_host.contains("planted"), "{rel} changed on the host");
    }
    for refused in ["chmod", "renameonto", "link", "symlink", "recreate"] {
        has(&o, &format!("{refused}=fail"));
    }
    for allowed in [
        "rm",
        "notes",
        "project",
        "myapp",
        "cacache",
        "pkgcache",
        "workspace",
    ] {
        has(&o, &format!("{allowed}=ok"));
    }
    let mode = std::fs::metadata(lab.home.join(".gdbinit")).unwrap();
    assert_eq!(mode.permissions().mode() & 0o111, 0);
    assert!(!lab.home.join(".screenrc").exists());
    assert!(!lab.home.join(".newlink").exists());
    // Each refusal says which rule, and what to do about the default one.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(".lesskey (create): a mandatory protection: less"),
        "{err}"
    );
    assert!(
        err.contains(".config (mkdir): the home's configuration, protected by default"),
        "{err}"
    );
}

#[test]
fn the_xdg_directories_set_elsewhere_are_protected_too() {
    let lab = Lab::new("dg-xdg");
    lab.dir("home/cfg");
    lab.dir("home/data");
    let fs = json!({"denyRead": [], "allowWrite": ["~"], "denyWrite": []});
    let mut script = String::from(T);
    for (i, rel) in [
        "cfg/kitty/kitty.conf",
        "cfg/git/config",
        "cfg/newtool/config",
        "data/applications/evil.desktop",
        "data/newtool/plugin.sh",
    ]
    .iter()
    .enumerate()
    {
        script.push_str(&plant(&format!("x{i}"), &format!("$HOME/{rel}")));
    }
    script.push_str("t notes sh -c 'echo x > $HOME/notes.txt'\n");
    std::fs::write(
        lab.root.join("settings.json"),
        json!({"network": {"allowedDomains": [], "deniedDomains": []}, "filesystem": fs})
            .to_string(),
    )
    .unwrap();
    let mut cmd = lab.command(&lab.root.join("settings.json"), &script);
    cmd.env("XDG_CONFIG_HOME", lab.home.join("cfg"))
        .env("XDG_DATA_HOME", lab.home.join("data"));
    let o = cmd.output().unwrap();
    for i in 0..5 {
        has(&o, &format!("x{i}=fail"));
    }
    has(&o, "notes=ok");
}

/// What tools read from the directories above a project.
const ABOVE_PLANTS: &[&str] = &[
    ".cargo/config.toml",
    ".cargo/config",
    ".npmrc",
    ".yarnrc.yml",
    "rust-toolchain.toml",
    "rust-toolchain",
    "go.work",
    "Directory.Build.props",
    "Directory.Build.targets",
    "NuGet.Config",
    "global.json",
    ".envrc",
    "mise.toml",
    ".mise.local.toml",
    ".config/mise/config.toml",
    ".tool-versions",
    ".python-version",
    ".mvn/extensions.xml",
    "Cargo.toml",
    "package.json",
    "pnpm-workspace.yaml",
];

#[test]
fn a_deny_write_project_keeps_what_its_tools_read_from_above() {
    let lab = Lab::new("dg-above");
    lab.file("home/src/safe/Cargo.toml", "[package]\nname = \"safe\"\n");
    lab.file("home/src/safe/package.json", "{}\n");
    lab.file("home/src/safe/src/main.rs", "fn main() {}\n");
    lab.file("home/src/other/README", "x\n");
    let fs = json!({"denyRead": [], "allowWrite": ["~/src"], "denyWrite": ["~/src/safe"]});
    // The link first: `mkdir -p .cargo` below makes the directory.
    let mut script = format!("{T}t linkcargo ln -s $HOME/src/other $HOME/src/.cargo\n");
    for (i, rel) in ABOVE_PLANTS.iter().enumerate() {
        script.push_str(&plant(&format!("a{i}"), &format!("$HOME/src/{rel}")));
    }
    script.push_str(
        "t safe sh -c 'echo x >> $HOME/src/safe/src/main.rs'
         t readme sh -c 'echo x > $HOME/src/README.md'
         t sibling sh -c 'mkdir -p $HOME/src/other/.cargo && echo x > $HOME/src/other/.cargo/config.toml'
         t siblingrc sh -c 'echo x > $HOME/src/other/.npmrc'
         t pyproject sh -c 'echo x > $HOME/src/pyproject.toml'
",
    );
    let o = lab.run(fs, &script);
    for (i, rel) in ABOVE_PLANTS.iter().enumerate() {
        let line = format!("a{i}=fail");
        assert!(
            stdout(&o).lines().any(|l| l == line),
            "~/src/{rel} was planted\n{}",
            stdout(&o)
        );
        assert!(!lab.home.join("src").join(rel).exists(), "~/src/{rel}");
    }
    for refused in ["safe", "linkcargo"] {
        has(&o, &format!("{refused}=fail"));
    }
    for allowed in ["readme", "sibling", "siblingrc", "pyproject"] {
        has(&o, &format!("{allowed}=ok"));
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("read from above by a denyWrite directory"),
        "{err}"
    );
}

#[test]
fn every_catalogue_name_is_refused_at_depth_one_and_nine() {
    use oajail_policy::guard::anywhere::ANYWHERE;
    let lab = Lab::new("dg-families");
    let deep = "d1/d2/d3/d4/d5/d6/d7/d8";
    let mut script = String::from(T);
    let mut names = Vec::new();
    for e in ANYWHERE {
        for ex in e.examples() {
            for dir in [".", deep] {
                let n = names.len();
                script.push_str(&plant(&format!("n{n}"), &format!("{dir}/{ex}")));
                names.push((format!("{dir}/{ex}"), e.tool));
            }
        }
    }
    script.push_str(&format!(
        "t control sh -c 'mkdir -p {deep} && echo x > {deep}/ordinary.yml'\n"
    ));
    let o = lab.run(
        json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []}),
        &script,
    );
    let out = stdout(&o);
    for (n, (path, tool)) in names.iter().enumerate() {
        assert!(
            out.lines().any(|l| l == format!("n{n}=fail")),
            "{path} ({tool}) was planted"
        );
        assert!(!lab.ws.join(path).exists(), "{path} exists on the host");
    }
    has(&o, "control=ok");
}

/// The python side of the descriptor test: every call on a descriptor
/// opened read-only, printed as `name=ok` or `name=<errno name>`.
const FD_META: &str = r#"
import errno, os, struct
def acl(user, group, other):
    # POSIX ACL xattr: version 2, then (tag, perm, id) per entry.
    undefined = 0xffffffff
    entries = [(0x01, user), (0x04, group), (0x20, other)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, undefined) for t, p in entries)
def t(name, fn):
    try:
        fn(); print(name + "=ok")
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)))
home = os.environ["HOME"]
for label, path, mode in [("hook", ".git/hooks/pre-commit", acl(7, 5, 5)),
                          ("bashrc", home + "/.bashrc", acl(6, 6, 6)),
                          ("plain", "plain.txt", acl(7, 5, 5))]:
    fd = os.open(path, os.O_RDONLY)
    t(label + "-fd-acl", lambda: os.setxattr(fd, "system.posix_acl_access", mode))
    t(label + "-fd-user-xattr", lambda: os.setxattr(fd, "user.oajail", b"1"))
    t(label + "-fd-remove-xattr", lambda: os.removexattr(fd, "user.oajail"))
    t(label + "-fd-chmod", lambda: os.fchmod(fd, 0o777))
    t(label + "-fd-chown", lambda: os.fchown(fd, -1, 54321))
    t(label + "-path-acl", lambda: os.setxattr(path, "system.posix_acl_access", mode))
    os.close(fd)
# A descriptor whose name was removed while another link remains.
fd = os.open("linked-a", os.O_RDONLY)
os.unlink("linked-a")
t("unlinked-fd-chmod", lambda: os.fchmod(fd, 0o777))
"#;

#[test]
fn metadata_through_a_descriptor_is_judged_as_its_path_form() {
    let lab = Lab::new("dg-fd");
    let hook = lab.file("ws/.git/hooks/pre-commit", "#!/bin/sh\ntouch pwned\n");
    lab.file("ws/.git/HEAD", "ref: refs/heads/main\n");
    lab.dir("ws/.git/objects");
    let bashrc = lab.file("home/.bashrc", "# rc\n");
    lab.file("ws/plain.txt", "x\n");
    lab.file("ws/linked-a", "x\n");
    std::fs::hard_link(lab.ws.join("linked-a"), lab.ws.join("linked-b")).unwrap();
    for f in [&hook, &bashrc] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let fs = json!({"denyRead": [], "allowWrite": [".", "~"], "denyWrite": []});
    let o = lab.run(
        fs,
        &format!("/usr/bin/python3 - <<'PYEOF'\n{FD_META}\nPYEOF\n"),
    );
    for label in ["hook", "bashrc"] {
        for call in [
            "fd-acl",
            "fd-user-xattr",
            "fd-remove-xattr",
            "fd-chmod",
            "fd-chown",
            "path-acl",
        ] {
            has(&o, &format!("{label}-{call}=EACCES"));
        }
    }
    // The same calls on an ordinary file do what they would outside.
    for call in [
        "fd-acl",
        "fd-user-xattr",
        "fd-remove-xattr",
        "fd-chmod",
        "path-acl",
    ] {
        has(&o, &format!("plain-{call}=ok"));
    }
    has(&o, "unlinked-fd-chmod=EACCES");
    for f in [&hook, &bashrc] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "{} changed mode", f.display());
    }
    assert_eq!(
        std::fs::metadata(lab.ws.join("linked-b"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
}
