//! The decision log, the live refusal lines and the exit summary.
//!
//! One JSON line per decision (`"event":"decision"`) and one per closed
//! tunnel (`"event":"close"`), each written whole by the log's writer
//! thread ([`crate::log_sink`]) to the `--log-json` target, so lines from
//! concurrent connections never interleave. Refusals go through a
//! [`Gate`]: up to 5 identical ones (same destination and reason) per
//! second and 50 in all are written; the rest are counted and the next line
//! for that destination is preceded by a `"event":"coalesced"` line with
//! the count (the remaining counts are written at exit). The log stops at a
//! size cap ([`crate::Limits::log_max_bytes`]).
//!
//! Each refused destination is also printed on stderr as it happens, with
//! the fix the policy suggests (`add "x.y" to network.allowedDomains`): a
//! long-running command such as an MCP server, whose client logs its
//! stderr, shows its refusals while it runs, not only at exit. These lines
//! have their own gate: one per destination per 30 s (then with the count
//! of repeats), 10 in a burst and 2 per second in all. Denials are also
//! counted for the summary printed when the jail exits.
use crate::log_gate::{Gate, Rate};
use crate::log_sink::Sink;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Refusal lines in the file: per destination and reason.
const FILE_PER_KEY: Rate = Rate {
    burst: 5.0,
    per_second: 5.0,
};
/// Refusal lines in the file: all destinations together.
const FILE_OVERALL: Rate = Rate {
    burst: 200.0,
    per_second: 50.0,
};
/// Live stderr lines: one per destination per 30 s.
const LIVE_PER_KEY: Rate = Rate {
    burst: 1.0,
    per_second: 1.0 / 30.0,
};
/// Live stderr lines: all destinations together.
const LIVE_OVERALL: Rate = Rate {
    burst: 10.0,
    per_second: 2.0,
};

/// One log line. Fields that do not apply are left out.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Record {
    /// RFC 3339 UTC time with milliseconds.
    pub time: String,
    /// `decision` or `close`.
    pub event: &'static str,
    /// Always `network` (the kind in oajail's one event schema, which the
    /// jail's filesystem refusals share: docs/enforcement.md).
    pub kind: &'static str,
    /// Connection number (ties a tunnel's close line to its decision).
    pub conn: u64,
    /// The jailed client's address (inside the jail's network namespace).
    pub client: String,
    /// `http`, `connect` or `socks5`.
    pub proto: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The `Host` header the client sent, when it differed (plain HTTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_host_header: Option<String>,
    /// The address dialed (the one that was checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// `allow`, `deny` or `error` (decision lines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// Machine-readable reason (`not_allowed`, `sni_mismatch`, `idle`, …).
    pub reason: String,
    /// Human-readable explanation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The allow entry that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// SNI seen in the ClientHello.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// Bytes from the client to the upstream (close lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_up: Option<u64>,
    /// Bytes from the upstream to the client (close lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_down: Option<u64>,
    /// Milliseconds since the connection was accepted.
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Denial {
    count: u64,
    /// Distinct reasons, at most [`MAX_REASONS`] kept.
    reasons: Vec<String>,
}

const MAX_REASONS: usize = 3;
/// Distinct destinations kept for the summary; the rest are counted together.
const MAX_DESTINATIONS: usize = 1000;

/// The denials seen during a run, for the stderr summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    denied: BTreeMap<String, Denial>,
    /// Decision lines written with `allow`.
    pub allowed: u64,
    /// Log lines dropped because the log writer fell behind.
    pub log_dropped: u64,
    /// Live refusal lines not printed (rate limit); the summary lists them.
    pub live_suppressed: u64,
}

impl Summary {
    /// Number of refused connections or requests.
    pub fn denied_total(&self) -> u64 {
        self.denied.values().map(|d| d.count).sum()
    }

    /// The refused destinations (`host:port`), sorted.
    pub fn denied_destinations(&self) -> Vec<&str> {
        self.denied.keys().map(String::as_str).collect()
    }
}

