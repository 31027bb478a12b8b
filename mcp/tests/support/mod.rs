//! Test support: the real binary as a child process, a raw JSON-lines MCP
//! client for both protocol eras, and a local mock of the API over TLS.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // shared by several test binaries; tests may panic

pub mod authz;
pub mod http;
pub mod mock;
pub mod rig;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_openagenda-mcp");

/// Modern-era `_meta` for a request.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"}
    })
}

/// A running server with a raw line client.
pub struct Server {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    pending: HashMap<i64, Value>,
    next_id: i64,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// A command for the binary with a clean, deterministic environment.
pub fn command(envs: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

impl Server {
    /// Starts the server with extra env vars and args.
    pub fn start(envs: &[(&str, &str)], args: &[&str]) -> Self {
        Self::start_command(command(envs, args))
    }

    fn with_child(mut self, child: Child) -> Self {
        self.child = Some(child);
        self
    }

    fn attach(child: &mut Child) -> Self {
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        Self {
            child: None,
            stdin: Some(stdin),
            lines: rx,
            pending: HashMap::new(),
            next_id: 1,
            stderr: log,
        }
    }

    /// Sends one raw JSON message.
    pub fn send(&mut self, msg: &Value) {
        let mut text = serde_json::to_string(msg).unwrap();
        text.push('\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Writes raw bytes to the server's stdin (malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message the server writes, whatever it is.
    pub fn next_message(&mut self, timeout: Duration) -> Value {
        self.lines.recv_timeout(timeout).unwrap_or_else(|_| {
            panic!(
                "no message within {timeout:?}; stderr:\n{}",
                self.stderr.lock().unwrap()
            )
        })
    }

    /// The next message, or `None` after `timeout`.
    pub fn try_next_message(&mut self, timeout: Duration) -> Option<Value> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Waits for the server to exit (without closing stdin).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Sends a request and returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Waits for the response with `id`.
    pub fn response(&mut self, id: i64, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.pending.remove(&id) {
                return v;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no response to id {id} within {timeout:?}; stderr:\n{}",
                    self.stderr.lock().unwrap()
                )
            });
            if let Some(got) = msg.get("id").and_then(Value::as_i64) {
                self.pending.insert(got, msg);
            }
        }
    }

    /// The next response to any request (for pipelined clients).
    pub fn recv_any(&mut self, timeout: Duration) -> Value {
        if let Some(id) = self.pending.keys().next().copied() {
            return self.pending.remove(&id).unwrap();
        }
        loop {
            let msg = self
                .lines
                .recv_timeout(timeout)
                .expect("no response in time");
            if msg.get("id").is_some() {
                return msg;
            }
        }
    }

    /// Starts any command speaking MCP on stdio (used for baselines).
    pub fn start_command(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server command");
        Self::attach(&mut child).with_child(child)
    }

    /// Request + response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id, Duration::from_secs(30))
    }

    /// Modern-era tools/call; returns the `result`.
    pub fn tool(&mut self, name: &str, args: Value) -> Value {
        let r = self.call(
            "tools/call",
            json!({"_meta": meta(), "name": name, "arguments": args}),
        );
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call failed: {r}"))
    }

    /// Runs `code` with execute; returns the result object.
    pub fn execute(&mut self, code: &str) -> Value {
        self.tool("execute", json!({"code": code}))
    }

    /// Closes stdin and waits for exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Stderr once it holds `text` (the wrapper's lines are written by
    /// other processes, after the answer), or as it is after 10 s.
    pub fn stderr_with(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.stderr.lock().unwrap().clone();
            if log.contains(text) || Instant::now() >= deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The error code of an isError execute result (panics if not an error).
pub fn error_code(result: &Value) -> String {
    assert_eq!(result["isError"], json!(true), "expected isError: {result}");
    result["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Pids of a process's children (a server's pooled workers).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    // A process that ended meanwhile (a worker between two reads) has no
    // children any more.
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// This host's primary IPv4 address (a connected UDP socket sends
/// nothing): the jail's loopback is its own, so a mock the jailed server
/// must reach listens there, admitted by the policy as an IP entry.
pub fn host_ip() -> std::net::Ipv4Addr {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    sock.connect("192.0.2.1:9")
        .expect("a route to pick the host address");
    match sock.local_addr().unwrap().ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() => ip,
        other => panic!("no non-loopback IPv4 address for the mock: {other}"),
    }
}

/// The policy masks `OA_API_KEY` (srt `credentials`): the jailed server
/// holds a stand-in, and the wrapper's proxy swaps the real key in for the
/// API host, or, where masking is not implemented, removes the variable so
/// that no key at all leaves. Either way the API never sees anything but
/// the real key or no `Authorization`: never the stand-in, never another.
pub fn assert_real_key(seen: &[mock::Seen], key: &str) {
    let real = format!("Bearer {key}");
    for s in seen {
        assert_eq!(
            s.authorization.as_deref(),
            Some(real.as_str()),
            "{} {}",
            s.method,
            s.target
        );
    }
}

/// The oajail binary: `OA_MCP_OAJAIL`, else `oajail` next to the server
/// binary (a workspace build puts it there). `None` when there is none,
/// which is a failure under `OAJAIL_TEST_STRICT` (the CI).
pub fn oajail_binary() -> Option<std::path::PathBuf> {
    let found = match std::env::var_os("OA_MCP_OAJAIL") {
        Some(p) => Some(p.into()),
        None => {
            let sibling = std::path::Path::new(BIN).parent().unwrap().join("oajail");
            sibling.is_file().then_some(sibling)
        }
    };
    assert!(
        found.is_some() || std::env::var_os("OAJAIL_TEST_STRICT").is_none(),
        "OAJAIL_TEST_STRICT is set but there is no oajail binary: build the workspace or set OA_MCP_OAJAIL"
    );
    found
}
