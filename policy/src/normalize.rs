//! From a draft (strings with their JSON paths) to a validated [`Policy`].
//!
//! Both input formats end here: srt settings are read into a [`Draft`] by
//! `srt.rs`, canonical JSON is deserialised and turned back into a `Draft`
//! by `srt.rs` too, so every value passes the same checks whichever format
//! it came from, and equal meanings give equal (hence equally hashed)
//! policies. Every list is sorted and deduplicated here.

use crate::domain::{DomainPattern, ListKind};
use crate::env::{valid_env_name, valid_env_pattern};
use crate::error::{At, JsonPath, Problem, quote};
use crate::schema::MAX_SAFE_INTEGER;
use crate::{
    FilesystemPolicy, Limits, NetworkPolicy, OajailSettings, PathEntry, Policy, ProcessPolicy,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Everything a policy says, before validation and normalisation.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub(crate) allowed_domains: Vec<At<String>>,
    pub(crate) denied_domains: Vec<At<String>>,
    pub(crate) denied_domain_reasons: Vec<(JsonPath, String, String)>,
    pub(crate) denied_resolved_addresses: Vec<At<String>>,
    pub(crate) allow_all_unix_sockets: bool,
    pub(crate) allow_local_binding: bool,
    pub(crate) http_proxy_port: Option<At<i128>>,
    pub(crate) socks_proxy_port: Option<At<i128>>,
    pub(crate) deny_read: Vec<At<(String, bool)>>,
    pub(crate) allow_read: Vec<At<(String, bool)>>,
    pub(crate) allow_write: Vec<At<(String, bool)>>,
    pub(crate) deny_write: Vec<At<(String, bool)>>,
    pub(crate) allow_git_config: bool,
    pub(crate) allow_nested_user_namespaces: bool,
    pub(crate) enable_weaker_nested_sandbox: bool,
    pub(crate) git_safe_directories: Vec<At<String>>,
    pub(crate) limits: Option<At<Limits>>,
    pub(crate) env_keep: Vec<At<String>>,
    pub(crate) env_deny: Vec<At<String>>,
    pub(crate) allow_degraded: bool,
    pub(crate) allow_private_destinations: Vec<At<String>>,
    pub(crate) tls_terminate: Option<crate::l7::TlsDraft>,
    pub(crate) http_allow: Vec<At<String>>,
    pub(crate) http_deny: Vec<At<String>>,
    pub(crate) strict: bool,
    pub(crate) ask: bool,
    pub(crate) masks: Vec<crate::credentials::MaskDraft>,
    pub(crate) file_masks: Vec<crate::credentials::MaskDraft>,
    pub(crate) issued: Vec<crate::issued::IssuedDraft>,
}

impl Draft {
    /// Validates and normalises; warnings are appended to `warnings`.
    pub(crate) fn build(self, warnings: &mut Vec<String>) -> Result<Policy, Problem> {
        let denied_domains = domains(&self.denied_domains, ListKind::Deny)?;
        let http_rules = crate::l7::HttpRules {
            allow: crate::l7::rules(&self.http_allow)?,
            deny: crate::l7::rules(&self.http_deny)?,
        };
        let tls_terminate = match self.tls_terminate {
            Some(draft) => {
                let path = JsonPath::root().key("network").key("tlsTerminate");
                Some(draft.build(&http_rules, &path)?)
            }
            None => None,
        };
        let network = NetworkPolicy {
            allowed_domains: domains(&self.allowed_domains, ListKind::Allow)?,
            denied_domain_reasons: reasons(&self.denied_domain_reasons, &denied_domains, warnings)?,
            denied_domains,
            denied_resolved_addresses: addresses(&self.denied_resolved_addresses)?,
            allow_all_unix_sockets: self.allow_all_unix_sockets,
            allow_local_binding: self.allow_local_binding,
            http_proxy_port: port(self.http_proxy_port)?,
            socks_proxy_port: port(self.socks_proxy_port)?,
            tls_terminate,
        };
        let filesystem = FilesystemPolicy {
            deny_read: entries(&self.deny_read)?,
            allow_read: entries(&self.allow_read)?,
            allow_write: entries(&self.allow_write)?,
            deny_write: entries(&self.deny_write)?,
            allow_git_config: self.allow_git_config,
        };
        let process = ProcessPolicy {
            allow_nested_user_namespaces: self.allow_nested_user_namespaces,
            enable_weaker_nested_sandbox: self.enable_weaker_nested_sandbox,
            git_safe_directories: safe_directories(&self.git_safe_directories)?,
        };
        let (env_keep, env_deny) = env_lists(&self.env_keep, &self.env_deny)?;
        let oajail = OajailSettings {
            limits: limits(self.limits)?,
            env_keep,
            env_deny,
            allow_degraded: self.allow_degraded,
            allow_private_destinations: addresses(&self.allow_private_destinations)?,
            http_rules,
            strict: self.strict,
            ask: self.ask,
            issued_tokens: crate::issued::build(&self.issued, &network)?,
        };
        let credentials = crate::credentials::build(&self.masks, &network, &oajail.env_deny)?;
        let credential_files = crate::credentials::build_files(&self.file_masks, &network)?;
        Ok(Policy {
            network,
            filesystem,
            process,
            oajail,
            credentials,
            credential_files,
        })
    }
}

fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items.dedup();
    items
}

fn domains(items: &[At<String>], kind: ListKind) -> Result<Vec<DomainPattern>, Problem> {
    let parsed = items
        .iter()
        .map(|(path, text)| {
            DomainPattern::parse(text, kind).map_err(|e| Problem::new(path, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sorted(parsed))
}

/// Reasons are keyed by the canonical text of the deny entry they explain.
/// A key that names no deny entry could never fire (srt: "never fires"), so
/// it is dropped with a warning; two spellings of one entry with different
/// reasons are a conflict.
fn reasons(
    items: &[(JsonPath, String, String)],
    denied: &[DomainPattern],
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, Problem> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (path, key, reason) in items {
        if reason.is_empty() {
            return Err(Problem::new(path, "must not be empty"));
        }
        let entry = DomainPattern::parse(key, ListKind::Deny).ok();
        let Some(entry) = entry.filter(|e| denied.contains(e)) else {
            warnings.push(format!(
                "{path}: no deniedDomains entry is {} (ignored)",
                quote(key)
            ));
            continue;
        };
        let canonical = entry.as_str().to_owned();
        match out.get(&canonical) {
            Some(existing) if existing != reason => {
                return Err(Problem::new(
                    path,
                    format!("conflicts with another reason for {}", quote(&canonical)),
                ));
            }
            _ => {
                out.insert(canonical, reason.clone());
            }
        }
    }
    Ok(out)
}

fn addresses(items: &[At<String>]) -> Result<Vec<String>, Problem> {
    let parsed = items
        .iter()
        .map(|(path, text)| parse_address(text).map_err(|e| Problem::new(path, e)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sorted(parsed))
}

fn entries(items: &[At<(String, bool)>]) -> Result<Vec<PathEntry>, Problem> {
    let parsed = items
        .iter()
        .map(|(path, (text, literal))| {
            PathEntry::parse(text, *literal).map_err(|e| Problem::new(path, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sorted(parsed))
}

fn port(value: Option<At<i128>>) -> Result<Option<u16>, Problem> {
    let Some((path, n)) = value else {
        return Ok(None);
    };
    match u16::try_from(n) {
        Ok(p) if p != 0 => Ok(Some(p)),
        _ => Err(Problem::new(
            &path,
            format!("must be an integer from 1 to 65535, found {n}"),
        )),
    }
}

/// An empty `safe.directory` value resets git's list; sorting would move
/// it, so it is refused rather than silently reinterpreted.
fn safe_directories(items: &[At<String>]) -> Result<Vec<String>, Problem> {
    for (path, text) in items {
        if text.is_empty() {
            return Err(Problem::new(
                path,
                "empty entry (git would read it as a reset of the list)",
            ));
        }
    }
    Ok(sorted(items.iter().map(|(_, t)| t.clone()).collect()))
}

fn env_lists(
    keep: &[At<String>],
    deny: &[At<String>],
) -> Result<(Vec<String>, Vec<String>), Problem> {
    for (path, name) in keep {
        if !valid_env_pattern(name) {
            return Err(Problem::new(
                path,
                format!("{} is not an environment variable name", quote(name)),
            ));
        }
    }
    for (path, name) in deny {
        if !valid_env_name(name) {
            return Err(Problem::new(
                path,
                format!("{} is not an environment variable name", quote(name)),
            ));
        }
        if keep.iter().any(|(_, k)| k == name) {
            return Err(Problem::new(
                path,
                format!("{} is also in oajail.envKeep", quote(name)),
            ));
        }
    }
    let keep = sorted(keep.iter().map(|(_, n)| n.clone()).collect());
    let deny = sorted(deny.iter().map(|(_, n)| n.clone()).collect());
    Ok((keep, deny))
}

fn limits(value: Option<At<Limits>>) -> Result<Limits, Problem> {
    let Some((path, mut limits)) = value else {
        return Ok(Limits::default());
    };
    // The jail never inherits the core limit (a core file of a jailed
    // process can hold its secrets), so `null` means 0 and hashes as 0.
    limits.core_bytes = limits.core_bytes.or(Some(0));
    let max = MAX_SAFE_INTEGER as u64;
    let checks = [
        ("coreBytes", limits.core_bytes, 0),
        ("openFiles", limits.open_files, 1),
        ("processes", limits.processes, 1),
        ("addressSpaceBytes", limits.address_space_bytes, 1),
        ("fileSizeBytes", limits.file_size_bytes, 0),
        ("cpuSeconds", limits.cpu_seconds, 1),
        ("tmpSizeBytes", limits.tmp_size_bytes, 1),
        ("wallSeconds", limits.wall_seconds, 1),
    ];
    for (key, value, min) in checks {
        if let Some(n) = value.filter(|n| !(min..=max).contains(n)) {
            return Err(Problem::new(
                &path.key(key),
                format!("must be an integer from {min} to {max}, found {n}"),
            ));
        }
    }
    Ok(limits)
}

/// Parses an IP literal or CIDR range the way srt's `parseAddressRange`
/// does (zone ids stripped, IPv4-mapped IPv6 read as IPv4, IPv6 without
/// brackets) and returns its canonical text: host bits cleared, the prefix
/// omitted when it covers the whole address (`10.1.2.3/8` → `10.0.0.0/8`,
/// `::ffff:1.2.3.4` → `1.2.3.4`).
pub(crate) fn parse_address(text: &str) -> Result<String, String> {
    let bad = || format!("{} is not an ip address or cidr range", quote(text));
    let (addr_text, prefix_text) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr_text = addr_text.split_once('%').map_or(addr_text, |(a, _)| a);
    let addr: IpAddr = addr_text.parse().map_err(|_| bad())?;
    let max: u32 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix_text {
        None => max,
        Some(p) if (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) => p
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    let (addr, prefix) = match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) if prefix >= 96 => (IpAddr::V4(v4), prefix - 96),
            Some(_) => return Err(bad()),
            None => (addr, prefix),
        },
        v4 => (v4, prefix),
    };
    let network = mask(addr, prefix);
    let full = if network.is_ipv4() { 32 } else { 128 };
    Ok(if prefix == full {
        network.to_string()
    } else {
        format!("{network}/{prefix}")
    })
}

fn mask(addr: IpAddr, prefix: u32) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4) & u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_canonical() {
        let ok = |input: &str, expected: &str| {
            assert_eq!(parse_address(input).unwrap(), expected, "{input}")
        };
        ok("10.1.2.3/8", "10.0.0.0/8");
        ok("192.168.1.10", "192.168.1.10");
        ok("192.168.1.10/32", "192.168.1.10");
        ok("0.0.0.0/0", "0.0.0.0/0");
        ok("FC00::1/7", "fc00::/7");
        ok("fe80::1%eth0", "fe80::1");
        ok("::ffff:1.2.3.4", "1.2.3.4");
        ok("::ffff:10.0.0.0/104", "10.0.0.0/8");
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/08x",
            "[::1]",
            "::ffff:1.2.3.4/64",
            "host",
            "1.2.3",
        ] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_names() {
        assert!(valid_env_name("AWS_REGION"));
        assert!(valid_env_name("_x1"));
        assert!(!valid_env_name("1X"));
        assert!(!valid_env_name("A-B"));
        assert!(!valid_env_name(""));
        assert!(valid_env_pattern("AWS_*"));
        assert!(!valid_env_pattern("*"));
        assert!(!valid_env_pattern("A*B"));
    }
}
