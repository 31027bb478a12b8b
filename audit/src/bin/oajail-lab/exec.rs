//! `oajail-lab exec PPID [--refuse-userns] -- ARGV`: how the lab starts
//! its command. The command dies with the lab (`PR_SET_PDEATHSIG`, which
//! survives `execve`), and with `--refuse-userns` it is refused user
//! namespaces as a container runtime's default seccomp profile refuses
//! them (`oajail audit --tier container`): `clone` and `unshare` with
//! `CLONE_NEWUSER` fail with `EPERM`, `clone3` (whose flags a filter
//! cannot read) with `ENOSYS`, so libc falls back to `clone`.

use anyhow::{Context, Result};
use std::process::Command;

/// Be killed when process `ppid` (this one's parent) dies; exit at once if
/// it already has (this process was then handed to another parent).
pub fn die_with_parent(ppid: i32) {
    let armed = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if armed.is_err() || nix::unistd::getppid().as_raw() != ppid {
        std::process::exit(3);
    }
}

/// The `exec` subcommand's arguments after `exec`: become ARGV.
pub fn exec(args: &[String]) -> i32 {
    use std::os::unix::process::CommandExt;
    let (ppid, rest) = match args.split_first() {
        Some((p, rest)) => (p, rest),
        None => return usage(),
    };
    let Ok(ppid) = ppid.parse() else {
        eprintln!("oajail-lab: exec: bad parent pid {ppid:?}");
        return 2;
    };
    let (refuse, rest) = match rest.split_first() {
        Some((flag, rest)) if flag == "--refuse-userns" => (true, rest),
        _ => (false, rest),
    };
    let argv = match rest.split_first() {
        Some((dashes, argv)) if dashes == "--" && !argv.is_empty() => argv,
        _ => return usage(),
    };
    die_with_parent(ppid);
    if refuse && let Err(e) = refuse_user_namespaces() {
        eprintln!("oajail-lab: exec: {e:#}");
        return 3;
    }
    let e = Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!("oajail-lab: exec {}: {e}", argv[0]);
    127
}

fn usage() -> i32 {
    eprintln!("usage: oajail-lab exec PPID [--refuse-userns] -- ARGV");
    2
}

/// The filter described in the module's comment, on this process (which
/// is single-threaded here) and everything it starts.
fn refuse_user_namespaces() -> Result<()> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let arch = std::env::consts::ARCH
        .try_into()
        .context("seccomp: this architecture")?;
    let newuser = libc::CLONE_NEWUSER as u64;
    let flag = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(newuser),
        newuser,
    )
    .context("seccomp: condition")?;
    let rule = || SeccompRule::new(vec![flag.clone()]).map(|r| vec![r]);
    let eperm = SeccompFilter::new(
        [
            (libc::SYS_clone, rule().context("seccomp: rule")?),
            (libc::SYS_unshare, rule().context("seccomp: rule")?),
        ]
        .into(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .context("seccomp: clone and unshare")?;
    let enosys = SeccompFilter::new(
        [(libc::SYS_clone3, vec![])].into(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .context("seccomp: clone3")?;
    // Without CAP_SYS_ADMIN (the command runs as the caller) a filter needs
    // no_new_privs; oajail sets it on the command anyway.
    nix::sys::prctl::set_no_new_privs().context("no_new_privs")?;
    for filter in [eperm, enosys] {
        let prog: BpfProgram = filter.try_into().context("seccomp: compile")?;
        seccompiler::apply_filter(&prog).context("seccomp: install")?;
    }
    Ok(())
}
