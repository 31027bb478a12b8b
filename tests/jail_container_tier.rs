//! The container tier and the fallbacks, on this host: oajail runs under a
//! seccomp filter that refuses what a container engine's profile refuses
//! (the user namespace, as Docker's default does; `pivot_root`;
//! `sethostname`), so the run tries the steps, negotiates, and runs in the
//! tier the "environment" allows. The real engines (docker, podman, runc)
//! run the same binary in `.ci`'s container matrix.
//!
//! Egress in the container tier has no network namespace: the proof that
//! every TCP connect ends at the proxy or is refused is a listener the test
//! owns on another loopback address, the proxy's real (ephemeral) port
//! named directly, and a UDP sink, none of which may see anything.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::*;

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const CLONE: u32 = 56;
    pub const SETHOSTNAME: u32 = 170;
    pub const PIVOT_ROOT: u32 = 155;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const CLONE: u32 = 220;
    pub const SETHOSTNAME: u32 = 161;
    pub const PIVOT_ROOT: u32 = 41;
}

const ALLOW: u32 = 0x7fff_0000;
const EPERM: u32 = 0x0005_0001;

/// Docker's default profile, as far as the jail sees it: `clone` with
/// `CLONE_NEWUSER` refused.
fn no_userns() -> String {
    format!(
        "[(0x20, 0, 0, 0), (0x15, 0, 3, {}), (0x20, 0, 0, 16), (0x45, 0, 1, 0x10000000), \
         (0x06, 0, 0, {EPERM}), (0x06, 0, 0, {ALLOW})]",
        nr::CLONE
    )
}

/// One call refused whatever its arguments.
fn refuse(call: u32) -> String {
    format!("[(0x20, 0, 0, 0), (0x15, 0, 1, {call}), (0x06, 0, 0, {EPERM}), (0x06, 0, 0, {ALLOW})]")
}

/// `sethostname` refused only for a 6-byte name: the probe's name passes,
/// the run's ("oajail") does not, as if the environment changed between.
fn hostname_of_six_refused() -> String {
    format!(
        "[(0x20, 0, 0, 0), (0x15, 0, 3, {}), (0x20, 0, 0, 24), (0x15, 0, 1, 6), \
         (0x06, 0, 0, {EPERM}), (0x06, 0, 0, {ALLOW})]",
        nr::SETHOSTNAME
    )
}

/// The built-in default policy as a settings file with `extra` merged in
/// at the top level (and into `network`/`filesystem`).
fn settings(tag: &str, extra: serde_json::Value) -> PathBuf {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies/default.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base).unwrap()).unwrap();
    for (key, value) in extra.as_object().unwrap() {
        match (v.get_mut(key), value) {
            (Some(serde_json::Value::Object(map)), serde_json::Value::Object(add)) => {
                map.extend(add.clone());
            }
            _ => {
                v[key] = value.clone();
            }
        }
    }
    let path = scratch_home(tag).join("settings.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// A TCP listener that counts the connections it accepts (and answers HTTP).
fn counting_listener(addr: &str) -> (TcpListener, Arc<AtomicUsize>) {
    let listener = TcpListener::bind(addr).unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let (l, count) = (listener.try_clone().unwrap(), hits.clone());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\nhello-from-host",
            );
        }
    });
    (listener, hits)
}

/// A listener on a loopback address other than 127.0.0.1, at the port the
/// jail is told the proxy listens on when that is free (the attack of the
/// issue), else at any port.
fn listener_elsewhere() -> (TcpListener, Arc<AtomicUsize>) {
    match TcpListener::bind("127.0.0.2:3128") {
        Ok(l) => {
            drop(l);
            counting_listener("127.0.0.2:3128")
        }
        Err(_) => counting_listener("127.0.0.2:0"),
    }
}

const WEAK: &str = "enableWeakerNestedSandbox";

/// What the script in the jail tries: `name result` per line.
const EGRESS_PROBE: &str = r#"
import os, socket, sys
def tcp(host, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port)); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); return "connected"
    except OSError as e:
        return "errno-%d" % e.errno
def proxy_ports():
    # The proxy's real listeners: oajail's, in the container's network.
    ports = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[1].startswith("0100007F:"):
            ports.add(int(f[1].split(":")[1], 16))
    return ports
