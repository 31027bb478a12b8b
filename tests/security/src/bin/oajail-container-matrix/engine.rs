//! The engines a cell runs in: Docker (our own dockerd), podman (rootful,
//! and rootless as the test user) and runc with a Kubernetes-like OCI
//! config ([`crate::runc`]). Each cell is one long-lived container whose
//! pid 1 only reaps; everything the cell does is an exec in it.

use crate::cell::{Bind, INIT, Who};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// An engine and its settings.
#[derive(Debug, Clone, Copy)]
pub enum Engine {
    /// `docker run` with these flags.
    Docker(&'static [&'static str]),
    /// `podman run` with these flags, as root or as the test user.
    Podman {
        /// As the test user.
        rootless: bool,
        /// Flags.
        flags: &'static [&'static str],
    },
    /// runc with the settings of a pod manifest of the checkout
    /// (`examples/kubernetes/…`), `hostUsers` overridden when `Some`.
    Pod {
        /// The manifest, relative to the checkout.
        manifest: &'static str,
        /// `hostUsers`, instead of the manifest's.
        host_users: Option<bool>,
    },
}

/// Where the engines are (from `.ci/container-engines env`).
pub struct Env {
    docker: String,
    docker_host: String,
    image: String,
    /// runc's image, state and Kubernetes defaults.
    pub runc: crate::runc::Paths,
    test_user: String,
    user_podman_args: String,
    user_runtime_dir: String,
    /// Scratch space of the engines.
    pub state: PathBuf,
    /// [`Env::podman_flags`], found once per engine (rootful, rootless).
    podman: [std::sync::OnceLock<Result<Vec<String>, String>>; 2],
}

impl Env {
    /// From the `OAJAIL_CM_*` variables; a missing one is an error.
    pub fn from_env() -> Result<Env> {
        let get = |k: &str| {
            std::env::var(k).with_context(|| {
                format!("{k} is not set (run through .ci/container-matrix, which sets it)")
            })
        };
        Ok(Env {
            docker: get("OAJAIL_CM_DOCKER")?,
            docker_host: get("OAJAIL_CM_DOCKER_HOST")?,
            image: get("OAJAIL_CM_IMAGE")?,
            runc: crate::runc::Paths {
                rootfs: get("OAJAIL_CM_ROOTFS")?.into(),
                state: get("OAJAIL_CM_STATE")?.into(),
                k8s_defaults: get("OAJAIL_CM_K8S_DEFAULTS")?.into(),
            },
            test_user: get("OAJAIL_CM_TEST_USER")?,
            user_podman_args: get("OAJAIL_CM_USER_PODMAN_ARGS")?,
            user_runtime_dir: get("OAJAIL_CM_USER_RUNTIME_DIR")?,
            state: get("OAJAIL_CM_STATE")?.into(),
            podman: Default::default(),
        })
    }

    /// The engine's command line prefix (`docker`, `runuser … podman …`).
    fn cli(&self, engine: &Engine) -> Command {
        match engine {
            Engine::Docker(_) => {
                let mut c = Command::new(&self.docker);
                c.env("DOCKER_HOST", &self.docker_host);
                c
            }
            Engine::Podman {
                rootless: false, ..
            } => Command::new("podman"),
            Engine::Podman { rootless: true, .. } => {
                let mut c = Command::new("runuser");
                c.current_dir("/")
                    .args(["-u", &self.test_user, "--", "env", "-i"]);
                c.arg(format!("HOME=/home/{}", self.test_user));
                c.arg(format!("XDG_RUNTIME_DIR={}", self.user_runtime_dir));
                c.args([
                    "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                    "podman",
                ]);
                // Its storage and run directories (.ci/container-engines).
                c.args(self.user_podman_args.split_whitespace());
                c
            }
            Engine::Pod { .. } => self.runc.cli(),
        }
    }

    /// What podman needs on this machine beyond the cell's own flags,
    /// found by starting a container: as root, open-file and process
    /// limits it may set (podman raises them to 1048576, which needs
    /// `CAP_SYS_RESOURCE`, absent here); and the OCI runtime that starts a
    /// container (crun, Debian's default, refuses a hybrid cgroup v1/v2
    /// layout; runc then). The seccomp profile and the masked paths are
    /// podman's own either way.
    pub fn podman_flags(&self, rootless: bool) -> Result<Vec<String>> {
        self.podman[usize::from(rootless)]
            .get_or_init(|| {
                self.find_podman_flags(rootless)
                    .map_err(|e| format!("{e:#}"))
            })
            .clone()
            .map_err(anyhow::Error::msg)
    }

