//! oajail-lab: the hermetic lab one attack runs in.
//!
//! `oajail-lab run CONFIG.json` enters a fresh network and mount namespace
//! (plus a user namespace when not root), puts the lab's "public" and
//! special addresses on a dummy interface, points `/etc/resolv.conf` at its
//! own logging DNS responder, starts every sink and stand-in socket, then runs the configured command (as the caller's
//! uid) and writes `lab-result.json`. Everything the sinks see goes to
//! `logs/events.jsonl`. Nothing leaves the machine: the lab's namespace has
//! no route out.
//!
//! Inside a container no namespace can be made: there the caller prepares
//! the container's own network namespace from outside and the lab runs in
//! it (`LabNetwork::Prepared`, checked before anything starts).
//!
//! `oajail-lab sleeper MARKER` is the harness's host canary process (it just sleeps).
//!
//! Both die with the process that started them (`PR_SET_PDEATHSIG`, the
//! parent's pid in `$OAJAIL_LAB_PARENT`), and so does the lab's command
//! (started through `oajail-lab exec PPID -- ARGV`): an audit killed with
//! `kill -9` leaves no lab, sleeper or jailed command running, and the next
//! audit can remove its directories.

// The keyring canary needs two raw calls; they live with the probe's (the
// only unsafe code of this crate). The lab uses a few of them.
#[allow(unsafe_code, dead_code)]
#[path = "oajail-probe/raw.rs"]
mod raw;

#[path = "oajail-lab/exec.rs"]
mod exec;
#[path = "oajail-lab/overlay.rs"]
mod overlay;

#[path = "oajail-lab/prepared.rs"]
mod prepared;

use anyhow::{Context, Result, bail};
use nix::sched::{CloneFlags, unshare};
use oajail_audit::dns::Responder;
use oajail_audit::labspec::{LabConfig, LabNetwork, LabResult, TCP_SINK_PORTS, UDP_SINK_PORTS};
use oajail_audit::sinks::{self, EventLog};
use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(Ok(ppid)) = std::env::var("OAJAIL_LAB_PARENT").ok().map(|p| p.parse()) {
        exec::die_with_parent(ppid);
    }
    let code = match args.first().map(String::as_str) {
        Some("exec") => exec::exec(&args[1..]),
        Some("sleeper") => {
            std::thread::sleep(Duration::from_secs(600));
            0
        }
        Some("run") if args.len() == 2 => run(Path::new(&args[1])),
        Some(flag) if flag == oajail_audit::BUILD_ID_FLAG => {
            println!("{}", oajail_audit::BUILD_ID);
            0
        }
        _ => {
            eprintln!(
                "usage: oajail-lab run CONFIG.json | oajail-lab sleeper MARKER | oajail-lab exec PPID -- ARGV"
            );
            2
        }
    };
    std::process::exit(code);
}

fn run(config_path: &Path) -> i32 {
    let config: LabConfig = match fs::read(config_path)
        .context("read lab config")
        .and_then(|b| serde_json::from_slice(&b).context("parse lab config"))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("oajail-lab: {e:#}");
            return 3;
        }
    };
    let result = match lab(&config) {
        Ok(r) => r,
        Err(e) => LabResult {
            lab_error: Some(format!("{e:#}")),
            ..LabResult::default()
        },
    };
    let out = config.dir.join("lab-result.json");
    let ok = result.lab_error.is_none();
    if let Err(e) = fs::write(&out, serde_json::to_vec_pretty(&result).unwrap_or_default()) {
        eprintln!("oajail-lab: write {}: {e}", out.display());
        return 3;
    }
    if ok { 0 } else { 3 }
}

