//! Table-driven canonicalisation and address-classification tests (the
//! "names" and "addresses" parts of the proxy attack list).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use oajail_policy::host::{Host, canonicalize};
use oajail_proxy::{LocalAddrs, classify};
use std::net::IpAddr;

#[test]
fn canonicalisation_table() {
    let name = |s: &str| Ok::<Host, ()>(Host::Name(s.into()));
    let v4 = |s: &str| Ok::<Host, ()>(Host::V4(s.parse().unwrap()));
    let v6 = |s: &str| Ok::<Host, ()>(Host::V6(s.parse().unwrap()));
    let err = || Err::<Host, ()>(());
    let table = [
        ("API.ALLOWED.COM.", name("api.allowed.com")),
        ("LOCALHOST.", name("localhost")),
        ("x_y.example.com", name("x_y.example.com")),
        ("xn--bcher-kva.example", name("xn--bcher-kva.example")),
        ("bücher.example", name("xn--bcher-kva.example")),
        ("аllowed.test", name("xn--llowed-2nf.test")),
        ("allowed\u{3002}test", name("allowed.test")),
        ("127.1", v4("127.0.0.1")),
        ("2130706433", v4("127.0.0.1")),
        ("0x7f000001", v4("127.0.0.1")),
        ("0x7f.1", v4("127.0.0.1")),
        ("0177.0.0.1", v4("127.0.0.1")),
        ("017700000001", v4("127.0.0.1")),
        ("127.000.000.001", v4("127.0.0.1")),
        ("127.0.0.1.", v4("127.0.0.1")),
        ("0", v4("0.0.0.0")),
        ("[::1]", v6("::1")),
        ("[0:0:0:0:0:0:0:1]", v6("::1")),
        ("[::FFFF:127.0.0.1]", v6("::ffff:7f00:1")),
        ("[fe80::1%25lo]", err()),
        ("fe80::1%lo", err()),
        ("%61pi.allowed.com", err()),
        ("api..allowed.com", err()),
        ("a.com\r\nx", err()),
        ("a\0.com", err()),
        ("a b.com", err()),
        ("256.1.1.1", err()),
        ("1.2.3.4.5", err()),
        ("0x100000000", err()),
        ("xn--zz.example", err()),
        ("evil.test#@allowed.test", err()),
        ("", err()),
    ];
    for (input, want) in table {
        assert_eq!(canonicalize(input).map_err(|_| ()), want, "{input:?}");
    }
}

#[test]
fn address_classification_table() {
    let table: &[(&str, Option<&str>)] = &[
        ("1.1.1.1", None),
        ("93.184.216.34", None),
        ("0.0.0.0", Some("this-network")),
        ("0.1.2.3", Some("this-network")),
        ("10.0.0.1", Some("rfc1918")),
        ("100.64.0.1", Some("cgnat")),
        ("100.127.255.255", Some("cgnat")),
        ("100.128.0.0", None),
        ("100.100.100.200", Some("metadata")),
        ("127.0.0.1", Some("loopback")),
        ("127.255.0.9", Some("loopback")),
        ("169.254.169.254", Some("metadata")),
        ("169.254.170.2", Some("link-local")),
        ("168.63.129.16", Some("metadata")),
        ("172.16.0.1", Some("rfc1918")),
        ("172.31.255.255", Some("rfc1918")),
        ("172.32.0.0", None),
        ("192.0.0.192", Some("metadata")),
        ("192.0.0.8", Some("ietf-protocol")),
        ("192.0.2.1", Some("documentation")),
        ("192.88.99.1", Some("6to4-relay")),
        ("192.168.1.1", Some("rfc1918")),
        ("198.18.0.1", Some("benchmarking")),
        ("198.19.255.255", Some("benchmarking")),
        ("198.51.100.7", Some("documentation")),
        ("203.0.113.7", Some("documentation")),
        ("224.0.0.1", Some("multicast")),
        ("240.0.0.1", Some("reserved")),
        ("255.255.255.255", Some("broadcast")),
        ("::", Some("unspecified")),
        ("::1", Some("loopback")),
        ("::ffff:127.0.0.1", Some("loopback")),
        ("::ffff:169.254.169.254", Some("metadata")),
        ("::ffff:1.1.1.1", None),
        ("::127.0.0.1", Some("ipv4-compatible")),
        ("64:ff9b::a9fe:a9fe", Some("nat64")),
        ("64:ff9b::7f00:1", Some("nat64")),
        ("64:ff9b::101:101", None),
        ("64:ff9b:1::1", Some("nat64-local")),
        ("100::1", Some("discard")),
        ("2001::1", Some("teredo")),
        ("2001:db8::1", Some("documentation")),
        ("2001:2::1", Some("ietf-protocol")),
        ("2002:a9fe:a9fe::", Some("6to4")),
        ("2002:7f00:1::", Some("6to4")),
        ("2002:101:101::", None),
        ("fc00::1", Some("unique-local")),
        ("fd00:ec2::254", Some("metadata")),
        ("fe80::1", Some("link-local")),
        ("fec0::1", Some("reserved")),
        ("ff02::1", Some("multicast")),
        ("2606:4700::1", None),
        ("4000::1", Some("reserved")),
    ];
    for (ip, want) in table {
        let ip: IpAddr = ip.parse().unwrap();
        assert_eq!(classify(ip), *want, "{ip}");
    }
}

#[test]
fn own_interface_addresses_are_known() {
    let local = LocalAddrs::default();
    assert!(local.contains("127.0.0.1".parse().unwrap()));
    assert!(local.contains("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!local.contains("203.0.113.250".parse().unwrap()));
}
