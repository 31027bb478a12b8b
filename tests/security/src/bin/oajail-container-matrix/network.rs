//! The lab's network in a cell's own network namespace, built from the
//! host (`nsenter -t <pid 1> -n`), since nothing inside a container may
//! build it: loopback up, a dummy interface with every lab address and
//! the lab's routes (`labspec::network_batch`, the same as `oajail-lab`
//! makes for itself), ping sockets for every group and low ports for every
//! user (`oajail-lab` in `prepared` mode checks the addresses). Every cell
//! runs with `--network none` (or runc's new network namespace), so the
//! lab's interface is its only one besides loopback: nothing leaves.

use anyhow::{Context, Result, bail};
use std::process::Command;

fn nsenter(pid: i32, args: &[&str]) -> Result<()> {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", "--"])
        .args(args)
        .output()
        .context("run nsenter")?;
    if !out.status.success() {
        bail!(
            "in the cell's network namespace: {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Give the network namespace of `pid` the lab's network.
pub fn prepare(pid: i32, scratch: &std::path::Path) -> Result<()> {
    nsenter(pid, &["ip", "link", "set", "lo", "up"])?;
    if nsenter(pid, &["ip", "link", "add", "lab0", "type", "dummy"]).is_err() {
        // Kernels without the dummy driver (as `oajail-lab` does).
        nsenter(
            pid,
            &[
                "ip", "link", "add", "lab0", "type", "veth", "peer", "name", "lab1",
            ],
        )
        .context("neither dummy nor veth interfaces are available")?;
        nsenter(pid, &["ip", "link", "set", "lab1", "up"])?;
    }
    // Network sysctls are per namespace: written by a process in it.
    // Docker turns IPv6 off in a container without an IPv6 network; the
    // lab has IPv6 addresses.
    for (key, value) in [
        ("net.ipv6.conf.all.disable_ipv6", "0"),
        ("net.ipv6.conf.default.disable_ipv6", "0"),
        ("net.ipv6.conf.lo.disable_ipv6", "0"),
        ("net.ipv6.conf.lab0.disable_ipv6", "0"),
        ("net.ipv4.ping_group_range", "0 2147483647"),
        ("net.ipv4.ip_unprivileged_port_start", "0"),
    ] {
        nsenter(pid, &["sysctl", "-q", "-w", &format!("{key}={value}")])?;
    }
    nsenter(pid, &["ip", "link", "set", "lab0", "up"])?;
    let batch = scratch.join(format!("ip-batch-{pid}"));
    std::fs::write(&batch, oajail_security::labspec::network_batch("lab0"))?;
    nsenter(pid, &["ip", "-batch", &batch.display().to_string()])?;
    let _ = std::fs::remove_file(&batch);
    Ok(())
}
