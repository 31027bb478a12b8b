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

/// Lower-case hex of a digest, as log lines and audit records print
/// digests (here, below every module that prints one).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn hex_is_lower_case_and_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
