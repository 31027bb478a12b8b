//! A lab for the filesystem tests: a scratch tree (home, workspace, other
//! dirs) under cargo's target tmp dir, a settings file written per run, and
//! the real `oajail` binary run with `sh -c`.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub const OAJAIL: &str = env!("CARGO_BIN_EXE_oajail");

/// A writable workspace; git commands that write `.git/config` (clone,
/// branch tracking) need `allowGitConfig`, as in the benchmarks.
pub fn ws(allow_git_config: bool) -> Value {
    json!({"denyRead": [], "allowWrite": ["."], "denyWrite": [], "allowGitConfig": allow_git_config})
}

/// `t NAME CMD…`: runs CMD quietly, prints `NAME=ok` or `NAME=fail`; `G`:
/// git with an identity.
pub const T: &str = r#"t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=fail"; fi; }
G() { git -c user.email=a@b.c -c user.name=n "$@"; }
"#;

/// Shell helpers defined before every script: `r PATH` prints the file or
/// `DENIED`, `w PATH` appends a line and prints `WROTE` or `DENIED`.
const PRELUDE: &str = r#"
r() { if c=$(cat "$1" 2>/dev/null); then echo "$c"; else echo DENIED; fi; }
w() { if (echo jail >> "$1") 2>/dev/null; then echo WROTE; else echo DENIED; fi; }
"#;

/// A scratch tree; removed when dropped.
pub struct Lab {
    /// The lab root (not itself in any policy).
    pub root: PathBuf,
    /// `$HOME` of the run.
    pub home: PathBuf,
    /// The workspace; the cwd of the run.
    pub ws: PathBuf,
}

impl Lab {
    /// A fresh lab named after the test.
    pub fn new(tag: &str) -> Lab {
        let root = base_dir().join(format!("fs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lab = Lab {
            home: root.join("home"),
            ws: root.join("ws"),
            root,
        };
        std::fs::create_dir_all(&lab.home).unwrap();
        std::fs::create_dir_all(&lab.ws).unwrap();
        lab
    }

    /// Absolute path of `rel` in the lab.
    pub fn p(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// Create a file (and parents) with `content`.
    pub fn file(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Create a directory (and parents).
    pub fn dir(&self, rel: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// Run `script` in the jail with the given `filesystem` object (plus an
    /// empty network section and any extra top-level keys).
    pub fn run_with(&self, filesystem: Value, extra: Value, script: &str) -> Output {
        let mut settings = json!({
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": filesystem,
        });
        if let (Some(s), Some(e)) = (settings.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        let file = self.root.join("settings.json");
        std::fs::write(&file, settings.to_string()).unwrap();
        self.command(&file, script).output().unwrap()
    }

    /// [`Lab::run_with`] without extra keys.
    pub fn run(&self, filesystem: Value, script: &str) -> Output {
        self.run_with(filesystem, json!({}), script)
    }

    /// The command line, for tests that need to change it.
    pub fn command(&self, settings: &Path, script: &str) -> Command {
        let mut cmd = Command::new(OAJAIL);
        cmd.arg("-s")
            .arg(settings)
            .arg("-c")
            .arg(format!("{PRELUDE}\n{script}"))
            .env("HOME", &self.home)
            .env_remove("OAJAIL_SETTINGS")
            .current_dir(&self.ws);
        cmd
    }
}

/// Where labs live: cargo's target tmp dir, or `$HOME/.oajail-fs-tests` when
/// that is not writable (the unprivileged CI run reuses root's build). Never
/// under `/tmp`: the jail's `/tmp` is private, which would hide the lab and
/// make every "denied" result meaningless.
fn base_dir() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let probe = target.join(format!(".probe-{}", std::process::id()));
    if std::fs::create_dir_all(&probe).is_ok() {
        let _ = std::fs::remove_dir(&probe);
        return target;
    }
    let home = std::env::var_os("HOME").expect("HOME must be set for the filesystem tests");
    let dir = PathBuf::from(home).join(".oajail-fs-tests");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        !dir.starts_with("/tmp"),
        "lab dir {} is under /tmp",
        dir.display()
    );
    dir
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// stdout, asserting the jail itself did not fail (status 125-127 are oajail's).
pub fn stdout(o: &Output) -> String {
    let code = o.status.code();
    assert!(
        !matches!(code, Some(125..=127)),
        "oajail failed: {code:?}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The lines of stdout as `key=value` pairs printed by `echo key=$(…)`.
pub fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(str::to_owned).collect()
}

/// Assert that stdout has exactly the line `want`.
#[track_caller]
pub fn has(o: &Output, want: &str) {
    let out = stdout(o);
    assert!(
        out.lines().any(|l| l == want),
        "missing line {want:?}\nstdout:\n{out}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// git on the host, in `dir`, with a fixed identity and no user config.
pub fn host_git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(["-c", "user.email=a@b.c", "-c", "user.name=n"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap()
}
