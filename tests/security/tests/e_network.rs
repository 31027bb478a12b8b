//! Family E: direct network egress that ignores the proxy, DNS, ICMP and
//! socket families. Every target address lives on the lab's interface, with
//! a sink that records any contact (the global post-condition).
mod common;
use common::*;
use labspec::{ALLOWED_V4, DNS_V4, EVIL_V4, EVIL_V6, METADATA_V4, PUBLIC_DNS_V4};

#[test]
fn blocks_direct_tcp_to_public_v4() {
    expect_blocked("E1-tcp-public-v4", DENY_HOME, |_| {
        argv!["tcp-connect", EVIL_V4, 443]
    });
}

#[test]
fn blocks_direct_tcp_to_allowed_host_address() {
    expect_blocked("E1-tcp-allowed-host-direct", DENY_HOME, |_| {
        argv!["tcp-connect", ALLOWED_V4, 443]
    });
}

#[test]
fn blocks_direct_tcp_to_public_v6() {
    expect_blocked("E1-tcp-public-v6", DENY_HOME, |_| {
        argv!["tcp-connect", EVIL_V6, 443]
    });
}

#[test]
fn blocks_direct_tcp_to_metadata() {
    expect_blocked("E1-tcp-metadata", DENY_HOME, |_| {
        argv!["tcp-connect", METADATA_V4, 80]
    });
}

#[test]
fn blocks_udp_to_public_v4() {
    expect_blocked("E2-udp-public", DENY_HOME, |_| {
        argv!["udp-send", EVIL_V4, 443]
    });
}

#[test]
fn blocks_udp_ntp() {
    expect_blocked("E2-udp-ntp", DENY_HOME, |_| {
        argv!["udp-send", PUBLIC_DNS_V4, 123]
    });
}

#[test]
fn blocks_udp_to_public_v6() {
    expect_blocked("E2-udp-public-v6", DENY_HOME, |_| {
        argv!["udp-send", EVIL_V6, 9999]
    });
}

#[test]
fn blocks_dns_to_public_resolver() {
    expect_blocked("E3-dns-public-resolver", DENY_HOME, |l| {
        argv![
            "dns-query",
            PUBLIC_DNS_V4,
            format!("{}.exfil.test", l.token)
        ]
    });
}

#[test]
fn blocks_dns_to_host_resolver() {
    expect_blocked("E3-dns-lab-resolver", DENY_HOME, |l| {
        argv!["dns-query", DNS_V4, format!("{}.exfil.test", l.token)]
    });
}

#[test]
fn blocks_system_resolver() {
    expect_blocked("E3-system-resolver", DENY_HOME, |l| {
        argv!["resolve", format!("{}.exfil.test", l.token)]
    });
}

#[test]
fn blocks_icmp() {
    expect_blocked("E4-icmp", DENY_HOME, |_| argv!["icmp-ping", EVIL_V4]);
}

#[test]
fn blocks_vsock() {
    let id = "E5-vsock";
    let mut lab = Lab::new(id);
    let args = ["socket-family", "40"];
    let baseline = lab.unjailed(&args, &RunOptions::default());
    let run = lab.jailed(DENY_HOME, &args, &RunOptions::default());
    assert_blocked_or_unsupported(&mut lab, id, &baseline, &run);
}

#[test]
fn blocks_exotic_socket_families() {
    expect_blocked("E6-exotic-families", DENY_HOME, |_| {
        argv!["socket-families"]
    });
}

#[test]
fn blocks_packet_sockets() {
    expect_blocked("E6-packet", DENY_HOME, |_| {
        argv!["socket-family", libc::AF_PACKET]
    });
}

#[test]
fn blocks_host_loopback_services() {
    expect_blocked("E7-host-loopback", DENY_HOME, |_| {
        argv!["tcp-connect", "127.0.0.1", 9999]
    });
}

/// The proxy's port on another loopback address, where the lab listens:
/// a holder of "TCP only through the proxy" that looks at the port alone
/// (Landlock's TCP rule) lets this through; the jail's network namespace,
/// or the supervisor taking every connect in the container tier, does not.
#[test]
fn blocks_direct_tcp_to_the_proxy_port_on_another_loopback_address() {
    expect_blocked("E9-proxy-port-other-address", DENY_HOME, |_| {
        argv!["tcp-proxy-port-elsewhere", "127.0.0.2"]
    });
}
