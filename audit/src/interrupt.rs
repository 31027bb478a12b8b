//! Stopping an audit early and still leaving nothing behind.
//!
//! Ctrl-C, `SIGTERM` or `SIGHUP` would otherwise end the audit at once,
//! before any clean-up runs (the next audit would sweep what it left, but
//! a user may never run another). [`watch`] catches the first of them:
//! labs being waited on are killed, no new attack starts, and the audit
//! returns through its normal clean-up, exiting `128 + signal` without a
//! report. A second signal ends the audit at once, and the next audit's
//! sweep removes what it left (`crate::rundir`).

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that stopped the audit; 0 while it runs.
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// The signal that stopped the audit, if one did.
pub fn stopped() -> Option<i32> {
    match STOPPED_BY.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Catch `SIGINT`, `SIGTERM` and `SIGHUP` from now on: the first stops
/// the audit, a second exits at once. A thread of its own waits for them.
pub fn watch() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let (mut int, mut term, mut hup) = rt.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("audit-signals".into())
        .spawn(move || {
            let mut next = || {
                rt.block_on(async {
                    tokio::select! {
                        _ = int.recv() => libc::SIGINT,
                        _ = term.recv() => libc::SIGTERM,
                        _ = hup.recv() => libc::SIGHUP,
                    }
                })
            };
            STOPPED_BY.store(next(), Ordering::SeqCst);
            // The handlers stay installed: a second signal is the user
            // insisting, so end now, as the default action would.
            std::process::exit(128 + next());
        })?;
    Ok(())
}

/// The signal's name (`SIGINT`).
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
}
