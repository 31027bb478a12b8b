//! Logging to stderr, one line per event.
//!
//! stdout belongs to the MCP protocol, so nothing in this crate writes there
//! except the transport. Lines are written with a single `write_all` on a
//! locked stderr so concurrent lines never interleave.

use std::io::Write;

/// Writes one plain log line to stderr: `openagenda-mcp: <level>: <text>`.
pub fn line(level: &str, text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("openagenda-mcp: {level}: {text}\n").as_bytes());
}

/// Writes one JSON object on its own line to stderr (audit records).
pub fn json(value: &serde_json::Value) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("{value}\n").as_bytes());
}

/// Writes a multi-line banner to stderr.
pub fn banner(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}
