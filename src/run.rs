//! The jailed run: policy → plans → jail → proxy → exit status.

use crate::ask::Asking;
use crate::cli::{Common, RunArgs};
use crate::container;
use crate::desk::{Desk, Listening};
use crate::plans::{self, Plans};
use crate::{Fail, proxy, settings};
use anyhow::anyhow;
use oajail_jail::negotiate::{self, Kernel, Negotiation, PlanFacts, Request};
use oajail_jail::{Jail, JailError, JailSpec, Waited};
use oajail_policy::Policy;
use std::ffi::{CString, OsString};
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run the command of `args` in a jail; returns the exit status to use.
pub fn run(common: &Common, args: RunArgs) -> Result<i32, Fail> {
    args.check().map_err(|e| Fail::usage(anyhow!(e)))?;
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    execute(common, &args, loaded, origin).map(|ran| ran.code)
}

/// A finished run.
pub struct Ran {
    /// The exit status to use.
    pub code: i32,
    /// Its refusals.
    pub desk: Arc<Desk>,
}

/// Run the command of `args` in a jail under the loaded policy.
pub fn execute(
    common: &Common,
    args: &RunArgs,
    loaded: oajail_policy::srt::Loaded,
    origin: settings::Origin,
) -> Result<Ran, Fail> {
    let argv = command_argv(args)?;
    // Put the caller's terminal back however the run ends (drop order: last).
    let _terminal = oajail_jail::terminal::Saved::capture();
    settings::print_warnings(&loaded.warnings);
    let policy = loaded.policy;
    let request = request(&policy, args);
    crate::preflight::wide_writes(&policy, request.strict)?;
    let asking = asking(&policy, args, &origin, &argv)?;
    let negotiated = negotiate(&policy, &request, kernel_for_run())?;
    let clock = Clock::new(common.debug);
    // Clone first: the kernel builds the namespaces and pid 1 brings up its
    // network on the other core while this process compiles the plans. The
    // process is still single-threaded here, as the clone requires.
    let early = Jail::spawn(negotiated.layers());
    // The container tier's directory and proxy listeners: its spec names them.
    let mut container = container::prepare(&negotiated)?;
    let mut plans = plans::compile_all(&policy, &origin, &args.env_keep)?;
    // Entries the filesystem plan dropped or narrowed (missing, symlinked…).
    settings::print_warnings(&plans.compiled.mounts.warnings);
    let facts = plans::host_facts(&origin)?;
    crate::preflight::hidden_cwd(&policy, &plans, &facts)?;
    let watched = match args.watch_reads {
        true => plans::watch_reads(&mut plans),
        false => Vec::new(),
    };
    let layers = negotiated.layers();
    if layers.guard && layers.seccomp {
        plans::unix_sockets_to_guard(&mut plans.compiled);
    }
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
    // Masked variables: the real values stay in this process (the proxy's
    // swap); the jail gets a fresh sentinel each.
    // Masked files likewise: the supervisor reads them, the jail sees the
    // sentinel at the same path (masked_files.rs).
    let files = crate::masked_files::read_all(&policy, &plans, &origin)?;
    let real_files: Vec<_> = files.iter().map(|f| (f.rule, f.value.clone())).collect();
    let credentials = oajail_proxy::Credentials::with_files(
        &policy.credentials,
        |name| std::env::var(name).ok(),
        &real_files,
    )
    .map_err(|e| Fail::setup(anyhow!("{e}")))?
    // Tokens issued while the command runs are masked as they arrive.
    .with_issued(&policy.oajail.issued_tokens);
    let sentinels = credentials.jail_env();
    (plans.env.set).retain(|(k, _)| sentinels.iter().all(|(name, _)| name != k));
    plans.env.set.extend(sentinels);
    let masked_files =
        crate::masked_files::apply(&files, &credentials.file_sentinels(), &mut plans);
    let bundle = authority
        .as_ref()
        .map(oajail_proxy::Authority::trust_bundle);
    let parts = SpecParts {
        argv,
        plans: &plans,
        masked_files,
        bundle,
        watched,
    };
    let spec = parts.build(&negotiated, container.as_ref())?;
    for line in negotiated.report_lines() {
        clock.note(&line);
    }
    clock.note(&format!(
        "policy from {origin} (sha256 {}); {} mount steps, {} landlock \
         rules, {} seccomp instructions; compiled",
        plans.compiled.policy_sha256,
        plans.compiled.mounts.steps.len(),
        plans.compiled.landlock.fs_rules.len(),
        spec.seccomp.as_ref().map_or(0, |p| p.len()),
    ));
    let timeout = args.timeout().or(plans.compiled.limits.wall_seconds);
    let desk = Desk::new(policy.clone(), facts);
    let facts = PlanFacts::of(&policy);
    let (jail, listeners) = start(
        early,
        &negotiated,
        (facts, &request),
        &spec,
        &parts,
        &mut container,
    )?;
    let secrets = proxy::Secrets {
        authority,
        credentials,
    };
    let ready = Ready {
        args,
        timeout,
        clock: &clock,
        container: container.as_ref(),
        desk: &desk,
        asking: asking.as_ref(),
    };
    // The run's directory lives until the jail is gone (dropped last).
    let code = supervise(jail, listeners, &plans, secrets, &ready);
    drop(container);
    Ok(Ran { code: code?, desk })
}

