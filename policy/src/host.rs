//! Host canonicalisation shared by pattern validation and the proxy.
//!
//! One function, [`canonicalize`], turns whatever a client or a settings
//! file wrote into a [`Host`]: a lower-case A-label DNS name, or an IP
//! address. Every decision (deny list, allow list, resolution) is made on
//! that value only, so two spellings of one destination can never be decided
//! differently.
//!
//! Choices (documented in docs/proxy.md):
//! - names are mapped with UTS 46 (the `idna` crate, WHATWG URL deny list) to
//!   A-labels, lower-cased, one trailing dot removed; the result must be
//!   `[a-z0-9._-]` only, labels 1–63 bytes, name ≤ 253 bytes;
//! - a name whose last label is numeric (decimal, `0x` hex, or octal) is an
//!   IPv4 address in `inet_aton` spelling (`127.1`, `2130706433`, `0x7f.1`,
//!   `0177.0.0.1`); if it does not parse as one it is refused, never resolved;
//! - IPv6 may be bracketed or bare; zone ids (`%25eth0`, `%eth0`) are
//!   refused: they only name link-local scopes, which are never a valid
//!   destination, and stripping them would hide what the client asked for.
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Longest host text accepted before any processing (srt's `isValidHost`).
pub const MAX_RAW_LEN: usize = 255;
/// Longest canonical DNS name (RFC 1035, without the trailing dot).
pub const MAX_NAME_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

/// A canonical destination host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A lower-case DNS name without trailing dot (IDNA A-labels).
    Name(String),
    /// An IPv4 literal in any inet_aton spelling.
    V4(Ipv4Addr),
    /// An IPv6 literal (brackets removed; zone ids are refused).
    V6(Ipv6Addr),
}

/// Why a host could not be canonicalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing was given.
    #[error("empty host")]
    Empty,
    /// More than [`MAX_RAW_LEN`] bytes, or a name over [`MAX_NAME_LEN`].
    #[error("host is longer than {0} characters")]
    TooLong(usize),
    /// A byte outside the host character set (after IDNA mapping).
    #[error("host contains the character {0:?}")]
    BadChar(char),
    /// UTS 46 refused the name (bad punycode, disallowed code point).
    #[error("host is not a valid internationalised domain name")]
    Idna,
    /// `a..b`, a leading dot, or two trailing dots.
    #[error("host has an empty label")]
    EmptyLabel,
    /// A label over 63 bytes.
    #[error("host has a label longer than 63 characters")]
    LabelTooLong,
    /// The last label is numeric but the whole is not an inet_aton address.
    #[error("host looks like an IPv4 address but is not a valid one")]
    BadIpv4,
    /// Brackets or colons that do not make an IPv6 address.
    #[error("host is not a valid IPv6 address")]
    BadIpv6,
    /// An IPv6 zone id (`%25…`).
    #[error("IPv6 zone ids are not accepted")]
    ZoneId,
}

impl Host {
    /// The IP address, if the host is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Name(_) => None,
            Host::V4(a) => Some(IpAddr::V4(*a)),
            Host::V6(a) => Some(IpAddr::V6(*a)),
        }
    }

    /// True for IP literals (wildcards never match them).
    pub fn is_ip(&self) -> bool {
        !matches!(self, Host::Name(_))
    }

    /// `host:port` as it goes in a request line or `Host` header
    /// (IPv6 bracketed).
    pub fn authority(&self, port: u16) -> String {
        format!("{self}:{port}")
    }
}

impl fmt::Display for Host {
    /// The URL host form: names and IPv4 as is, IPv6 in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::V4(a) => write!(f, "{a}"),
            Host::V6(a) => write!(f, "[{a}]"),
        }
    }
}

/// Fold an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) to its IPv4 form, so
/// that one destination has one spelling when compared with IP patterns.
pub fn fold_mapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        IpAddr::V4(_) => ip,
    }
}