impl fmt::Display for Summary {
    /// Nothing when nothing was refused; otherwise one line per destination
    /// and its distinct reasons (the first three).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.denied.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "oajail: the proxy refused {} connection(s):",
            self.denied_total()
        )?;
        for (dest, d) in &self.denied {
            writeln!(f, "  {dest} ({}x): {}", d.count, d.reasons.join("; "))?;
        }
        if self.log_dropped > 0 {
            writeln!(
                f,
                "oajail: {} decision log line(s) were dropped (the log writer fell behind)",
                self.log_dropped
            )?;
        }
        Ok(())
    }
}

/// The log sink shared by every connection.
#[derive(Debug)]
pub(crate) struct Log {
    sink: Option<Sink>,
    /// Made at the first live line: most runs refuse nothing, and its
    /// writer thread would only lengthen every start. `None` when that
    /// thread could not start (the live lines are then lost; the summary
    /// at exit still counts them).
    stderr: OnceLock<Option<Sink>>,
    summary: Mutex<Summary>,
    file_gate: Mutex<Gate>,
    live_gate: Mutex<Gate>,
    /// Told of every refusal (`StartOptions::observer`).
    observer: Watcher,
}

/// The observer, behind a `Debug` that shows only whether there is one.
struct Watcher(Option<crate::Observer>);

impl fmt::Debug for Watcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Watcher({})", self.0.is_some())
    }
}

/// A coalesced-refusals line: `count` refusals like `key` were not written.
#[derive(Serialize)]
struct Coalesced<'a> {
    time: String,
    event: &'static str,
    /// `host:port reason`, or empty for refusals beyond the tracked keys.
    key: &'a str,
    count: u64,
}

impl Log {
    /// Open the log target (`None`: summary and live lines only).
    pub(crate) fn open(
        path: Option<&Path>,
        max_bytes: u64,
        observer: Option<crate::Observer>,
    ) -> std::io::Result<Self> {
        let sink = match path {
            Some(p) => Some(Sink::open(p, max_bytes)?),
            None => None,
        };
        let now = Instant::now();
        Ok(Self {
            sink,
            stderr: OnceLock::new(),
            summary: Mutex::new(Summary::default()),
            file_gate: Mutex::new(Gate::new(FILE_PER_KEY, FILE_OVERALL, now)),
            live_gate: Mutex::new(Gate::new(LIVE_PER_KEY, LIVE_OVERALL, now)),
            observer: Watcher(observer),
        })
    }

    /// Wait (bounded) until the lines sent so far are written.
    pub(crate) fn flush(&self) {
        if let Some(sink) = &self.sink {
            sink.flush();
        }
    }

    /// A line of another kind (the jail's refusals) into the same log,
    /// gated like the proxy's refusals under `key`; `time` is set here.
    pub(crate) fn write_event(&self, key: &str, mut value: serde_json::Value) {
        let Some(sink) = &self.sink else { return };
        let verdict = (self.file_gate.lock().ok()).and_then(|mut g| g.check(key, Instant::now()));
        match verdict {
            None => return,
            Some(0) => {}
            Some(n) => send_coalesced(sink, key, n),
        }
        if let Some(map) = value.as_object_mut() {
            map.insert("time".into(), now_rfc3339().into());
        }
        if let Ok(mut line) = serde_json::to_vec(&value) {
            line.push(b'\n');
            sink.send(line);
        }
    }

    /// Write one line (gated when it is a refusal), print the live line of
    /// a denial, and count it for the summary.
    pub(crate) fn write(&self, mut rec: Record) {
        rec.time = now_rfc3339();
        rec.kind = "network";
        let refusal = matches!(rec.decision, Some("deny" | "error"));
        let key = format!("{} {}", destination(&rec), rec.reason);
        if rec.decision == Some("deny") {
            self.count_denial(&rec);
            self.live(&rec, &key);
            if let Some(observe) = &self.observer.0 {
                observe(&crate::Refused {
                    host: rec.host.as_deref(),
                    port: rec.port,
                    proto: rec.proto,
                    reason: &rec.reason,
                    message: rec.message.as_deref(),
                });
            }
        } else if rec.decision == Some("allow")
            && let Ok(mut s) = self.summary.lock()
        {
            s.allowed += 1;
        }
        let Some(sink) = &self.sink else { return };
        if refusal {
            let verdict = self
                .file_gate
                .lock()
                .ok()
                .and_then(|mut g| g.check(&key, Instant::now()));
            match verdict {
                None => return,
                Some(0) => {}
                Some(n) => send_coalesced(sink, &key, n),
            }
        }
        if let Ok(mut line) = serde_json::to_vec(&rec) {
            line.push(b'\n');
            sink.send(line);
        }
    }

