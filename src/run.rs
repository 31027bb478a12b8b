//! The jailed run: policy → plans → jail → proxy → exit status.

use crate::cli::{Common, RunArgs};
use crate::{Fail, settings};
use anyhow::anyhow;
use oajail_jail::{Jail, JailSpec};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

/// Run the command of `args` in a jail; returns the exit status to use.
pub fn run(common: &Common, args: RunArgs) -> Result<i32, Fail> {
    let argv = command_argv(&args)?;
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    for w in &loaded.warnings {
        eprintln!("oajail: warning: {w}");
    }
    if common.debug {
        eprintln!("oajail: policy from {origin}");
    }
    let cwd = std::env::current_dir().map_err(|e| Fail::setup(anyhow!("cwd: {e}")))?;
    let env = crate::run::environment(&args.env_keep);
    let spec = JailSpec::new(argv, env, cwd);
    let mut jail = Jail::spawn(&spec)?;
    let listeners = jail.take_listeners()?;
    // The proxy is started on these listeners (oajail_proxy::start) once it
    // exists; until then they are held open so the plumbing is exercised.
    let held = listeners;
    jail.release()?;
    let timeout = args.timeout.map(Duration::from_secs);
    let outcome = jail.wait(timeout)?;
    drop(held);
    if outcome.timed_out {
        eprintln!(
            "oajail: timeout: killed the jail after {}s",
            args.timeout.unwrap_or_default()
        );
    }
    Ok(outcome.code)
}

/// `-c CMD` → `/bin/sh -c CMD`; `-- CMD ARGS…` as given.
fn command_argv(args: &RunArgs) -> Result<Vec<CString>, Fail> {
    let words: Vec<OsString> = match &args.shell_command {
        Some(cmd) => vec!["/bin/sh".into(), "-c".into(), cmd.into()],
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

/// Temporary environment plan until `oajail_policy::env` lands.
fn environment(keep: &[String]) -> Vec<CString> {
    let secret = |k: &str| {
        let u = k.to_ascii_uppercase();
        [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "_KEY",
            "AWS_",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
        ]
        .iter()
        .any(|p| u.contains(p))
    };
    let mut out: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let name = k.to_string_lossy().into_owned();
            if (secret(&name) && !keep.contains(&name)) || name == "TMPDIR" {
                return None;
            }
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            CString::new(kv).ok()
        })
        .collect();
    for fixed in ["SANDBOX_RUNTIME=1", "OAJAIL=1", "TMPDIR=/tmp"] {
        out.extend(CString::new(fixed).ok());
    }
    out
}
