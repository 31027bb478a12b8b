//! The jail's pid 1: a flat, ordered list of set-up steps, then the command
//! is forked and pid 1 becomes the init ([`crate::init`]).
//!
//! The reasons for this order are in `docs/enforcement-order.md`; in short:
//! id maps before anything that needs the namespace's capabilities and before
//! going non-dumpable; the listener hand-off before waiting for the spec
//! (the supervisor compiles it meanwhile); the network and mounts while
//! capabilities are still held; capabilities, then no_new_privs, as soon as
//! the last privileged step is done (while the supervisor still builds the
//! ruleset); the supervisor's go-ahead before anything of the command exists
//! (so a proxy failure stops the jail first); on Landlock ABI 1 only, the
//! mover (`guard/mover.rs`), then Landlock in pid 1 *before* the fork, so pid 1 and the
//! command share one Landlock domain (Landlock's signal scope would otherwise
//! stop pid 1 from forwarding signals to the command); seccomp last, just
//! before `execve` in the command and just before the wait loop in pid 1.

use crate::cpus::Affinity;
use crate::error::{Failure, Step};
use crate::guard::{Handoff, Mover, Server};
use crate::landlock::{Built, LandlockStatus, Prebuilt};
use crate::report::{EnforcementReport, LandlockEnforced};
use crate::spec::{JailSpec, Layers};
use crate::sync::{self, Channel, ChildMsg, ExitReport, SpecFile};
use crate::sys::process::spawn_shared;
use crate::{caps, init, net, ns};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;
use oajail_policy::compile::landlock::FsAccess;
use std::os::fd::AsRawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

/// The jail's host name (its uts namespace is private).
const HOSTNAME: &str = "oajail";

/// Run pid 1. Never returns: exits with the command's status, or with
/// [`crate::exit_code::SETUP_FAILED`] after reporting the failing step.
pub(crate) fn run(
    layers: Layers,
    chan: Channel,
    spec_file: &SpecFile,
    ids: (u32, u32),
    affinity: Affinity,
    report: ExitReport,
) -> ! {
    match catch_unwind(AssertUnwindSafe(|| {
        setup(layers, &chan, spec_file, ids, affinity)
    })) {
        Ok(Ok((command, signals, guard))) => {
            // Closing our end: once the command has executed too, the
            // supervisor sees end-of-file, which means "exec succeeded".
            drop(chan);
            let flat = !layers.namespaces;
            if flat {
                // No pid namespace dies with pid 1 here: instead of dying
                // at once with the supervisor, pid 1 sees it go (its exit
                // report's pipe breaks) and ends every process of the jail.
                let _ = nix::sys::prctl::set_pdeathsig(None);
            }
            init::run(command, signals, flat, guard, report)
        }
        Ok(Err((step, failure))) => sync::report(&chan, step, failure),
        Err(_) => sync::report(&chan, Step::Fork, Failure::msg("panic during jail setup")),
    }
}

type StepResult<T = ()> = Result<T, (Step, Failure)>;

/// Tag a step's error with the step's name.
fn at<T, E: Into<Failure>>(step: Step, r: Result<T, E>) -> StepResult<T> {
    r.map_err(|e| (step, e.into()))
}

