//! The server on the Streamable HTTP transport, and a raw HTTP/1.1 client
//! for it (requests as bytes, responses as status, headers and body, SSE
//! `data:` lines decoded), so tests see exactly what goes over the wire.

use super::authz::Authz;
use super::mock::Mock;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running HTTP server.
pub struct HttpServer {
    child: Child,
    pub port: u16,
    pub stderr: Arc<Mutex<String>>,
}

/// One response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, or the last JSON-RPC message of an SSE body.
    pub fn json(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        if let Ok(v) = serde_json::from_str(&text) {
            return v;
        }
        let last = text
            .lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some());
        last.unwrap_or_else(|| panic!("no JSON in the body ({}): {text}", self.status))
    }
}

/// The environment of a server behind `authz` and `mock` on `port`.
pub fn env_for(authz: &Authz, mock: &Mock, port: u16) -> Vec<(String, String)> {
    vec![
        ("OA_OAUTH_ISSUER".into(), authz.issuer()),
        ("OA_OAUTH_RESOURCE".into(), resource(port)),
        ("OA_BASE_URL".into(), mock.base_url()),
        (
            "OA_EXTRA_CA_CERTS".into(),
            mock.ca_path.display().to_string(),
        ),
        ("OA_CODE_EGRESS_AUTHORITY".into(), "none".into()),
        ("OA_SANDBOX_TIMEOUT_MS".into(), "2000".into()),
    ]
}

/// The resource identifier of a server on `port`.
pub fn resource(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// The environment for exchanging tokens at `authz`.
pub fn exchange_env(authz: &Authz) -> Vec<(String, String)> {
    let (id, secret) = super::authz::EXCHANGE_CLIENT;
    vec![
        (
            "OA_TOKEN_EXCHANGE_URL".into(),
            format!("{}/token", authz.issuer()),
        ),
        ("OA_TOKEN_EXCHANGE_CLIENT_ID".into(), id.into()),
        ("OA_TOKEN_EXCHANGE_CLIENT_SECRET".into(), secret.into()),
    ]
}

impl HttpServer {
    /// Binds 127.0.0.1:0 here and starts the server on it (`--listen
    /// stdin`), so the port, and with it the resource URL, is known first.
    pub fn start(env: impl Fn(u16) -> Vec<(String, String)>, args: &[&str]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut cmd = Command::new(super::BIN);
        cmd.args(["--transport", "http", "--listen", "stdin"])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        for (k, v) in env(port) {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)));
        Self::spawn(cmd, port)
    }

    /// Starts `cmd` (already pointed at `port`).
    pub fn spawn(mut cmd: Command, port: u16) -> Self {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        Self {
            child,
            port,
            stderr: log,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a line containing `text` in stderr.
    pub fn wait_log(&self, text: &str, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The audit records in the log once there are `n` of them (a record
    /// is written after its answer is sent), or all there are after 10 s.
    pub fn audits(&self, n: usize) -> Vec<Value> {
        let read = || -> Vec<Value> {
            (self.log().lines())
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|v| v.get("audit").cloned())
                .collect()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut got = read();
        while got.len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            got = read();
        }
        got
    }

    /// Whether the process has exited, and how.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// One raw request.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        request(self.port, method, path, headers, body)
    }

    /// POST a JSON-RPC message to /mcp with `token` (and more headers).
    pub fn post(&self, token: Option<&str>, extra: &[(&str, &str)], msg: &Value) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(a) = &auth {
            headers.push(("authorization", a));
        }
        headers.extend_from_slice(extra);
        self.request("POST", "/mcp", &headers, msg.to_string().as_bytes())
    }

    /// POST a 2026-07-28 request with the standard headers it needs
    /// (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` for a call).
    pub fn post_modern(&self, token: Option<&str>, msg: &Value) -> Reply {
        let method = msg["method"].as_str().unwrap_or_default().to_owned();
        let name = msg["params"]["name"].as_str().map(str::to_owned);
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method.as_str()),
        ];
        if let Some(n) = &name {
            headers.push(("mcp-name", n.as_str()));
        }
        self.post(token, &headers, msg)
    }

    /// A modern-era (2026-07-28) tools/call; returns the JSON-RPC reply.
    pub fn call_tool(&self, token: &str, id: i64, name: &str, args: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"_meta": super::meta(), "name": name, "arguments": args}});
        let r = self.post_modern(Some(token), &msg);
        assert_eq!(r.status, 200, "{r:?}\n{}", self.log());
        r.json()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `GET`, or `None` while nothing answers on the port.
pub fn try_get(port: u16, path: &str) -> Option<Reply> {
    TcpStream::connect(("127.0.0.1", port)).ok()?;
    Some(request(port, "GET", path, &[], b""))
}

/// A raw HTTP/1.1 request to 127.0.0.1:`port` (`Connection: close`).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before it has read all of a large body.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head: {}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..i]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = i + 2;
        out.extend_from_slice(&b[start..(start + size).min(b.len())]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}