/// Canonicalise one host as written by a client or a policy file.
///
/// `raw` is the host part only (no port); IPv6 may be bracketed.
pub fn canonicalize(raw: &str) -> Result<Host, HostError> {
    if raw.is_empty() {
        return Err(HostError::Empty);
    }
    if raw.len() > MAX_RAW_LEN {
        return Err(HostError::TooLong(MAX_RAW_LEN));
    }
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(HostError::BadIpv6)?;
        return parse_v6(inner);
    }
    if raw.contains(':') {
        return parse_v6(raw);
    }
    if raw.contains('%') {
        return Err(HostError::BadChar('%'));
    }
    let name = to_ascii_lower(raw)?;
    let name = match name.strip_suffix('.') {
        Some(stripped) => stripped.to_owned(),
        None => name,
    };
    if name.is_empty() {
        return Err(HostError::EmptyLabel);
    }
    if let Some(v4) = inet_aton(&name) {
        return v4.map(Host::V4);
    }
    check_name(&name)?;
    Ok(Host::Name(name))
}

fn parse_v6(text: &str) -> Result<Host, HostError> {
    if text.contains('%') {
        return Err(HostError::ZoneId);
    }
    text.parse::<Ipv6Addr>()
        .map(Host::V6)
        .map_err(|_| HostError::BadIpv6)
}

/// ASCII-lowercase, or UTS 46 map to A-labels when the text is not plain
/// lower-case-able ASCII or carries punycode that must be validated.
fn to_ascii_lower(raw: &str) -> Result<String, HostError> {
    for c in raw.chars() {
        if c.is_ascii() && !is_host_char(c.to_ascii_lowercase()) {
            return Err(HostError::BadChar(c));
        }
    }
    let lower = raw.to_ascii_lowercase();
    if lower.is_ascii() && !lower.contains("xn--") {
        return Ok(lower);
    }
    let mapped = idna::domain_to_ascii_cow(lower.as_bytes(), idna::AsciiDenyList::URL)
        .map_err(|_| HostError::Idna)?;
    match mapped.chars().find(|c| !is_host_char(*c)) {
        Some(c) => Err(HostError::BadChar(c)),
        None => Ok(mapped.into_owned()),
    }
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')
}

fn check_name(name: &str) -> Result<(), HostError> {
    if name.len() > MAX_NAME_LEN {
        return Err(HostError::TooLong(MAX_NAME_LEN));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(HostError::LabelTooLong);
        }
    }
    Ok(())
}

/// `Some` when the name "ends in a number" (WHATWG URL): then it is an IPv4
/// address in inet_aton spelling or it is invalid. `None` for real names.
fn inet_aton(name: &str) -> Option<Result<Ipv4Addr, HostError>> {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !looks_numeric(last) {
        return None;
    }
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 4 {
        return Some(Err(HostError::BadIpv4));
    }
    let mut nums = Vec::with_capacity(parts.len());
    for part in &parts {
        match parse_aton_part(part) {
            Some(n) => nums.push(n),
            None => return Some(Err(HostError::BadIpv4)),
        }
    }
    Some(assemble_v4(&nums).ok_or(HostError::BadIpv4))
}

