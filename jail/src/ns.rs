//! Namespace set-up done by the jail's pid 1 itself.

use std::io;

/// Namespaces every jail gets: user, mount, pid (fresh /proc), net (loopback
/// only), ipc and uts. Only user and pid are created by the clone (pid 1 must
/// be born in its pid namespace); pid 1 unshares the others itself right
/// after its id maps ([`UNSHARE_FLAGS`]), so the kernel builds the network
/// namespace (the costliest, ≈ 0.6 ms) on pid 1's core while the supervisor
/// compiles the plans, instead of inside the supervisor's `clone` call.
pub(crate) const CLONE_FLAGS: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;

/// The namespaces pid 1 unshares after writing its id maps (it holds every
/// capability of its new user namespace then, which owns them all).
pub(crate) const UNSHARE_FLAGS: libc::c_int =
    libc::CLONE_NEWNS | libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;

/// Enter the namespaces of [`UNSHARE_FLAGS`] (`flags` is a subset of them).
pub(crate) fn unshare_rest(flags: libc::c_int) -> io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::from_bits_retain(flags)).map_err(io::Error::from)
}

/// Map the caller's uid and gid to themselves (root stays 0), denying
/// `setgroups` first as the kernel requires for an unprivileged gid map.
///
/// The child writes its own maps: a process may map its own (parent
/// namespace) uid in a namespace it just created, so the supervisor does not
/// need a round trip here. This must run before the process becomes
/// non-dumpable, which would make its /proc files unwritable.
pub(crate) fn write_id_maps(uid: u32, gid: u32) -> io::Result<()> {
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    std::fs::write("/proc/self/setgroups", "deny\n")?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// The jail's host name (the uts namespace is private).
pub(crate) fn set_hostname(name: &str) -> io::Result<()> {
    nix::unistd::sethostname(name).map_err(io::Error::from)
}
