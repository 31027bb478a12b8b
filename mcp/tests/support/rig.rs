//! One server under test, bare or under `--jail`, in front of the TLS mock,
//! and the checks every hostile script ends with: `ping` answers at once,
//! `SIGTERM` ends the server within a second, and no process it started is
//! left.
//!
//! Bare, the mock listens on loopback. Jailed, the server is started the way
//! MCP clients start it (`openagenda-mcp --jail`, oajail beside the binary
//! or `OA_MCP_OAJAIL`), and the mock listens on this host's own address,
//! since the jail's loopback is its own (as in `tests/jail.rs`).

use super::mock::{Mock, TempDir};
use super::{BIN, Server, command};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `OA_CODE_EGRESS_AUTHORITY=none`, mock on loopback.
    Bare,
    /// `openagenda-mcp --jail`.
    Jailed,
}

/// The API key every rig's server holds.
pub const KEY: &str = "oa_sk_hostile_0123456789abcdef";

/// A server, its mock and the files they share.
pub struct Rig {
    pub mode: Mode,
    bin: PathBuf,
    pub mock: Mock,
    pub server: Server,
    _files: TempDir,
    _home: TempDir,
}

impl Rig {
    /// Starts a server in `mode` with `envs` and `args` added. Jailed, `None`
    /// when there is no oajail binary (a failure under `OAJAIL_TEST_STRICT`).
    pub fn start(mode: Mode, envs: &[(&str, &str)], args: &[&str]) -> Option<Self> {
        Self::start_bin(mode, Path::new(BIN), envs, args)
    }

    /// [`Rig::start`] with another copy of the server binary (whose worker
    /// is the one beside it).
    pub fn start_bin(mode: Mode, bin: &Path, envs: &[(&str, &str)], args: &[&str]) -> Option<Self> {
        let (mock, base) = match mode {
            Mode::Bare => {
                let mock = Mock::start();
                let base = mock.base_url();
                (mock, base)
            }
            Mode::Jailed => {
                super::oajail_binary()?;
                let ip = super::host_ip();
                let mock = Mock::start_on(ip);
                let base = format!("https://{ip}:{}/v3", mock.port);
                (mock, base)
            }
        };
        // The jail has a private /tmp: the CA bundle lives under /var/tmp.
        let files = TempDir::new_in(&[PathBuf::from("/var/tmp")], "rig");
        let ca = files.0.join("ca.pem");
        std::fs::copy(&mock.ca_path, &ca).unwrap();
        let home = TempDir::new("rig-home");
        let mut all: Vec<(&str, &str)> = vec![
            ("OA_API_KEY", KEY),
            ("OA_BASE_URL", &base),
            ("OA_EXTRA_CA_CERTS", ca.to_str().unwrap()),
            ("HOME", home.0.to_str().unwrap()),
        ];
        let oajail = super::oajail_binary();
        let sibling = bin.parent().unwrap().join("oajail");
        let named = oajail.filter(|p| *p != sibling);
        let mut args_all: Vec<&str> = Vec::new();
        match mode {
            Mode::Bare => all.push(("OA_CODE_EGRESS_AUTHORITY", "none")),
            Mode::Jailed => args_all.push("--jail"),
        }
        if let (Mode::Jailed, Some(p)) = (mode, named.as_ref()) {
            all.push(("OA_OAJAIL", p.to_str().unwrap()));
        }
        all.extend_from_slice(envs);
        args_all.extend_from_slice(args);
        let mut cmd = command(&all, &args_all);
        if bin != Path::new(BIN) {
            cmd = Command::new(bin);
            cmd.args(&args_all).env_clear().env("PATH", "/usr/bin:/bin");
            cmd.envs(all.iter().copied());
        }
        let server = Server::start_command(cmd);
        let mut rig = Self {
            mode,
            bin: bin.to_path_buf(),
            mock,
            server,
            _files: files,
            _home: home,
        };
        // The handshake (2025-11-25, where `ping` is a method) proves the
        // server, and jailed its boot check, is up.
        let init = rig.server.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "hostile", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "initialize: {init}");
        rig.server
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        Some(rig)
    }

    /// The process serving MCP: the child itself bare; jailed, the
    /// `openagenda-mcp` process inside the jail (not a worker).
    pub fn serving_pid(&self) -> u32 {
        let top = self.server.pid();
        if self.mode == Mode::Bare {
            return top;
        }
        let bin = std::fs::canonicalize(&self.bin).unwrap();
        descendants(top)
            .into_iter()
            .map(|(pid, _)| pid)
            .find(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == bin)
                    && !cmdline(*pid).contains("__execute-worker")
            })
            .unwrap_or_else(|| panic!("no jailed openagenda-mcp under {top}"))
    }

    /// Peak resident set (`VmHWM`) of the serving process, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(self.serving_pid(), "VmHWM:")
    }

    /// `ping` must be answered within `limit`.
    pub fn ping_within(&mut self, limit: Duration) {
        let started = Instant::now();
        let r = self.server.call("ping", json!({}));
        assert_eq!(r["result"], json!({}), "ping: {r}");
        assert!(
            started.elapsed() < limit,
            "ping took {:?} (limit {limit:?})",
            started.elapsed()
        );
    }

    /// The end of every hostile test: `ping` answers at once, `SIGTERM` ends
    /// the server within a second, and nothing it started is left running.
    pub fn end(mut self) {
        self.ping_within(Duration::from_secs(1));
        let top = self.server.pid();
        let tree = descendants(top);
        let sent = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(top as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = self.server.wait_exit(Duration::from_secs(1));
        let log = self.server.stderr.lock().unwrap().clone();
        assert!(
            status.is_some(),
            "{:?}: the server did not exit within 1 s of SIGTERM; stderr:\n{log}",
            self.mode
        );
        let left = loop {
            let left: Vec<u32> = tree
                .iter()
                .filter(|(pid, start)| start_time(*pid) == Some(*start))
                .map(|(pid, _)| *pid)
                .collect();
            if left.is_empty() || sent.elapsed() > Duration::from_secs(1) {
                break left;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            left.is_empty(),
            "{:?}: processes left 1 s after SIGTERM: {:?}",
            self.mode,
            left.iter().map(|p| cmdline(*p)).collect::<Vec<_>>()
        );
    }
}

/// Every descendant of `pid` with its start time (pid reuse cannot fool a
/// later check).
pub fn descendants(pid: u32) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in super::children(p) {
            if let Some(start) = start_time(child) {
                out.push((child, start));
                todo.push(child);
            }
        }
    }
    out
}

/// Start time (field 22 of `/proc/PID/stat`) of a live, non-zombie process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// A `kB` line of `/proc/PID/status`.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A copy of the server with `worker` beside it as its worker
/// (`openagenda-mcp-worker`), in a directory removed on drop; hard links
/// where the file system allows them, copies otherwise.
pub fn server_with_worker(worker: &Path) -> (TempDir, PathBuf) {
    let bin_dir = Path::new(BIN).parent().unwrap().to_path_buf();
    let mut bases = vec![bin_dir];
    bases.extend(std::env::var_os("HOME").map(PathBuf::from));
    bases.push("/var/tmp".into());
    let dir = TempDir::new_in(&bases, "probe-server");
    let server = dir.0.join("openagenda-mcp");
    let place = |from: &Path, to: &Path| {
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to).unwrap();
        }
    };
    place(Path::new(BIN), &server);
    place(worker, &dir.0.join("openagenda-mcp-worker"));
    (dir, server)
}
