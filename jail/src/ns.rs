//! Namespace set-up done by the jail's pid 1 itself.

use std::io;

/// Namespaces every jail gets: user, mount, pid (fresh /proc), net (loopback
/// only), ipc and uts.
pub(crate) const CLONE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

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
