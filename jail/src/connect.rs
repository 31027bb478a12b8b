//! The container tier's connect hand-off: pid 1 makes every `connect`,
//! `bind` and `listen` of the command, so TCP egress stays the wrapper's
//! where the jail has no network namespace of its own.
//!
//! The command's last filter (the guard's) sends these calls to pid 1.
//! pid 1 reads the address once from the caller's memory, decides on that
//! copy, makes a socket of its own and connects (or binds) *it*, then puts
//! it in the caller's descriptor table in place of the caller's socket
//! (`SECCOMP_ADDFD_FLAG_SETFD`) and answers 0. It never lets the caller's
//! call run (`CONTINUE`): a racing thread could change the address or the
//! descriptor between a check and the kernel's second reading. Whatever
//! happens meanwhile, the socket that ends up connected is pid 1's, and it
//! is connected to what pid 1 decided.
//!
//! The decision, for a TCP connect: the address the jail is told for the
//! proxy (`127.0.0.1:3128`, `[::1]:3128`, as `HTTP_PROXY` says) is
//! connected to the proxy's real listener; with `allowLocalBinding`, a
//! loopback address where the jail itself listens is connected as named;
//! everything else is refused as the full jail's network namespace would
//! refuse it (`ENETUNREACH`, or `ECONNREFUSED` on loopback), with a line on
//! stderr. A bind is made on loopback only (the unspecified address
//! becomes loopback: the full jail's namespace has nothing else), and only
//! with `allowLocalBinding`. Unix sockets (only with `allowAllUnixSockets`)
//! are connected and bound as named, relative to the caller's working
//! directory.
//!
//! What a replacement loses: options set on the socket before `connect`
//! or `bind` (`TCP_NODELAY`, buffer sizes; `SO_REUSEADDR` is set on every
//! bound socket) and other descriptors the caller had made of it. The
//! file status flags (`O_NONBLOCK`) and close-on-exec are carried over.

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// How long pid 1 waits for a connect (the proxy's backlog, a unix
/// listener that does not accept) before the call fails with `ETIMEDOUT`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How many refusals are printed one by one before only counting.
const LOUD_REFUSALS: u32 = 5;
/// Sockets pid 1 bound and keeps until they listen (bounded).
const BOUND_MAX: usize = 256;

/// What pid 1 needs for the hand-off (sent with the spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectSpec {
    /// The proxy's listeners, bound by the supervisor in the container's
    /// network (an IPv4 one first).
    pub proxy: Vec<SocketAddr>,
    /// The port the jail is told the proxy listens on (on 127.0.0.1 and ::1).
    pub jail_port: u16,
    /// `allowLocalBinding`: loopback binds, and connects to the jail's own
    /// listeners.
    pub allow_local_binding: bool,
    /// `allowAllUnixSockets`.
    pub allow_unix: bool,
}

/// One handed-off call, as pid 1 sees it.
pub(crate) struct Call<'a> {
    /// The system call number.
    pub(crate) nr: i64,
    /// Its arguments.
    pub(crate) args: [u64; 6],
    /// The caller's `/proc/<tid>` directory.
    pub(crate) proc_dir: BorrowedFd<'a>,
    /// Reads `len` bytes at an address of the caller's memory.
    pub(crate) read: &'a dyn Fn(u64, usize) -> Result<Vec<u8>, Errno>,
}

/// What the caller gets.
pub(crate) enum Reply {
    /// The call's return value.
    Value(i64),
    /// `fd` takes the place of the caller's descriptor `at`; the call
    /// returns 0.
    Replace {
        /// pid 1's socket.
        fd: OwnedFd,
        /// The caller's descriptor number.
        at: i32,
        /// Close-on-exec on the caller's copy.
        cloexec: bool,
    },
}

/// pid 1's state for the hand-off.
pub(crate) struct Connector {
    spec: ConnectSpec,
    /// Sockets pid 1 bound for the command, by inode, until they listen.
    bound: HashMap<u64, OwnedFd>,
    /// The jail's listening sockets: address and inode.
    listening: Vec<(SocketAddr, u64)>,
    refused: u32,
}

impl Connector {
    pub(crate) fn new(spec: ConnectSpec) -> Self {
        Connector {
            spec,
            bound: HashMap::new(),
            listening: Vec::new(),
            refused: 0,
        }
    }

    /// Whether `nr` is one of the handed-off calls.
    pub(crate) fn handles(nr: i64) -> bool {
        [libc::SYS_connect, libc::SYS_bind, libc::SYS_listen].contains(&nr)
    }

