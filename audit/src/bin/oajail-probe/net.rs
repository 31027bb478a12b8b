//! Family E: direct network egress that ignores the proxy, and socket families.
//!
//! A sent datagram is reported as `succeeded` even if no one answered: the
//! lab's sinks are the ground truth and the harness checks them too. A TCP
//! connection is `succeeded` when the lab's sink answers it; one answered by
//! anything else is the jail's proxy taking the connection (the container
//! tier hands every connect to it, whatever address it names), and the
//! sinks still say whether anything reached them. Payloads carry a marker,
//! never a canary.

use crate::raw as sys;
use crate::report::{FILTERED, Outcome, io_errno};
use nix::errno::Errno;
use oajail_audit::sinks::SINK_ACK;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// Errnos with which a direct connection may be refused.
const NET_DENIED: &[Errno] = &[
    Errno::ENETUNREACH,
    Errno::EHOSTUNREACH,
    Errno::ECONNREFUSED,
    Errno::EACCES,
    Errno::EPERM,
    Errno::EADDRNOTAVAIL,
    Errno::EAFNOSUPPORT,
];

const PAYLOAD: &[u8] = b"OAJ-EXFIL-PROBE\n";

fn addr(attack: &str, ip: &str, port: &str) -> Result<SocketAddr, Outcome> {
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| Outcome::unexpected(attack, None, format!("bad ip {ip}")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| Outcome::unexpected(attack, None, format!("bad port {port}")))?;
    Ok(SocketAddr::new(ip, port))
}

/// `tcp-connect IP PORT`.
pub fn tcp_connect(attack: &str, ip: &str, port: &str) -> Outcome {
    let sa = match addr(attack, ip, port) {
        Ok(a) => a,
        Err(o) => return o,
    };
    match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
        Ok(s) => after_connect(attack, sa, s),
        Err(e) => Outcome::failed(attack, "connect", io_errno(&e), NET_DENIED),
    }
}

/// Send the marker on a connected stream and read who answers: the lab's
/// sink (an escape) or something else (the proxy the connect was handed to).
pub fn after_connect(attack: &str, sa: SocketAddr, mut s: TcpStream) -> Outcome {
    use std::io::Read;
    let _ = s.write_all(PAYLOAD);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while answer.len() < 4096 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        if answer
            .windows(SINK_ACK.len())
            .any(|w| w == SINK_ACK.as_bytes())
        {
            return Outcome::succeeded(
                attack,
                format!("connected to {sa}; the lab's sink answered"),
            );
        }
    }
    let first = String::from_utf8_lossy(&answer[..answer.len().min(40)]).into_owned();
    Outcome::blocked_plain(
        attack,
        format!("connected, but not to {sa}: answered {first:?}, not by the lab's sink"),
    )
}

/// `udp-send IP PORT`.
pub fn udp_send(attack: &str, ip: &str, port: &str) -> Outcome {
    let sa = match addr(attack, ip, port) {
        Ok(a) => a,
        Err(o) => return o,
    };
    let bind = if sa.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let sock = match UdpSocket::bind(bind) {
        Ok(s) => s,
        Err(e) => return Outcome::failed(attack, "socket", io_errno(&e), NET_DENIED),
    };
    match sock.send_to(PAYLOAD, sa) {
        Ok(_) => Outcome::succeeded(attack, format!("datagram sent to {sa}")),
        Err(e) => Outcome::failed(attack, "sendto", io_errno(&e), NET_DENIED),
    }
}

/// A minimal DNS query for `name` (type A, recursion desired).
pub fn dns_query_packet(id: u16, name: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(64);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        p.push(u8::try_from(label.len().min(63)).unwrap_or(63));
        p.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    p.extend_from_slice(&[0, 0, 1, 0, 1]);
    p
}

/// `dns-query SERVER NAME`: a raw UDP query straight to a resolver (E3a).
pub fn dns_query(attack: &str, server: &str, name: &str) -> Outcome {
    let sa = match addr(attack, server, "53") {
        Ok(a) => a,
        Err(o) => return o,
    };
    let bind = if sa.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let sock = match UdpSocket::bind(bind) {
        Ok(s) => s,
        Err(e) => return Outcome::failed(attack, "socket", io_errno(&e), NET_DENIED),
    };
    if let Err(e) = sock.send_to(&dns_query_packet(0x4f41, name), sa) {
        return Outcome::failed(attack, "sendto", io_errno(&e), NET_DENIED);
    }
    let _ = sock.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 512];
    match sock.recv_from(&mut buf) {
        Ok(_) => Outcome::succeeded(attack, format!("query sent to {sa} and answered")),
        Err(_) => Outcome::succeeded(attack, format!("query sent to {sa} (no answer)")),
    }
}

