//! `oajail learn` on the workflows users run (issue 29): a tool writing
//! its cache under the home, `npm install` with its cache under the home
//! from a registry on the host's loopback, `pip install --user` from a
//! local wheel, a command reading `~/.ssh`. Each round runs in the jail and
//! refuses what the settings refuse; the learnt file makes the next round
//! get further, and the last one passes. Nothing is ever proposed for a
//! secret store or a mandatory protection, and a line says so.
//!
//! Hermetic: the registry is a server on the host's loopback, the wheel a
//! file. Root and the unprivileged user.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::*;

/// A home directory outside `/tmp` (the jail's `/tmp` is its own, so a
/// home there would be writable in the jail), removed when dropped.
struct Home(PathBuf);

impl Home {
    fn new(tag: &str) -> Home {
        let dir = PathBuf::from(format!("/var/tmp/oajail-desk-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Home(std::fs::canonicalize(&dir).unwrap())
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// `oajail ARGS…` with this home, in `cwd`.
    fn oajail(&self, cwd: &Path, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(OAJAIL);
        cmd.args(args)
            .env("HOME", &self.0)
            .env_remove("OAJAIL_SETTINGS")
            .current_dir(cwd);
        cmd
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Learn rounds (`-s LEARNT --out LEARNT`, starting from `base`) until
/// the command passes; the rounds' outputs.
fn learn_until_it_passes(
    home: &Home,
    base: Option<&Path>,
    cwd: &Path,
    script: &str,
) -> (PathBuf, Vec<Output>) {
    let learnt = home.join("learnt.json");
    let report = home.join("report.json");
    let _ = std::fs::remove_file(&learnt);
    let mut rounds = Vec::new();
    for round in 0..5 {
        let mut args = vec!["learn".to_owned()];
        let from = if round == 0 {
            base.map(Path::to_path_buf)
        } else {
            Some(learnt.clone())
        };
        if let Some(from) = from {
            args.extend(["-s".into(), from.display().to_string()]);
        }
        args.extend([
            "--out".into(),
            learnt.display().to_string(),
            "--report".into(),
            report.display().to_string(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.to_owned(),
        ]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = home.oajail(cwd, &argv).output().unwrap();
        let passed = o.status.success();
        rounds.push(o);
        if passed {
            return (learnt, rounds);
        }
    }
    let log: Vec<String> = rounds.iter().map(err).collect();
    panic!("learning never converged:\n{}", log.join("\n-----\n"));
}

fn settings(path: &Path, domains: &[String], allow_write: &[&str]) {
    let body = serde_json::json!({
        "network": {"allowedDomains": domains, "deniedDomains": []},
        "filesystem": {"denyRead": [], "allowWrite": allow_write, "denyWrite": []},
    });
    std::fs::write(path, serde_json::to_string_pretty(&body).unwrap()).unwrap();
}

fn allow_write(learnt: &Path) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(learnt).unwrap()).unwrap();
    v["filesystem"]["allowWrite"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e.as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_tool_writing_its_cache_under_the_home_is_learnt_as_its_own_directory() {
    let home = Home::new("learn-cache");
    let script =
        "mkdir -p ~/.cache/mytool && echo data > ~/.cache/mytool/db && cat ~/.cache/mytool/db";
    let (learnt, rounds) = learn_until_it_passes(&home, None, &home.0, script);
    // ~/.cache is made (never proposed), then the tool's own directory.
    assert!(
        err(&rounds[0]).contains("made the empty directory ~/.cache"),
        "{}",
        err(&rounds[0])
    );
    assert_eq!(allow_write(&learnt), ["~/.cache/mytool"]);
    assert_eq!(out(rounds.last().unwrap()), "data\n");
    let learnt = learnt.to_str().unwrap();
    let check = home
        .oajail(&home.0, &["-s", learnt, "policy", "check"])
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", err(&check));
    let again = home
        .oajail(&home.0, &["-s", learnt, "-c", script])
        .output()
        .unwrap();
    assert_eq!(out(&again), "data\n", "{}", err(&again));
}

#[test]
fn reading_ssh_gets_no_proposal_and_a_line_saying_so() {
    let home = Home::new("learn-ssh");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let learnt = home.join("learnt.json");
    let o = home
        .oajail(
            &home.0,
            &[
                "learn",
                "--out",
                learnt.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "cat ~/.ssh/id_ed25519",
            ],
        )
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!out(&o).contains("PRIVATE"), "learn let the read happen");
    let e = err(&o);
    assert!(
        e.contains(&format!(
            "oajail: learn: not proposed: read {}/.ssh/id_ed25519 (open): ~/.ssh is a secret store",
            home.0.display()
        )),
        "{e}"
    );
    let text = std::fs::read_to_string(&learnt).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["filesystem"]["allowRead"], serde_json::json!([]));
}

/// A wheel of `hellopkg` (VALUE = 42) in `dir`.
fn wheel(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let script = r#"
import base64, hashlib, sys, zipfile
files = {
    "hellopkg/__init__.py": "VALUE = 42\n",
    "hellopkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hellopkg\nVersion: 1.0\n",
    "hellopkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1] + "/hellopkg-1.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("hellopkg-1.0.dist-info/RECORD,,")
    z.writestr("hellopkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let o = std::process::Command::new(PYTHON)
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
}

fn pip(wheels: &Path, user_base: &str) -> String {
    format!(
        "{user_base}{PYTHON} -m pip install --user --no-index --find-links {} --no-cache-dir \
         --disable-pip-version-check --break-system-packages hellopkg && \
         {user_base}{PYTHON} -c 'import hellopkg; print(hellopkg.VALUE)'",
        wheels.display()
    )
}

#[test]
fn pip_install_user_into_site_packages_is_never_proposed_and_a_user_base_of_its_own_is_learnt() {
    let home = Home::new("learn-pip");
    let wheels = home.join("wheels");
    wheel(&wheels);
    // ~/.local/lib: Python runs *.pth and usercustomize from there at
    // every start, so no entry may allow it.
    let learnt = home.join("site.json");
    let mut declined = String::new();
    for _ in 0..3 {
        let s = if learnt.exists() {
            vec!["-s", learnt.to_str().unwrap()]
        } else {
            vec![]
        };
        let mut args = vec!["learn"];
        args.extend(s);
        let script = pip(&wheels, "");
        args.extend(["--out", learnt.to_str().unwrap(), "--", "sh", "-c", &script]);
        let o = home.oajail(&home.0, &args).output().unwrap();
        assert!(
            !o.status.success(),
            "pip --user passed into ~/.local: {}",
            err(&o)
        );
        declined.push_str(&err(&o));
    }
    assert!(
        declined.contains("~/.local/lib is a mandatory protection (python: user site-packages"),
        "{declined}"
    );
    assert!(
        !allow_write(&learnt)
            .iter()
            .any(|e| e.starts_with("~/.local")),
        "{:?}",
        allow_write(&learnt)
    );
    assert!(
        !home.join(".local/lib").exists(),
        "the install reached the host"
    );
    // A user base of its own (PYTHONUSERBASE) is no start-up path: learnt.
    let script = pip(&wheels, "PYTHONUSERBASE=$HOME/.pyuser ");
    let (learnt, rounds) = learn_until_it_passes(&home, None, &home.0, &script);
    assert_eq!(allow_write(&learnt), ["~/.pyuser"]);
    assert_eq!(out(rounds.last().unwrap()).lines().last(), Some("42"));
}

/// An npm registry on the host's loopback serving one package,
/// `leftpad-test` 1.0.0; returns its port.
fn registry(dir: &Path) -> u16 {
    let pkg = dir.join("pkg/package");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"leftpad-test","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join("index.js"),
        "module.exports = (s, n) => s.padStart(n);\n",
    )
    .unwrap();
    let tgz = dir.join("leftpad-test-1.0.0.tgz");
    let o = std::process::Command::new("tar")
        .args([
            "czf",
            tgz.to_str().unwrap(),
            "-C",
            dir.join("pkg").to_str().unwrap(),
            "package",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let tarball = std::fs::read(&tgz).unwrap();
    let sha1 = {
        let o = std::process::Command::new("sha1sum")
            .arg(&tgz)
            .output()
            .unwrap();
        out(&o).split_whitespace().next().unwrap().to_owned()
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let (kind, body) = if target.ends_with(".tgz") {
                ("application/octet-stream", tarball.clone())
            } else if target.contains("leftpad-test") {
                let doc = serde_json::json!({
                    "name": "leftpad-test",
                    "dist-tags": {"latest": "1.0.0"},
                    "versions": {"1.0.0": {
                        "name": "leftpad-test", "version": "1.0.0",
                        "dist": {"tarball": format!("http://127.0.0.1:{port}/leftpad-test/-/leftpad-test-1.0.0.tgz"), "shasum": sha1}
                    }}
                });
                ("application/json", doc.to_string().into_bytes())
            } else {
                ("text/plain", b"not found".to_vec())
            };
            let status = if kind == "text/plain" {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    port
}

#[test]
fn npm_install_with_its_cache_under_the_home_from_a_loopback_registry_is_learnt() {
    let home = Home::new("learn-npm");
    let port = registry(&home.join("registry"));
    let project = home.join("app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name":"app","version":"1.0.0","private":true,"dependencies":{"leftpad-test":"1.0.0"}}"#,
    )
    .unwrap();
    let base = home.join("base.json");
    settings(&base, &[], &["."]);
    // npm's NO_PROXY would send 127.0.0.1 past the proxy (and out of the
    // jail's network there is nothing): through the proxy, as a real
    // registry would be reached.
    let script = format!(
        "NO_PROXY=none.invalid no_proxy=none.invalid npm install --registry http://127.0.0.1:{port}/ \
         --no-audit --no-fund --no-update-notifier >/dev/null 2>&1 && \
         node -e 'console.log(require(\"leftpad-test\")(\"ok\", 4))'"
    );
    let (learnt, rounds) = learn_until_it_passes(&home, Some(&base), &project, &script);
    let writes = allow_write(&learnt);
    assert!(writes.contains(&"~/.npm".to_owned()), "{writes:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&learnt).unwrap()).unwrap();
    assert_eq!(
        v["network"]["allowedDomains"],
        serde_json::json!([format!("127.0.0.1:{port}")])
    );
    assert_eq!(out(rounds.last().unwrap()), "  ok\n");
    // The first round refused and learnt; it did not install.
    assert!(rounds.len() >= 2, "{}", err(&rounds[0]));
    // A fresh install under the learnt file passes.
    std::fs::remove_dir_all(project.join("node_modules")).unwrap();
    let again = oajail(
        "learn-npm",
        &["-s", learnt.to_str().unwrap(), "-c", &script],
    )
    .current_dir(&project)
    .output()
    .unwrap();
    assert_eq!(out(&again), "  ok\n", "{}", err(&again));
}