/// Everything in order; single-threaded until `start_sinks`.
fn lab(config: &LabConfig) -> Result<LabResult> {
    if config.network == LabNetwork::Prepared {
        prepared::check(config)?;
    } else {
        let in_userns = enter_namespaces(config)?;
        // Before the resolv.conf bind: an overlay of /etc would hide it.
        overlay::policy_paths(config, in_userns)?;
        bind_resolv_conf(&config.dir)?;
        if config.alias_home {
            alias_home(&config.dir)?;
        }
        configure_network(&config.dir)?;
        if config.no_userns {
            // 1 when the command itself needs one nested namespace to drop to its uid.
            let limit = if config.uid == 0 { "0" } else { "1" };
            fs::write("/proc/sys/user/max_user_namespaces", limit)
                .context("limit user namespaces")?;
        }
    }
    let log =
        EventLog::create(&config.dir.join("logs/events.jsonl")).context("create event log")?;
    let unwatched = start_sinks(config, &log)?;
    if let Some((desc, payload)) = &config.keyring_canary {
        raw::join_new_session_keyring().context("new session keyring")?;
        raw::add_key_session(desc, payload.as_bytes()).context("add canary key")?;
    }
    let mut result = run_command(config, &log)?;
    result.unwatched = unwatched;
    // Let sink threads finish logging what arrived just before the exit.
    std::thread::sleep(Duration::from_millis(150));
    if let Some(marker) = &config.daemon_marker {
        result.leftover_daemons = reap_marked(marker);
    }
    Ok(result)
}

/// Returns true when a lab user namespace was created.
fn enter_namespaces(config: &LabConfig) -> Result<bool> {
    let root = nix::unistd::geteuid().is_root();
    let mut flags = CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS;
    if !root || config.no_userns {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    // Read the ids before unsharing: afterwards they read as the overflow id.
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(flags).context("unshare lab namespaces")?;
    if flags.contains(CloneFlags::CLONE_NEWUSER) {
        fs::write("/proc/self/setgroups", "deny").context("setgroups deny")?;
        fs::write("/proc/self/uid_map", format!("0 {uid} 1")).context("uid_map")?;
        fs::write("/proc/self/gid_map", format!("0 {gid} 1")).context("gid_map")?;
    }
    use nix::mount::{MsFlags, mount};
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("make / private")?;
    Ok(flags.contains(CloneFlags::CLONE_NEWUSER))
}

/// A second mount of the fake home (A10): `<lab>/home-alias`.
fn alias_home(dir: &Path) -> Result<()> {
    use nix::mount::{MsFlags, mount};
    let alias = dir.join("home-alias");
    fs::create_dir_all(&alias)?;
    mount(
        Some(dir.join("home").as_path()),
        &alias,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .context("bind the fake home a second time")
}

fn bind_resolv_conf(dir: &Path) -> Result<()> {
    use nix::mount::{MsFlags, mount};
    let etc = dir.join("etc");
    fs::create_dir_all(&etc)?;
    let resolv = etc.join("resolv.conf");
    fs::write(&resolv, oajail_audit::labspec::resolv_conf())?;
    let hosts = etc.join("hosts");
    fs::write(&hosts, "127.0.0.1 localhost\n::1 localhost\n")?;
    for (src, dst) in [(&resolv, "/etc/resolv.conf"), (&hosts, "/etc/hosts")] {
        mount(
            Some(src.as_path()),
            dst,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .with_context(|| format!("bind lab {dst}"))?;
    }
    Ok(())
}

/// Find iproute2's `ip`; a missing tool fails the lab (never a silent pass).
fn ip_binary() -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("ip"))
        .find(|p| p.is_file())
        .context("iproute2 `ip` not found (apt-get install iproute2)")
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new(ip_binary()?)
        .args(args)
        .output()
        .context("run ip")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The lab interface: a dummy device, or a veth pair on kernels without the
/// dummy driver (minimal VM kernels). Either way packets to a lab address
/// are delivered locally and nothing else has a route.
fn create_lab_interface() -> Result<()> {
    if ip(&["link", "add", "lab0", "type", "dummy"]).is_ok() {
        return ip(&["link", "set", "lab0", "up"]);
    }
    ip(&[
        "link", "add", "lab0", "type", "veth", "peer", "name", "lab1",
    ])
    .context("neither dummy nor veth interfaces are available")?;
    ip(&["link", "set", "lab1", "up"])?;
    ip(&["link", "set", "lab0", "up"])
}

fn configure_network(dir: &Path) -> Result<()> {
    ip(&["link", "set", "lo", "up"])?;
    create_lab_interface()?;
    let batch = oajail_audit::labspec::network_batch("lab0");
    let file = dir.join("etc/ip.batch");
    fs::write(&file, batch)?;
    ip(&["-batch", &file.display().to_string()])?;
    // Unprivileged ping sockets, so the unjailed control can ping: every
    // group this user namespace maps (in the lab's own only gid 0, the
    // caller's; under a container's, its range; on the host, all).
    fs::write("/proc/sys/net/ipv4/ping_group_range", mapped_gids()?).context("ping_group_range")?;
    Ok(())
}

/// `FIRST LAST` of the first range of `/proc/self/gid_map` (ping sockets
/// take at most 2^31 - 1).
fn mapped_gids() -> Result<String> {
    let map = fs::read_to_string("/proc/self/gid_map").context("read gid_map")?;
    let nums: Vec<u64> = (map.split_whitespace().take(3))
        .filter_map(|n| n.parse().ok())
        .collect();
    let [first, _, count] = nums[..] else {
        bail!("gid_map: {map:?}");
    };
    let last = (first + count.saturating_sub(1)).min(2_147_483_647);
    Ok(format!("{first} {last}"))
}

fn spawn_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f);
}