    fn find_podman_flags(&self, rootless: bool) -> Result<Vec<String>> {
        let mut base: Vec<String> = Vec::new();
        if !rootless {
            base.extend(
                [
                    "--ulimit",
                    "nofile=8192:8192",
                    "--ulimit",
                    "nproc=8192:8192",
                ]
                .map(String::from),
            );
        }
        let engine = Engine::Podman {
            rootless,
            flags: &[],
        };
        let mut errors = Vec::new();
        for runtime in [None, Some("runc")] {
            let mut flags = base.clone();
            if let Some(r) = runtime {
                flags.extend(["--runtime".to_owned(), r.to_owned()]);
            }
            let mut c = self.cli(&engine);
            c.args(["run", "--rm", "--network", "none"])
                .args(&flags)
                .arg(&self.image)
                .arg("true");
            let out = c.stdin(Stdio::null()).output().context("podman")?;
            if out.status.success() {
                return Ok(flags);
            }
            errors.push(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        bail!("podman starts no container here: {}", errors.join("; "))
    }

    /// The engine's versions, for the report.
    pub fn versions(&self, engine: &Engine) -> String {
        let first = |mut c: Command| -> String {
            c.output()
                .ok()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_owned()
                })
                .unwrap_or_default()
        };
        match engine {
            Engine::Docker(_) => {
                let mut c = self.cli(engine);
                c.args(["version", "-f", "docker {{.Server.Version}}, runc {{range .Server.Components}}{{if eq .Name \"runc\"}}{{.Version}}{{end}}{{end}}"]);
                first(c)
            }
            Engine::Podman { rootless, .. } => {
                let mut c = self.cli(engine);
                c.args(["version", "-f", "podman {{.Client.Version}}"]);
                let flags = self.podman_flags(*rootless).unwrap_or_default();
                let runtime = match flags.iter().position(|f| f == "--runtime") {
                    Some(i) => first(Command::new(&flags[i + 1]).tap_arg("--version")),
                    None => first(Command::new("crun").tap_arg("--version")),
                };
                format!("{}, {runtime}", first(c))
            }
            Engine::Pod { .. } => first(Command::new("runc").tap_arg("--version")),
        }
    }
}

/// `Command::arg` that returns the command (for one-liners).
trait TapArg {
    fn tap_arg(self, a: &str) -> Self;
}

impl TapArg for Command {
    fn tap_arg(mut self, a: &str) -> Self {
        self.arg(a);
        self
    }
}

/// A flag naming a seccomp profile of the checkout by its relative path
/// (`seccomp=examples/…`), with the path made absolute.
fn resolve(flag: &str) -> String {
    match flag.strip_prefix("seccomp=") {
        Some(file) if file.ends_with(".json") && !file.starts_with('/') => {
            format!("seccomp={}", crate::checkout().join(file).display())
        }
        _ => flag.to_owned(),
    }
}

/// A running cell.
pub struct Container<'a> {
    env: &'a Env,
    engine: Engine,
    /// Name (docker, podman) or id (runc).
    pub name: String,
    /// Its pid 1 on the host (to enter its network namespace).
    pub pid: i32,
}

fn run(mut c: Command, what: &str) -> Result<Output> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{what}: spawn"))?;
    if !out.status.success() {
        bail!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Start `engine`'s container for cell `name` with `binds`.
pub fn start<'a>(
    env: &'a Env,
    engine: Engine,
    name: &str,
    binds: &[Bind],
) -> Result<Container<'a>> {
    let cname = format!("oajail-cm-{name}");
    let pid = match &engine {
        Engine::Docker(flags) | Engine::Podman { flags, .. } => {
            let mut rm = env.cli(&engine);
            rm.args(["rm", "-f", &cname])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            rm.stdin(Stdio::null());
            let _ = rm.status();
            let mut c = env.cli(&engine);
            c.args([
                "run",
                "-d",
                "--name",
                &cname,
                "--network",
                "none",
                "--hostname",
                name,
            ]);
            for b in binds {
                let mode = if b.writable { "rw" } else { "ro" };
                c.arg("-v").arg(format!(
                    "{}:{}:{mode}",
                    b.path.display(),
                    b.target().display()
                ));
            }
            if let Engine::Podman { rootless, .. } = engine {
                c.args(env.podman_flags(rootless)?);
            }
            c.args(flags.iter().map(|f| resolve(f)))
                .arg(&env.image)
                .args(INIT);
            run(c, &format!("start {name}"))?;
            let mut inspect = env.cli(&engine);
            inspect.args(["inspect", "-f", "{{.State.Pid}}", &cname]);
            let out = run(inspect, &format!("inspect {name}"))?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .context("container pid")?
        }
        Engine::Pod {
            manifest,
            host_users,
        } => {
            let pod = crate::pod::read(&crate::checkout().join(manifest), *host_users)?;
            crate::runc::start(&env.runc, &pod, &cname, binds)?
        }
    };
    Ok(Container {
        env,
        engine,
        name: cname,
        pid,
    })
}

impl Container<'_> {
    /// Run `argv` inside as `who`, in `cwd`, with exactly `vars`.
    pub fn exec(
        &self,
        who: Who,
        cwd: &Path,
        vars: &[(String, String)],
        argv: &[String],
    ) -> Result<Output> {
        let mut c = self.env.cli(&self.engine);
        match &self.engine {
            Engine::Pod { .. } => {
                let process =
                    crate::runc::process(&self.env.runc, &self.name, who, cwd, vars, argv)?;
                c.args(["exec", "--process"]).arg(process).arg(&self.name);
            }
            _ => {
                let ids = who.ids();
                c.args(["exec", "-u", &format!("{ids}:{ids}"), "-w"])
                    .arg(cwd);
                for (k, v) in vars {
                    c.arg("-e").arg(format!("{k}={v}"));
                }
                c.arg(&self.name).args(argv);
            }
        }
        c.stdin(Stdio::null()).output().context("exec in the cell")
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let mut c = self.env.cli(&self.engine);
        match &self.engine {
            Engine::Pod { .. } => {
                c.args(["delete", "-f", &self.name]);
            }
            _ => {
                c.args(["rm", "-f", &self.name]);
            }
        }
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let _ = c.status();
    }
}
