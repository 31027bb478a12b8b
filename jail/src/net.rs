//! The jail's network: loopback only, plus the proxy listener(s).
//!
//! pid 1 binds 127.0.0.1:3128 (and `[::1]:3128` when IPv6 loopback works)
//! inside the jail's own netns and hands the listening sockets to the
//! supervisor, which serves them from the host side. The command therefore
//! reaches the outside only through the proxy, and no bridge process lives
//! in the jail's pid namespace.

use crate::sync::{Channel, ChildMsg};
use std::io;
use std::net::{Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;

/// The proxy port inside the jail (srt's default HTTP proxy port).
pub const PROXY_PORT: u16 = 3128;

/// Bring `lo` up.
pub(crate) fn loopback_up() -> io::Result<()> {
    crate::sys::net::loopback_up()
}

/// Bind the listener(s) (when `bind`) and send them to the supervisor,
/// closing our copies.
pub(crate) fn hand_off_listeners(chan: &Channel, bind: bool) -> io::Result<()> {
    let listeners = if bind {
        listen_on_loopback(PROXY_PORT)?
    } else {
        Vec::new()
    };
    let raw: Vec<_> = listeners.iter().map(|l| l.as_raw_fd()).collect();
    chan.send(&ChildMsg::Listeners, &raw)
}

/// Listeners on 127.0.0.1 and, when IPv6 loopback works, `[::1]` at
/// `port` (0: a port of the kernel's choosing for each). The container
/// tier's supervisor binds its proxy listeners with this.
pub fn listen_on_loopback(port: u16) -> io::Result<Vec<TcpListener>> {
    let mut listeners = vec![TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))?];
    // IPv6 may be disabled in the kernel or for this netns; then v4 alone.
    if let Ok(v6) = TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
        listeners.push(v6);
    }
    Ok(listeners)
}