/// Starts every sink; returns the ones a prepared lab could not open.
fn start_sinks(config: &LabConfig, log: &EventLog) -> Result<Vec<String>> {
    for port in TCP_SINK_PORTS.iter().chain(&[53]) {
        let l = TcpListener::bind(("::", *port)).with_context(|| format!("tcp sink :{port}"))?;
        let log = log.clone();
        spawn_thread(move || sinks::tcp_sink(l, log));
    }
    for port in UDP_SINK_PORTS {
        let s = UdpSocket::bind(("::", *port)).with_context(|| format!("udp sink :{port}"))?;
        let log = log.clone();
        spawn_thread(move || sinks::udp_sink(s, log));
    }
    let dns = UdpSocket::bind(("::", 53)).context("dns responder :53")?;
    let responder = Arc::new(Responder::new(config.dns));
    let dlog = log.clone();
    spawn_thread(move || sinks::dns_server(dns, responder, dlog));
    let mut unwatched = Vec::new();
    match start_icmp_logger(log) {
        Ok(()) => {}
        // uid 1000 in a container has no CAP_NET_RAW (the lab's own user
        // namespace gives it one); the probe still judges its own ping.
        Err(e) if config.network == LabNetwork::Prepared => {
            unwatched.push(format!("icmp: {e:#}"));
        }
        Err(e) => return Err(e),
    }
    sinks::start_https_sink(&config.dir, log).context("https sink")?;
    start_unix_sinks(config, log)?;
    let (cwd, log) = (config.cwd.clone(), log.clone());
    spawn_thread(move || prepared::listen_on_request(&cwd, &log));
    Ok(unwatched)
}

fn start_icmp_logger(log: &EventLog) -> Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket};
    let sock = socket(
        AddressFamily::Inet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::Icmp,
    )
    .context("raw icmp logger")?;
    let log = log.clone();
    spawn_thread(move || icmp_loop(sock, log));
    Ok(())
}

fn icmp_loop(sock: OwnedFd, log: EventLog) {
    use nix::sys::socket::{SockaddrIn, recvfrom};
    let mut buf = [0u8; 2048];
    while let Ok((n, from)) = recvfrom::<SockaddrIn>(sock.as_raw_fd(), &mut buf) {
        let ihl = usize::from(buf.first().copied().unwrap_or(0x45) & 0x0f) * 4;
        // Only echo requests (type 8): replies would double-count.
        if buf.get(ihl) == Some(&8) {
            let peer = from.map(|a| a.to_string()).unwrap_or_default();
            let dst = buf
                .get(16..20)
                .map(|b| format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]))
                .unwrap_or_default();
            let data = String::from_utf8_lossy(&buf[ihl.min(n)..n]).into_owned();
            log.record(&oajail_audit::labspec::SinkEvent {
                sink: "icmp".into(),
                local: dst,
                peer,
                bytes: n,
                data,
                name: None,
            });
        }
    }
}

