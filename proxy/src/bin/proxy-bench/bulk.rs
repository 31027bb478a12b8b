//! B1: bulk transfer, direct and through each relay variant, interleaved.
use crate::{GIB, ProxyChild, Res, Setup, median, open};
use std::io::Read;
use std::net::SocketAddr;
use std::time::Instant;

fn bulk(proxy: Option<SocketAddr>, up: SocketAddr, hello: &[u8], n: u64) -> Res<f64> {
    let start = Instant::now();
    let mut s = open(proxy, up, hello, b'B', n)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    loop {
        let k = s.read(&mut buf)?;
        if k == 0 {
            break;
        }
        got += k as u64;
    }
    if got != n {
        return Err(format!("bulk: got {got} of {n} bytes").into());
    }
    Ok(n as f64 / GIB as f64 / start.elapsed().as_secs_f64())
}

/// One bulk run: (GiB/s, CPU seconds of this process, i.e. the client and
/// the upstream, and of the proxy process if there is one).
fn timed_bulk(s: &Setup, proxy: Option<&ProxyChild>, bytes: u64) -> Res<(f64, f64, f64)> {
    let me = std::process::id();
    let (ends0, proxy0) = (cpu_seconds(me)?, proxy.map(|p| cpu_seconds(p.child.id())));
    let retrans0 = tcp_retransmits()?;
    let v = bulk(proxy.map(|p| p.addr), s.up, &s.hello, bytes)?;
    let ends = cpu_seconds(me)? - ends0;
    RETRANS.fetch_add(
        tcp_retransmits()? - retrans0,
        std::sync::atomic::Ordering::Relaxed,
    );
    let relay = match (proxy, proxy0) {
        (Some(p), Some(before)) => cpu_seconds(p.child.id())? - before?,
        _ => 0.0,
    };
    Ok((v, ends, relay))
}

/// TCP segments retransmitted (machine-wide) during bulk runs, summed
/// into the current variant's tally by the caller.
static RETRANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The machine's `RetransSegs` counter (`/proc/net/snmp`). On loopback
/// these are mostly spurious fast retransmits after out-of-order delivery.
fn tcp_retransmits() -> Res<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp")?;
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().ok_or("no Tcp")?, tcp.next().ok_or("no Tcp")?);
    let i = names
        .split_whitespace()
        .position(|n| n == "RetransSegs")
        .ok_or("no RetransSegs")?;
    Ok(values
        .split_whitespace()
        .nth(i)
        .ok_or("no RetransSegs")?
        .parse()?)
}

/// Per-variant results of B1.
#[derive(Default, Clone)]
struct Bulk {
    speed: Vec<f64>,
    ratio: Vec<f64>,
    ends_cpu: f64,
    relay_cpu: f64,
    retrans: u64,
}

/// Direct and every relay variant, interleaved: D P1 D P2 D P3 D, the
/// variants in a rotated order each round. Each proxied run is compared
/// with the mean of the direct runs just before and just after it, which
/// cancels most drift in the machine's load. Reported: the median and the
/// range of those per-run ratios, and CPU seconds per GiB of the proxy and
/// of the two ends (client + upstream, this process).
pub(crate) fn bench_bulk(s: &Setup, bytes: u64, runs: usize) -> Res<()> {
    let n = s.proxies.len();
    let mut res = vec![Bulk::default(); n];
    let (mut direct, mut direct_cpu) = (Vec::new(), 0.0);
    let take = || RETRANS.swap(0, std::sync::atomic::Ordering::Relaxed);
    let mut direct_retrans = 0;
    for round in 0..runs {
        let (d, c, _) = timed_bulk(s, None, bytes)?;
        direct_retrans += take();
        let mut before = d;
        direct.push(d);
        direct_cpu += c;
        for k in 0..n {
            let i = (k + round) % n;
            let (v, ends, relay) = timed_bulk(s, Some(&s.proxies[i].1), bytes)?;
            res[i].retrans += take();
            let (after, c, _) = timed_bulk(s, None, bytes)?;
            direct_retrans += take();
            direct.push(after);
            direct_cpu += c;
            let r = &mut res[i];
            r.speed.push(v);
            r.ratio.push(v / ((before + after) / 2.0));
            r.ends_cpu += ends;
            r.relay_cpu += relay;
            before = after;
        }
    }
    let gib = bytes as f64 / GIB as f64;
    println!(
        "B1 bulk {} MiB x{runs}: direct median {:.2} GiB/s (min {:.2}, max {:.2}), ends CPU {:.2} s per GiB, {:.0} retransmits per GiB",
        bytes >> 20,
        median(direct.clone()),
        min(&direct),
        max(&direct),
        direct_cpu / (gib * direct.len() as f64),
        direct_retrans as f64 / (gib * direct.len() as f64)
    );
    let per = gib * runs as f64;
    for (r, (label, _)) in res.iter().zip(&s.proxies) {
        println!(
            "   {label}: median {:.2} GiB/s; ratio median {:.2} (runs {:.2}-{:.2}); CPU s per GiB: proxy {:.2}, ends {:.2}; {:.0} retransmits per GiB",
            median(r.speed.clone()),
            median(r.ratio.clone()),
            min(&r.ratio),
            max(&r.ratio),
            r.relay_cpu / per,
            r.ends_cpu / per,
            r.retrans as f64 / per
        );
        let mut sorted = r.ratio.clone();
        sorted.sort_by(f64::total_cmp);
        let runs: Vec<String> = sorted.iter().map(|x| format!("{x:.2}")).collect();
        println!("      per-run ratios: {}", runs.join(" "));
    }
    Ok(())
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// User + system CPU time of a process, from /proc (clock ticks of 10 ms).
fn cpu_seconds(pid: u32) -> Res<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the ")" that closes the command name: utime is the 12th,
    // stime the 13th.
    let rest = stat.rsplit_once(')').ok_or("bad /proc stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).ok_or("no utime")?.parse::<f64>()?
        + f.get(12).ok_or("no stime")?.parse::<f64>()?;
    Ok(ticks / 100.0)
}