other_host, other_port = sys.argv[1], int(sys.argv[2])
print("elsewhere", tcp(other_host, other_port))
print("direct", tcp("127.0.0.1", int(sys.argv[3])))
real = [p for p in proxy_ports() if p not in (int(sys.argv[3]), 3128)]
print("real-proxy-port", sorted(set(tcp("127.0.0.1", p) for p in real)) or "none-found")
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"leak", ("127.0.0.1", int(sys.argv[4]))); print("udp sent")
except OSError as e:
    print("udp errno-%d" % e.errno)
for fam, kind, proto in [(socket.AF_INET, socket.SOCK_RAW, 1), (socket.AF_NETLINK, socket.SOCK_RAW, 0), (socket.AF_PACKET, socket.SOCK_RAW, 0)]:
    try:
        socket.socket(fam, kind, proto); print("socket", fam, "made")
    except OSError as e:
        print("socket", int(fam), "errno-%d" % e.errno)
try:
    s = socket.socket(); s.sendto(b"x", 0x20000000, (other_host, other_port)); print("fastopen sent")
except OSError as e:
    print("fastopen errno-%d" % e.errno)
"#;

/// The issue's attacks on egress without a network namespace: another
/// loopback address at the proxy's port, the proxy's real port named
/// directly (Landlock's port rule allows it), a host port, UDP, raw,
/// netlink and packet sockets, TCP Fast Open. Only the proxy is reached,
/// through the address the jail is told.
#[test]
fn every_tcp_connect_ends_at_the_proxy_or_is_refused() {
    let (elsewhere, elsewhere_hits) = listener_elsewhere();
    let (host, host_hits) = counting_listener("127.0.0.1:0");
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_nonblocking(true).unwrap();
    let (e, h) = (elsewhere.local_addr().unwrap(), host.local_addr().unwrap());
    let home = scratch_home("ct-egress");
    std::fs::write(home.join("probe.py"), EGRESS_PROBE).unwrap();
    let s = settings(
        "ct-egress",
        serde_json::json!({ WEAK: true, "network": {
            "allowedDomains": [format!("127.0.0.1:{}", h.port())], "deniedDomains": [] } }),
    );
    let script = format!(
        "python3 probe.py {} {} {} {}; curl -sS --max-time 10 --noproxy '' -x $HTTP_PROXY \
         http://127.0.0.1:{}/; echo",
        e.ip(),
        e.port(),
        h.port(),
        sink.local_addr().unwrap().port(),
        h.port()
    );
    let o = oajail_under_filter(
        "ct-egress",
        &no_userns(),
        &["-s", s.to_str().unwrap(), "-c", &script],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    let text = out(&o);
    for line in [
        "elsewhere errno-111",
        "direct errno-111",
        "real-proxy-port ['errno-111']",
        "udp errno-1",
        "socket 2 errno-1",
        "socket 16 errno-1",
        "socket 17 errno-1",
        "fastopen errno-1",
        "hello-from-host",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line}:\n{text}{}",
            err(&o)
        );
    }
    assert_eq!(elsewhere_hits.load(Ordering::SeqCst), 0, "{text}");
    // The one hit on the host server came through the proxy (curl).
    assert_eq!(host_hits.load(Ordering::SeqCst), 1, "{text}");
    assert!(
        sink.recv(&mut [0u8; 16]).is_err(),
        "the udp sink got a datagram"
    );
    for line in [
        "tier: container",
        "NOT ENFORCED in full: host processes hidden",
        "oajail: connect: refused tcp to 127.0.0.1:",
    ] {
        assert!(err(&o).contains(line), "{line}: {}", err(&o));
    }
}

/// `doctor`'s verdict is the run's outcome: refused without the key (the
/// same line), runs in the container tier with it.
#[test]
fn doctor_agrees_with_the_run_with_and_without_the_key() {
    for (tag, weak) in [("ct-nokey", false), ("ct-key", true)] {
        let s = settings(tag, serde_json::json!({ WEAK: weak }));
        let s = s.to_str().unwrap();
        let doctor = oajail_under_filter(tag, &no_userns(), &["-s", s, "doctor"])
            .output()
            .unwrap();
        let run = oajail_under_filter(tag, &no_userns(), &["-s", s, "--", "/bin/true"])
            .output()
            .unwrap();
        let verdict = out(&doctor)
            .lines()
            .find_map(|l| l.strip_prefix("verdict: "))
            .unwrap_or_default()
            .to_owned();
        assert!(
            out(&doctor).contains("step user and pid namespaces (clone): refused (EPERM)"),
            "{}",
            out(&doctor)
        );
        if weak {
            assert_eq!(doctor.status.code(), Some(0), "{verdict}");
            assert!(
                verdict.starts_with("runs in the container tier"),
                "{verdict}"
            );
            assert_eq!(run.status.code(), Some(0), "{}", err(&run));
        } else {
            assert_eq!(doctor.status.code(), Some(1), "{verdict}");
            assert_eq!(run.status.code(), Some(125), "{}", err(&run));
            let line = err(&run).trim().to_owned();
            assert_eq!(line.lines().count(), 1, "{line}");
            assert_eq!(
                line.strip_prefix("oajail: "),
                verdict.strip_prefix("refused: ")
            );
            assert!(line.contains(&format!("\"{WEAK}\": true")), "{line}");
        }
    }
}

