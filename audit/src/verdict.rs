//! The probe's verdict: one JSON line on stdout plus a fixed exit code.
//!
//! The exit codes are part of the suite's contract (docs/security-tests.md):
//! a harness that only looks at the exit status must still never mistake an
//! escape, a crash or a missing tool for "blocked".

use serde::{Deserialize, Serialize};

/// Exit code: the attack worked (the suite fails).
pub const EXIT_SUCCEEDED: i32 = 0;
/// Exit code: the attack was stopped with an errno or signal it was expected to meet.
pub const EXIT_BLOCKED: i32 = 10;
/// Exit code: the attack failed, but not in a way the probe expected (investigate).
pub const EXIT_UNEXPECTED: i32 = 11;
/// Exit code: the attack cannot be exercised on this kernel (recorded, never green by itself).
pub const EXIT_NOT_APPLICABLE: i32 = 20;
/// Exit code: the probe was called wrongly or its own setup failed.
pub const EXIT_PROBE_ERROR: i32 = 2;

/// What happened to one attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The attack achieved its effect: an escape.
    Succeeded,
    /// Stopped with an expected errno, signal or masked content.
    Blocked,
    /// Failed in a way the probe did not expect.
    Unexpected,
    /// The kernel lacks the feature the attack needs.
    NotApplicable,
}

impl Verdict {
    /// The fixed exit code for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Succeeded => EXIT_SUCCEEDED,
            Verdict::Blocked => EXIT_BLOCKED,
            Verdict::Unexpected => EXIT_UNEXPECTED,
            Verdict::NotApplicable => EXIT_NOT_APPLICABLE,
        }
    }

    /// The verdict for an exit code, if it is one of the fixed codes.
    pub fn from_exit_code(code: i32) -> Option<Verdict> {
        match code {
            EXIT_SUCCEEDED => Some(Verdict::Succeeded),
            EXIT_BLOCKED => Some(Verdict::Blocked),
            EXIT_UNEXPECTED => Some(Verdict::Unexpected),
            EXIT_NOT_APPLICABLE => Some(Verdict::NotApplicable),
            _ => None,
        }
    }

    /// Short lower-case name used in logs and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Succeeded => "succeeded",
            Verdict::Blocked => "blocked",
            Verdict::Unexpected => "unexpected",
            Verdict::NotApplicable => "not_applicable",
        }
    }
}

/// The single JSON line the probe prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The attack id the probe was asked to run.
    pub attack: String,
    /// The verdict; must agree with the exit code.
    pub verdict: Verdict,
    /// The errno that stopped the attack, if any.
    pub errno: Option<i32>,
    /// Symbolic name of `errno` (`EPERM`, …).
    pub errno_name: Option<String>,
    /// The signal that stopped the attack (a child killed by seccomp), if any.
    pub signal: Option<i32>,
    /// One human-readable line: which step, what was seen. Never a canary.
    pub detail: String,
}

impl ProbeReport {
    /// Serialise as the one-line wire form.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            // Serialising plain strings and integers cannot fail; keep a
            // parseable fallback anyway so the harness never sees garbage.
            format!("{{\"attack\":\"{}\",\"verdict\":\"unexpected\",\"errno\":null,\"errno_name\":null,\"signal\":null,\"detail\":\"serialise failed\"}}", self.attack)
        })
    }

    /// Find and parse the probe's line in captured stdout (the last line that parses).
    pub fn find_in(stdout: &str) -> Option<ProbeReport> {
        stdout
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<ProbeReport>(line.trim()).ok())
    }
}

/// Symbolic name of an errno value (for the report; the number is kept too).
pub fn errno_name(errno: i32) -> String {
    let name = nix::errno::Errno::from_raw(errno);
    if name == nix::errno::Errno::UnknownErrno {
        format!("E#{errno}")
    } else {
        format!("{name:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_round_trip() {
        for v in [
            Verdict::Succeeded,
            Verdict::Blocked,
            Verdict::Unexpected,
            Verdict::NotApplicable,
        ] {
            assert_eq!(Verdict::from_exit_code(v.exit_code()), Some(v));
        }
        assert_eq!(Verdict::from_exit_code(1), None);
        assert_eq!(Verdict::from_exit_code(125), None);
    }

    #[test]
    fn report_line_is_found_after_noise() {
        let r = ProbeReport {
            attack: "x".into(),
            verdict: Verdict::Blocked,
            errno: Some(1),
            errno_name: Some(errno_name(1)),
            signal: None,
            detail: "open: EPERM".into(),
        };
        let out = format!("banner\n{}\n", r.to_line());
        assert_eq!(ProbeReport::find_in(&out), Some(r));
        assert_eq!(errno_name(1), "EPERM");
    }
}
