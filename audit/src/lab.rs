//! Host side of the lab: builds the lab directory (fake home full of
//! canaries, workspace, policy), starts the host canary process, and runs
//! one command through the `oajail-lab` binary, collecting everything it
//! recorded into a [`Run`].

use crate::canary::{self, SECRET_ENV};
use crate::labspec::{DnsMode, LabConfig, LabNetwork, LabResult, SinkEvent};
use crate::verdict::ProbeReport;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the lab lets an attack's command run: 20 s, or
/// `OAJAIL_TEST_LAB_TIMEOUT_MS` where one jailed command is much slower
/// (the kernel matrix's VMs run under TCG, ~500x slower per start-up).
fn command_timeout_ms() -> u64 {
    std::env::var("OAJAIL_TEST_LAB_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Where the lab's binaries are; every one must exist (a missing tool fails the test).
#[derive(Debug, Clone)]
pub struct Tools {
    /// The real `oajail` binary under test.
    pub oajail: PathBuf,
    /// `oajail-probe`.
    pub probe: PathBuf,
    /// `oajail-lab`.
    pub lab: PathBuf,
}

impl Tools {
    /// Locate the binaries next to the running test executable
    /// (`target/<profile>/deps/<test>` → `target/<profile>/`), or from
    /// `OAJAIL_BIN` / `OAJAIL_PROBE_BIN` / `OAJAIL_LAB_BIN`. Panics naming
    /// the missing binary and how to build it.
    pub fn locate() -> Tools {
        let exe = std::env::current_exe().unwrap_or_default();
        let profile_dir = exe
            .parent()
            .and_then(|deps| {
                if deps.ends_with("deps") {
                    deps.parent()
                } else {
                    Some(deps)
                }
            })
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let find = |env: &str, name: &str, build: &str| -> PathBuf {
            let p = std::env::var_os(env)
                .map(PathBuf::from)
                .unwrap_or_else(|| profile_dir.join(name));
            assert!(
                p.is_file(),
                "security suite: {} not found at {} (build it with `{build}` or set {env})",
                name,
                p.display()
            );
            p
        };
        let tools = Tools {
            oajail: find("OAJAIL_BIN", "oajail", "cargo build -p oajail"),
            probe: find(
                "OAJAIL_PROBE_BIN",
                "oajail-probe",
                "cargo build -p oajail-audit",
            ),
            lab: find(
                "OAJAIL_LAB_BIN",
                "oajail-lab",
                "cargo build -p oajail-audit",
            ),
        };
        if let Err(e) = tools.same_build() {
            panic!("security suite: {e} (build it with `cargo build -p oajail-audit`)");
        }
        tools
    }

    /// Err naming the binary when `oajail-probe` or `oajail-lab` was built
    /// from other sources than this library ([`crate::BUILD_ID`]): a stale
    /// probe would answer a newer catalogue with wrong verdicts.
    pub fn same_build(&self) -> Result<(), String> {
        for (name, path) in [("oajail-probe", &self.probe), ("oajail-lab", &self.lab)] {
            let out = Command::new(path)
                .arg(crate::BUILD_ID_FLAG)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("{name} at {}: {e}", path.display()))?;
            let id = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || id.trim() != crate::BUILD_ID {
                return Err(format!(
                    "{name} at {} is from another build (its sources {}, expected {})",
                    path.display(),
                    Some(id.trim())
                        .filter(|s| !s.is_empty())
                        .unwrap_or("unknown"),
                    crate::BUILD_ID
                ));
            }
        }
        Ok(())
    }
}

/// Everything one run left behind.
#[derive(Debug, Clone)]
pub struct Run {
    /// The command line that ran inside the lab.
    pub argv: Vec<String>,
    /// What the lab saw about the command.
    pub lab: LabResult,
    /// The command's stdout.
    pub stdout: String,
    /// The command's stderr.
    pub stderr: String,
    /// Every sink / listener event.
    pub events: Vec<SinkEvent>,
    /// The probe's verdict line, if it printed one.
    pub report: Option<ProbeReport>,
}

/// Options of one lab run beyond the command.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run the command on a pty that is its controlling terminal.
    pub pty: bool,
    /// With `pty`: stdout on the pty as well (an interactive run).
    pub pty_output: bool,
    /// Leak a dirfd and a socket into oajail.
    pub leak_fds: bool,
    /// Plant a session-keyring canary key with this description.
    pub keyring_desc: Option<String>,
    /// Marker a daemon carries; the lab checks it is gone after the run.
    pub daemon_marker: Option<String>,
    /// Make user namespaces unavailable to the command.
    pub no_userns: bool,
    /// Refuse the command user namespaces with a seccomp filter (`EPERM`),
    /// as a container runtime's default profile does.
    pub refuse_userns: bool,
    /// Mount the fake home a second time at `<lab>/home-alias`.
    pub alias_home: bool,
    /// DNS answering mode.
    pub dns: DnsMode,
    /// Extra environment for the command.
    pub env: Vec<(String, String)>,
    /// Extra oajail arguments, placed before `--` (e.g. `--timeout 1`).
    pub oajail_args: Vec<String>,
    /// SIGKILL oajail itself after this many milliseconds.
    pub kill_after_ms: Option<u64>,
    /// Bytes for the command's stdin, kept open for `stdin_hold_ms` after.
    pub stdin: Option<Vec<u8>>,
    /// See `stdin`.
    pub stdin_hold_ms: u64,
    /// Host directories overlaid in the lab with `<lab>/abs/<i>/upper`.
    pub overlays: Vec<PathBuf>,
}