/// The private TMPDIR: the only writable tmp; the host's /tmp neither
/// writable nor readable; removed at exit.
#[test]
fn tmpdir_is_private_and_removed_at_exit() {
    let marker = PathBuf::from(format!("/tmp/oajail-ct-marker-{}", std::process::id()));
    std::fs::write(&marker, "host-tmp-secret").unwrap();
    let s = settings("ct-tmp", serde_json::json!({ WEAK: true }));
    let script = format!(
        "echo \"tmpdir $TMPDIR\"; echo x > \"$TMPDIR/f\" && echo tmpdir-writable; \
         cat {m} || echo host-tmp-unreadable; echo y > /tmp/oajail-ct-new || echo host-tmp-readonly; \
         echo z > /dev/shm/oajail-ct || echo shm-closed",
        m = marker.display()
    );
    let o = oajail_under_filter(
        "ct-tmp",
        &no_userns(),
        &["-s", s.to_str().unwrap(), "-c", &script],
    )
    .output()
    .unwrap();
    std::fs::remove_file(&marker).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    let text = out(&o);
    for line in [
        "tmpdir-writable",
        "host-tmp-unreadable",
        "host-tmp-readonly",
        "shm-closed",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}:\n{text}");
    }
    assert!(!text.contains("host-tmp-secret"), "{text}");
    let dir = text
        .lines()
        .find_map(|l| l.strip_prefix("tmpdir "))
        .map(PathBuf::from)
        .unwrap();
    assert!(
        dir.starts_with("/tmp") && dir.ends_with("tmp"),
        "{}",
        dir.display()
    );
    assert!(
        !dir.parent().unwrap().exists(),
        "{} left behind",
        dir.display()
    );
    assert!(!Path::new("/tmp/oajail-ct-new").exists());
}

