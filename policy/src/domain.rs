//! srt domain patterns (`network.allowedDomains` / `deniedDomains` entries).
//!
//! Syntax (srt 0.0.83 plus the oajail extensions marked †):
//! - an exact host, canonicalised by [`crate::host::canonicalize`]; it must
//!   contain a dot or be `localhost`;
//! - `*.a.b`: strict subdomains of `a.b` (never `a.b` itself, never an IP);
//!   the allow list needs at least two labels after `*.` (`*.com` is too
//!   broad); the deny list accepts any suffix, a bare `*` and `*:port`;
//! - IPv4 literals (any inet_aton spelling, stored dotted) and bracketed IPv6
//!   (`[::1]`, stored compressed);
//! - † CIDR ranges `10.0.0.0/8`, `[fd00::]/8` (host bits must be zero) to
//!   admit a private range deliberately or to deny one;
//! - an optional `:port` (1–65535, no leading zero); without it the entry
//!   matches every port (srt semantics). The proxy only lets a tunnel that
//!   does not start with TLS through when the entry names the port.
//!
//! Refused: `://`, `/` other than a CIDR prefix, unbracketed IPv6 (except a
//! CIDR), any other `*`, whitespace and anything [`crate::host`] refuses.
use crate::host::{self, Host};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which list a pattern comes from: `*` is only valid in the deny list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `network.allowedDomains`.
    Allow,
    /// `network.deniedDomains`.
    Deny,
}

/// Why a pattern was refused. Display is the part after the JSON path,
/// e.g. `"*.com" is too broad`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DomainError(pub String);

/// What a pattern matches, before the port.
#[derive(Debug, Clone)]
enum Target {
    /// Bare `*` (deny list only).
    Any,
    /// One DNS name.
    Exact(String),
    /// `*.suffix`: names ending in `.suffix`, the suffix itself excluded.
    Suffix(String),
    /// One IP address (IPv4-mapped IPv6 folded to IPv4).
    Ip(IpAddr),
    /// A CIDR range.
    Net(IpNet),
}

/// One `allowedDomains`/`deniedDomains` entry, canonical.
///
/// Equality, order and hashing use the canonical text only.
#[derive(Debug, Clone)]
pub struct DomainPattern {
    text: String,
    target: Target,
    port: Option<u16>,
}

impl DomainPattern {
    /// Parse and canonicalise one entry.
    pub fn parse(text: &str, kind: ListKind) -> Result<Self, DomainError> {
        let bad = |why: &str| DomainError(format!("{text:?} {why}"));
        if text.is_empty() {
            return Err(DomainError("empty domain pattern".into()));
        }
        if text.contains("://") {
            return Err(bad(
                "has a scheme; write the host only (optionally host:port)",
            ));
        }
        if let Some(c) = text.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(&format!("contains the character {c:?}")));
        }
        let parts = split_pattern(text).map_err(&bad)?;
        let port = match parts.port {
            None => None,
            Some(p) => Some(host::parse_port(p).ok_or_else(|| {
                bad("has an invalid port (1-65535, digits only, no leading zero)")
            })?),
        };
        let target = match parts.prefix {
            Some(len) => parse_net(parts.host, len, kind).map_err(&bad)?,
            None => parse_host(parts.host, kind).map_err(&bad)?,
        };
        let mut canonical = target.to_string();
        if let Some(p) = port {
            canonical.push_str(&format!(":{p}"));
        }
        Ok(Self {
            text: canonical,
            target,
            port,
        })
    }

    /// The canonical text of the pattern (what srt JSON output contains).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The port the entry names, if any (`None` = every port).
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// True for IP and CIDR entries: these may admit a non-public address.
    pub fn is_ip_entry(&self) -> bool {
        matches!(self.target, Target::Ip(_) | Target::Net(_))
    }

    /// Does this entry match a canonical destination? Wildcards never match
    /// IP literals; IPv4-mapped IPv6 literals match IPv4 entries.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.target, host) {
            (Target::Any, _) => true,
            (Target::Exact(n), Host::Name(h)) => n == h,
            (Target::Suffix(s), Host::Name(h)) => is_strict_subdomain(h, s),
            (Target::Ip(_) | Target::Net(_), _) => match host.ip() {
                Some(ip) => self.matches_ip(ip, port),
                None => false,
            },
            _ => false,
        }
    }

    /// Does this IP or CIDR entry cover a resolved address? Name entries
    /// never do (they were decided on the name).
    pub fn matches_ip(&self, ip: IpAddr, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let ip = host::fold_mapped(ip);
        match &self.target {
            Target::Ip(mine) => *mine == ip,
            Target::Net(net) => net.contains(ip),
            _ => false,
        }
    }
}