/// `oajail-lab` dies with the process named here (its parent), and takes
/// the lab's command with it.
const LAB_PARENT: &str = "OAJAIL_LAB_PARENT";

/// One lab: a directory with a fake home, a workspace and a policy, plus a
/// host canary process. Removed on drop unless the test failed. Its
/// processes die with the thread that made it (`PR_SET_PDEATHSIG` follows
/// the thread): a lab is used by the thread that created it.
pub struct Lab {
    /// The binaries.
    pub tools: Tools,
    /// Run-unique token inside every canary.
    pub token: String,
    /// The lab directory.
    pub dir: PathBuf,
    /// Abstract socket name the lab listens on.
    pub abstract_name: String,
    canary_proc: Child,
    home_before: BTreeMap<PathBuf, Vec<u8>>,
    owner: Option<(u32, u32)>,
    /// Silence `oajail-lab`'s own stdout/stderr (the audit draws a table there).
    pub quiet: bool,
}

fn base_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OAJAIL_SECURITY_LAB_DIR") {
        return PathBuf::from(d);
    }
    // Not under /tmp: the jail gives the command a private /tmp, which
    // would hide the workspace itself.
    PathBuf::from(format!(
        "/var/tmp/oajail-security-{}",
        nix::unistd::getuid()
    ))
}

/// Why a lab could not be built or run: the step, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct LabError {
    /// The step that failed, lower case (`build the fake home …`).
    pub step: String,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

impl LabError {
    /// A failed step and its cause.
    pub fn new(step: impl Into<String>, source: std::io::Error) -> LabError {
        LabError {
            step: step.into(),
            source,
        }
    }
}

impl Lab {
    /// Build a fresh lab for test `name`. Panics (failing the test) on any setup error.
    pub fn new(name: &str) -> Lab {
        Lab::create(name, Tools::locate(), &base_dir(), None)
            .unwrap_or_else(|e| panic!("security lab: {e}"))
    }

