//! The jailed run: policy → plans → jail → proxy → exit status.

use crate::cli::{Common, RunArgs};
use crate::plans::{self, Plans};
use crate::{Fail, proxy, settings};
use anyhow::anyhow;
use oajail_jail::doctor::Missing;
use oajail_jail::seccomp::SeccompProgram;
use oajail_jail::{Jail, JailError, JailSpec, Layers};
use oajail_policy::Policy;
use std::ffi::{CString, OsString};
use std::net::TcpListener;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

/// Run the command of `args` in a jail; returns the exit status to use.
pub fn run(common: &Common, args: RunArgs) -> Result<i32, Fail> {
    args.check().map_err(|e| Fail::usage(anyhow!(e)))?;
    let argv = command_argv(&args)?;
    // Put the caller's terminal back however the run ends (drop order: last).
    let _terminal = oajail_jail::terminal::Saved::capture();
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    settings::print_warnings(&loaded.warnings);
    let policy = loaded.policy;
    let layers = decide_layers(&policy, args.allow_degraded)?;
    let clock = Clock::new(common.debug);
    // Clone first: the kernel builds the namespaces and pid 1 brings up its
    // network on the other core while this process compiles the plans. The
    // process is still single-threaded here, as the clone requires.
    let early = Jail::spawn(layers);
    let plans = plans::compile_all(&policy, &origin, &args.env_keep)?;
    // Entries the filesystem plan dropped or narrowed (missing, symlinked…).
    settings::print_warnings(&plans.compiled.mounts.warnings);
    // The CA is made before the spec: the jail's trust bundle carries its
    // certificate (its key stays in this process, with the proxy).
    let authority = oajail_proxy::Authority::for_plan(&plans.egress)
        .map_err(|e| Fail::setup(anyhow!("{e}")))?;
    if authority.as_ref().is_some_and(|a| a.host_roots() == 0) {
        settings::print_warnings(&[
            "tls termination: no system root certificates found on this host; \
            the jail trusts only the run's ca, so https to hosts that are not terminated fails"
                .to_owned(),
        ]);
    }
    let mut spec = build_spec(argv, &plans)?;
    spec.trust_bundle = authority
        .as_ref()
        .map(oajail_proxy::Authority::trust_bundle);
    clock.note(&format!(
        "policy from {origin} (sha256 {}); layers {layers:?}; {} mount steps, {} landlock \
         rules, {} seccomp instructions; compiled",
        plans.compiled.policy_sha256,
        plans.compiled.mounts.steps.len(),
        plans.compiled.landlock.fs_rules.len(),
        spec.seccomp.as_ref().map_or(0, |p| p.len()),
    ));
    let timeout = args.timeout().or(plans.compiled.limits.wall_seconds);
    let allow_degraded = args.allow_degraded || policy.oajail.allow_degraded;
    let (jail, listeners) = start(early, layers, &spec, allow_degraded)?;
    supervise(jail, listeners, &plans, authority, &args, timeout, &clock)
}

/// `-d`: timestamped notes on stderr.
struct Clock(Option<std::time::Instant>);

impl Clock {
    fn new(debug: bool) -> Self {
        Clock(debug.then(std::time::Instant::now))
    }

    fn note(&self, what: &str) {
        if let Some(t0) = self.0 {
            eprintln!(
                "oajail: [{:.1} ms] {what}",
                t0.elapsed().as_secs_f64() * 1000.0
            );
        }
    }
}