fn start_unix_sinks(config: &LabConfig, log: &EventLog) -> Result<()> {
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let run = config.dir.join("run");
    fs::create_dir_all(&run)?;
    for name in ["ssh-agent.sock", "bus", "docker.sock", "X0", "log"] {
        // A previous run in the same lab left its socket files behind.
        let _ = fs::remove_file(run.join(name));
    }
    for name in ["ssh-agent.sock", "bus", "docker.sock", "X0"] {
        let path = run.join(name);
        let l =
            UnixListener::bind(&path).with_context(|| format!("unix sink {}", path.display()))?;
        let (log, local) = (log.clone(), path.display().to_string());
        spawn_thread(move || sinks::unix_sink(l, name.into(), local, log));
    }
    // Two datagram sinks: one in the runtime directory the jail hides, one
    // in plain view (read-only there): a read-only mount does not stop a
    // datagram, so only the refusal of every unix socket able to address
    // one (`socket`, datagram `socketpair`) holds that one.
    let share = config.dir.join("share");
    fs::create_dir_all(&share)?;
    let _ = fs::remove_file(share.join("log"));
    for (path, name) in [(run.join("log"), "log"), (share.join("log"), "log-in-view")] {
        let d = UnixDatagram::bind(&path).context("unix dgram sink")?;
        let (dlog, local) = (log.clone(), path.display().to_string());
        spawn_thread(move || sinks::unix_dgram_sink(d, name.into(), local, dlog));
    }
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(config.abstract_name.as_bytes())?;
    let l = UnixListener::bind_addr(&addr).context("abstract sink")?;
    let alog = log.clone();
    spawn_thread(move || sinks::unix_sink(l, "abstract".into(), "@abstract".into(), alog));
    Ok(())
}

/// Descriptors deliberately leaked into the command (C6), kept alive by the caller.
struct Leaks {
    _fds: Vec<OwnedFd>,
}

fn leak_fds(config: &LabConfig, log: &EventLog) -> Result<(Leaks, String)> {
    use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl, open};
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    let home = open(
        &config.dir.join("home"),
        OFlag::O_PATH | OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .context("open home dirfd")?;
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .context("socketpair")?;
    for fd in [&home, &theirs] {
        fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::empty())).context("clear FD_CLOEXEC")?;
    }
    let list = format!("{},{}", home.as_raw_fd(), theirs.as_raw_fd());
    let log = log.clone();
    spawn_thread(move || {
        let mut s = std::os::unix::net::UnixStream::from(ours);
        let mut buf = [0u8; 4096];
        use std::io::Read;
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            log.record(&oajail_audit::labspec::SinkEvent {
                sink: "leak".into(),
                local: "socketpair".into(),
                peer: String::new(),
                bytes: n,
                data: String::from_utf8_lossy(&buf[..n]).into_owned(),
                name: None,
            });
        }
    });
    Ok((
        Leaks {
            _fds: vec![home, theirs],
        },
        list,
    ))
}

fn command_argv(config: &LabConfig) -> Vec<String> {
    let mut argv = Vec::new();
    // A prepared lab runs as the caller already; its own lab runs as root
    // of a user namespace.
    if config.uid != 0 && config.network == LabNetwork::Own {
        // Drop from the lab's root back to the caller's uid in a nested user
        // namespace, so the command runs exactly as unprivileged as the caller.
        argv.extend([
            "unshare".into(),
            "--user".into(),
            format!("--map-user={}", config.uid),
            format!("--map-group={}", config.gid),
            "--".into(),
        ]);
    }
    // Then (as the caller) the command dies with this lab, which dies with
    // the audit or test; `--tier container` takes user namespaces away.
    let me =
        std::env::current_exe().map_or_else(|_| "oajail-lab".into(), |p| p.display().to_string());
    argv.extend([me, "exec".into(), std::process::id().to_string()]);
    if config.refuse_userns {
        argv.push("--refuse-userns".into());
    }
    argv.push("--".into());
    if config.pty {
        argv.extend(["setsid".into(), "--wait".into(), "--ctty".into()]);
    }
    argv.extend(config.command.iter().cloned());
    argv
}

fn run_command(config: &LabConfig, log: &EventLog) -> Result<LabResult> {
    let argv = command_argv(config);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(config.env.iter().cloned())
        .current_dir(&config.cwd);
    cmd.stdout(fs::File::create(config.dir.join("cmd.stdout"))?);
    cmd.stderr(fs::File::create(config.dir.join("cmd.stderr"))?);
    let mut _leaks = None;
    if config.leak_fds {
        let (leaks, list) = leak_fds(config, log)?;
        cmd.env("OAJ_LEAKED_FDS", list);
        _leaks = Some(leaks);
    }
    let pty = if config.pty { Some(open_pty()?) } else { None };
    let tty_before = pty.as_ref().map(|p| tty_state(&p.slave));
    match (&pty, &config.stdin_file) {
        (Some(p), _) => cmd.stdin(Stdio::from(p.slave.try_clone()?)),
        (None, Some(_)) => cmd.stdin(Stdio::piped()),
        (None, None) => cmd.stdin(Stdio::null()),
    };
    let copying = match pty.as_ref().filter(|_| config.pty_output) {
        Some(p) => Some(interactive(&mut cmd, p, &config.dir)?),
        None => None,
    };
    let mut child = cmd.spawn().with_context(|| format!("spawn {}", argv[0]))?;
    if let (Some(file), Some(stdin)) = (&config.stdin_file, child.stdin.take()) {
        feed_stdin(
            stdin,
            fs::read(file).context("read stdin file")?,
            config.stdin_hold_ms,
        );
    }
    drop(cmd);
    drop(_leaks);
    let mut result = wait_with_timeout(
        child,
        Duration::from_millis(config.timeout_ms),
        config.kill_after_ms,
    )?;
    if let Some(copy) = copying {
        copy.finish();
    }
    if let Some(p) = pty {
        let after = tty_state(&p.slave);
        if tty_before.as_ref() != Some(&after) {
            result.pty_state_changed = Some(format!("before {tty_before:?}, after {after:?}"));
        }
        result.pty_injected = Some(drain(&p.slave));
    }
    Ok(result)
}