fn is_strict_subdomain(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

struct Parts<'a> {
    host: &'a str,
    prefix: Option<&'a str>,
    port: Option<&'a str>,
}

/// Split `host[/len][:port]`, with IPv6 only inside brackets (except an
/// unbracketed CIDR such as `fd00::/8`, whose `/` makes it unambiguous).
fn split_pattern(text: &str) -> Result<Parts<'_>, &'static str> {
    let (host, rest) = if text.starts_with('[') {
        let end = text.find(']').ok_or("has an unclosed '['")?;
        text.split_at(end + 1)
    } else if let Some(slash) = text.find('/') {
        text.split_at(slash)
    } else {
        match text.matches(':').count() {
            0 => (text, ""),
            1 => text.split_at(text.find(':').unwrap_or(text.len())),
            _ => return Err("is ambiguous; write IPv6 addresses in brackets, e.g. [::1]:443"),
        }
    };
    let (prefix, port_part) = match rest.strip_prefix('/') {
        Some(p) => match p.split_once(':') {
            Some((len, port)) => (Some(len), Some(port)),
            None => (Some(p), None),
        },
        None if rest.is_empty() => (None, None),
        None => (
            None,
            Some(rest.strip_prefix(':').ok_or("has text after ']'")?),
        ),
    };
    if prefix.is_some_and(|p| p.contains('/')) || port_part.is_some_and(|p| p.contains('/')) {
        return Err("has a path; write the host only (optionally host:port)");
    }
    Ok(Parts {
        host,
        prefix,
        port: port_part,
    })
}

fn parse_host(text: &str, kind: ListKind) -> Result<Target, &'static str> {
    if text == "*" {
        return match kind {
            ListKind::Deny => Ok(Target::Any),
            ListKind::Allow => Err("is too broad"),
        };
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        if suffix.contains('*') {
            return Err("may use '*' only as a leading '*.'");
        }
        return match host::canonicalize(suffix) {
            Ok(Host::Name(n)) if kind == ListKind::Allow && !n.contains('.') => Err("is too broad"),
            Ok(Host::Name(n)) => Ok(Target::Suffix(n)),
            Ok(_) => Err("is a wildcard over an IP address"),
            Err(_) => Err("is not a valid host pattern"),
        };
    }
    if text.contains('*') {
        return Err("may use '*' only as a leading '*.'");
    }
    match host::canonicalize(text) {
        Ok(Host::Name(n)) if n == "localhost" || n.contains('.') => Ok(Target::Exact(n)),
        Ok(Host::Name(_)) => Err("is not a full host name (it needs a dot, or is localhost)"),
        Ok(h) => Ok(Target::Ip(
            h.ip()
                .map(host::fold_mapped)
                .ok_or("is not an IP address")?,
        )),
        Err(host::HostError::ZoneId) => Err("has an IPv6 zone id, which is not accepted"),
        Err(_) => Err("is not a valid host name or IP address"),
    }
}

fn parse_net(addr: &str, len: &str, kind: ListKind) -> Result<Target, &'static str> {
    let ip = match host::canonicalize(addr) {
        Ok(h) if h.is_ip() => h.ip().ok_or("is not a CIDR range")?,
        _ => return Err("is not a CIDR range (address/prefix)"),
    };
    let net = IpNet::new(ip, len)?;
    if kind == ListKind::Allow && net.prefix == 0 {
        return Err("is too broad");
    }
    if net.prefix == net.max_prefix() {
        return Ok(Target::Ip(host::fold_mapped(net.addr)));
    }
    Ok(Target::Net(net))
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Any => f.write_str("*"),
            Target::Exact(n) => f.write_str(n),
            Target::Suffix(s) => write!(f, "*.{s}"),
            Target::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
            Target::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Target::Net(n) => write!(f, "{n}"),
        }
    }
}