/// Hand the spec to the freshly cloned jail and receive its listeners. When
/// the kernel refuses the namespaces and a degraded run is allowed, retry
/// without any namespace (Landlock and seccomp only) after printing what
/// that loses.
fn start(
    early: Result<Jail, JailError>,
    layers: Layers,
    spec: &JailSpec,
    allow_degraded: bool,
) -> Result<(Jail, Vec<TcpListener>), Fail> {
    let finish = |jail: Result<Jail, JailError>| -> Result<(Jail, Vec<TcpListener>), JailError> {
        let mut jail = jail?;
        jail.send_spec(spec)?;
        let listeners = jail.take_listeners()?;
        Ok((jail, listeners))
    };
    match finish(early) {
        Ok(started) => Ok(started),
        Err(e) if e.namespaces_refused() && allow_degraded && layers.landlock => {
            print_banner(&[format!("user namespaces: {e}"), NO_NAMESPACES.into()]);
            let flat = Layers {
                namespaces: false,
                mounts: false,
                ..layers
            };
            finish(Jail::spawn(flat)).map_err(Fail::from)
        }
        Err(e) if e.namespaces_refused() => Err(Fail::setup(anyhow!(
            "{e}: user namespaces are unavailable (see `oajail doctor`); \
             --allow-degraded runs with Landlock and seccomp only"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// What a run without namespaces loses (printed in the degraded banner).
const NO_NAMESPACES: &str = "without namespaces: no mount view (denyWrite inside allowWrite and the \
    mandatory denies are NOT enforced; Landlock alone holds the filesystem), host network (Landlock \
    limits TCP connects to the proxy port; UDP is open), host /proc and pids (background processes \
    may outlive the command)";

fn print_banner(lines: &[String]) {
    eprintln!("oajail: ==================== DEGRADED JAIL ====================");
    for line in lines {
        eprintln!("oajail: missing layer: {line}");
    }
    eprintln!("oajail: =======================================================");
}

/// Start the proxy on the jail's listeners, release the jail, and wait.
fn supervise(
    mut jail: Jail,
    listeners: Vec<TcpListener>,
    plans: &Plans,
    authority: Option<oajail_proxy::Authority>,
    args: &RunArgs,
    timeout: Option<u64>,
    clock: &Clock,
) -> Result<i32, Fail> {
    let proxy = match proxy::start(plans, authority, args.log_json.clone(), listeners) {
        Ok(p) => p,
        Err(e) => {
            jail.abort();
            return Err(Fail::setup(e));
        }
    };
    let report = jail.release()?;
    clock.note(&format!("command executed; enforced: {report:?}"));
    let outcome = jail.wait(timeout.map(Duration::from_secs))?;
    proxy.finish();
    if outcome.timed_out {
        eprintln!(
            "oajail: timeout: killed the jail after {}s",
            timeout.unwrap_or_default()
        );
    }
    Ok(outcome.code)
}

/// Which layers to enforce: all of them, unless the kernel lacks one and the
/// user allowed a degraded run (then a banner lists what is missing).
fn decide_layers(policy: &Policy, allow_flag: bool) -> Result<Layers, Fail> {
    let mut layers = Layers::ALL;
    let missing = quick_probe();
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|m| format!("{} ({})", m.layer, m.why))
            .collect::<Vec<_>>();
        if !(allow_flag || policy.oajail.allow_degraded) {
            return Err(Fail::setup(anyhow!(
                "probe: missing kernel layer: {}; refusing to run (use --allow-degraded to run without it)",
                list.join(", ")
            )));
        }
        let abi = oajail_jail::doctor::landlock_abi();
        for m in &missing {
            match (m.layer, abi) {
                // An old ABI still enforces most of the plan: apply its best.
                ("landlock", Some(_)) => layers.landlock_required = false,
                ("landlock", None) => layers.landlock = false,
                ("seccomp", _) => {
                    layers.seccomp = false;
                    layers.guard = false;
                }
                _ => {}
            }
        }
        print_banner(&list);
    }
    let off = oajail_jail::layers::apply_test_disable(&mut layers);
    if !off.is_empty() {
        eprintln!(
            "oajail: !!! TEST BUILD: layers disabled by OAJAIL_TEST_DISABLE: {} !!!",
            off.join(",")
        );
    }
    Ok(layers)
}

/// The cheap probes (no process is created): Landlock ABI and seccomp. User
/// namespaces are not probed here: the clone itself fails with a clear line,
/// and there is no degraded mode without them (see docs/enforcement-order.md).
fn quick_probe() -> Vec<Missing> {
    let mut missing = Vec::new();
    match oajail_jail::doctor::landlock_abi() {
        None => missing.push(Missing {
            layer: "landlock",
            why: "not offered by the kernel".into(),
        }),
        Some(v) if v < u32::from(oajail_policy::compile::landlock::MIN_ABI) => {
            missing.push(Missing {
                layer: "landlock",
                why: format!(
                    "abi {v} is older than the {} the plan needs",
                    oajail_policy::compile::landlock::MIN_ABI
                ),
            })
        }
        Some(_) => {}
    }
    if !oajail_jail::doctor::seccomp_available() {
        missing.push(Missing {
            layer: "seccomp",
            why: "seccomp filters (kill, errno, user notification) unavailable".into(),
        });
    }
    missing
}

fn build_spec(argv: Vec<CString>, plans: &Plans) -> Result<JailSpec, Fail> {
    let cwd = std::env::current_dir().map_err(|e| Fail::setup(anyhow!("cwd: {e}")))?;
    let env = plans
        .env
        .set
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Fail::setup(anyhow!("environment: a value contains a NUL byte")))?;
    let mut spec = JailSpec::new(argv, env, cwd);
    spec.seccomp =
        Some(SeccompProgram::compile(&plans.compiled.seccomp).map_err(|e| Fail::setup(e.into()))?);
    spec.guard = Some(
        oajail_jail::guard::GuardSpec::compile(&plans.compiled.guard)
            .map_err(|e| Fail::setup(e.into()))?,
    );
    spec.rlimits = plans.compiled.limits.rlimits.clone();
    spec.mounts = Some(plans.compiled.mounts.clone());
    spec.landlock = Some(plans.compiled.landlock.clone());
    spec.ssh_helper = std::env::current_exe().ok();
    Ok(spec)
}

/// `-c CMD` → `<bash> -c CMD`, as srt runs it (its `binShell`: `bash` found
/// on the caller's `PATH`); `-- CMD ARGS…` as given.
fn command_argv(args: &RunArgs) -> Result<Vec<CString>, Fail> {
    let words: Vec<OsString> = match &args.shell_command {
        Some(cmd) => vec![bash()?.into(), "-c".into(), cmd.into()],
        None => args.command.clone(),
    };
    if words.is_empty() {
        return Err(Fail::usage(anyhow!(
            "no command: use -c 'CMD' or -- CMD [ARGS]..."
        )));
    }
    words
        .into_iter()
        .map(|w| {
            CString::new(w.into_vec())
                .map_err(|_| Fail::usage(anyhow!("command contains a NUL byte")))
        })
        .collect()
}

/// The first executable `bash` on the caller's `PATH`. Without one `-c` is
/// refused rather than run by another shell that would read the string
/// differently (`[[ ]]`, arrays, `$'…'`).
fn bash() -> Result<std::path::PathBuf, Fail> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bash"))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            Fail::usage(anyhow!(
                "-c: bash not found on PATH (-c runs the command with bash, as srt does); \
                 use -- sh -c 'CMD' for another shell"
            ))
        })
}