/// Write `data` to the command's stdin, keep it open `hold_ms`, then close it.
fn feed_stdin(mut stdin: std::process::ChildStdin, data: Vec<u8>, hold_ms: u64) {
    spawn_thread(move || {
        use std::io::Write;
        let _ = stdin.write_all(&data);
        let _ = stdin.flush();
        std::thread::sleep(Duration::from_millis(hold_ms));
        drop(stdin);
    });
}

struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

/// stdout on the pty too, its output copied to `cmd.stdout`, and the pty's
/// identity (`st_dev:st_ino`) in `OAJ_HOST_TTY` for the probe to look for.
fn interactive(cmd: &mut Command, p: &Pty, dir: &Path) -> Result<sinks::PtyCopy> {
    let st = nix::sys::stat::fstat(&p.slave).context("fstat pty")?;
    cmd.env("OAJ_HOST_TTY", format!("{}:{}", st.st_dev, st.st_ino));
    cmd.stdout(Stdio::from(p.slave.try_clone()?));
    let out = fs::File::create(dir.join("cmd.stdout"))?;
    // A copy: the master stays open for the after-run checks.
    Ok(sinks::PtyCopy::start(p.master.try_clone()?, out))
}

fn open_pty() -> Result<Pty> {
    use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
    let p = nix::pty::openpty(None, None).context("openpty")?;
    let mut t = tcgetattr(&p.slave).context("tcgetattr")?;
    cfmakeraw(&mut t);
    tcsetattr(&p.slave, SetArg::TCSANOW, &t).context("tcsetattr")?;
    Ok(Pty {
        master: p.master,
        slave: p.slave,
    })
}

/// The terminal state a jailed command could leave behind: the termios
/// flags and control characters (exclusive mode is refused by seccomp and
/// checked by the probe itself).
fn tty_state(slave: &OwnedFd) -> String {
    match nix::sys::termios::tcgetattr(slave) {
        Ok(t) => format!(
            "iflag {:?} oflag {:?} cflag {:?} lflag {:?} cc {:?}",
            t.input_flags, t.output_flags, t.control_flags, t.local_flags, t.control_chars
        ),
        Err(e) => format!("tcgetattr: {e}"),
    }
}

/// Bytes waiting in the terminal's input queue (what TIOCSTI would have pushed).
fn drain(slave: &OwnedFd) -> usize {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let _ = fcntl(slave.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    let mut buf = [0u8; 256];
    nix::unistd::read(slave, &mut buf).unwrap_or(0)
}

fn wait_with_timeout(
    mut child: Child,
    limit: Duration,
    kill_after_ms: Option<u64>,
) -> Result<LabResult> {
    use std::os::unix::process::ExitStatusExt;
    let start = Instant::now();
    let mut timed_out = false;
    let kill_at = kill_after_ms.map(Duration::from_millis);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if kill_at.is_some_and(|k| start.elapsed() > k) {
            // The supervisor is killed from outside (H5): no chance to clean up.
            let _ = child.kill();
            break child.wait()?;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(LabResult {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        elapsed_ms,
        ..LabResult::default()
    })
}

/// Count (then kill) processes whose argv carries `marker`, giving them 1 s to go away.
fn reap_marked(marker: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let pids = marked(marker);
        if pids.is_empty() {
            return 0;
        }
        if Instant::now() > deadline {
            for pid in &pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return pids.len();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn marked(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}