fn setup(
    layers: Layers,
    chan: &Channel,
    spec_file: &SpecFile,
    ids: (u32, u32),
    affinity: Affinity,
) -> StepResult<(Pid, SignalFd, Option<Server>)> {
    enter(layers, chan, ids)?;
    // The mounts' first steps need no plan: taken while the supervisor
    // compiles, they leave pid 1's path after the spec.
    let staged = if layers.mount_view() {
        Some(at(Step::Mounts, crate::mount::prepare())?)
    } else {
        None
    };
    let (wants_terminal, shared) = at(Step::Supervisor, chan.wait_spec())?;
    let spec = at(Step::Supervisor, spec_file.read())?;
    match spec.mounts.as_ref().zip(staged) {
        // Includes pivot_root into the new root (see mount.rs).
        Some((plan, staged)) => {
            let view = crate::mount::View {
                fresh_proc: layers.fresh_proc,
                pivot: layers.pivot,
            };
            at(Step::Mounts, staged.apply(plan, &spec.masked_files, view))?
        }
        // Without the jail's own mount view the real file would show.
        None if !spec.masked_files.is_empty() => {
            let msg = "masked files: a masked credential file needs the jail's own mount view";
            return Err((Step::Mounts, Failure::msg(msg)));
        }
        None => {}
    }
    install_trust_bundle(layers, &spec)?;
    at(Step::Chdir, std::env::set_current_dir(&spec.cwd))?;
    let on_terminal = wants_terminal && open_terminal(chan)?;
    // Nothing needs a capability any more: drop them while the supervisor
    // still builds the ruleset and prepares the proxy.
    drop_privileges(layers)?;
    // Without a mount view nothing of the ruleset depends on the jail: pid
    // 1 builds its half while the supervisor builds the other.
    let built = build_landlock(layers, &spec, shared)?;
    let prebuilt = at(Step::Supervisor, chan.wait_byte_with_fd(sync::GO))?;
    // The supervisor kept pid 1 off its CPU while both worked (cpus.rs);
    // pid 1 and the command get the caller's CPUs back.
    affinity.restore();
    let ruleset = match (prebuilt, built) {
        (Some(fd), _) => Some(Ruleset::Prebuilt(Prebuilt::from_fd(fd))),
        (None, built) => built.map(Ruleset::Built),
    };
    let (report, mover) = lock_down(layers, &spec, ruleset)?;
    at(Step::Fork, chan.send(&ChildMsg::Enforced(report), &[]))?;
    let signals = at(Step::Fork, init::signal_fd())?;
    // The guard's hand-off socketpair, made before the fork.
    let guard = spec.guard.as_ref().filter(|_| layers.guard);
    let handoff = guard.map(|_| at(Step::Guard, Handoff::new())).transpose()?;
    // Installed once, before the fork, so the command inherits it (a second
    // install would compile the program again on the start-up path). The
    // command's remaining set-up calls (signal reset, setsid, rlimits,
    // close_range, execve) are not on the deny list.
    if let Some(program) = spec.seccomp.as_ref().filter(|_| layers.seccomp) {
        at(Step::Seccomp, program.install())?;
    }
    if let Some(program) = spec.memory_seccomp.as_ref().filter(|_| layers.seccomp) {
        at(Step::Seccomp, program.install())?;
    }
    // The command shares pid 1's memory until its execve (no copy of it:
    // `spawn_shared`), so it gets everything by reference.
    let guard_end = handoff.as_ref();
    let spawned = spawn_shared(|| crate::command::run(&spec, chan, guard_end, on_terminal));
    let command = Pid::from_raw(at(Step::Fork, spawned)?);
    let server = match (guard, handoff) {
        (Some(g), Some(h)) => {
            let plan = g.plan().clone();
            let mut prime: Vec<std::path::PathBuf> = plan.roots.iter().map(Into::into).collect();
            prime.push(spec.cwd.clone());
            let connect = spec.connect.clone().filter(|_| layers.connect);
            (at(Step::Guard, h.receive())?)
                .map(|listener| Server::new(listener, plan, prime, mover, connect))
        }
        _ => None,
    };
    Ok((command, signals, server))
}

/// An interactive run: a pty on the jail's own devpts (after the mounts),
/// its master to the supervisor, its slave our controlling terminal and
/// standard descriptors. Without one (no pty device) the command shares
/// the caller's terminal in a session of its own, as a non-interactive run
/// does, where seccomp's ioctl denies hold it: said, not refused.
fn open_terminal(chan: &Channel) -> StepResult<bool> {
    let (master, slave) = match crate::pty::open_in_jail() {
        Ok(pair) => pair,
        Err(e) => {
            let why = crate::error::lower_first(&e.to_string());
            eprintln!("oajail: note: terminal: no pty in the jail ({why}); no job control");
            return Ok(false);
        }
    };
    at(
        Step::Terminal,
        chan.send(&ChildMsg::Terminal, &[master.as_raw_fd()]),
    )?;
    drop(master);
    at(Step::Terminal, crate::pty::take_over(slave))?;
    Ok(true)
}

/// The run's CA bundle, inside the jail's own mount view only (without one
/// it would land on the host's file system): refused rather than skipped,
/// since the command's CA variables name it.
fn install_trust_bundle(layers: Layers, spec: &JailSpec) -> StepResult {
    let Some(pem) = &spec.trust_bundle else {
        return Ok(());
    };
    match spec.mounts.as_ref().filter(|_| layers.mount_view()) {
        Some(plan) => at(
            Step::Mounts,
            crate::mount::trust::install(plan, pem.as_bytes()),
        ),
        None => Err((
            Step::Mounts,
            Failure::msg("trust bundle: the run's ca bundle needs the jail's own mount view"),
        )),
    }
}

