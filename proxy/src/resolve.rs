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

/// The system resolver (`getaddrinfo` on tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            // Port 0: only the addresses matter; the proxy adds the port.
            let addrs = tokio::net::lookup_host((name, 0)).await?;
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.dedup();
            Ok(ips)
        })
    }
}