    /// Make the call for the caller.
    pub(crate) fn perform(&mut self, call: &Call<'_>) -> Result<Reply, Errno> {
        let fd = call.args[0] as i32;
        let inode = socket_inode(call.proc_dir, fd)?;
        match call.nr {
            libc::SYS_listen => self.listen(inode, call.args[1] as i32),
            nr => {
                let len = (call.args[2] as usize).min(128);
                let raw = (call.read)(call.args[1], len)?;
                let addr = Address::parse(&raw)?;
                let flags = FdFlags::of(call.proc_dir, fd)?;
                let sock = if nr == libc::SYS_connect {
                    self.connect(call, inode, &addr)?
                } else {
                    self.bind(call, inode, &addr)?
                };
                let Some(sock) = sock else {
                    return Ok(Reply::Value(0));
                };
                rustix::io::ioctl_fionbio(&sock, flags.nonblocking)?;
                Ok(Reply::Replace {
                    fd: sock,
                    at: fd,
                    cloexec: flags.cloexec,
                })
            }
        }
    }

    /// At exit: the total, when more refusals happened than were printed.
    pub(crate) fn report_total(&self) {
        if self.refused > LOUD_REFUSALS {
            crate::say(format_args!(
                "oajail: connect: {} connects refused in total",
                self.refused
            ));
        }
    }

    fn connect(
        &mut self,
        call: &Call<'_>,
        inode: u64,
        addr: &Address,
    ) -> Result<Option<OwnedFd>, Errno> {
        match addr {
            // Dissolving an association: nothing new is reached.
            Address::Unspec => Ok(None),
            Address::Unix(unix) => {
                if !self.spec.allow_unix {
                    return Err(Errno::ACCESS);
                }
                let sock = unix_socket(call.proc_dir, inode)?;
                at_callers_cwd(call.proc_dir, || timed(&sock, |s| connect(s, unix)))?;
                Ok(Some(sock))
            }
            Address::Ip(dst) => {
                let target = self.target(*dst)?;
                let sock = tcp_socket(dst)?;
                self.bound.remove(&inode);
                timed(&sock, |s| connect(s, &target))?;
                Ok(Some(sock))
            }
        }
    }

    /// Where a TCP connect to `dst` goes, or why it is refused.
    fn target(&mut self, dst: SocketAddr) -> Result<SocketAddr, Errno> {
        let ip = unmapped(dst.ip());
        if ip.is_loopback() && dst.port() == self.spec.jail_port && is_proxy_address(ip) {
            let want_v6 = dst.is_ipv6();
            let listener = (self.spec.proxy.iter())
                .find(|a| a.is_ipv6() == want_v6)
                .copied()
                .or_else(|| self.spec.proxy.first().map(|a| v4_mapped(*a, want_v6)));
            return listener.ok_or(Errno::CONNREFUSED);
        }
        if self.spec.allow_local_binding && ip.is_loopback() && self.jail_listens(dst) {
            return Ok(dst);
        }
        self.refused += 1;
        if self.refused <= LOUD_REFUSALS {
            crate::say(format_args!(
                "oajail: connect: refused tcp to {dst} (tcp leaves the jail only through the \
                 proxy at 127.0.0.1:{}, which HTTP_PROXY names)",
                self.spec.jail_port
            ));
        }
        Err(if ip.is_loopback() {
            Errno::CONNREFUSED
        } else {
            Errno::NETUNREACH
        })
    }

    /// Whether the jail listens at `dst` (a loopback address): a socket pid
    /// 1 listened on for the command, still listening there.
    fn jail_listens(&self, dst: SocketAddr) -> bool {
        let ip = unmapped(dst.ip());
        (self.listening.iter())
            .filter(|(a, _)| unmapped(a.ip()) == ip && a.port() == dst.port())
            .any(|(_, inode)| listening_inode(dst.port(), *inode))
    }

    fn bind(
        &mut self,
        call: &Call<'_>,
        inode: u64,
        addr: &Address,
    ) -> Result<Option<OwnedFd>, Errno> {
        let sock = match addr {
            Address::Unspec => return Err(Errno::AFNOSUPPORT),
            Address::Unix(unix) => {
                if !self.spec.allow_unix {
                    return Err(Errno::ACCESS);
                }
                let sock = unix_socket(call.proc_dir, inode)?;
                at_callers_cwd(call.proc_dir, || rustix::net::bind(&sock, unix))?;
                sock
            }
            Address::Ip(wanted) => {
                if !self.spec.allow_local_binding {
                    // What Landlock's empty bind rule answers in the full jail.
                    return Err(Errno::ACCESS);
                }
                let at = loopback_only(*wanted)?;
                let sock = tcp_socket(&at)?;
                rustix::net::sockopt::set_socket_reuseaddr(&sock, true)?;
                rustix::net::bind(&sock, &at)?;
                sock
            }
        };
        if self.bound.len() >= BOUND_MAX {
            self.bound.clear();
        }
        let copy = sock.try_clone().map_err(|_| Errno::NOMEM)?;
        self.bound.insert(fd_inode(&sock)?, copy);
        Ok(Some(sock))
    }

