//! Host canonicalisation shared by pattern validation and the proxy (stub; owned by the proxy work).
use std::net::{Ipv4Addr, Ipv6Addr};

/// A canonical destination host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A lower-case DNS name without trailing dot (IDNA A-labels).
    Name(String),
    /// An IPv4 literal in any inet_aton spelling.
    V4(Ipv4Addr),
    /// An IPv6 literal (brackets and zone id removed).
    V6(Ipv6Addr),
}