    /// Build a fresh lab named `name` under `base` with `tools`; with
    /// `owner`, the lab belongs to that uid/gid and commands run as it
    /// (`oajail audit --as-user`). Errors name the step that failed.
    pub fn create(
        name: &str,
        tools: Tools,
        base: &Path,
        owner: Option<(u32, u32)>,
    ) -> Result<Lab, LabError> {
        let token = canary::token();
        let dir = base.join(format!("{name}-{token}"));
        let build = || -> std::io::Result<()> {
            fs::create_dir_all(dir.join("logs"))?;
            canary::build_home(&dir.join("home"), &token)?;
            canary::build_workspace(&dir.join("ws"))?;
            canary::plant(
                &dir.join("canary-cwd/secret.txt"),
                &canary::canary(&token, "proc-cwd"),
            )
        };
        build().map_err(|e| LabError::new(format!("build lab {}", dir.display()), e))?;
        if let Some((uid, gid)) = owner {
            chown_tree(&dir, uid, gid).map_err(|e| {
                LabError::new(format!("give lab {} to uid {uid}", dir.display()), e)
            })?;
        }
        let canary_proc = Command::new(&tools.lab)
            .args(["sleeper", "oajail-host-canary"])
            .env(LAB_PARENT, std::process::id().to_string())
            .current_dir(dir.join("canary-cwd"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::new("spawn host canary process", e))?;
        let home_before = snapshot(&dir.join("home"));
        let abstract_name = format!("oajail-lab-{token}");
        Ok(Lab {
            tools,
            token,
            dir,
            abstract_name,
            canary_proc,
            home_before,
            owner,
            quiet: false,
        })
    }

    /// A path inside the fake home.
    pub fn home(&self, rel: &str) -> String {
        self.dir.join("home").join(rel).display().to_string()
    }

    /// A path inside the workspace.
    pub fn ws(&self, rel: &str) -> String {
        self.dir.join("ws").join(rel).display().to_string()
    }

    /// A path inside the lab directory.
    pub fn path(&self, rel: &str) -> String {
        self.dir.join(rel).display().to_string()
    }

    /// Pid of the host canary process (same uid as the jailed command).
    pub fn canary_pid(&self) -> i32 {
        self.canary_proc.id() as i32
    }

    /// True while the host canary process is alive.
    pub fn canary_alive(&mut self) -> bool {
        matches!(self.canary_proc.try_wait(), Ok(None))
    }

    /// Files of the fake home that changed, appeared or vanished since the lab was built.
    pub fn home_changes(&self) -> Vec<String> {
        let now = snapshot(&self.dir.join("home"));
        let mut out = Vec::new();
        for (p, before) in &self.home_before {
            match now.get(p) {
                None => out.push(format!("removed {}", p.display())),
                Some(after) if after != before => out.push(format!("changed {}", p.display())),
                _ => {}
            }
        }
        out.extend(
            now.keys()
                .filter(|p| !self.home_before.contains_key(*p))
                .map(|p| format!("created {}", p.display())),
        );
        out
    }

    /// Give the lab (again) to its owner after files were planted in it,
    /// so that `--as-user` runs meet a lab that is theirs throughout.
    pub fn give_to_owner(&self) -> Result<(), LabError> {
        match self.owner {
            Some((uid, gid)) => chown_tree(&self.dir, uid, gid).map_err(|e| {
                LabError::new(format!("give lab {} to uid {uid}", self.dir.display()), e)
            }),
            None => Ok(()),
        }
    }

    /// Take the fake home's reference snapshot again, after the test
    /// planted files of its own there (they become part of "before").
    pub fn rebaseline_home(&mut self) {
        self.home_before = snapshot(&self.dir.join("home"));
    }

    /// Write fixture `tests/fixtures/<name>` into the lab with `@LAB@`
    /// replaced by the lab directory; returns its path.
    pub fn policy(&self, fixture: &str) -> String {
        let src = fixtures_dir().join(fixture);
        let text = fs::read_to_string(&src)
            .unwrap_or_else(|e| panic!("security lab: read fixture {}: {e}", src.display()));
        self.policy_text(&text.replace("@LAB@", &self.dir.display().to_string()))
    }

    /// Write `text` as the lab's policy file; returns its path.
    /// (With `OAJAIL_SECURITY_NESTED=1` it carries `enableWeakerNestedSandbox`.)
    pub fn policy_text(&self, text: &str) -> String {
        let dst = self.dir.join("policy.json");
        let text = crate::switches::opt_in(text).unwrap_or_else(|e| panic!("security lab: {e}"));
        fs::write(&dst, text).unwrap_or_else(|e| panic!("security lab: write policy: {e}"));
        dst.display().to_string()
    }

    /// The environment of every run: the fake home, stand-in sockets and secret canaries.
    fn base_env(&self) -> Vec<(String, String)> {
        let run = self.path("run");
        let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
        let mut env = vec![
            (
                "PATH".into(),
                "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
            ),
            ("HOME".into(), self.path("home")),
            ("USER".into(), user.clone()),
            ("LOGNAME".into(), user),
            ("LANG".into(), "C.UTF-8".into()),
            ("XDG_RUNTIME_DIR".into(), run.clone()),
            ("SSH_AUTH_SOCK".into(), format!("{run}/ssh-agent.sock")),
            (
                "DBUS_SESSION_BUS_ADDRESS".into(),
                format!("unix:path={run}/bus"),
            ),
            ("DOCKER_HOST".into(), format!("unix://{run}/docker.sock")),
            ("DISPLAY".into(), ":0".into()),
        ];
        for name in SECRET_ENV {
            env.push((
                (*name).into(),
                canary::canary(&self.token, &format!("env-{name}")),
            ));
        }
        for (name, template) in canary::SECRET_ENV_VALUES {
            let value = canary::canary(&self.token, &format!("env-{name}"));
            env.push(((*name).into(), template.replace("{}", &value)));
        }
        env
    }

    /// Run the probe under the real oajail with fixture policy `fixture`.
    pub fn jailed(&self, fixture: &str, probe: &[&str], opts: &RunOptions) -> Run {
        self.jailed_with_file(&self.policy(fixture), probe, opts)
    }

    /// Run the probe under the real oajail with the settings file `file`.
    pub fn jailed_with_file(&self, file: &str, probe: &[&str], opts: &RunOptions) -> Run {
        self.probe_under(&self.tools.oajail, Some(file), &[], probe, opts)
    }

    /// Run the probe under the `test-layers` build of oajail with
    /// `OAJAIL_TEST_DISABLE=<layer>` (see [`ablation_oajail`]).
    pub fn jailed_without(
        &self,
        layer: &str,
        fixture: &str,
        probe: &[&str],
        opts: &RunOptions,
    ) -> Run {
        self.jailed_test_build(&[("OAJAIL_TEST_DISABLE", layer)], fixture, probe, opts)
    }

    /// Run the probe under the `test-layers` build of oajail with extra
    /// test switches in its environment (`OAJAIL_TEST_DISABLE`,
    /// `OAJAIL_TEST_PRETEND_MISSING`).
    pub fn jailed_test_build(
        &self,
        switches: &[(&str, &str)],
        fixture: &str,
        probe: &[&str],
        opts: &RunOptions,
    ) -> Run {
        let policy = self.policy(fixture);
        self.probe_under(&ablation_oajail(), Some(&policy), switches, probe, opts)
    }

    /// Run the probe under oajail with no settings file (the built-in default policy).
    pub fn jailed_default(&self, probe: &[&str], opts: &RunOptions) -> Run {
        crate::switches::no_file_allowed().unwrap_or_else(|e| panic!("security lab: {e}"));
        self.probe_under(&self.tools.oajail, None, &[], probe, opts)
    }

    /// [`Lab::jailed_default`] with the `test-layers` build and its
    /// `switches` (an older Landlock ABI, a missing kernel feature).
    pub fn jailed_default_test_build(
        &self,
        switches: &[(&str, &str)],
        probe: &[&str],
        opts: &RunOptions,
    ) -> Run {
        self.probe_under(&ablation_oajail(), None, switches, probe, opts)
    }

    /// `OAJAIL [-s POLICY] [oajail_args] -- PROBE ARGS`, with the test
    /// `switches` added to the run's environment.
    fn probe_under(
        &self,
        oajail: &Path,
        policy: Option<&str>,
        switches: &[(&str, &str)],
        probe: &[&str],
        opts: &RunOptions,
    ) -> Run {
        let mut argv = vec![oajail.display().to_string()];
        if let Some(policy) = policy {
            argv.extend(["-s".to_owned(), policy.to_owned()]);
        }
        argv.extend(crate::switches::extra_oajail_args());
        argv.extend(opts.oajail_args.iter().cloned());
        argv.push("--".into());
        argv.push(self.tools.probe.display().to_string());
        argv.extend(probe.iter().map(|s| s.to_string()));
        let mut opts = opts.clone();
        let switches = switches
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        opts.env.extend(switches);
        self.run(argv, &opts)
    }

    /// Run the probe WITHOUT the jail (controls: proves the probe detects escapes).
    pub fn unjailed(&self, probe: &[&str], opts: &RunOptions) -> Run {
        let mut argv = vec![self.tools.probe.display().to_string()];
        argv.extend(probe.iter().map(|s| s.to_string()));
        self.run(argv, opts)
    }

    /// Run any command line in the lab. Panics (failing the test) when the lab cannot run it.
    pub fn run(&self, argv: Vec<String>, opts: &RunOptions) -> Run {
        self.try_run(argv, opts)
            .unwrap_or_else(|e| panic!("security lab: {e}"))
    }

    /// Run any command line in the lab; errors name the step that failed.
    pub fn try_run(&self, argv: Vec<String>, opts: &RunOptions) -> Result<Run, LabError> {
        let mut env = self.base_env();
        env.extend(opts.env.iter().cloned());
        let config = LabConfig {
            dir: self.dir.clone(),
            command: argv.clone(),
            env,
            cwd: self.dir.join("ws"),
            uid: self
                .owner
                .map_or_else(|| nix::unistd::getuid().as_raw(), |o| o.0),
            gid: self
                .owner
                .map_or_else(|| nix::unistd::getgid().as_raw(), |o| o.1),
            pty: opts.pty,
            pty_output: opts.pty && opts.pty_output,
            leak_fds: opts.leak_fds,
            keyring_canary: opts
                .keyring_desc
                .clone()
                .map(|d| (d, canary::canary(&self.token, "keyring"))),
            daemon_marker: opts.daemon_marker.clone(),
            no_userns: opts.no_userns,
            refuse_userns: opts.refuse_userns,
            alias_home: opts.alias_home,
            abstract_name: self.abstract_name.clone(),
            dns: opts.dns,
            timeout_ms: command_timeout_ms(),
            kill_after_ms: opts.kill_after_ms,
            stdin_file: opts.stdin.as_ref().map(|_| self.dir.join("stdin.bin")),
            stdin_hold_ms: opts.stdin_hold_ms,
            overlays: opts.overlays.clone(),
            network: LabNetwork::from_env().map_err(|e| {
                LabError::new(e, std::io::Error::from(std::io::ErrorKind::InvalidInput))
            })?,
        };
        if let Some(bytes) = &opts.stdin {
            fs::write(self.dir.join("stdin.bin"), bytes)
                .map_err(|e| LabError::new("write the command's stdin", e))?;
        }
        let cfg_path = self.dir.join("lab.json");
        fs::write(
            &cfg_path,
            serde_json::to_vec_pretty(&config).unwrap_or_default(),
        )
        .map_err(|e| LabError::new("write lab config", e))?;
        self.spawn_lab(&cfg_path)?;
        Ok(self.collect(argv))
    }

    fn spawn_lab(&self, cfg: &Path) -> Result<(), LabError> {
        let mut cmd = Command::new(&self.tools.lab);
        cmd.arg("run")
            .arg(cfg)
            .env(LAB_PARENT, std::process::id().to_string())
            .stdin(Stdio::null());
        if self.quiet {
            // The lab's own diagnostics; the command's output goes to files
            // and a lab failure to `lab-result.json` either way.
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| LabError::new(format!("spawn {}", self.tools.lab.display()), e))?;
        let start = Instant::now();
        loop {
            if crate::interrupt::stopped().is_some() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LabError::new(
                    "wait for oajail-lab",
                    std::io::Error::from(std::io::ErrorKind::Interrupted),
                ));
            }
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                // The lab's own set-up and clean-up on top of the command's.
                Ok(None)
                    if start.elapsed() > Duration::from_millis(command_timeout_ms() + 25_000) =>
                {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LabError::new(
                        "wait for oajail-lab",
                        std::io::Error::from(std::io::ErrorKind::TimedOut),
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(LabError::new("wait for oajail-lab", e)),
            }
        }
    }