/// The namespace steps that need no plan: id maps, parent death, pid 1's own
/// hardening, host name, loopback, and the proxy listener hand-off.
fn enter(layers: Layers, chan: &Channel, (uid, gid): (u32, u32)) -> StepResult {
    if layers.namespaces {
        at(Step::IdMaps, ns::write_id_maps(uid, gid))?;
        at(Step::Namespaces, ns::unshare_rest(layers.unshare_flags()))?;
    }
    at(Step::ParentDeath, init::die_with_supervisor(chan))?;
    at(Step::InitHardening, init::harden())?;
    if !layers.namespaces {
        at(Step::InitHardening, init::become_subreaper())?;
    }
    if layers.namespaces && layers.uts {
        at(Step::Hostname, ns::set_hostname(HOSTNAME))?;
    }
    if layers.namespaces && layers.netns {
        at(Step::Loopback, net::loopback_up())?;
    }
    // Without namespaces the supervisor binds the proxy's listeners itself
    // (in the container's network, on ports of the kernel's choosing);
    // the empty message still says pid 1 got this far.
    let bind = layers.namespaces;
    at(Step::ProxyListener, net::hand_off_listeners(chan, bind))
}

/// Every capability, then no_new_privs (Landlock and seccomp need it
/// without CAP_SYS_ADMIN): after the last privileged step (mounts, trust
/// bundle, terminal), before "go".
fn drop_privileges(layers: Layers) -> StepResult {
    if layers.caps {
        at(Step::Capabilities, caps::drop_all(!layers.namespaces))?;
    }
    at(Step::NoNewPrivs, caps::no_new_privs())
}

/// Landlock, in pid 1 before the fork (after [`drop_privileges`]): the
/// command inherits this very domain, so pid 1 may still signal it under
/// Landlock's signal scope. Returns what was enforced, and on Landlock ABI 1
/// the mover (forked just before: `guard/mover.rs`).
fn lock_down(
    layers: Layers,
    spec: &JailSpec,
    prebuilt: Option<Ruleset>,
) -> StepResult<(EnforcementReport, Option<Mover>)> {
    let mover = start_mover(layers, spec)?;
    let landlock = apply_landlock(layers, spec, prebuilt)?;
    let report = EnforcementReport {
        namespaces: layers.namespaces,
        mounts: layers.mount_view() && spec.mounts.is_some(),
        landlock,
        landlock_abi: if landlock == LandlockEnforced::None {
            0
        } else {
            layers.landlock_abi
        },
        caps: layers.caps,
        seccomp: layers.seccomp && spec.seccomp.is_some(),
        guard: layers.guard && spec.guard.is_some(),
    };
    Ok((report, mover))
}

/// Landlock ABI 1 beside the mount view, with the guard: the process that
/// makes the moves across directories ABI 1 refuses (`guard/mover.rs`).
fn start_mover(layers: Layers, spec: &JailSpec) -> StepResult<Option<Mover>> {
    let (Some(plan), true) = (&spec.landlock, layers.mover()) else {
        return Ok(None);
    };
    let readable = (plan.fs_rules.iter())
        .filter(|r| r.access.contains(&FsAccess::ReadFile))
        .map(|r| PathBuf::from(&r.path))
        .collect();
    at(Step::Guard, Mover::start(readable)).map(Some)
}

/// A ruleset made before the go-ahead: by the supervisor (its host-side
/// part) or, without a mount view, all of it by pid 1.
enum Ruleset {
    Prebuilt(Prebuilt),
    Built(Built),
}

/// Without a mount view: the ruleset, built before the go-ahead (pid 1's
/// half of the one the supervisor shared, or all of it).
fn build_landlock(
    layers: Layers,
    spec: &JailSpec,
    shared: Option<std::os::fd::OwnedFd>,
) -> StepResult<Option<Built>> {
    let abi = layers.landlock_abi;
    let built = match (spec.landlock.as_ref(), shared) {
        (Some(_), _) if !layers.landlock || layers.mount_view() => return Ok(None),
        (Some(plan), Some(fd)) => Built::finish_shared(fd, plan, abi),
        (Some(plan), None) => crate::landlock::build(plan, abi),
        (None, _) => return Ok(None),
    };
    Ok(Some(at(Step::Landlock, built)?))
}

/// Landlock: finish the ruleset the supervisor built ahead (jail-side rules
/// only), enforce the one pid 1 built, or build it all here.
fn apply_landlock(
    layers: Layers,
    spec: &JailSpec,
    ruleset: Option<Ruleset>,
) -> StepResult<LandlockEnforced> {
    let Some(plan) = spec.landlock.as_ref().filter(|_| layers.landlock) else {
        return Ok(LandlockEnforced::None);
    };
    let abi = layers.landlock_abi;
    let status = match (ruleset, &spec.mounts) {
        (Some(Ruleset::Prebuilt(r)), Some(mounts)) => r.restrict(plan, mounts, abi),
        (Some(Ruleset::Built(r)), _) => r.restrict(plan, abi),
        _ => crate::landlock::restrict(plan, abi),
    };
    Ok(match at(Step::Landlock, status)? {
        LandlockStatus::Full => LandlockEnforced::Full,
        LandlockStatus::Partial => LandlockEnforced::Partial,
    })
}
