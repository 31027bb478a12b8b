//! The decision log and the exit summary.
//!
//! One JSON line per decision (`"event":"decision"`) and one per closed
//! tunnel (`"event":"close"`), written with a single `write` each to the
//! `--log-json` file (opened for append), so lines from concurrent
//! connections never interleave. Denials are also counted for the short
//! stderr summary printed when the jail exits.
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// One log line. Fields that do not apply are left out.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Record {
    /// RFC 3339 UTC time with milliseconds.
    pub time: String,
    /// `decision` or `close`.
    pub event: &'static str,
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
        Ok(())
    }
}

/// Open the decision log for appending. The path may lie in a directory a
/// jailed command could write during an earlier run, so a planted symlink is
/// never followed and a planted FIFO never blocks the proxy (attack B5).
fn open_log_file(path: &Path) -> std::io::Result<File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The log sink shared by every connection.
#[derive(Debug)]
pub(crate) struct Log {
    file: Option<Mutex<File>>,
    summary: Mutex<Summary>,
}

impl Log {
    pub(crate) fn open(path: Option<&Path>) -> std::io::Result<Self> {
        let file = match path {
            Some(p) => Some(Mutex::new(open_log_file(p)?)),
            None => None,
        };
        Ok(Self {
            file,
            summary: Mutex::new(Summary::default()),
        })
    }

    /// Write one line and count it for the summary.
    pub(crate) fn write(&self, mut rec: Record) {
        rec.time = now_rfc3339();
        if let Ok(mut s) = self.summary.lock() {
            match rec.decision {
                Some("allow") => s.allowed += 1,
                Some("deny") => {
                    let dest = match (&rec.host, rec.port) {
                        (Some(h), Some(p)) => format!("{h}:{p}"),
                        (Some(h), None) => h.clone(),
                        _ => format!("({})", rec.proto),
                    };
                    let reason = rec.message.clone().unwrap_or_else(|| rec.reason.clone());
                    // A jailed program must not grow this map without bound.
                    let dest =
                        if s.denied.len() >= MAX_DESTINATIONS && !s.denied.contains_key(&dest) {
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
                _ => {}
            }
        }
        let Some(file) = &self.file else { return };
        let Ok(mut line) = serde_json::to_vec(&rec) else {
            return;
        };
        line.push(b'\n');
        if let Ok(mut f) = file.lock() {
            // A full disk must not stop the proxy; the summary still counts.
            let _ = f.write_all(&line);
        }
    }

    pub(crate) fn summary(&self) -> Summary {
        let mut out = self.summary.lock().map(|s| s.clone()).unwrap_or_default();
        if let Some(file) = &self.file
            && let Ok(mut f) = file.lock()
        {
            let _ = f.flush();
        }
        out.denied.retain(|_, d| d.count > 0);
        out
    }
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