/// An IP range (`10.0.0.0/8`, `[fd00::]/8`); addresses of the other family
/// never match (an IPv4-mapped range does not become `0.0.0.0/0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    fn new(addr: IpAddr, len: &str) -> Result<Self, &'static str> {
        let valid_len = !len.is_empty()
            && len.len() <= 3
            && len.bytes().all(|b| b.is_ascii_digit())
            && (len == "0" || !len.starts_with('0'));
        let prefix: u8 = match len.parse() {
            Ok(p) if valid_len => p,
            _ => return Err("has an invalid prefix length"),
        };
        let net = Self {
            addr: host::fold_mapped(addr),
            prefix,
        };
        if prefix > net.max_prefix() {
            return Err("has a prefix length longer than the address");
        }
        if net.network() != net.addr {
            return Err("has bits set after the prefix length");
        }
        Ok(net)
    }

    /// Parse `a.b.c.d[/n]`, `x::y[/n]` or `[x::y][/n]` (a bare address is a
    /// one-address range). Used for `deniedResolvedAddresses` and
    /// `oajail.allowPrivateDestinations`.
    pub fn parse(text: &str) -> Result<Self, DomainError> {
        let bad = |why: &str| DomainError(format!("{text:?} {why}"));
        let (addr, len) = match text.rsplit_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let ip = match host::canonicalize(addr) {
            Ok(h) if h.is_ip() => h.ip().ok_or_else(|| bad("is not an IP address"))?,
            _ => return Err(bad("is not an IP address or CIDR range")),
        };
        let max = if host::fold_mapped(ip).is_ipv4() {
            "32"
        } else {
            "128"
        };
        Self::new(ip, len.unwrap_or(max)).map_err(bad)
    }

    fn max_prefix(&self) -> u8 {
        if self.addr.is_ipv4() { 32 } else { 128 }
    }

    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }

    /// Is `ip` (IPv4-mapped folded) inside the range? Families never mix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = host::fold_mapped(ip);
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        Self {
            addr: ip,
            prefix: self.prefix,
        }
        .network()
            == self.addr
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{a}/{}", self.prefix),
            IpAddr::V6(a) => write!(f, "[{a}]/{}", self.prefix),
        }
    }
}

impl Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl PartialEq for DomainPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}
impl Eq for DomainPattern {}
impl PartialOrd for DomainPattern {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for DomainPattern {
    fn cmp(&self, other: &Self) -> Ordering {
        self.text.cmp(&other.text)
    }
}
impl Hash for DomainPattern {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl Serialize for DomainPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// Deserialising accepts the deny-list syntax (the wider one): which list an
/// entry may appear in is checked by the settings parser, which calls
/// [`DomainPattern::parse`] with the right [`ListKind`].
impl<'de> Deserialize<'de> for DomainPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text, ListKind::Deny).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(t: &str) -> Result<String, String> {
        DomainPattern::parse(t, ListKind::Allow)
            .map(|p| p.as_str().to_owned())
            .map_err(|e| e.0)
    }