fn looks_numeric(label: &str) -> bool {
    if label.is_empty() {
        return false;
    }
    if label.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match label.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

fn parse_aton_part(part: &str) -> Option<u64> {
    if part.is_empty() || part.len() > 40 {
        return None;
    }
    if let Some(hex) = part.strip_prefix("0x") {
        if hex.is_empty() {
            return Some(0);
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if part.len() > 1 && part.starts_with('0') {
        return u64::from_str_radix(&part[1..], 8).ok();
    }
    part.parse::<u64>().ok()
}

/// inet_aton: all parts but the last are single bytes; the last fills the
/// remaining bytes.
fn assemble_v4(nums: &[u64]) -> Option<Ipv4Addr> {
    let (last, head) = nums.split_last()?;
    let mut value: u64 = 0;
    for (i, n) in head.iter().enumerate() {
        if *n > 255 {
            return None;
        }
        value |= n << (8 * (3 - i));
    }
    let rest_bits = 8 * (4 - head.len());
    if rest_bits < 64 && *last >= (1u64 << rest_bits) {
        return None;
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// Parse a port: 1–65535, ASCII digits only, no sign, no leading zero.
pub fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || text.starts_with('0') {
        return None;
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// Split `host:port` / `[v6]:port` into its parts; the port is required.
/// Returns `None` when the shape is wrong (no port, bad port, stray colon).
pub fn split_authority(text: &str) -> Option<(&str, u16)> {
    let (host, port) = if text.starts_with('[') {
        let end = text.find(']')?;
        let (h, rest) = text.split_at(end + 1);
        (h, rest.strip_prefix(':')?)
    } else {
        let (h, p) = text.rsplit_once(':')?;
        if h.contains(':') {
            return None;
        }
        (h, p)
    };
    Some((host, parse_port(port)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Host {
        Host::V4(s.parse().unwrap())
    }

    #[test]
    fn canonical_forms() {
        let cases: &[(&str, Host)] = &[
            ("API.Allowed.COM.", Host::Name("api.allowed.com".into())),
            (
                "my_host.example.com",
                Host::Name("my_host.example.com".into()),
            ),
            ("127.1", v4("127.0.0.1")),
            ("2130706433", v4("127.0.0.1")),
            ("0x7f000001", v4("127.0.0.1")),
            ("0x7f.1", v4("127.0.0.1")),
            ("0177.0.0.1", v4("127.0.0.1")),
            ("017700000001", v4("127.0.0.1")),
            ("127.000.000.001", v4("127.0.0.1")),
            ("127.0.0.1.", v4("127.0.0.1")),
            ("[::1]", Host::V6(Ipv6Addr::LOCALHOST)),
            ("[0:0:0:0:0:0:0:1]", Host::V6(Ipv6Addr::LOCALHOST)),
            ("::1", Host::V6(Ipv6Addr::LOCALHOST)),
            ("exämple.com", Host::Name("xn--exmple-cua.com".into())),
            ("allowed\u{3002}test", Host::Name("allowed.test".into())),
        ];
        for (raw, want) in cases {
            assert_eq!(canonicalize(raw).as_ref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn refused_forms() {
        let long_label = format!("{}.com", "a".repeat(64));
        let long_name = format!("{}.com", ["abc"; 70].join("."));
        let cases = [
            "",
            "%61pi.allowed.com",
            "api..allowed.com",
            ".a.com",
            "a.com..",
            "[fe80::1%25lo]",
            "fe80::1%lo",
            "[::1",
            "1.2.3.4.5",
            "256.0.0.1",
            "1.2.3.0x100",
            "a b.com",
            "a/b.com",
            "a@b.com",
            "evil.com\r\n",
            "a\0.com",
            "08.1",
            "[1.2.3.4]",
        ];
        for raw in cases {
            assert!(canonicalize(raw).is_err(), "{raw:?} should be refused");
        }
        assert_eq!(canonicalize(&long_label), Err(HostError::LabelTooLong));
        assert!(canonicalize(&long_name).is_err());
    }

    #[test]
    fn ports_and_authorities() {
        assert_eq!(split_authority("a.com:443"), Some(("a.com", 443)));
        assert_eq!(split_authority("[::1]:443"), Some(("[::1]", 443)));
        for bad in [
            "a.com",
            "a.com:0",
            "a.com:65536",
            "a.com:443abc",
            "a.com:+443",
            "a.com: 443",
            "a.com:0443",
            "::1:443",
            "[::1]443",
        ] {
            assert_eq!(split_authority(bad), None, "{bad}");
        }
    }
}
