//! A tiny DNS responder for the lab: logs every query name, answers `A`
//! queries from a fixed table (or alternately for rebinding tests), and
//! says NXDOMAIN to everything else. It never forwards anything anywhere.

use crate::labspec::{ALLOWED_V4, DnsMode, EVIL_V4, LOCAL_ROUTE_V4, METADATA_V4};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The name in a DNS query packet, lower-cased, dot-joined.
pub fn query_name(packet: &[u8]) -> Option<String> {
    parse_question(packet).map(|(name, _)| name)
}

/// The question's name and the offset just after its terminating zero label.
fn parse_question(packet: &[u8]) -> Option<(String, usize)> {
    let mut pos = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*packet.get(pos)?);
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        let label = packet.get(pos + 1..pos + 1 + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        pos += 1 + len;
    }
    Some((labels.join("."), pos + 1))
}

/// Answers for the lab's names.
pub struct Responder {
    mode: DnsMode,
    rebind_count: AtomicUsize,
}

impl Responder {
    /// A responder in `mode`.
    pub fn new(mode: DnsMode) -> Responder {
        Responder {
            mode,
            rebind_count: AtomicUsize::new(0),
        }
    }

    /// The A record for `name`, if the lab has one.
    pub fn lookup(&self, name: &str) -> Option<Ipv4Addr> {
        if name == "rebind.test" && self.mode == DnsMode::Rebind {
            let n = self.rebind_count.fetch_add(1, Ordering::SeqCst);
            let ip = if n.is_multiple_of(2) {
                ALLOWED_V4
            } else {
                "127.0.0.1"
            };
            return ip.parse().ok();
        }
        let fixed = TABLE.iter().find(|(n, _)| *n == name).map(|(_, ip)| *ip);
        match (fixed, self.mode) {
            (Some(ip), _) => ip.parse().ok(),
            (None, DnsMode::Sinkhole) => ALLOWED_V4.parse().ok(),
            (None, _) => None,
        }
    }

    /// The response packet for `query` (None when it is not a query).
    pub fn respond(&self, query: &[u8]) -> Option<Vec<u8>> {
        let (name, name_end) = parse_question(query)?;
        let question = query.get(12..name_end + 4)?;
        let qtype = query.get(name_end..name_end + 2)?;
        let known = self.mode == DnsMode::Sinkhole || TABLE.iter().any(|(n, _)| *n == name);
        let answer = if qtype == [0, 1] {
            self.lookup(&name)
        } else {
            None
        };
        let mut r = Vec::with_capacity(64);
        r.extend_from_slice(query.get(0..2)?);
        // QR, AA, RD copied; RA; rcode 0 (known name) or 3 (NXDOMAIN).
        r.push(0x84 | (query.get(2)? & 0x01));
        r.push(if known { 0x80 } else { 0x83 });
        r.extend_from_slice(&[0, 1, 0, u8::from(answer.is_some()), 0, 0, 0, 0]);
        r.extend_from_slice(question);
        if let Some(ip) = answer {
            r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
            r.extend_from_slice(&ip.octets());
        }
        Some(r)
    }
}

/// The lab's names. `*.allowed.test` names map an allowlisted name to each
/// special range (catalogue F7/F8); `rebind.test` alternates in rebind mode.
pub const TABLE: &[(&str, &str)] = &[
    ("allowed.test", ALLOWED_V4),
    ("www.allowed.test", ALLOWED_V4),
    ("api.allowed.test", ALLOWED_V4),
    ("evil.test", EVIL_V4),
    ("metadata.google.internal", METADATA_V4),
    ("metadata.azure.internal", METADATA_V4),
    ("metadata.allowed.test", METADATA_V4),
    ("ecs.allowed.test", "169.254.170.2"),
    ("alibaba.allowed.test", "100.100.100.200"),
    ("azure.allowed.test", "168.63.129.16"),
    ("cgnat.allowed.test", "100.64.0.1"),
    ("private.allowed.test", "10.0.0.5"),
    ("private172.allowed.test", "172.16.0.10"),
    ("private192.allowed.test", "192.168.1.10"),
    ("loopback.allowed.test", "127.0.0.1"),
    ("zero.allowed.test", "0.0.0.0"),
    ("rebind.test", ALLOWED_V4),
    // A host in the lab resolv.conf's search domain (E8): reached only if
    // the proxy resolves `nx.allowed.test` relative to `search corp.test`.
    ("nx.allowed.test.corp.test", EVIL_V4),
    // An allowed name resolving to an address of the lab's local route (F19).
    ("localroute.allowed.test", LOCAL_ROUTE_V4),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str) -> Vec<u8> {
        let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            p.push(l.len() as u8);
            p.extend_from_slice(l.as_bytes());
        }
        p.extend_from_slice(&[0, 0, 1, 0, 1]);
        p
    }

    #[test]
    fn answers_known_names_and_nxdomain_for_others() {
        let r = Responder::new(DnsMode::Fixed);
        let a = r.respond(&query("Allowed.test")).unwrap();
        assert_eq!(&a[a.len() - 4..], &[93, 184, 216, 34]);
        assert_eq!(a[3] & 0x0f, 0);
        let nx = r.respond(&query("x.exfil.test")).unwrap();
        assert_eq!(nx[3] & 0x0f, 3);
        assert_eq!(query_name(&query("a.b.c")).as_deref(), Some("a.b.c"));
    }

    #[test]
    fn rebind_alternates() {
        let r = Responder::new(DnsMode::Rebind);
        let first = r.lookup("rebind.test").unwrap();
        let second = r.lookup("rebind.test").unwrap();
        assert_ne!(first, second);
        assert!(second.is_loopback());
    }
}
