//! Network interface flags: bring `lo` up in the jail's fresh netns.

use std::io;
use std::os::fd::AsRawFd;

/// Set IFF_UP on the loopback interface.
///
/// Raw ioctl: nix has no typed SIOCGIFFLAGS/SIOCSIFFLAGS wrapper, and a
/// netlink client would be far more code for one flag.
pub(crate) fn loopback_up() -> io::Result<()> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").or_else(|_| {
        // Before lo is up binding 127.0.0.1 may fail; any AF_INET socket works.
        std::net::UdpSocket::bind("0.0.0.0:0")
    })?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming "lo"; SIOCGIFFLAGS fills ifru_flags.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS initialised the ifru_flags member of the union.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: `req` still names "lo" and now carries the flags to set.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