    /// `listen` on a socket pid 1 bound: made on pid 1's own copy, so a
    /// descriptor swapped in meanwhile cannot be made to listen (an unbound
    /// TCP socket would listen on every address of the container).
    fn listen(&mut self, inode: u64, backlog: i32) -> Result<Reply, Errno> {
        if let Some(sock) = self.bound.remove(&inode) {
            rustix::net::listen(&sock, backlog)?;
            if let Ok(local) = rustix::net::getsockname(&sock)
                && let Ok(addr) = SocketAddr::try_from(local)
            {
                self.listening.retain(|(_, i)| listening_inode(0, *i));
                self.listening.push((addr, inode));
            }
            return Ok(Reply::Value(0));
        }
        // Listening already (a new backlog): nothing new is reached.
        if self.listening.iter().any(|(_, i)| *i == inode) {
            return Ok(Reply::Value(0));
        }
        Err(Errno::ACCESS)
    }
}

/// Whether `ip` is an address the jail is told the proxy listens on.
fn is_proxy_address(ip: IpAddr) -> bool {
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
}

/// `::ffff:a.b.c.d` as `a.b.c.d`.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An IPv4 listener as an IPv6 socket reaches it (`::ffff:127.0.0.1`).
fn v4_mapped(a: SocketAddr, v6: bool) -> SocketAddr {
    match (a.ip(), v6) {
        (IpAddr::V4(v4), true) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
        _ => a,
    }
}

/// The address a bind may take: loopback as given, the unspecified
/// address as loopback; anything else is not in the full jail's network.
fn loopback_only(wanted: SocketAddr) -> Result<SocketAddr, Errno> {
    let ip = match unmapped(wanted.ip()) {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip if ip.is_loopback() => wanted.ip(),
        _ => return Err(Errno::ADDRNOTAVAIL),
    };
    Ok(SocketAddr::new(ip, wanted.port()))
}

/// A socket address read from the caller.
#[derive(Debug, PartialEq, Eq)]
enum Address {
    Unspec,
    Ip(SocketAddr),
    Unix(SocketAddrUnix),
}

impl Address {
    /// Parse a `struct sockaddr` of `raw.len()` bytes.
    fn parse(raw: &[u8]) -> Result<Address, Errno> {
        let family = u16::from_ne_bytes([
            *raw.first().ok_or(Errno::INVAL)?,
            *raw.get(1).ok_or(Errno::INVAL)?,
        ]);
        let port = || Ok::<u16, Errno>(u16::from_be_bytes(array(raw, 2)?));
        match i32::from(family) {
            libc::AF_UNSPEC => Ok(Address::Unspec),
            libc::AF_INET => {
                let ip = Ipv4Addr::from(array::<4>(raw, 4)?);
                Ok(Address::Ip(SocketAddr::new(IpAddr::V4(ip), port()?)))
            }
            libc::AF_INET6 => {
                let ip = Ipv6Addr::from(array::<16>(raw, 8)?);
                Ok(Address::Ip(SocketAddr::new(IpAddr::V6(ip), port()?)))
            }
            libc::AF_UNIX => {
                let path = raw.get(2..).ok_or(Errno::INVAL)?;
                let unix = match path.split_first() {
                    Some((0, name)) => SocketAddrUnix::new_abstract_name(name)?,
                    _ => {
                        let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
                        SocketAddrUnix::new(&path[..end])?
                    }
                };
                Ok(Address::Unix(unix))
            }
            _ => Err(Errno::AFNOSUPPORT),
        }
    }
}

fn array<const N: usize>(raw: &[u8], at: usize) -> Result<[u8; N], Errno> {
    raw.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(Errno::INVAL)
}

/// The caller descriptor's file status flags that carry over.
struct FdFlags {
    nonblocking: bool,
    cloexec: bool,
}