/// The kernel and environment as a run sees them: cheap probes, and where
/// something may refuse steps of the full jail (a container's seccomp
/// profile, its masked `/proc`, AppArmor) every step tried first, so the
/// run is negotiated on what they do, as `doctor` is.
pub(crate) fn kernel_for_run() -> Kernel {
    let kernel = Kernel::probe();
    if kernel.place.may_refuse() {
        Kernel {
            steps: oajail_jail::envprobe::run_steps(),
            ..kernel
        }
    } else {
        kernel
    }
}

/// What a spec is built from, kept for a second negotiation.
struct SpecParts<'a> {
    argv: Vec<CString>,
    plans: &'a Plans,
    masked_files: Vec<oajail_jail::MaskedFileSpec>,
    /// The run's trust bundle (PEM), when some tunnel may be terminated.
    bundle: Option<String>,
    /// The read watch's hidden paths (`--watch-reads`; empty: off).
    watched: Vec<PathBuf>,
}

impl SpecParts<'_> {
    /// The spec for `negotiated` (and the container tier's run, if it is one).
    fn build(
        &self,
        negotiated: &Negotiation,
        container: Option<&container::Run>,
    ) -> Result<JailSpec, Fail> {
        let mut spec = build_spec(negotiated, self.argv.clone(), self.plans, container)?;
        // Masked files go along: without a mount view pid 1 refuses them,
        // naming them, rather than run without.
        spec.masked_files = self.masked_files.clone();
        spec.watch_reads = self.watched.clone();
        match container {
            // No mount view to install it in: the run's read-only directory.
            Some(run) => run.install_bundle(self.bundle.as_deref())?,
            None => spec.trust_bundle = self.bundle.clone(),
        }
        Ok(spec)
    }
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

/// Hand the spec to the freshly cloned jail and receive its listeners.
/// When a step of the full jail is refused and the steps were not tried
/// before (a host with no sign of a container), try them now and
/// negotiate again on what they did: that run goes ahead only as the
/// negotiation allows (its banner names what it does not hold). Where the
/// steps were tried, a step that fails anyway refuses the run at that
/// step: the environment changed since.
fn start(
    early: Result<Jail, JailError>,
    negotiated: &Negotiation,
    (facts, request): (PlanFacts, &Request),
    spec: &JailSpec,
    parts: &SpecParts<'_>,
    container: &mut Option<container::Run>,
) -> Result<(Jail, Vec<TcpListener>), Fail> {
    let finish = |jail: Result<Jail, JailError>,
                  spec: &JailSpec|
     -> Result<(Jail, Vec<TcpListener>), JailError> {
        let mut jail = jail?;
        if oajail_jail::pty::wanted() {
            jail.use_terminal();
        }
        jail.send_spec(spec)?;
        let listeners = jail.take_listeners()?;
        Ok((jail, listeners))
    };
    let with_own = |started: (Jail, Vec<TcpListener>), container: &mut Option<container::Run>| {
        let (jail, mut listeners) = started;
        if let Some(run) = container.as_mut() {
            listeners.append(&mut run.take_listeners());
        }
        (jail, listeners)
    };
    let e = match finish(early, spec) {
        Ok(started) => return Ok(with_own(started, container)),
        Err(e) if e.namespaces_refused() && !negotiated.kernel.steps.probed() => e,
        Err(e) => return Err(e.into()),
    };
    let steps = oajail_jail::envprobe::run_steps();
    if steps.first_refused().is_none() {
        // Every step works when tried on its own: not the environment.
        return Err(e.into());
    }
    let kernel = Kernel {
        steps,
        ..negotiated.kernel
    };
    let again = Negotiation::decide(kernel, facts, request).map_err(|n| {
        match oajail_jail::doctor::apparmor_userns_hint() {
            Some(hint) => Fail::setup(anyhow!("{e}: {hint}; otherwise {n}")),
            None => Fail::setup(anyhow!("{e}: {n}")),
        }
    })?;
    print_banner(&again);
    *container = container::prepare(&again)?;
    let spec = parts.build(&again, container.as_ref())?;
    let started = finish(Jail::spawn(again.layers()), &spec)?;
    Ok(with_own(started, container))
}

