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

/// Plain `fork(2)`, used by pid 1 to start the mover (`guard/mover.rs`),
/// which must live on outside pid 1's memory; the command is started with
/// [`spawn_shared`].
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

/// The stack of a [`spawn_shared`] child: the command's last steps in
/// `command.rs` use a few pages of it; only touched pages cost anything.
const SHARED_STACK: usize = 1 << 20;
const PAGE: usize = 4096;

/// Run `child` in a new process that shares this one's memory until it
/// executes a program or exits (`CLONE_VM | CLONE_VFORK`, as posix_spawn
/// does); this process is suspended meanwhile. Returns the child's pid.
///
/// Why not fork: on the benchmark machine pid 1's fork, with the copy of
/// its page tables and the copy-on-write faults that follow in both
/// processes, cost about 0.2 ms of `oajail -- /bin/true`'s start-up
/// (docs/benchmarks.md); a shared-memory child copies nothing.
///
/// What the child may do, since every write lands in this process's memory:
/// - use `child`'s captures by reference only and never drop anything this
///   process owns (its captures are never dropped: it does not return);
/// - allocate (the caller is single-threaded and suspended, so the
///   allocator's locks are free; what the child allocates leaks here);
/// - end with `execve` or `_exit`, never by returning.
pub(crate) fn spawn_shared<F: FnOnce()>(child: F) -> io::Result<libc::pid_t> {
    extern "C" fn trampoline<F: FnOnce()>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Option<F>` of `spawn_shared`, alive until
        // the child has executed or exited (CLONE_VFORK); only the child
        // touches it meanwhile.
        let slot = unsafe { &mut *arg.cast::<Option<F>>() };
        if let Some(f) = slot.take() {
            f();
        }
        // `child` executes a program or exits; never return into the
        // caller's frames, which are this process's own.
        exit_now(127)
    }
    // SAFETY: a fresh anonymous mapping; no pointer argument but the null
    // hint.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SHARED_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut slot = Some(child);
    // SAFETY: the lowest page becomes the stack's guard (an overflow faults
    // instead of writing below the mapping); the range is inside it.
    let guarded = unsafe { libc::mprotect(stack, PAGE, libc::PROT_NONE) };
    let pid = if guarded == 0 {
        // SAFETY: the child runs `trampoline` on its own stack (the top of
        // the mapping; x86_64 and aarch64 stacks grow down) in this
        // process's memory, and this call returns only once the child has
        // executed or exited (CLONE_VFORK), so `slot` and the stack outlive
        // its use; the caller is single-threaded (pid 1), so no lock is
        // held by another thread. Without CLONE_SETTLS the child uses this
        // thread's TLS, which nothing else uses while it runs.
        unsafe {
            libc::clone(
                trampoline::<F>,
                stack.cast::<u8>().add(SHARED_STACK).cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut slot).cast(),
            )
        }
    } else {
        -1
    };
    let err = io::Error::last_os_error();
    // SAFETY: the mapping made above; the child no longer runs on it.
    unsafe { libc::munmap(stack, SHARED_STACK) };
    match pid {
        -1 => Err(err),
        pid => Ok(pid),
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
