//! The guard as the only holder of the mandatory write denies, through the
//! real binary: every kind of write to a protected file deep in a
//! `node_modules`, the twins of the shell and git files in a writable home,
//! links and renames judged by what they are, hard links, bracket names,
//! pid 1 as a confused deputy, racing threads. Runs as root and as an
//! unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;

fn ws() -> serde_json::Value {
    json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []})
}

/// `t NAME CMD…`: runs CMD quietly, prints `NAME=ok` or `NAME=fail`.
const T: &str = r#"t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=fail"; fi; }
"#;

fn py(code: &str) -> String {
    format!("/usr/bin/python3 - <<'PYEOF'\n{code}\nPYEOF\n")
}

const DEEP: &str = "node_modules/a/node_modules/b/lib/c/d/e";

#[test]
fn a_protected_file_at_depth_nine_in_node_modules_cannot_change() {
    let lab = Lab::new("wg-deep");
    lab.file(&format!("ws/{DEEP}/.bashrc"), "ORIG");
    lab.file(&format!("ws/{DEEP}/index.js"), "ORIG");
    let code = format!(
        r#"
import ctypes, os
d = "{DEEP}"
f = d + "/.bashrc"
libc = ctypes.CDLL(None, use_errno=True)
def t(name, fn):
    try:
        r = fn()
        print(name + "=" + ("fail" if r is not None and r < 0 else "ok"))
    except OSError:
        print(name + "=fail")
t("append", lambda: open(f, "a").write("x"))
t("otrunc", lambda: open(f, "w"))
t("rdwr", lambda: os.close(os.open(f, os.O_RDWR)))
t("truncate", lambda: os.truncate(f, 0))
t("chmod", lambda: os.chmod(f, 0o777))
fd = os.open(f, os.O_RDONLY)
t("fchmod", lambda: os.fchmod(fd, 0o755))
t("xattr", lambda: os.setxattr(f, "user.x", b"1"))
open("evil", "w").write("x")
t("renameover", lambda: os.rename("evil", f))
t("linkover", lambda: os.link("evil", d + "/.zshrc"))
t("renameaway", lambda: os.rename(f, "stolen"))
t("ordinary", lambda: open(d + "/index.js", "a").write("ok"))
print("content=" + open(f).read())
# What cannot make anything run is not refused: times, a mode without
# execute, set-id or group/other write bits, and removing it.
t("utime", lambda: os.utime(f, (0, 0)))
t("chmod644", lambda: os.chmod(f, 0o600))
t("unlink", lambda: os.unlink(f))
t("recreate", lambda: open(f, "w").write("planted"))
print("gone=" + str(not os.path.exists(f)))
"#
    );
    let o = lab.run(ws(), &py(&code));
    for op in [
        "append",
        "otrunc",
        "rdwr",
        "truncate",
        "chmod",
        "fchmod",
        "xattr",
        "renameover",
        "linkover",
        "renameaway",
        "recreate",
    ] {
        has(&o, &format!("{op}=fail"));
    }
    for op in ["ordinary", "utime", "chmod644", "unlink"] {
        has(&o, &format!("{op}=ok"));
    }
    has(&o, "content=ORIG");
    has(&o, "gone=True");
}

#[test]
fn twins_of_shell_and_git_files_in_a_writable_home() {
    let lab = Lab::new("wg-twins");
    lab.dir("home/zdot");
    let fs = json!({"denyRead": [], "allowWrite": ["~", "."], "denyWrite": []});
    let paths = [
        ".config/git/config",
        ".bash_aliases",
        ".bashrc.d/evil.sh",
        ".config/fish/config.fish",
        ".config/fish/conf.d/evil.fish",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        "zdot/.zshrc",
        ".config/autostart/evil.desktop",
        ".config/systemd/user/evil.service",
        ".pam_environment",
        ".ssh/rc",
        ".local/bin/git",
        ".cargo/registry/src/x/build.rs",
        "xdg/git/config",
    ];
    let mut script = String::from(T);
    for p in paths {
        script.push_str(&format!(
            "t {p} sh -c 'mkdir -p \"$(dirname $HOME/{p})\" 2>/dev/null; echo x > $HOME/{p}'\n"
        ));
    }
    script.push_str("t known sh -c 'mkdir -p $HOME/.ssh && echo x >> $HOME/.ssh/known_hosts'\n");
    script.push_str("t cfglink sh -c 'mv $HOME/.config $HOME/c2 && ln -s /tmp $HOME/.config'\n");
    let mut cmd = lab.command(&lab.root.join("settings.json"), &script);
    std::fs::write(
        lab.root.join("settings.json"),
        json!({"network": {"allowedDomains": [], "deniedDomains": []}, "filesystem": fs})
            .to_string(),
    )
    .unwrap();
    cmd.env("XDG_CONFIG_HOME", lab.home.join("xdg"))
        .env("ZDOTDIR", lab.home.join("zdot"));
    let o = cmd.output().unwrap();
    for p in paths {
        has(&o, &format!("{p}=fail"));
        assert!(!lab.home.join(p).exists(), "{p} made");
    }
    has(&o, "known=ok");
    has(&o, "cfglink=fail");
}

