//! A Kubernetes pod's container as runc runs it: containerd's default OCI
//! spec (the one the CRI plugin starts from: its capabilities, masked and
//! read-only `/proc` paths) with the pod's `securityContext` applied —
//! `seccompProfile` (`RuntimeDefault` is containerd's own profile, asked
//! of this machine's containerd by `.ci/container-engines`; `Localhost` a
//! profile file), `hostUsers: false` (a user namespace mapping container
//! root to host uid 200000) and `procMount: Unmasked` (no masked paths).
//! A container running as a non-root user gets no effective capabilities,
//! as the CRI plugin gives it.

use crate::cell::{Bind, INIT, Who};
use crate::pod::Pod;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Host uid (and gid) of container root under `hostUsers: false`.
const USERNS_BASE: u32 = 200_000;

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parse {}", path.display()))
}

/// What runc needs of `.ci/container-engines`.
pub struct Paths {
    /// The image's root file system (read-only in every cell).
    pub rootfs: PathBuf,
    /// Scratch space: runc's state and the bundles.
    pub state: PathBuf,
    /// containerd's default spec (`spec.json`) and seccomp profile (`seccomp.json`).
    pub k8s_defaults: PathBuf,
}

impl Paths {
    /// `runc --root <our state>`.
    pub fn cli(&self) -> Command {
        let mut c = Command::new("runc");
        c.arg("--root").arg(self.state.join("runc"));
        c
    }
}

fn bundle(env: &Paths, name: &str) -> PathBuf {
    env.state.join("runc-bundles").join(name)
}

/// The pod's seccomp profile in OCI form. A Localhost profile file is in
/// the format Docker and the kubelet read; its keys (`defaultAction`,
/// `architectures`, `syscalls[].names/action/errnoRet/args`) are the OCI
/// spec's own, so it is taken as it is (a profile with Docker-only keys
/// such as `archMap` or `includes` is refused, not half-read).
fn seccomp(env: &Paths, pod: &Pod) -> Result<Value> {
    match &pod.localhost_profile {
        None => read_json(&env.k8s_defaults.join("seccomp.json")),
        Some(file) => {
            let profile = read_json(file)?;
            for key in ["archMap", "includes", "excludes"] {
                if profile.get(key).is_some() {
                    bail!(
                        "{}: `{key}` is Docker's, not the OCI spec's",
                        file.display()
                    );
                }
            }
            Ok(profile)
        }
    }
}

fn mounts(binds: &[Bind]) -> Vec<Value> {
    let mut out: Vec<Value> = ["/tmp", "/var/tmp", "/root", "/home"]
        .iter()
        .map(|d| {
            json!({"destination": d, "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"]})
        })
        .collect();
    out.extend(binds.iter().map(|b| {
        let dst = b.target();
        let mode = if b.writable { "rw" } else { "ro" };
        json!({"destination": dst, "type": "bind", "source": b.path, "options": ["rbind", mode]})
    }));
    out
}

/// The container's config.json.
fn config(env: &Paths, pod: &Pod, name: &str, binds: &[Bind]) -> Result<Value> {
    let mut spec = read_json(&env.k8s_defaults.join("spec.json"))?;
    spec["root"] = json!({"path": env.rootfs, "readonly": true});
    spec["hostname"] = json!(name);
    spec["process"]["terminal"] = json!(false);
    spec["process"]["args"] = json!(INIT);
    spec["process"]["env"] = json!(["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]);
    let base = spec["mounts"].as_array().cloned().unwrap_or_default();
    spec["mounts"] = Value::Array(base.into_iter().chain(mounts(binds)).collect());
    let linux = &mut spec["linux"];
    linux["seccomp"] = seccomp(env, pod)?;
    linux["cgroupsPath"] = json!(format!("/oajail-ci-runc/{name}"));
    if pod.proc_unmasked {
        linux["maskedPaths"] = json!([]);
        linux["readonlyPaths"] = json!([]);
    }
    if pod.user_namespace {
        let ns = linux["namespaces"]
            .as_array_mut()
            .context("spec namespaces")?;
        ns.push(json!({"type": "user"}));
        let map = json!([{"containerID": 0, "hostID": USERNS_BASE, "size": 65536}]);
        linux["uidMappings"] = map.clone();
        linux["gidMappings"] = map;
    }
    Ok(spec)
}

/// Write the bundle and `runc run -d` it; returns its pid 1.
pub fn start(env: &Paths, pod: &Pod, name: &str, binds: &[Bind]) -> Result<i32> {
    let dir = bundle(env, name);
    let _ = env
        .cli()
        .args(["delete", "-f", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    std::fs::create_dir_all(&dir).context("runc bundle")?;
    let spec = config(env, pod, name, binds)?;
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&spec)?)?;
    let pidfile = dir.join("pid");
    let _ = std::fs::remove_file(&pidfile);
    // A file, not a pipe: the detached container keeps runc's stdio, and
    // a pipe would never reach its end.
    let log = dir.join("runc.log");
    let status = env
        .cli()
        .args(["run", "-d", "--pid-file"])
        .arg(&pidfile)
        .arg("--bundle")
        .arg(&dir)
        .arg(name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .status()
        .context("runc run")?;
    if !status.success() {
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        bail!("runc run {name}: {}", err.trim());
    }
    let pid = std::fs::read_to_string(&pidfile).context("runc pid file")?;
    pid.trim().parse().context("runc pid")
}

/// The process.json of one exec: `who`, `cwd`, exactly `vars`, `argv`;
/// the spec's capabilities for root, none effective for uid 1000.
pub fn process(
    env: &Paths,
    name: &str,
    who: Who,
    cwd: &Path,
    vars: &[(String, String)],
    argv: &[String],
) -> Result<PathBuf> {
    let dir = bundle(env, name);
    let spec = read_json(&dir.join("config.json"))?;
    let mut caps = spec["process"]["capabilities"].clone();
    if who == Who::User {
        for set in ["effective", "permitted", "inheritable", "ambient"] {
            caps[set] = json!([]);
        }
    }
    let ids = who.ids();
    let p = json!({
        "terminal": false,
        "user": {"uid": ids, "gid": ids},
        "args": argv,
        "env": vars.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "cwd": cwd,
        "capabilities": caps,
        "noNewPrivileges": spec["process"]["noNewPrivileges"].as_bool().unwrap_or(false),
        "rlimits": spec["process"]["rlimits"],
    });
    let path = dir.join(format!("process-{}.json", who.dir()));
    std::fs::write(&path, serde_json::to_vec_pretty(&p)?)?;
    Ok(path)
}
