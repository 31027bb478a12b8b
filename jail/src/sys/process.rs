//! Process creation and process-wide state that needs raw calls.

use std::io;

/// Result of a fork-like call, seen from the calling side.
pub(crate) enum Forked {
    /// We are the new process.
    Child,
    /// We are the caller; the new process has this pid (in our pid namespace).
    Parent(libc::pid_t),
}

/// Fork-like `clone(flags | SIGCHLD)` with a null stack, so the child runs on a
/// copy-on-write copy of our stack exactly like `fork(2)`, but in the new
/// namespaces named by `flags` (with `CLONE_NEWPID` it is pid 1 there).
///
/// Neither nix nor std offers this: `nix::sched::clone` needs a separate
/// stack and a callback, and `unshare(CLONE_NEWPID)` would not move the caller
/// itself into the new pid namespace.
///
/// The caller must be single-threaded: the child is a copy of this one thread,
/// and a lock held by another thread would stay locked forever in the child.
/// glibc's `fork` handlers do not run, so the child must not rely on
/// `pthread_atfork` state (it does not call `raise` or `abort`).
pub(crate) fn clone_fork(flags: libc::c_int) -> io::Result<Forked> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: raw clone without CLONE_VM and with a null stack behaves like
    // fork(2): the child gets a private copy of the address space. The caller
    // guarantees the process is single-threaded (documented above). The
    // pointer arguments (parent_tid, child_tid, tls) are null and unused
    // because no CLONE_*SETTID/CLONE_SETTLS flag is passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0 as libc::c_ulong,
        )
    };
    match ret {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid as libc::pid_t)),
    }
}

/// Plain `fork(2)`, used by pid 1 to start the command.
///
/// pid 1 is single-threaded (it never starts threads), which is what makes
/// running arbitrary code in the child sound.
pub(crate) fn fork() -> io::Result<Forked> {
    // SAFETY: the calling process (the jail's pid 1) is single-threaded, so
    // the child cannot inherit a lock held by another thread.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => Ok(Forked::Child),
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(Forked::Parent(child.as_raw())),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Exit immediately with `code`, without running atexit handlers or
/// flushing stdio buffers copied from the supervisor.
///
/// Raw libc: nix 0.31 has no `_exit`, and `std::process::exit` runs the
/// supervisor's exit-time machinery in the jail.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes no pointers and never returns.
    unsafe { libc::_exit(code) }
}

/// Reset every catchable signal to its default disposition.
///
/// Rust's runtime sets SIGPIPE to SIG_IGN and ignored signals survive
/// `execve`, so without this the command would inherit oajail's choices.
pub(crate) fn reset_signal_dispositions() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in Signal::iterator() {
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        // SAFETY: installing SIG_DFL runs no handler code, so no signal-safety
        // requirement applies; failures (none expected) leave the old one.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
}

/// Overwrite this process's argv and environ strings (the memory the kernel
/// shows as `/proc/self/cmdline` and `/proc/self/environ`) with zeros, writing
/// `title` at the start of the argv area.
///
/// Used by the jail's pid 1, which is a copy of the supervisor and would
/// otherwise show the caller's whole environment (tokens included) and
/// command line to anything able to read its /proc files. Nothing in this
/// process reads `std::env` or `std::env::args` afterwards.
pub(crate) fn scrub_cmdline_and_environ(title: &[u8]) -> io::Result<()> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let [arg_start, arg_end, env_start, env_end] = stat_areas(&stat)?;
    for (start, end) in [(arg_start, arg_end), (env_start, env_end)] {
        if end > start {
            // SAFETY: [start, end) is this process's own argv/environ string
            // area as reported by the kernel (/proc/self/stat fields 48-51);
            // it is mapped writable (it lies in the initial stack mapping) and
            // this process is single-threaded, so nothing reads it while we write.
            unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
        }
    }
    let len = title
        .len()
        .min(arg_end.saturating_sub(arg_start).saturating_sub(1));
    if len > 0 {
        // SAFETY: `len` is smaller than the argv area checked above, and the
        // source is a valid slice that does not overlap the stack area.
        unsafe { std::ptr::copy_nonoverlapping(title.as_ptr(), arg_start as *mut u8, len) };
    }
    Ok(())
}

/// Fields 48-51 of /proc/self/stat: arg_start, arg_end, env_start, env_end.
fn stat_areas(stat: &str) -> io::Result<[usize; 4]> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected /proc/self/stat format",
        )
    };
    // The command name (field 2) may contain spaces; fields restart after ')'.
    let rest = stat.rsplit_once(')').ok_or_else(bad)?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so field N is fields[N - 3].
    let get = |n: usize| -> io::Result<usize> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(bad)
    };
    Ok([get(48)?, get(49)?, get(50)?, get(51)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_areas_parses_fields_after_comm_with_spaces() {
        let mut s = String::from("1 (a b) c");
        for i in 4..=52 {
            s.push_str(&format!(" {i}"));
        }
        assert_eq!(stat_areas(&s).unwrap(), [48, 49, 50, 51]);
    }
}