#[test]
fn links_and_renames_are_judged_by_what_they_are() {
    let lab = Lab::new("wg-links");
    let code = r#"
import os
def t(name, fn):
    try:
        fn(); print(name + "=ok")
    except OSError:
        print(name + "=fail")
os.makedirs(".evil/agents", exist_ok=True)
os.symlink("../.evil", "t1")
t("renamelink", lambda: os.rename("t1", ".claude"))
os.symlink(".evil", "t2")
t("hardlinklink", lambda: os.link("t2", ".claude", follow_symlinks=False))
os.makedirs("prepared", exist_ok=True)
t("renamedir", lambda: os.rename("prepared", ".claude"))
t("newdir", lambda: os.mkdir(".claude"))
t("agent", lambda: open(".claude/agents.md", "w").write("notes"))
t("agents", lambda: os.mkdir(".claude/agents"))
open("plain", "w").write("x")
t("hardlinkname", lambda: os.link("plain", ".mcp.json"))
t("symlinkname", lambda: os.symlink("plain", ".gitmodules"))
print("claude_is_dir=" + str(os.path.isdir(".claude") and not os.path.islink(".claude")))
"#;
    let o = lab.run(ws(), &py(code));
    for want in [
        "renamelink=fail",
        "hardlinklink=fail",
        "renamedir=fail",
        "newdir=ok",
        "agent=ok",
        "agents=fail",
        "hardlinkname=fail",
        "symlinkname=fail",
        "claude_is_dir=True",
    ] {
        has(&o, want);
    }
}

#[test]
fn a_hard_link_of_a_protected_file_is_protected() {
    let lab = Lab::new("wg-hardlink");
    lab.file("home/.bashrc", "ORIG");
    std::fs::hard_link(lab.home.join(".bashrc"), lab.ws.join("innocent.txt")).unwrap();
    lab.file("ws/.git/HEAD", "ref: refs/heads/main\n");
    lab.dir("ws/.git/objects");
    lab.file("ws/.git/hooks/pre-push", "ORIG");
    std::fs::hard_link(lab.ws.join(".git/hooks/pre-push"), lab.ws.join("notes.txt")).unwrap();
    let script = format!(
        "{T}echo home=$(w innocent.txt); echo hook=$(w notes.txt)
         t relink ln .git/hooks/pre-push again.txt"
    );
    let o = lab.run(ws(), &script);
    has(&o, "home=DENIED");
    has(&o, "hook=DENIED");
    has(&o, "relink=fail");
    assert_eq!(
        std::fs::read_to_string(lab.home.join(".bashrc")).unwrap(),
        "ORIG"
    );
}

#[test]
fn bracket_names_are_read_literally_when_they_exist() {
    let lab = Lab::new("wg-brackets");
    lab.file("home/[private]/secret.txt", "SECRET");
    lab.file("ws/[locked]", "ORIG");
    let fs = json!({"denyRead": ["~/[private]"], "allowWrite": ["."], "denyWrite": ["./[locked]"]});
    let o = lab.run(
        fs,
        "echo read=$(r \"$HOME/[private]/secret.txt\"); echo write=$(w '[locked]')",
    );
    has(&o, "read=DENIED");
    has(&o, "write=DENIED");
    assert_eq!(
        std::fs::read_to_string(lab.ws.join("[locked]")).unwrap(),
        "ORIG"
    );
}

#[test]
fn pid_one_is_not_a_confused_deputy() {
    let lab = Lab::new("wg-deputy");
    let code = r#"
import os
def t(name, fn):
    try:
        fn(); print(name + "=ok")
    except OSError as e:
        print(name + "=fail")
for n in range(3, 12):
    t("fd%d" % n, lambda: os.close(os.open("/proc/1/fd/%d" % n, os.O_WRONLY | os.O_CREAT, 0o600)))
t("mem", lambda: os.close(os.open("/proc/1/mem", os.O_RDWR)))
t("own", lambda: open("/proc/self/fd/1", "w").write(""))
"#;
    let o = lab.run(ws(), &py(code));
    for n in 3..12 {
        has(&o, &format!("fd{n}=fail"));
    }
    has(&o, "mem=fail");
    has(&o, "own=ok");
}

#[test]
fn a_link_to_proc_self_names_the_caller_not_pid_one() {
    let lab = Lab::new("wg-selflink");
    // The command's own stdout is a file here; pid 1's is the test's pipe.
    let script = "ln -s /dev/stdout log; ln -s /proc/self/fd/1 log2; \
        sh -c 'echo via-link >> log; echo via-proc >> log2' > out.txt; \
        echo out=$(tr '\\n' , < out.txt)";
    let o = lab.run(ws(), script);
    has(&o, "out=via-link,via-proc,");
    assert!(
        !stdout(&o)
            .lines()
            .any(|l| l == "via-link" || l == "via-proc")
    );
}

#[test]
fn racing_links_never_reach_a_hook() {
    let lab = Lab::new("wg-race");
    lab.file("ws/r/.git/HEAD", "ref: refs/heads/main\n");
    lab.dir("ws/r/.git/objects");
    lab.dir("ws/r/.git/hooks");
    lab.dir("ws/safe");
    let code = r#"
import os, threading
stop = False
def swap():
    while not stop:
        for target in ("safe", "r/.git/hooks"):
            try:
                os.unlink("link")
            except FileNotFoundError:
                pass
            os.symlink(target, "link")
th = threading.Thread(target=swap); th.start()
for i in range(3000):
    try:
        with open("link/pre-commit", "w") as f:
            f.write("x")
    except OSError:
        pass
stop = True; th.join()
print("hook=" + str(os.path.exists("r/.git/hooks/pre-commit")))
print("safe=" + str(os.path.exists("safe/pre-commit")))
"#;
    let o = lab.run(ws(), &py(code));
    has(&o, "hook=False");
    has(&o, "safe=True");
}
