//! Which destination addresses are public.
//!
//! [`classify`] is a pure table (tested in `tests/classify.rs`); the host's
//! own interface addresses are added at run time by [`LocalAddrs`], because
//! an allowed name resolving to the host's own public address would reach
//! the host's daemons.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// `None` when `ip` is a public unicast address; otherwise the name of the
/// range it falls in (`"loopback"`, `"rfc1918"`, `"metadata"`, …).
/// IPv4-mapped, NAT64, 6to4 and Teredo addresses are decoded and judged by
/// the IPv4 address they carry.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Addresses that can never be a destination, even when a policy entry
/// admits the range they are in (`0.0.0.0` means "this host" on Linux).
pub fn never_dialable(ip: IpAddr) -> bool {
    match oajail_policy::host::fold_mapped(ip) {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast(),
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
    }
}

const V4_METADATA: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
    Ipv4Addr::new(192, 0, 0, 192),
];

/// (network, prefix length, name), checked in order.
const V4_RANGES: [(u32, u8, &str); 16] = [
    (0x0000_0000, 8, "this-network"),
    (0x0a00_0000, 8, "rfc1918"),
    (0x6440_0000, 10, "cgnat"),
    (0x7f00_0000, 8, "loopback"),
    (0xa9fe_0000, 16, "link-local"),
    (0xac10_0000, 12, "rfc1918"),
    (0xc000_0000, 24, "ietf-protocol"),
    (0xc000_0200, 24, "documentation"),
    (0xc058_6300, 24, "6to4-relay"),
    (0xc0a8_0000, 16, "rfc1918"),
    (0xc612_0000, 15, "benchmarking"),
    (0xc633_6400, 24, "documentation"),
    (0xcb00_7100, 24, "documentation"),
    (0xe000_0000, 4, "multicast"),
    (0xffff_ffff, 32, "broadcast"),
    (0xf000_0000, 4, "reserved"),
];

fn in_v4(ip: u32, net: u32, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    ip & mask == net
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if V4_METADATA.contains(&ip) {
        return Some("metadata");
    }
    let n = u32::from(ip);
    V4_RANGES
        .iter()
        .find(|(net, len, _)| in_v4(n, *net, *len))
        .map(|(_, _, name)| *name)
}

fn in_v6(ip: u128, net: u128, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    ip & mask == net
}

fn embedded_v4(bits: u128, shift: u32) -> Ipv4Addr {
    // Truncation is the point: take the 32 bits at `shift`.
    Ipv4Addr::from(((bits >> shift) & 0xffff_ffff) as u32)
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let n = u128::from(ip);
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if n == 0xfd00_0ec2_0000_0000_0000_0000_0000_0254 {
        return Some("metadata");
    }
    if in_v6(n, 0x0064_ff9b << 96, 96) {
        return classify_v4(embedded_v4(n, 0)).map(|_| "nat64");
    }
    if in_v6(n, 0x2002 << 112, 16) {
        return classify_v4(embedded_v4(n, 80)).map(|_| "6to4");
    }
    const RANGES: [(u128, u8, &str); 9] = [
        (0, 96, "ipv4-compatible"),
        (0x0064_ff9b_0001 << 80, 48, "nat64-local"),
        (0x0100 << 112, 64, "discard"),
        (0x2001 << 112, 32, "teredo"),
        (0x2001_0db8 << 96, 32, "documentation"),
        (0x2001 << 112, 23, "ietf-protocol"),
        (0xfc00 << 112, 7, "unique-local"),
        (0xfe80 << 112, 10, "link-local"),
        (0xff00 << 112, 8, "multicast"),
    ];
    if let Some((_, _, name)) = RANGES.iter().find(|(net, len, _)| in_v6(n, *net, *len)) {
        return Some(name);
    }
    // Only 2000::/3 is allocated global unicast; fec0::/10 (site-local) and
    // everything else is reserved.
    if in_v6(n, 0x2000 << 112, 3) {
        None
    } else {
        Some("reserved")
    }
}

/// The host's own interface addresses, read on first use (a run whose
/// command never connects anywhere pays nothing) and re-read at most once a
/// second. A read that fails gives `None`: then every address counts as the
/// host's own, so the check fails closed instead of letting that class pass.
#[derive(Debug, Default)]
pub struct LocalAddrs {
    cache: RwLock<Option<(Instant, Option<Vec<IpAddr>>)>>,
}

const REFRESH: Duration = Duration::from_secs(1);

impl LocalAddrs {
    /// Is `ip` one of this host's interface addresses?
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = oajail_policy::host::fold_mapped(ip);
        let hit = |list: &Option<Vec<IpAddr>>| list.as_ref().is_none_or(|l| l.contains(&ip));
        if let Ok(cache) = self.cache.read()
            && let Some((at, list)) = cache.as_ref()
            && at.elapsed() < REFRESH
        {
            return hit(list);
        }
        let fresh = read_interfaces();
        let hit = hit(&fresh);
        if let Ok(mut cache) = self.cache.write() {
            *cache = Some((Instant::now(), fresh));
        }
        hit
    }
}

fn read_interfaces() -> Option<Vec<IpAddr>> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    let list = addrs
        .filter_map(|ifa| ifa.address)
        .filter_map(|sa| {
            if let Some(v4) = sa.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect();
    Some(list)
}