    #[test]
    fn accepted_allow_entries_are_canonical() {
        let cases = [
            ("API.Example.COM.", "api.example.com"),
            ("localhost", "localhost"),
            ("*.cdn.example.com", "*.cdn.example.com"),
            ("github.com:22", "github.com:22"),
            ("127.1", "127.0.0.1"),
            ("2130706433:8080", "127.0.0.1:8080"),
            ("[0:0::1]:443", "[::1]:443"),
            ("[::ffff:1.2.3.4]", "1.2.3.4"),
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("10.1.2.3/32:5432", "10.1.2.3:5432"),
            ("fd00::/8", "[fd00::]/8"),
            ("[fd00::]/8:443", "[fd00::]/8:443"),
            ("bücher.example", "xn--bcher-kva.example"),
        ];
        for (input, want) in cases {
            assert_eq!(allow(input).as_deref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn refused_allow_entries() {
        let cases = [
            ("*", "too broad"),
            ("*.com", "too broad"),
            ("*:443", "too broad"),
            ("0.0.0.0/0", "too broad"),
            ("https://example.com", "scheme"),
            ("example.com/path", "path"),
            ("example", "needs a dot"),
            ("::1", "ambiguous"),
            ("a.com:0", "invalid port"),
            ("a.com:0443", "invalid port"),
            ("a.com:65536", "invalid port"),
            ("a.com:", "invalid port"),
            ("a*.example.com", "leading"),
            ("*.*.example.com", "leading"),
            ("api.*.example.com", "leading"),
            ("*.1.2.3", "IP address"),
            ("10.0.0.1/8", "bits set"),
            ("10.0.0.0/33", "longer"),
            ("10.0.0.0/08", "prefix"),
            ("[fe80::1%25lo]", "zone"),
            ("a..b.com", "not a valid"),
            ("a b.com", "character"),
            ("", "empty"),
        ];
        for (input, why) in cases {
            match allow(input) {
                Ok(p) => panic!("{input:?} accepted as {p:?}"),
                Err(e) => assert!(e.contains(why), "{input:?}: {e}"),
            }
        }
        assert_eq!(allow("*.com").unwrap_err(), "\"*.com\" is too broad");
    }

    #[test]
    fn deny_list_accepts_wider_forms() {
        for t in ["*", "*:22", "*.com", "0.0.0.0/0"] {
            assert!(DomainPattern::parse(t, ListKind::Deny).is_ok(), "{t}");
        }
    }

    #[test]
    fn matching() {
        let p = |t: &str| DomainPattern::parse(t, ListKind::Deny).unwrap();
        let h = |t: &str| host::canonicalize(t).unwrap();
        let wild = p("*.cdn.allowed.com");
        assert!(wild.matches(&h("a.cdn.allowed.com"), 443));
        assert!(wild.matches(&h("A.B.CDN.allowed.com."), 1));
        for miss in [
            "cdn.allowed.com",
            "evilcdn.allowed.com",
            "cdn.allowed.com.evil.com",
        ] {
            assert!(!wild.matches(&h(miss), 443), "{miss}");
        }
        assert!(p("*").matches(&h("a.com"), 1) && p("*").matches(&h("1.2.3.4"), 1));
        assert!(p("*:22").matches(&h("a.com"), 22) && !p("*:22").matches(&h("a.com"), 443));
        let port = p("api.allowed.com:443");
        assert!(port.matches(&h("API.allowed.com."), 443));
        assert!(!port.matches(&h("api.allowed.com"), 22));
        assert_eq!(port.port(), Some(443));
        assert!(p("127.0.0.1").matches(&h("2130706433"), 80));
        assert!(p("127.0.0.1").matches(&h("[::ffff:127.0.0.1]"), 80));
        assert!(p("10.0.0.0/8").matches(&h("10.9.8.7"), 80));
        // An IPv4-mapped range must not collapse to 0.0.0.0/0 (smokescreen PR #289).
        assert!(DomainPattern::parse("[::ffff:0:0]/96", ListKind::Deny).is_err());
        assert!(!p("[fd00::]/8").matches(&h("10.0.0.1"), 80));
        assert!(!p("a.com").matches(&h("1.2.3.4"), 80));
    }

    #[test]
    fn ip_nets() {
        let n = IpNet::parse("192.168.0.0/16").unwrap();
        assert!(n.contains("192.168.4.5".parse().unwrap()));
        assert!(n.contains("::ffff:192.168.4.5".parse().unwrap()));
        assert!(!n.contains("192.169.0.1".parse().unwrap()));
        assert_eq!(IpNet::parse("1.2.3.4").unwrap().to_string(), "1.2.3.4/32");
        assert!(IpNet::parse("example.com").is_err());
    }
}
