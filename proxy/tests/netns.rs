//! The host's own interface addresses are not public (attack list case 7):
//! an allowed name resolving to one of them is refused, even when the
//! address itself looks public.
//!
//! Needs an address that the range table calls public on one of "this
//! host's" interfaces, so the check runs in a fresh network namespace
//! (`unshare -rn`, which works as root and unprivileged): the test binary
//! re-executes itself there, single-threaded, adds `100.200.0.1/32` to that
//! namespace's loopback, and runs the proxy, the upstream and the client
//! inside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use oajail_proxy::Limits;
use std::net::Ipv4Addr;

const OWN: Ipv4Addr = Ipv4Addr::new(100, 200, 0, 1);

/// Runs only inside the namespace made by `own_interface_addresses_are_refused`.
#[test]
fn own_interface_child() {
    if std::env::var("OAJAIL_NETNS_CHILD").is_err() {
        return;
    }
    for args in [
        &["link", "set", "lo", "up"][..],
        &["addr", "add", "100.200.0.1/32", "dev", "lo"],
    ] {
        let (code, _, err) = run("ip", args);
        assert_eq!(code, 0, "ip {args:?}: {err}");
    }
    assert_eq!(
        oajail_proxy::classify(OWN.into()),
        None,
        "the address must look public"
    );
    let up = Upstream::raw(OWN);
    let target = format!("own.lab.test:{}", up.addr.port());
    let lab = Lab::start(&["own.lab.test"], &[]);
    lab.resolver.map("own.lab.test", OWN);
    let resp = raw(
        lab.proxy,
        format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&resp), 403, "{resp}");
    assert!(resp.contains("an address of this host"), "{resp}");
    assert_eq!(up.hits(), 0);
    drop(lab);
    // Control: the same destination, deliberately admitted, is reachable.
    let mut egress = plan(&["own.lab.test"], &[]);
    egress.allow_private = vec![oajail_policy::domain::IpNet::parse("100.200.0.1").unwrap()];
    let lab = Lab::with(egress, Limits::default());
    lab.resolver.map("own.lab.test", OWN);
    let (_c, head) = connect(lab.proxy, &target, b"SSH-2.0-x\r\n");
    assert_eq!(status(&head), 200, "{head}");
}

#[test]
fn own_interface_addresses_are_refused() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("unshare")
        .arg("-rn")
        .arg(exe)
        .args([
            "--exact",
            "own_interface_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("OAJAIL_NETNS_CHILD", "1")
        .output()
        .expect("unshare (util-linux) is needed; tests do not skip");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