impl FdFlags {
    /// From `/proc/<tid>/fdinfo/<fd>` (`flags:` in octal).
    fn of(proc_dir: BorrowedFd<'_>, fd: i32) -> Result<FdFlags, Errno> {
        let text = read_at(proc_dir, &format!("fdinfo/{fd}")).map_err(|_| Errno::BADF)?;
        let flags = text
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            .ok_or(Errno::BADF)?;
        Ok(FdFlags {
            nonblocking: flags & libc::O_NONBLOCK as u32 != 0,
            cloexec: flags & libc::O_CLOEXEC as u32 != 0,
        })
    }
}

/// The inode of the socket behind the caller's `fd` (`ENOTSOCK` when it
/// is not a socket).
fn socket_inode(proc_dir: BorrowedFd<'_>, fd: i32) -> Result<u64, Errno> {
    if fd < 0 {
        return Err(Errno::BADF);
    }
    let link = rustix::fs::readlinkat(proc_dir, format!("fd/{fd}"), Vec::new())
        .map_err(|e| if e == Errno::NOENT { Errno::BADF } else { e })?;
    let text = link.to_string_lossy();
    text.strip_prefix("socket:[")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
        .ok_or(Errno::NOTSOCK)
}

fn fd_inode(fd: &OwnedFd) -> Result<u64, Errno> {
    Ok(rustix::fs::fstat(fd)?.st_ino)
}

fn read_at(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<String> {
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty())?;
    std::io::read_to_string(std::fs::File::from(fd))
}

/// A TCP socket of `addr`'s family (blocking; made non-blocking as the
/// caller's was before it is handed over).
fn tcp_socket(addr: &SocketAddr) -> Result<OwnedFd, Errno> {
    let family = if addr.is_ipv6() {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)
}

/// A unix socket of the same type as the caller's (inode `inode`, found in
/// the caller's `/proc/<tid>/net/unix`).
fn unix_socket(proc_dir: BorrowedFd<'_>, inode: u64) -> Result<OwnedFd, Errno> {
    let table = read_at(proc_dir, "net/unix").map_err(|_| Errno::ACCESS)?;
    let kind = table
        .lines()
        .skip(1)
        .find_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let ino: u64 = cols.get(6)?.parse().ok()?;
            (ino == inode).then(|| u32::from_str_radix(cols.get(4)?, 16).ok())?
        })
        .unwrap_or(libc::SOCK_STREAM as u32);
    let kind = match kind as i32 {
        libc::SOCK_DGRAM => SocketType::DGRAM,
        libc::SOCK_SEQPACKET => SocketType::SEQPACKET,
        _ => SocketType::STREAM,
    };
    rustix::net::socket_with(AddressFamily::UNIX, kind, SocketFlags::CLOEXEC, None)
}

fn connect(
    sock: BorrowedFd<'_>,
    addr: &impl rustix::net::addr::SocketAddrArg,
) -> Result<(), Errno> {
    rustix::net::connect(sock, addr)
}