    fn collect(&self, argv: Vec<String>) -> Run {
        let read = |rel: &str| {
            String::from_utf8_lossy(&fs::read(self.dir.join(rel)).unwrap_or_default()).into_owned()
        };
        let lab: LabResult =
            serde_json::from_str(&read("lab-result.json")).unwrap_or_else(|e| LabResult {
                lab_error: Some(format!("no lab result ({e})")),
                ..LabResult::default()
            });
        let events = read("logs/events.jsonl")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let stdout = read("cmd.stdout");
        let report = ProbeReport::find_in(&stdout);
        Run {
            argv,
            lab,
            stdout,
            stderr: read("cmd.stderr"),
            events,
            report,
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.canary_proc.kill();
        let _ = self.canary_proc.wait();
        if !std::thread::panicking() && std::env::var_os("OAJAIL_SECURITY_KEEP").is_none() {
            let _ = crate::rundir::remove_tree(&self.dir);
        }
    }
}

/// The `test-layers` build of oajail used by the layer-ablation tests:
/// `$OAJAIL_ABLATION_BIN`, else `target/test-layers/<profile>/oajail`
/// (built by `cargo build -p oajail --features test-layers --target-dir
/// target/test-layers`). Panics naming the build command when missing: an
/// ablation run that cannot happen must fail, not pass.
pub fn ablation_oajail() -> PathBuf {
    if let Some(p) = std::env::var_os("OAJAIL_ABLATION_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> → target/test-layers/<profile>/oajail
    let profile = exe.parent().and_then(Path::parent);
    let target = profile.and_then(Path::parent);
    let p = match (target, profile.and_then(Path::file_name)) {
        (Some(t), Some(prof)) => t.join("test-layers").join(prof).join("oajail"),
        _ => PathBuf::from("target/test-layers/debug/oajail"),
    };
    assert!(
        p.is_file(),
        "layer ablation: {} not found (build it with `cargo build -p oajail --features test-layers --target-dir target/test-layers` or set OAJAIL_ABLATION_BIN)",
        p.display()
    );
    p
}

/// Give every file of the lab to `uid`/`gid` (symlinks themselves, not their targets).
fn chown_tree(root: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(root, Some(uid), Some(gid))?;
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            chown_tree(&entry.path(), uid, gid)?;
        } else {
            std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

/// `tests/fixtures/` of the workspace.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Every regular file under `root` with its content (the fake home is small).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(_) => {
                    let content = fs::read(&p).unwrap_or_else(|_| b"<unreadable>".to_vec());
                    let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
                    out.insert(rel, content);
                }
                Err(_) => {}
            }
        }
    }
    out
}
