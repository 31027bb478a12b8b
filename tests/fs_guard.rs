//! The create-guard through the real binary: names created during the run
//! (new repositories, `.claude/agents`, `.bashrc` in a new directory, links,
//! renames, exchanges, a dangling symlink into hooks, a racing thread) are
//! refused, and ordinary work keeps its semantics (umask, O_EXCL, errno,
//! O_CLOEXEC, cp -r, tar x, git with allowGitConfig, 1,000 files).
//! Runs as root and as an unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;

/// `t NAME CMD…`: runs CMD quietly, prints `NAME=ok` or `NAME=fail`.
const T: &str = r#"t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=fail"; fi; }
"#;

/// A python one-off in the jail.
fn py(code: &str) -> String {
    format!("/usr/bin/python3 - <<'PYEOF'\n{code}\nPYEOF\n")
}

#[test]
fn new_repository_hooks_are_refused() {
    let lab = Lab::new("guard-repo");
    let script = format!(
        "{T}git init -q sub 2>/dev/null; t hook sh -c 'echo x > sub/.git/hooks/pre-commit'
         mkdir -p a/b/c/d/e/f/.git; t mkhooks mkdir a/b/c/d/e/f/.git/hooks
         t deep sh -c 'echo x > a/b/c/d/e/f/.git/hooks/pre-commit'
         t config sh -c 'echo x > a/b/c/d/e/f/.git/config'
         t commondir sh -c 'echo x > a/b/c/d/e/f/.git/commondir'
         t sample sh -c 'echo x > a/b/c/d/e/f/.git/hooks/pre-commit.sample'
         t promote mv a/b/c/d/e/f/.git/hooks/pre-commit.sample a/b/c/d/e/f/.git/hooks/pre-commit
         ls sub/.git/hooks a/b/c/d/e/f/.git/hooks | grep -c '^pre-commit$' | sed 's/^/live=/'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "hook=fail",
        "mkhooks=ok",
        "deep=fail",
        "config=fail",
        "commondir=fail",
        "sample=ok",
        "promote=fail",
        "live=0",
    ] {
        has(&o, want);
    }
}

#[test]
fn git_works_with_allow_git_config_but_hooks_stay_closed() {
    let lab = Lab::new("guard-git");
    let script = format!(
        "{T}t init git init -q r; cd r
         git config user.email a@b.c; git config user.name n
         echo x > f; t add git add f; t commit git commit -qm m
         t log sh -c 'git log --oneline | grep -q m'
         t hook sh -c 'echo x > .git/hooks/post-commit'"
    );
    let o = lab.run(ws(true), &script);
    for want in ["init=ok", "add=ok", "commit=ok", "log=ok", "hook=fail"] {
        has(&o, want);
    }
}

#[test]
fn protected_names_created_during_the_run_are_refused() {
    let lab = Lab::new("guard-names");
    lab.dir("ws/d");
    let script = format!(
        "{T}t claude mkdir -p a/b/.claude/agents
         t claudeok mkdir -p c/.claude/projects
         t vscode mkdir -p n/.vscode
         t bashrc sh -c 'mkdir -p nd && echo x > nd/.bashrc'
         mkdir s1 && t gitlink ln -s ../d s1/.git
         mkdir s2 && t gitfile sh -c 'echo gitdir: ../d > s2/.git'
         echo x > plain; t hardlink ln plain nd/.bashrc
         t renamefile sh -c 'echo y > y && mv y nd/.zshrc'
         mkdir -p s3 mv1/hooks && t renamedir mv mv1 s3/.git
         mkdir m1 && t renamedirclaude mv m1 nd/.claude
         t ordinary sh -c 'mkdir -p ok/deep && echo x > ok/deep/f && mv ok/deep/f ok/g && ln ok/g ok/h && ln -s g ok/i'
         ls -a nd | grep -c -e '^\\.bashrc$' -e '^\\.zshrc$' -e '^\\.claude$' | sed 's/^/made=/'"
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "claude=fail",
        "claudeok=ok",
        "vscode=fail",
        "bashrc=fail",
        "gitlink=fail",
        "gitfile=fail",
        "hardlink=fail",
        "renamefile=fail",
        "renamedir=fail",
        "renamedirclaude=fail",
        "ordinary=ok",
        "made=0",
    ] {
        has(&o, want);
    }
}

#[test]
fn dangling_symlink_and_rename_exchange_are_refused() {
    let lab = Lab::new("guard-tricks");
    let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("r/.git/hooks", exist_ok=True)
os.symlink("r/.git/hooks/pre-commit", "dangling")
try:
    open("dangling", "w").write("x"); print("dangling=ok")
except OSError:
    print("dangling=fail")
os.symlink("r/.git/hooks/pre-commit.sample", "sample-link")
open("payload", "w").write("x")
os.makedirs("r/.git/info", exist_ok=True)
open("r/.git/info/exclude", "w").write("x")
AT_FDCWD, RENAME_EXCHANGE = -100, 2
def exchange(a, b):
    r = libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)
    return "ok" if r == 0 else "fail"