/// Run `op` with a send timeout on `sock` (which bounds `connect`), then
/// clear it: the socket is the caller's afterwards.
fn timed(
    sock: &OwnedFd,
    op: impl FnOnce(BorrowedFd<'_>) -> Result<(), Errno>,
) -> Result<(), Errno> {
    use rustix::net::sockopt::{Timeout, set_socket_timeout};
    set_socket_timeout(sock, Timeout::Send, Some(CONNECT_TIMEOUT))?;
    let done = op(sock.as_fd()).map_err(|e| {
        if e == Errno::AGAIN {
            Errno::TIMEDOUT
        } else {
            e
        }
    });
    set_socket_timeout(sock, Timeout::Send, None)?;
    done
}

/// Run `op` with pid 1's working directory at the caller's (a relative
/// unix socket path is the caller's), and back. pid 1 is single-threaded.
fn at_callers_cwd<T>(
    proc_dir: BorrowedFd<'_>,
    op: impl FnOnce() -> Result<T, Errno>,
) -> Result<T, Errno> {
    use rustix::fs::{Mode, OFlags};
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let back = rustix::fs::open(".", dir, Mode::empty())?;
    let cwd = rustix::fs::openat(proc_dir, "cwd", dir, Mode::empty())?;
    rustix::process::fchdir(&cwd)?;
    let done = op();
    rustix::process::fchdir(&back)?;
    done
}

/// Answer notification `id` with `reply`.
pub(crate) fn answer(
    listener: BorrowedFd<'_>,
    id: u64,
    reply: Result<Reply, Errno>,
) -> std::io::Result<()> {
    use crate::sys::notify;
    match reply {
        Ok(Reply::Value(v)) => notify::answer(listener, id, Ok(v)),
        Ok(Reply::Replace { fd, at, cloexec }) => {
            notify::replace_fd(listener, id, fd.as_fd(), at, cloexec)?;
            notify::answer(listener, id, Ok(0))
        }
        Err(e) => notify::answer(listener, id, Err(e.raw_os_error())),
    }
}

/// Whether a TCP socket with inode `inode` listens (at `port`, unless 0),
/// from `/proc/net/tcp` and `tcp6` (state `0A`).
fn listening_inode(port: u16, inode: u64) -> bool {
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .any(|table| {
            let Ok(text) = std::fs::read_to_string(table) else {
                return false;
            };
            text.lines().skip(1).any(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                let local_port = cols
                    .get(1)
                    .and_then(|l| l.rsplit(':').next())
                    .and_then(|p| u16::from_str_radix(p, 16).ok());
                cols.get(3) == Some(&"0A")
                    && cols.get(9).and_then(|i| i.parse::<u64>().ok()) == Some(inode)
                    && (port == 0 || local_port == Some(port))
            })
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut raw = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        raw.extend(port.to_be_bytes());
        raw.extend(ip);
        raw.extend([0u8; 8]);
        raw
    }

    fn connector(local: bool) -> Connector {
        Connector::new(ConnectSpec {
            proxy: vec![
                "127.0.0.1:41000".parse().unwrap(),
                "[::1]:41001".parse().unwrap(),
            ],
            jail_port: 3128,
            allow_local_binding: local,
            allow_unix: false,
        })
    }

    #[test]
    fn addresses_parse_as_the_kernel_reads_them() {
        let a = Address::parse(&v4([127, 0, 0, 1], 3128)).unwrap();
        assert_eq!(a, Address::Ip("127.0.0.1:3128".parse().unwrap()));
        let mut v6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        v6.extend(443u16.to_be_bytes());
        v6.extend([0u8; 4]);
        v6.extend(Ipv6Addr::LOCALHOST.octets());
        v6.extend([0u8; 4]);
        let a = Address::parse(&v6).unwrap();
        assert_eq!(a, Address::Ip("[::1]:443".parse().unwrap()));
        let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        unix.extend(b"\0name");
        assert!(matches!(Address::parse(&unix).unwrap(), Address::Unix(_)));
        assert_eq!(Address::parse(&[1]).unwrap_err(), Errno::INVAL);
        let mut netlink = 16u16.to_ne_bytes().to_vec();
        netlink.extend([0u8; 10]);
        assert_eq!(Address::parse(&netlink).unwrap_err(), Errno::AFNOSUPPORT);
    }

    /// The proxy address the jail is told goes to the real listener of
    /// the same family; any other address, the proxy's port on another
    /// loopback address included, is refused.
    #[test]
    fn only_the_proxy_address_is_connected() {
        let mut c = connector(false);
        let to = |c: &mut Connector, s: &str| c.target(s.parse().unwrap());
        assert_eq!(
            to(&mut c, "127.0.0.1:3128"),
            Ok("127.0.0.1:41000".parse().unwrap())
        );
        assert_eq!(to(&mut c, "[::1]:3128"), Ok("[::1]:41001".parse().unwrap()));
        assert_eq!(
            to(&mut c, "[::ffff:127.0.0.1]:3128"),
            Ok("[::1]:41001".parse().unwrap())
        );
        assert_eq!(to(&mut c, "127.0.0.2:3128"), Err(Errno::CONNREFUSED));
        assert_eq!(to(&mut c, "127.0.0.1:41000"), Err(Errno::CONNREFUSED));
        assert_eq!(to(&mut c, "93.184.216.34:443"), Err(Errno::NETUNREACH));
        assert_eq!(to(&mut c, "10.0.0.1:3128"), Err(Errno::NETUNREACH));
        let mut only_v4 = connector(false);
        only_v4.spec.proxy.truncate(1);
        assert_eq!(
            to(&mut only_v4, "[::1]:3128"),
            Ok("[::ffff:127.0.0.1]:41000".parse().unwrap())
        );
    }

    #[test]
    fn binds_stay_on_loopback() {
        let at = |s: &str| loopback_only(s.parse().unwrap());
        assert_eq!(at("0.0.0.0:8080"), Ok("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(at("[::]:8080"), Ok("[::1]:8080".parse().unwrap()));
        assert_eq!(at("127.0.0.5:80"), Ok("127.0.0.5:80".parse().unwrap()));
        assert_eq!(at("172.17.0.2:80"), Err(Errno::ADDRNOTAVAIL));
    }
}
