//! Name resolution, behind a trait so tests control every answer.
//!
//! The proxy calls the resolver exactly once per allowed request and dials
//! one of the addresses it got (after checking all of them), so a resolver
//! that changes its answer (DNS rebinding) cannot change what is dialed.
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;

/// The future a [`Resolver`] returns.
pub type ResolveFuture<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Resolves a canonical DNS name (never an IP literal) to its addresses.
pub trait Resolver: Send + Sync + 'static {
    /// All addresses of `name`; an empty list or an error means unreachable.
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a>;
}

/// The system resolver: `/etc/hosts` by exact name, then `getaddrinfo` on
/// tokio's blocking pool for the name as an absolute FQDN.
///
/// The trailing dot matters: for a relative name glibc tries each
/// `search` domain of resolv.conf after (or before, below `ndots`) the
/// name itself, so an allowed `nx.allowed.example` that does not exist
/// would reach `nx.allowed.example.corp.example`, a host the policy never
/// named. glibc's hosts backend does not match a name with a trailing dot,
/// so `/etc/hosts` is read here first, by exact (case-insensitive) name.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            // A few hundred bytes from the page cache: cheaper read in place
            // than a hop to the blocking pool.
            let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
            let mut ips = hosts_lookup(&hosts, name);
            if ips.is_empty() {
                let fqdn = format!("{}.", name.trim_end_matches('.'));
                // Port 0: only the addresses matter; the proxy adds the port.
                let addrs = tokio::net::lookup_host((fqdn.as_str(), 0)).await?;
                ips = addrs.map(|a| a.ip()).collect();
            }
            ips.dedup();
            Ok(ips)
        })
    }
}

/// The addresses `/etc/hosts` (its text) gives `name`, in file order.
pub fn hosts_lookup(hosts: &str, name: &str) -> Vec<IpAddr> {
    let name = name.trim_end_matches('.');
    hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let ip: IpAddr = words.next()?.parse().ok()?;
            words.any(|w| w.eq_ignore_ascii_case(name)).then_some(ip)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_matches_exact_names_only() {
        let hosts = "127.0.0.1 localhost\n10.1.2.3 git.internal git # office\n\
                     # 10.9.9.9 git.internal\n::1 localhost ip6-localhost\n";
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(hosts_lookup(hosts, "GIT.internal"), vec![ip("10.1.2.3")]);
        assert_eq!(hosts_lookup(hosts, "git.internal."), vec![ip("10.1.2.3")]);
        assert_eq!(
            hosts_lookup(hosts, "localhost"),
            vec![ip("127.0.0.1"), ip("::1")]
        );
        assert!(hosts_lookup(hosts, "internal").is_empty());
        assert!(hosts_lookup(hosts, "office").is_empty());
    }
}