fn print_banner(negotiated: &Negotiation) {
    let lines = negotiated.banner();
    if lines.is_empty() {
        return;
    }
    if negotiated.unheld.is_empty() {
        // Fallbacks that lose nothing: said, without the alarm.
        for line in lines {
            eprintln!("oajail: note: {line}");
        }
        return;
    }
    eprintln!("oajail: ==================== DEGRADED JAIL ====================");
    eprintln!("oajail: tier: {}", negotiated.tier.describe());
    for line in lines {
        eprintln!("oajail: {line}");
    }
    eprintln!("oajail: =======================================================");
}

/// Release the jail and wait; the proxy serves the jail's listeners from
/// the jail's first connection on.
/// What the supervision of a started jail reads besides the jail.
struct Ready<'a> {
    args: &'a RunArgs,
    timeout: Option<u64>,
    clock: &'a Clock,
    /// The container tier's run (its directory).
    container: Option<&'a container::Run>,
    /// The run's refusals.
    desk: &'a Arc<Desk>,
    /// Who is asked before a refusal, if anyone.
    asking: Option<&'a Arc<Asking>>,
}

fn supervise(
    mut jail: Jail,
    listeners: Vec<TcpListener>,
    plans: &Plans,
    secrets: proxy::Secrets,
    run: &Ready<'_>,
) -> Result<i32, Fail> {
    let (args, timeout, clock, desk) = (run.args, run.timeout, run.clock, run.desk);
    // What can fail on the caller's input (the decision log, the CA) fails
    // here, before the command runs.
    let ready = match proxy::prepare(plans, secrets, args.log_json.clone(), hooks(run)) {
        Ok(p) => p,
        Err(e) => {
            jail.abort();
            return Err(Fail::setup(e));
        }
    };
    desk.log_to(ready.events());
    let events = jail.take_events();
    let report = jail.release()?;
    let listening = events.map(|stream| desk.listen(stream));
    if let Some(a) = run.asking {
        a.attach(jail.prompter());
    }
    clock.note(&format!("command executed; enforced: {report:?}"));
    // What killed runs left, now that the command runs.
    if let Some(c) = run.container {
        c.sweep();
    }
    let deadline = timeout.map(|t| Instant::now() + Duration::from_secs(t));
    // The proxy's runtime and its threads start when a connection waits in
    // a listener's backlog (it is accepted then): a command that never
    // connects (`git status`, `ls`, a test runner offline) never pays for
    // them. If the runtime cannot start, the jail is killed before any
    // connection got through.
    let waited = {
        let wake: Vec<BorrowedFd<'_>> = listeners.iter().map(AsFd::as_fd).collect();
        jail.wait_until(deadline, &wake)?
    };
    let outcome = match waited {
        Waited::Exited(outcome) => {
            finish_desk(desk, listening, None);
            outcome
        }
        Waited::Readable => {
            let proxy = match ready.serve(listeners) {
                Ok(p) => p,
                Err(e) => {
                    jail.abort();
                    return Err(Fail::setup(e));
                }
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let outcome = jail.wait(left)?;
            finish_desk(desk, listening, Some(proxy));
            outcome
        }
    };
    if outcome.timed_out {
        oajail_jail::say(format_args!(
            "oajail: timeout: killed the jail after {}s",
            timeout.unwrap_or_default()
        ));
    }
    Ok(outcome.code)
}

/// The desk told of the proxy's refusals, and the asker asked first.
fn hooks(run: &Ready<'_>) -> proxy::Hooks {
    let desk = Arc::clone(run.desk);
    let observer: oajail_proxy::Observer =
        Arc::new(move |r: &oajail_proxy::Refused<'_>| desk.network(r));
    let asker = run.asking.map(|a| {
        let a = Arc::clone(a);
        let asker: oajail_proxy::Asker = Arc::new(move |q: &oajail_proxy::Question| a.host(q));
        asker
    });
    proxy::Hooks {
        observer: Some(observer),
        asker,
    }
}

/// Who is asked before a refusal: `--decider CMD`, else the terminal with
/// `--ask` (refused without one) or `oajail.ask` (said and skipped
/// without one), else nobody.
fn asking(
    policy: &Policy,
    args: &RunArgs,
    origin: &settings::Origin,
    argv: &[CString],
) -> Result<Option<Arc<Asking>>, Fail> {
    let file = match origin {
        settings::Origin::File(p) => Some(p.clone()),
        settings::Origin::Builtin => None,
    };
    let words = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(cmd) = &args.decider {
        return Ok(Some(Asking::decider(cmd.clone(), file, words)));
    }
    let terminal = oajail_jail::pty::wanted();
    if args.ask && !terminal {
        return Err(Fail::usage(anyhow!(
            "--ask needs a terminal (stdin and stdout, oajail in the foreground); \
             use --decider CMD to ask a program instead"
        )));
    }
    if policy.oajail.ask && !terminal && !args.ask {
        settings::print_warnings(&[
            "oajail.ask: no terminal here, so refusals are not asked (use --decider CMD)"
                .to_owned(),
        ]);
        return Ok(None);
    }
    Ok((args.ask || policy.oajail.ask).then(|| Asking::terminal(file, words)))
}

/// The jail is gone: read pid 1's last refusals, print the proxy's
/// summary, then the count of every refusal per kind.
fn finish_desk(desk: &Desk, listening: Option<Listening>, proxy: Option<proxy::Running>) {
    if let Some(listening) = listening {
        listening.wait(Duration::from_secs(1));
    }
    desk.flush_log();
    if let Some(proxy) = proxy {
        proxy.finish();
    }
    if let Some(line) = desk.summary() {
        oajail_jail::say(format_args!("{line}"));
    }
}

/// What the user asked of the layers (flags and the settings: srt's
/// `enableWeakerNestedSandbox` accepts the losses of the tier the
/// environment allows).
fn request(policy: &Policy, args: &RunArgs) -> Request {
    let mut request = settings_request(policy);
    request.strict |= args.strict;
    request.accept_unheld |= args.allow_degraded;
    request
}

/// What the settings alone ask of the layers (a run without flags, as
/// `doctor` predicts it).
pub(crate) fn settings_request(policy: &Policy) -> Request {
    Request {
        strict: policy.oajail.strict,
        accept_unheld: policy.oajail.allow_degraded,
        accept_container: policy.process.enable_weaker_nested_sandbox,
        test_disabled: oajail_jail::layers::test_disabled(),
    }
}

/// The jail crate's negotiation for this kernel; prints the banner of a
/// degraded run and of a test build's switches.
fn negotiate(policy: &Policy, request: &Request, kernel: Kernel) -> Result<Negotiation, Fail> {
    let negotiated = Negotiation::decide(kernel, PlanFacts::of(policy), request)
        .map_err(|e| Fail::setup(e.into()))?;
    print_banner(&negotiated);
    if !negotiated.test_disabled.is_empty() {
        eprintln!(
            "oajail: !!! TEST BUILD: layers disabled by OAJAIL_TEST_DISABLE: {} !!!",
            negotiated.test_disabled.join(",")
        );
    }
    Ok(negotiated)
}

fn build_spec(
    negotiated: &Negotiation,
    argv: Vec<CString>,
    plans: &Plans,
    container: Option<&container::Run>,
) -> Result<JailSpec, Fail> {
    let cwd = std::env::current_dir().map_err(|e| Fail::setup(anyhow!("cwd: {e}")))?;
    let env = plans
        .env
        .set
        .iter()
        .map(|(k, v)| {
            let v = container.map_or_else(|| v.clone(), |run| run.env_value(k, v));
            CString::new(format!("{k}={v}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Fail::setup(anyhow!("environment: a value contains a NUL byte")))?;
    let command = negotiate::Command {
        argv,
        env,
        cwd,
        ssh_helper: std::env::current_exe().ok(),
    };
    // Unix-socket refusals are pid 1's only while the guard runs; a run
    // without it (another tier) keeps them in the deny filter.
    let layers = negotiated.layers();
    let moved = plans::unix_sockets_at_guard(&plans.compiled);
    let compiled = if moved && !(layers.guard && layers.seccomp) {
        let mut kept = plans.compiled.clone();
        plans::unix_sockets_to_deny_filter(&mut kept);
        std::borrow::Cow::Owned(kept)
    } else {
        std::borrow::Cow::Borrowed(&plans.compiled)
    };
    negotiated
        .build_spec(command, &compiled, container.map(|c| &c.tier))
        .map_err(|e| Fail::setup(e.into()))
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
