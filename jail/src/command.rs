//! The command process (pid 2 of the jail): last per-process steps, then
//! `execve`. The seccomp filter is already in place: pid 1 installed it
//! before starting this process, so every step here runs under it. The
//! create-guard's filter is the command's own, installed last (pid 1 must
//! not carry it).
//!
//! Until its `execve` this process shares pid 1's memory
//! (`sys::process::spawn_shared`): it reads the spec and pid 1's
//! descriptors by reference and changes nothing pid 1 owns.

use crate::error::{Failure, Step, lower_first};
use crate::exit_code;
use crate::guard::Handoff;
use crate::spec::JailSpec;
use crate::sync::{Channel, ChildMsg, report};
use nix::sys::signal::SigSet;
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;

/// Used when the command's environment has no `PATH` (as execvp does).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Run the command's steps and execute it. Never returns.
/// `on_terminal`: pid 1 made the jail's pty its controlling terminal.
pub(crate) fn run(
    spec: &JailSpec,
    chan: &Channel,
    guard: Option<&Handoff>,
    on_terminal: bool,
) -> ! {
    if let Err((step, failure)) = prepare(spec, guard, on_terminal) {
        report(chan, step, failure)
    }
    exec(spec, chan)
}

fn prepare(
    spec: &JailSpec,
    guard: Option<&Handoff>,
    on_terminal: bool,
) -> Result<(), (Step, Failure)> {
    // Signals: pid 1 and the supervisor block the forwarded ones; the command
    // starts with a clean mask and default dispositions.
    crate::sys::process::reset_signal_dispositions();
    SigSet::empty()
        .thread_set_mask()
        .map_err(|e| (Step::Setsid, e.into()))?;
    if on_terminal {
        // The jail's own pty: the command leads its foreground group (job
        // control for a shell); the caller's terminal is out of reach.
        crate::pty::foreground().map_err(|e| (Step::Terminal, e.into()))?;
    } else {
        // A new session: the command has no controlling terminal, so it
        // cannot push input into the user's terminal with TIOCSTI.
        nix::unistd::setsid().map_err(|e| (Step::Setsid, e.into()))?;
    }
    crate::rlimit::apply(&spec.rlimits).map_err(|e| (Step::Rlimits, e))?;
    if spec.scope_command {
        scope_signals().map_err(|e| (Step::Landlock, e.into()))?;
    }
    crate::sys::fd::cloexec_from(3).map_err(|e| (Step::CloseFds, e.into()))?;
    // Last: the listener goes to pid 1 and no copy stays here.
    if let (Some(handoff), Some(spec)) = (guard, spec.guard.as_ref()) {
        handoff.install(spec).map_err(|e| (Step::Guard, e))?;
    }
    Ok(())
}

/// A Landlock layer of the command's own with only the signal scope (the
/// container tier, ABI 6): its signals stop at its own domain, so it cannot
/// kill pid 1, which ends every process of the jail when the command or
/// the supervisor goes.
fn scope_signals() -> std::io::Result<()> {
    const LANDLOCK_SCOPE_SIGNAL: u64 = 1 << 1;
    let ruleset = crate::sys::landlock::create_scoped_ruleset(LANDLOCK_SCOPE_SIGNAL)?;
    crate::sys::landlock::restrict_self(std::os::fd::AsFd::as_fd(&ruleset))
}

/// `execve`, searching the `PATH` of the command's own environment when
/// `argv[0]` has no slash (libc's execvp would use oajail's environment).
fn exec(spec: &JailSpec, chan: &Channel) -> ! {
    let Some(program) = spec.argv.first() else {
        report(chan, Step::Exec, Failure::msg("empty command"))
    };
    let env = environment(spec);
    let mut decisive = nix::Error::ENOENT;
    for candidate in candidates(program, &env) {
        let Err(e) = nix::unistd::execve(&candidate, &spec.argv, &env);
        match e {
            nix::Error::ENOENT | nix::Error::ENOTDIR => {}
            // A file that exists but may not be executed decides the error;
            // an untraversable PATH directory is skipped (as shells do).
            nix::Error::EACCES if file_exists(&candidate) => decisive = e,
            nix::Error::EACCES => {}
            other => {
                decisive = other;
                break;
            }
        }
    }
    let program = program.to_string_lossy().into_owned();
    let msg = lower_first(decisive.desc());
    let _ = chan.send(
        &ChildMsg::ExecFailed {
            program,
            errno: decisive as i32,
            msg,
        },
        &[],
    );
    let code = if decisive == nix::Error::ENOENT {
        exit_code::NOT_FOUND
    } else {
        exit_code::NOT_EXECUTABLE
    };
    crate::sys::process::exit_now(code)
}

/// The command's environment, minus `GIT_SSH_COMMAND` when the ssh helper
/// (the oajail binary) cannot be executed in the jail's filesystem view.
fn environment(spec: &JailSpec) -> Vec<CString> {
    let Some(helper) = &spec.ssh_helper else {
        return spec.env.clone();
    };
    if nix::unistd::access(helper.as_path(), nix::unistd::AccessFlags::X_OK).is_ok() {
        return spec.env.clone();
    }
    eprintln!(
        "oajail: warning: {} is not visible in the jail; GIT_SSH_COMMAND not set (ssh cannot use the proxy)",
        helper.display()
    );
    spec.env
        .iter()
        .filter(|kv| !kv.to_bytes().starts_with(b"GIT_SSH_COMMAND="))
        .cloned()
        .collect()
}

fn file_exists(path: &CStr) -> bool {
    std::fs::metadata(std::ffi::OsStr::from_bytes(path.to_bytes())).is_ok()
}

/// Paths to try for `program`.
fn candidates(program: &CStr, env: &[CString]) -> Vec<CString> {
    let bytes = program.to_bytes();
    if bytes.contains(&b'/') {
        return vec![program.to_owned()];
    }
    let path = env
        .iter()
        .find_map(|kv| kv.to_bytes().strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH.as_bytes());
    path.split(|b| *b == b':')
        .map(|dir| if dir.is_empty() { b".".as_slice() } else { dir })
        .filter_map(|dir| {
            let mut full = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(dir));
            full.push(std::ffi::OsStr::from_bytes(bytes));
            CString::new(full.as_os_str().as_bytes()).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn slash_means_no_search() {
        assert_eq!(candidates(&c("./x"), &[c("PATH=/a")]), vec![c("./x")]);
    }

    #[test]
    fn search_uses_the_command_environment_path() {
        let got = candidates(&c("ls"), &[c("HOME=/h"), c("PATH=/a::/b")]);
        assert_eq!(got, vec![c("/a/ls"), c("./ls"), c("/b/ls")]);
    }

    #[test]
    fn default_path_without_path_variable() {
        assert_eq!(candidates(&c("ls"), &[]).len(), 3);
    }
}
