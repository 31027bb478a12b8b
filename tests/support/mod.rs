//! Helpers shared by the root package's integration tests: run the real
//! `oajail` binary with a clean, predictable environment.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The oajail binary under test.
pub const OAJAIL: &str = env!("CARGO_BIN_EXE_oajail");
/// A python every test user can run (pyenv shims live under /root).
pub const PYTHON: &str = "/usr/bin/python3";

/// A scratch HOME with no settings file, so the built-in default applies.
pub fn scratch_home(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oajail-it-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `oajail ARGS…` with HOME = a scratch dir, cwd = that dir, no OAJAIL_SETTINGS.
pub fn oajail(tag: &str, args: &[&str]) -> Command {
    let home = scratch_home(tag);
    let mut cmd = Command::new(OAJAIL);
    cmd.args(args)
        .env("HOME", &home)
        .env_remove("OAJAIL_SETTINGS")
        .current_dir(&home);
    cmd
}

/// `oajail -s SETTINGS --log-json LOG -c SCRIPT`, not yet run (callers add
/// environment).
pub fn oajail_logged(
    tag: &str,
    settings: &std::path::Path,
    log: &std::path::Path,
    script: &str,
) -> Command {
    let (settings, log) = (settings.to_str().unwrap(), log.to_str().unwrap());
    oajail(tag, &["-s", settings, "--log-json", log, "-c", script])
}

/// Start `cmd` with its stdout piped and return it with the first line it
/// prints (test servers print their ports there once they listen).
pub fn spawn_and_read_line(cmd: &mut Command) -> (std::process::Child, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn a test server");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (child, line)
}

/// Run `sh -c script` in the jail and return the output.
pub fn sh(tag: &str, script: &str) -> Output {
    oajail(tag, &["-c", script]).output().unwrap()
}

/// stdout as a string.
pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as a string.
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert success and return stdout.
pub fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        out(&o),
        err(&o)
    );
    out(&o)
}

/// The Landlock ABI the negotiation uses on this kernel (0: off), as
/// `oajail doctor` reports it, capped at the plan's ABI 6: tests that
/// also run on older kernels (`.ci/kernel-matrix`) expect what this
/// kernel can do, not what the newest can.
pub fn landlock_level() -> u8 {
    let o = Command::new(OAJAIL).arg("doctor").output().unwrap();
    let text = out(&o);
    let abi = text
        .lines()
        .find_map(|l| l.strip_prefix("landlock: abi "))
        .map_or(0, |v| v.trim().parse::<u8>().unwrap());
    match abi {
        0 | 1 => 0,
        v => v.min(6),
    }
}

/// `oajail ARGS…` (HOME = a scratch dir, as [`oajail`]) started by python
/// after it installs the seccomp filter `prog` (`(code, jt, jf, k)` BPF
/// tuples, inherited over `execve`, no_new_privs set): a kernel or a
/// container engine that refuses some calls.
pub fn oajail_under_filter(tag: &str, prog: &str, args: &[&str]) -> Command {
    let script = format!(
        r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
prog = {prog}
buf = b"".join(struct.pack("HBBI", *i) for i in prog)
cbuf = ctypes.create_string_buffer(buf)
fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(cbuf))
cprog = ctypes.create_string_buffer(fprog)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.addressof(cprog), 0, 0) == 0, ctypes.get_errno()
os.execv(sys.argv[1], sys.argv[1:])
"#
    );
    let home = scratch_home(tag);
    let mut cmd = Command::new(PYTHON);
    cmd.args(["-c", script.as_str(), OAJAIL])
        .args(args)
        .env("HOME", &home)
        .env_remove("OAJAIL_SETTINGS")
        .current_dir(&home);
    cmd
}
