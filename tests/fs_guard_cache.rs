//! What pid 1 keeps between calls, changed through the jail: each kept fact
//! (which repository git finds for a directory, what its configuration
//! names, the directories resolved before) is changed by the command the
//! way a developer's tools change it — a new `.git`, a new `core.hooksPath`,
//! a renamed parent, a removed `.git` — and the next decision sees the
//! change. Each also races: a thread changes the
//! fact while another keeps trying to plant a hook through it. Runs as root
//! and as an unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;

/// A python one-off in the jail.
fn py(code: &str) -> String {
    format!("/usr/bin/python3 - <<'PYEOF'\n{code}\nPYEOF\n")
}

/// A repository made on the host at `rel` (in the lab), with `config`
/// appended to its configuration.
fn host_repo(lab: &Lab, rel: &str, config: &str) {
    let dir = lab.dir(rel);
    assert!(
        host_git(&dir, &["init", "-q", "-b", "main", "."])
            .status
            .success()
    );
    let path = dir.join(".git/config");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(config);
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_new_git_directory_is_seen() {
    let lab = Lab::new("cache-newgit");
    let script = format!(
        "{T}mkdir -p p/hk
         t before sh -c 'echo x > p/hk/first'
         t init G init -q p
         t hookspath G -C p config core.hooksPath hk
         t after sh -c 'echo x > p/hk/pre-commit'
         t other sh -c 'echo x > p/other'"
    );
    let o = lab.run(ws(true), &script);
    for want in [
        "before=ok",
        "init=ok",
        "hookspath=ok",
        "after=fail",
        "other=ok",
    ] {
        has(&o, want);
    }
    assert!(!lab.ws.join("p/hk/pre-commit").exists());
}

#[test]
fn a_changed_hooks_path_is_seen() {
    let lab = Lab::new("cache-hookspath");
    host_repo(&lab, "ws/r", "[core]\n\thooksPath = one\n");
    lab.file("ws/r/one/keep", "");
    let script = format!(
        "{T}cd r; mkdir -p two
         t one sh -c 'echo x > one/pre-commit'
         t two sh -c 'echo x > two/first'
         t set G config core.hooksPath two
         t twoafter sh -c 'echo x > two/pre-commit'
         t oneafter sh -c 'echo x > one/pre-commit'"
    );
    let o = lab.run(ws(true), &script);
    for want in [
        "one=fail",
        "two=ok",
        "set=ok",
        "twoafter=fail",
        "oneafter=ok",
    ] {
        has(&o, want);
    }
}

#[test]
fn a_renamed_parent_is_seen() {
    let lab = Lab::new("cache-rename");
    host_repo(&lab, "ws/p/r", "[core]\n\thooksPath = hk\n");
    lab.file("ws/p/r/hk/keep", "");
    lab.file("ws/p/r/src/a.txt", "a\n");
    let script = format!(
        "{T}t before sh -c 'echo x > p/r/hk/pre-commit'
         t src sh -c 'echo x > p/r/src/b.txt'
         t move mv p q
         t moved sh -c 'echo x > q/r/hk/pre-commit'
         t stale sh -c 'echo x > p/r/src/c.txt'
         test -e q/r/src/c.txt; echo leaked=$?
         t newsrc sh -c 'echo x > q/r/src/d.txt'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "before=fail",
        "src=ok",
        "move=ok",
        "moved=fail",
        "stale=fail",
        "leaked=1",
        "newsrc=ok",
    ] {
        has(&o, want);
    }
}

#[test]
fn removing_a_nested_git_leaves_the_enclosing_repository_read() {
    let lab = Lab::new("cache-unseen");
    host_repo(&lab, "ws/outer", "[core]\n\thooksPath = inner/hk\n");
    host_repo(&lab, "ws/outer/inner", "");
    lab.file("ws/outer/inner/hk/keep", "");
    let script = format!(
        "{T}cd outer/inner
         t first sh -c 'echo x > src.txt'
         t rmgit rm -rf .git
         t plant sh -c 'echo x > hk/pre-commit'"
    );
    let o = lab.run(ws(false), &script);
    for want in ["first=ok", "rmgit=ok", "plant=fail"] {
        has(&o, want);
    }
}

#[test]
fn racing_a_nested_git_directory_never_opens_a_hook_path() {
    let lab = Lab::new("cache-race-git");
    host_repo(&lab, "ws/outer", "[core]\n\thooksPath = inner/hk\n");
    host_repo(&lab, "ws/outer/inner", "");
    lab.dir("ws/outer/inner/hk");
    let code = r#"
import os, shutil, threading
os.chdir("outer/inner")
stop = False
def flip():
    while not stop:
        shutil.rmtree(".git", ignore_errors=True)
        for d in (".git/objects", ".git/refs/heads"):
            os.makedirs(d, exist_ok=True)
        with open(".git/HEAD", "w") as f:
            f.write("ref: refs/heads/main\n")
th = threading.Thread(target=flip); th.start()
planted = 0
for i in range(2000):
    try:
        with open("hk/pre-commit", "w") as f:
            f.write("x")
        planted += 1
    except OSError:
        pass
stop = True; th.join()
print("planted=%d" % planted)
print("hook=" + str(os.path.exists("hk/pre-commit")))
"#;
    let o = lab.run(ws(false), &py(code));
    has(&o, "planted=0");
    has(&o, "hook=False");
}

#[test]
fn racing_hooks_path_changes_end_with_the_last_one_in_force() {
    let lab = Lab::new("cache-race-config");
    host_repo(&lab, "ws/r", "[core]\n\thooksPath = one\n");
    lab.file("ws/r/one/pre-commit", "#!/bin/sh\n");
    lab.file("ws/r/two/pre-commit", "#!/bin/sh\n");
    let code = r##"
import os, subprocess, threading
os.chdir("r")
stop = False
def flip():
    for i in range(40):
        v = "two" if i % 2 == 0 else "one"
        subprocess.run(["git", "config", "core.hooksPath", v], check=True)
th = threading.Thread(target=flip); th.start()
while th.is_alive():
    for d in ("one", "two"):
        try:
            with open(d + "/pre-commit", "a") as f:
                f.write("")
        except OSError:
            pass
th.join()
last = subprocess.run(["git", "config", "core.hooksPath"], capture_output=True, text=True).stdout.strip()
print("last=" + last)
for d in ("one", "two"):
    try:
        with open(d + "/pre-commit", "a") as f:
            f.write("# planted\n")
        print(d + "=ok")
    except OSError:
        print(d + "=fail")
"##;
    let o = lab.run(ws(true), &py(code));
    has(&o, "last=one");
    has(&o, "one=fail");
    has(&o, "two=ok");
}

#[test]
fn racing_a_removed_directory_and_a_link_in_its_place_never_reaches_a_hook() {
    let lab = Lab::new("cache-race-dirs");
    host_repo(&lab, "ws/r", "");
    let code = r#"
import os, threading
stop = False
os.mkdir("x")
def flip():
    while not stop:
        try:
            os.rmdir("x")
        except OSError:
            pass
        try:
            os.symlink("r/.git/hooks", "x")
            os.unlink("x")
        except OSError:
            pass
        try:
            os.mkdir("x")
        except OSError:
            pass
th = threading.Thread(target=flip); th.start()
for i in range(3000):
    try:
        with open("x/pre-commit", "w") as f:
            f.write("x")
        os.unlink("x/pre-commit")
    except OSError:
        pass
stop = True; th.join()
print("hook=" + str(os.path.exists("r/.git/hooks/pre-commit")))
"#;
    let o = lab.run(ws(false), &py(code));
    has(&o, "hook=False");
}

#[test]
fn a_changed_working_directory_is_seen() {
    let lab = Lab::new("cache-cwd");
    let code = r#"
import os, threading
for d in ("d1", "d2", "d3"):
    os.mkdir(d)
top = os.getcwd()
def where(name):
    return [d for d in ("d1", "d2", "d3", ".") if os.path.exists(os.path.join(top, d, name))]
os.chdir("d1"); open("a", "w").close()
os.chdir("../d2"); open("b", "w").close()
fd = os.open(os.path.join(top, "d3"), os.O_RDONLY); os.fchdir(fd); os.close(fd)
open("c", "w").close()
os.chdir(top)
print("a=" + ",".join(where("a")), "b=" + ",".join(where("b")), "c=" + ",".join(where("c")))
# Another thread moves the shared working directory, then signals; the
# first thread's next file lands where the kernel puts it.
moved = threading.Event()
def mover():
    os.chdir(os.path.join(top, "d3")); moved.set()
open("before", "w").close()
t = threading.Thread(target=mover); t.start(); moved.wait()
open("after", "w").close()
t.join()
print("before=" + ",".join(where("before")), "after=" + ",".join(where("after")))
# Many flips: every file is where its inode says, in one of the two.
os.chdir(os.path.join(top, "d1"))
stop = False
def flip():
    while not stop:
        os.chdir(os.path.join(top, "d1")); os.chdir(os.path.join(top, "d2"))
t = threading.Thread(target=flip); t.start()
bad = 0
for i in range(500):
    fd = os.open("r%d" % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    ino = os.fstat(fd).st_ino; os.close(fd)
    homes = [d for d in ("d1", "d2") if os.path.exists(os.path.join(top, d, "r%d" % i)) and os.stat(os.path.join(top, d, "r%d" % i)).st_ino == ino]
    bad += len(homes) != 1
stop = True; t.join()
print("bad=%d" % bad)
"#;
    let o = lab.run(ws(false), &py(code));
    for want in ["a=d1 b=d2 c=d3", "before=. after=d3", "bad=0"] {
        has(&o, want);
    }
}
