//! The proxy's request / CONNECT parsing, ClientHello peek and SOCKS5
//! handshake, black-box: arbitrary bytes are written to a real listener of
//! `oajail_proxy` (dispatch on the first byte), whose resolver refuses every
//! name, so nothing can leave the process. The proxy's parsers are private;
//! this target reaches all of them through the wire. libfuzzer-sys aborts on
//! a panic in any thread, so a panicking connection task is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oajail_proxy::{ProxyConfig, ProxyHandle, ResolveFuture, Resolver, StartOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

struct NoDns;

impl Resolver for NoDns {
    fn resolve<'a>(&'a self, _name: &'a str) -> ResolveFuture<'a> {
        Box::pin(async { Err(std::io::Error::other("fuzz: no dns")) })
    }
}

fn proxy() -> SocketAddr {
    static PROXY: OnceLock<(ProxyHandle, SocketAddr)> = OnceLock::new();
    PROXY
        .get_or_init(|| {
            let text = r#"{"network":{"allowedDomains":["allowed.test","*.allowed.test"],"deniedDomains":["evil.test"]},
                "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]}}"#;
            let policy = oajail_policy::Policy::from_settings_json(text, "fuzz").expect("fuzz policy").policy;
            let egress = oajail_policy::egress::EgressPlan::from_policy(&policy).expect("egress plan");
            let mut limits = oajail_proxy::Limits::default();
            limits.header_timeout = Duration::from_millis(200);
            limits.peek_timeout = Duration::from_millis(200);
            limits.connect_timeout = Duration::from_millis(200);
            limits.dns_timeout = Duration::from_millis(200);
            let config = ProxyConfig { egress, log_json: None, limits };
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let opts = StartOptions::default().resolver(Arc::new(NoDns));
            let handle = oajail_proxy::start_with(config, vec![listener], opts).expect("start proxy");
            (handle, addr)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut s) = TcpStream::connect(proxy()) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let _ = s.write_all(data);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
});