    fn count_denial(&self, rec: &Record) {
        let Ok(mut s) = self.summary.lock() else {
            return;
        };
        let reason = rec.message.clone().unwrap_or_else(|| rec.reason.clone());
        let dest = destination(rec);
        // A jailed program must not grow this map without bound.
        let dest = if s.denied.len() >= MAX_DESTINATIONS && !s.denied.contains_key(&dest) {
            "(other destinations)".to_owned()
        } else {
            dest
        };
        let entry = s.denied.entry(dest).or_insert(Denial {
            count: 0,
            reasons: Vec::new(),
        });
        entry.count += 1;
        if entry.reasons.len() < MAX_REASONS && !entry.reasons.contains(&reason) {
            entry.reasons.push(reason);
        }
    }

    /// The live stderr line of a denial, when its gate lets it through.
    fn live(&self, rec: &Record, key: &str) {
        let Some(repeats) = self
            .live_gate
            .lock()
            .ok()
            .and_then(|mut g| g.check(key, Instant::now()))
        else {
            return;
        };
        let mut line = live_line(rec, repeats).into_bytes();
        line.push(b'\n');
        if let Some(stderr) = self.stderr.get_or_init(|| Sink::stderr().ok()) {
            stderr.send(line);
        }
    }

    pub(crate) fn summary(&self) -> Summary {
        let mut out = self.summary.lock().map(|s| s.clone()).unwrap_or_default();
        if let Some(sink) = &self.sink {
            let left = self
                .file_gate
                .lock()
                .map(|mut g| g.drain())
                .unwrap_or_default();
            for (key, n) in left {
                send_coalesced(sink, &key, n);
            }
            sink.flush();
            out.log_dropped = sink.dropped();
        }
        if let Some(Some(stderr)) = self.stderr.get() {
            stderr.flush();
        }
        out.live_suppressed = self
            .live_gate
            .lock()
            .map(|mut g| g.drain().iter().map(|(_, n)| n).sum())
            .unwrap_or_default();
        out.denied.retain(|_, d| d.count > 0);
        out
    }
}

fn send_coalesced(sink: &Sink, key: &str, count: u64) {
    let line = Coalesced {
        time: now_rfc3339(),
        event: "coalesced",
        key,
        count,
    };
    if let Ok(mut bytes) = serde_json::to_vec(&line) {
        bytes.push(b'\n');
        sink.send(bytes);
    }
}

/// `host:port` of a record (or the protocol when the request named none).
fn destination(rec: &Record) -> String {
    match (&rec.host, rec.port) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.clone(),
        _ => format!("({})", rec.proto),
    }
}

/// `oajail: refused evil.test:443 (connect): evil.test:443 is not on the
/// allow list; add "evil.test" … to network.allowedDomains to allow it`.
fn live_line(rec: &Record, repeats: u64) -> String {
    let why = rec.message.as_deref().unwrap_or(rec.reason.as_str());
    let more = if repeats > 0 {
        format!(" [{repeats} more since the last report]")
    } else {
        String::new()
    };
    format!(
        "oajail: refused {} ({}): {why}{more}",
        destination(rec),
        rec.proto
    )
}

/// One line of oajail's on stderr, in one write: `eprintln!` writes a
/// line in pieces, and a line cut between two writes can straddle the end
/// of the terminal relay, which then shows its first piece as a line of
/// its own (oajail-jail's `say`, the same rule for the jail's lines).
pub(crate) fn say(line: fmt::Arguments<'_>) {
    use std::io::Write;
    let mut text = line.to_string();
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Client address text for the log.
pub(crate) fn client_text(addr: SocketAddr) -> String {
    addr.to_string()
}

fn now_rfc3339() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's well-known algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_413), (2025, 11, 21));
    }
}