/// `resolve NAME`: the system resolver (`/etc/resolv.conf`, nscd, …) (E3f).
pub fn resolve(attack: &str, name: &str) -> Outcome {
    match (name, 443).to_socket_addrs() {
        Ok(mut it) => match it.next() {
            Some(a) => Outcome::succeeded(attack, format!("resolved to {}", a.ip())),
            None => Outcome::blocked_plain(attack, "resolver returned no address"),
        },
        Err(e) => Outcome::blocked_plain(attack, format!("resolution failed: {e}")),
    }
}

/// `icmp-ping IP`: an echo request from an unprivileged ping socket (E4).
pub fn icmp_ping(attack: &str, ip: &str) -> Outcome {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn, sendto, socket,
    };
    let Ok(v4) = ip.parse::<std::net::Ipv4Addr>() else {
        return Outcome::unexpected(attack, None, format!("bad ipv4 {ip}"));
    };
    let sock = match socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::Icmp,
    ) {
        Ok(s) => s,
        Err(e) => return Outcome::failed(attack, "socket(ICMP)", e, NET_DENIED),
    };
    // Echo request: type 8, code 0, checksum filled by the kernel for ping sockets.
    let echo = [8u8, 0, 0, 0, 0x4f, 0x41, 0, 1, b'O', b'A', b'J'];
    let dst = SockaddrIn::from(std::net::SocketAddrV4::new(v4, 0));
    use std::os::fd::AsRawFd;
    match sendto(sock.as_raw_fd(), &echo, &dst, MsgFlags::empty()) {
        Ok(_) => Outcome::succeeded(attack, format!("echo request sent to {v4}")),
        Err(e) => Outcome::failed(attack, "sendto", e, NET_DENIED),
    }
}

/// Families a jailed process may create sockets in (loopback TCP/UDP to the
/// proxy, netlink for its own interfaces).
const ALLOWED_FAMILIES: &[i32] = &[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// Try to open a socket in `family` with any common type.
fn open_family(family: i32) -> Result<(), Errno> {
    let mut last = Errno::EAFNOSUPPORT;
    for ty in [
        libc::SOCK_STREAM,
        libc::SOCK_DGRAM,
        libc::SOCK_RAW,
        libc::SOCK_SEQPACKET,
    ] {
        match sys::socket_raw(family, ty, 0) {
            Ok(_) => return Ok(()),
            Err(e) if FILTERED.contains(&e) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// `socket-family N`: one family (e.g. 40 = AF_VSOCK, 17 = AF_PACKET, 1 = AF_UNIX).
pub fn socket_family(attack: &str, family: &str) -> Outcome {
    let Ok(fam) = family.parse::<i32>() else {
        return Outcome::unexpected(attack, None, format!("bad family {family}"));
    };
    match open_family(fam) {
        Ok(()) => Outcome::succeeded(attack, format!("socket in family {fam} created")),
        Err(e) => Outcome::failed(attack, &format!("socket({fam})"), e, FILTERED),
    }
}

/// `socket-families`: every family 0..=45 outside the allowed set (E6).
pub fn socket_families(attack: &str) -> Outcome {
    let mut opened = Vec::new();
    let mut unfiltered = Vec::new();
    for fam in 0..=45 {
        if ALLOWED_FAMILIES.contains(&fam) {
            continue;
        }
        match open_family(fam) {
            Ok(()) => opened.push(fam),
            Err(e) if FILTERED.contains(&e) => {}
            Err(_) => unfiltered.push(fam),
        }
    }
    if !opened.is_empty() {
        return Outcome::succeeded(attack, format!("sockets created in families {opened:?}"));
    }
    if unfiltered.is_empty() {
        Outcome::blocked_plain(attack, "every family outside inet/inet6/netlink filtered")
    } else {
        // The kernel refused these on its own (module absent): no escape, but
        // the filter did not answer, which the report must show.
        Outcome::blocked_plain(
            attack,
            format!("no family opened; refused by the kernel, not the filter: {unfiltered:?}"),
        )
    }
}
