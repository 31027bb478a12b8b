//! The host as the user finds it, through the real binary: nothing is
//! created, changed or left on the host to enforce the policy, whatever the
//! moment a `kill -9` hits the supervisor; a workspace under the host's
//! `/tmp` is guarded like any other; `/tmp` as the working directory is
//! refused with one line, and `allowWrite: ["/tmp"]` shares the host's
//! `/tmp`; a 300,000-entry tree starts and stays guarded; a workspace whose
//! repository the caller cannot write into still runs. Runs as root and as an
//! unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn ws() -> serde_json::Value {
    json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []})
}

fn settings(lab: &Lab, fs: serde_json::Value) -> PathBuf {
    let file = lab.root.join("settings.json");
    let s = json!({"network": {"allowedDomains": [], "deniedDomains": []}, "filesystem": fs});
    std::fs::write(&file, s.to_string()).unwrap();
    file
}

/// Every path under `dir` with its type, size, mode and modification time.
fn snapshot(dir: &Path) -> String {
    let out = Command::new("find")
        .arg(dir)
        .args(["-printf", "%p %y %s %m %T@\\n"])
        .output()
        .unwrap();
    let mut lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

#[test]
fn kill_minus_nine_at_any_moment_leaves_the_host_as_it_was() {
    let lab = Lab::new("host-kill");
    // A repository and a home without any of the shell files, so every
    // protected name is missing (what placeholders used to be made for).
    lab.file("ws/.git/HEAD", "ref: refs/heads/main\n");
    lab.dir("ws/.git/objects");
    lab.file("ws/src/main.rs", "fn main() {}\n");
    lab.file("home/notes.txt", "n\n");
    let file = settings(
        &lab,
        json!({"denyRead": [], "allowWrite": ["~", "."], "denyWrite": []}),
    );
    let before = snapshot(&lab.root);
    for delay_ms in [0u64, 1, 2, 3, 5, 8, 12, 20, 35, 60, 100, 200] {
        let mut child = lab.command(&file, "sleep 30").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // The jail dies with the supervisor (parent-death signal).
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            snapshot(&lab.root),
            before,
            "after kill -9 at {delay_ms} ms"
        );
    }
}

/// A scratch directory under the host's `/tmp`, removed on drop.
struct HostTmp(PathBuf);

impl HostTmp {
    fn new(tag: &str) -> HostTmp {
        let dir = PathBuf::from(format!("/tmp/oajail-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        HostTmp(dir)
    }
}

impl Drop for HostTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_workspace_under_the_host_tmp_is_guarded() {
    let lab = Lab::new("host-tmpws");
    let tmp = HostTmp::new("ws");
    let file = settings(&lab, ws());
    let script = "echo rc=$(w .bashrc); mkdir -p a/b; echo deep=$(w a/b/.bashrc); \
        mkdir -p r/.git/hooks; echo hook=$(w r/.git/hooks/post-checkout); echo ok=$(w ok.txt)";
    let mut cmd = lab.command(&file, script);
    cmd.current_dir(&tmp.0);
    let o = cmd.output().unwrap();
    for want in ["rc=DENIED", "deep=DENIED", "hook=DENIED", "ok=WROTE"] {
        has(&o, want);
    }
    assert!(
        tmp.0.join("ok.txt").exists(),
        "the write did not reach the host"
    );
    assert!(!tmp.0.join(".bashrc").exists());
    assert!(!tmp.0.join("r/.git/hooks/post-checkout").exists());
}

#[test]
fn tmp_as_the_working_directory_is_refused_with_the_fix_or_shared_when_asked() {
    let lab = Lab::new("host-cwdtmp");
    // Nothing makes the host's /tmp visible: one line, naming the fix.
    let file = settings(
        &lab,
        json!({"denyRead": [], "allowWrite": [], "denyWrite": []}),
    );
    let mut cmd = lab.command(&file, "echo ran");
    cmd.current_dir("/tmp");
    let o = cmd.output().unwrap();
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/tmp") && err.contains("allowWrite"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("ran"));
    // `allowWrite: ["."]` from /tmp asks for the host's /tmp: it is shared.
    let file = settings(&lab, ws());
    let mut cmd = lab.command(
        &file,
        "echo ran; ls -d .X11-unix 2>/dev/null | sed 's/^/x11=/'",
    );
    cmd.current_dir("/tmp");
    let o = cmd.output().unwrap();
    has(&o, "ran");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the host's /tmp is shared"), "{err}");
}

#[test]
fn allow_write_tmp_shares_the_host_tmp() {
    let lab = Lab::new("host-sharetmp");
    let tmp = HostTmp::new("share");
    let file = settings(
        &lab,
        json!({"denyRead": [], "allowWrite": [".", "/tmp"], "denyWrite": []}),
    );
    let target = tmp.0.join("from-jail.txt");
    let script = format!(
        "echo shared=$(w {}); echo rc=$(w {}/.bashrc)",
        target.display(),
        tmp.0.display()
    );
    let o = lab.command(&file, &script).output().unwrap();
    has(&o, "shared=WROTE");
    has(&o, "rc=DENIED");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "jail\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the host's /tmp is shared"), "{err}");
}

#[test]
fn a_tree_of_300000_entries_starts_and_stays_guarded() {
    let lab = Lab::new("host-big");
    let code = r#"
import os
for d in range(600):
    p = "nm/p%d" % d
    os.makedirs(p, exist_ok=True)
    open(p + "/seed", "w").write("x")
    for i in range(499):
        os.link(p + "/seed", "%s/f%d" % (p, i))
os.makedirs("nm/p599/a/b/c/d/e/f", exist_ok=True)
"#;
    let made = Command::new("python3")
        .args(["-c", code])
        .current_dir(&lab.ws)
        .status()
        .unwrap();
    assert!(made.success());
    let o = lab.run(
        ws(),
        "echo rc=$(w nm/p599/a/b/c/d/e/f/.bashrc); echo ok=$(w nm/p599/a/new.txt)",
    );
    has(&o, "rc=DENIED");
    has(&o, "ok=WROTE");
}

#[test]
fn a_repository_the_caller_cannot_write_into_is_fine() {
    // What another user's repository looks like to the caller: nothing
    // inside `.git` may be created. Placeholders made such runs fail.
    let lab = Lab::new("host-foreign");
    lab.file("ws/repo/.git/HEAD", "ref: refs/heads/main\n");
    lab.dir("ws/repo/.git/objects");
    let git = lab.ws.join("repo/.git");
    let ro = |mode| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    ro(0o555);
    let o = lab.run(ws(), "echo ran");
    ro(0o755);
    has(&o, "ran");
    assert_eq!(o.status.code(), Some(0));
}