/// `kill -9` of oajail leaves the run's directory; the next start in the
/// same place removes it. pid 1 sees the supervisor go and ends the
/// command (no pid namespace ends it here); with Landlock's signal scope
/// the command cannot kill pid 1 to escape that.
#[test]
fn kill_9_leaves_no_process_and_a_directory_the_next_start_sweeps() {
    let s = settings("ct-kill", serde_json::json!({ WEAK: true }));
    let s = s.to_str().unwrap();
    let script = "kill -KILL $PPID 2>/dev/null || echo \"pid1-unreachable\"; \
                  echo \"$$ $TMPDIR\"; exec sleep 30";
    let mut child = oajail_under_filter("ct-kill", &no_userns(), &["-s", s, "-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut line = read_line(&mut stdout);
    let scoped = landlock_level() >= 6;
    if scoped {
        assert_eq!(line.trim(), "pid1-unreachable");
        line = read_line(&mut stdout);
    }
    let (pid, tmpdir) = line.trim().split_once(' ').unwrap();
    let dir = PathBuf::from(tmpdir).parent().unwrap().to_path_buf();
    assert!(dir.is_dir(), "{}", dir.display());
    // python exec'd oajail: the child's pid is the supervisor's.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(dir.exists(), "a kill -9 cannot remove it");
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while proc.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let outlived = proc.exists();
    // Below Landlock ABI 6 the command may outlive oajail (a named loss):
    // end it, by the pid it printed (no pid namespace: the host's numbering).
    let _ = std::process::Command::new("kill")
        .args(["-KILL", pid])
        .status();
    assert!(
        !(scoped && outlived),
        "the command outlived a kill -9 of oajail"
    );
    let o = oajail_under_filter("ct-kill", &no_userns(), &["-s", s, "--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!dir.exists(), "{} not swept", dir.display());
}

/// One line of a child's stdout.
fn read_line(out: &mut std::process::ChildStdout) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// `pivot_root` refused (Docker's profile with CAP_SYS_ADMIN) or
/// `sethostname` refused (podman's): fallbacks that lose nothing, so the
/// full jail runs without the key, saying so.
#[test]
fn fallbacks_that_lose_nothing_run_without_the_key() {
    let cases = [
        (
            "ct-pivot",
            refuse(nr::PIVOT_ROOT),
            "fallback: mounts: move_mount onto / and chroot",
        ),
        (
            "ct-host",
            refuse(nr::SETHOSTNAME),
            "fallback: namespaces: no uts namespace",
        ),
    ];
    for (tag, filter, note) in cases {
        let script = "hostname; cat /proc/self/mountinfo | head -1; ls /proc | grep -c '^[0-9]'";
        let o = oajail_under_filter(tag, &filter, &["-d", "-c", script])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{tag}: {}", err(&o));
        assert!(err(&o).contains(note), "{tag}: {}", err(&o));
        assert!(err(&o).contains("tier: namespaces"), "{tag}: {}", err(&o));
        assert!(!err(&o).contains("NOT ENFORCED"), "{tag}: {}", err(&o));
        let text = out(&o);
        let mut lines = text.lines();
        let hostname = lines.next().unwrap();
        assert_eq!(hostname == "oajail", tag == "ct-pivot", "{tag}: {text}");
        // The jail's own root and pid namespace: only its processes show.
        assert!(lines.next().unwrap().contains(" / / "), "{tag}: {text}");
        let procs: usize = lines.next().unwrap().trim().parse().unwrap();
        assert!(procs <= 4, "{tag}: {procs} processes visible: {text}");
    }
}

/// A step the probe saw work and the run then found refused (the
/// environment changed in between): the run stops at that step, in one
/// line, before the command exists.
#[test]
fn a_step_refused_after_the_probe_stops_the_run_at_that_step() {
    let o = oajail_under_filter(
        "ct-changed",
        &hostname_of_six_refused(),
        &["--", "/bin/echo", "ran"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(out(&o).is_empty(), "{}", out(&o));
    let text = err(&o);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.starts_with("oajail: hostname: "), "{text}");
}

/// The key accepts losses; it never asks for them.
#[test]
fn the_key_on_a_host_that_allows_everything_runs_the_full_jail() {
    let s = settings("ct-full", serde_json::json!({ WEAK: true }));
    let o = oajail(
        "ct-full",
        &["-s", s.to_str().unwrap(), "-d", "-c", "hostname"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o).trim(), "oajail");
    assert!(
        err(&o).contains("tier: namespaces (the full jail)"),
        "{}",
        err(&o)
    );
    assert!(
        !err(&o).contains("fallback") && !err(&o).contains("DEGRADED"),
        "{}",
        err(&o)
    );
}

/// `allowLocalBinding` and `allowAllUnixSockets` in the container tier: a
/// server the command starts (on 0.0.0.0, made loopback) is reachable from
/// the jail; a server outside the jail on loopback is not; unix sockets
/// work through pid 1.
#[test]
fn local_servers_and_unix_sockets_in_the_container_tier() {
    let (outside, outside_hits) = counting_listener("127.0.0.1:0");
    let port = outside.local_addr().unwrap().port();
    let s = settings(
        "ct-local",
        serde_json::json!({ WEAK: true, "network": {
            "allowLocalBinding": true, "allowAllUnixSockets": true } }),
    );
    let script = format!(
        r#"
import os, socket, threading
srv = socket.socket(); srv.bind(("0.0.0.0", 0)); srv.listen()
print("bound", srv.getsockname()[0])
threading.Thread(target=lambda: srv.accept()[0].sendall(b"own"), daemon=True).start()
c = socket.create_connection(("127.0.0.1", srv.getsockname()[1]), timeout=5); print("own", c.recv(3).decode())
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5); print("outside connected")
except OSError as e:
    print("outside errno-%d" % e.errno)
path = os.path.join(os.environ["TMPDIR"], "s")
u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen()
threading.Thread(target=lambda: u.accept()[0].sendall(b"unix"), daemon=True).start()
v = socket.socket(socket.AF_UNIX); v.connect(path); print("unix", v.recv(4).decode())
"#
    );
    let o = oajail_under_filter(
        "ct-local",
        &no_userns(),
        &["-s", s.to_str().unwrap(), "--", "python3", "-c", &script],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), err(&o));
    let text = out(&o);
    for line in [
        "bound 127.0.0.1",
        "own own",
        "outside errno-111",
        "unix unix",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line}:\n{text}{}",
            err(&o)
        );
    }
    assert_eq!(outside_hits.load(Ordering::SeqCst), 0);
    assert!(
        err(&o).contains("NOT ENFORCED in full: host unix sockets"),
        "{}",
        err(&o)
    );
}