# A directory prepared outside .git, swapped with the (empty) hooks.
os.makedirs("h2", exist_ok=True)
open("h2/pre-commit", "w").write("x")
print("exchange=" + exchange("h2", "r/.git/hooks"))
open("other", "w").write("y")
print("exchangeok=" + exchange("payload", "other"))
print("live=" + str(os.path.exists("r/.git/hooks/pre-commit")))
"#;
    let o = lab.run(ws(false), &py(code));
    for want in [
        "dangling=fail",
        "exchange=fail",
        "exchangeok=ok",
        "live=False",
    ] {
        has(&o, want);
    }
}

#[test]
fn a_racing_thread_never_creates_a_protected_name() {
    let lab = Lab::new("guard-race");
    let code = r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("race", exist_ok=True)
buf = ctypes.create_string_buffer(b"race/xxxxxxx", 64)
stop = False
def flip():
    a, b = b"race/xxxxxxx\0", b"race/.bashrc\0"
    while not stop:
        ctypes.memmove(buf, b, len(b)); ctypes.memmove(buf, a, len(a))
t = threading.Thread(target=flip); t.start()
for _ in range(3000):
    libc.mkdir(buf, 0o755)
    libc.rmdir(b"race/xxxxxxx")
stop = True; t.join()
print("bashrc=" + str(os.path.exists("race/.bashrc")))
"#;
    let o = lab.run(ws(false), &py(code));
    has(&o, "bashrc=False");
}

#[test]
fn ordinary_work_keeps_its_semantics() {
    let lab = Lab::new("guard-semantics");
    let code = r#"
import errno, fcntl, os, stat
os.umask(0o077)
open("private", "w").close()
print("mode=%o" % stat.S_IMODE(os.stat("private").st_mode))
os.mkdir("pdir"); print("dirmode=%o" % stat.S_IMODE(os.stat("pdir").st_mode))
os.umask(0o022)
try:
    os.open("private", os.O_CREAT | os.O_EXCL | os.O_WRONLY); print("excl=ok")
except OSError as e:
    print("excl=" + errno.errorcode[e.errno])
try:
    os.open("missing/x", os.O_CREAT | os.O_WRONLY); print("enoent=ok")
except OSError as e:
    print("enoent=" + errno.errorcode[e.errno])
try:
    os.open("/usr/oajail-guard-test", os.O_CREAT | os.O_WRONLY); print("ro=ok")
except OSError as e:
    print("ro=" + ("denied" if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM) else errno.errorcode[e.errno]))
fd = os.open("c1", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC)
print("cloexec=%d" % (fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
# os.open always adds O_CLOEXEC (PEP 446): call libc's open directly.
import ctypes
fd = ctypes.CDLL(None).open(b"c2", os.O_CREAT | os.O_WRONLY, 0o644)
print("inherit=%d" % (fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.openat(999, b"x", os.O_CREAT | os.O_WRONLY, 0o644)
print("badfd=" + ("ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]))
print("nonblock=%d" % (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK))
os.write(fd, b"abc"); os.close(fd)
fd = os.open("c2", os.O_CREAT | os.O_WRONLY | os.O_TRUNC); os.close(fd)
print("trunc=%d" % os.stat("c2").st_size)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600); os.write(fd, b"t")
print("tmpfile=ok")
os.makedirs("many", exist_ok=True)
for i in range(1000):
    with open("many/f%d" % i, "w") as f:
        f.write("x")
print("many=%d" % len(os.listdir("many")))
try:
    os.mkdir("pdir"); print("eexist=ok")
except OSError as e:
    print("eexist=" + errno.errorcode[e.errno])
os.symlink("target-missing", "dl")
try:
    open("dl", "w"); print("dangling=ok")
except OSError as e:
    print("dangling=" + errno.errorcode[e.errno])
open("exists", "w").write("old")
os.symlink("exists", "l2")
open("l2", "a").write("new")
print("follow=" + open("exists").read())
"#;
    let script = format!(
        "{T}{}
         mkdir -p src/a/b && echo x > src/a/b/f && t cpr cp -r src dst
         t tar sh -c 'tar cf /tmp/t.tar src && mkdir unt && cd unt && tar xf /tmp/t.tar && test -f src/a/b/f'
         t devnull sh -c 'echo x > /dev/null'
         t stdout sh -c 'echo x > /dev/stdout'",
        py(code)
    );
    let o = lab.run(ws(false), &script);
    for want in [
        "mode=600",
        "dirmode=700",
        "excl=EEXIST",
        "enoent=ENOENT",
        "ro=denied",
        "cloexec=1",
        "inherit=0",
        "nonblock=0",
        "badfd=EBADF",
        "trunc=0",
        "tmpfile=ok",
        "many=1000",
        "eexist=EEXIST",
        "dangling=EACCES",
        "follow=oldnew",
        "cpr=ok",
        "tar=ok",
        "devnull=ok",
        "stdout=ok",
    ] {
        has(&o, want);
    }
}
