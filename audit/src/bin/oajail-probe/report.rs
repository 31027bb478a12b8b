//! Building the probe's one-line verdict from syscall results.
//!
//! Every attack ends in exactly one of these constructors, so the mapping
//! "errno seen → verdict" is written once, next to the attack, as the list of
//! errnos that count as "blocked as expected". Anything else is `unexpected`:
//! a failure we did not predict must never be silently read as a defence.

use nix::errno::Errno;
use oajail_audit::verdict::{ProbeReport, Verdict, errno_name};

/// The marker every canary secret starts with; the probe never prints it.
pub const CANARY_MARKER: &[u8] = b"OAJ-CANARY-";

/// Errnos a read of a protected file may legitimately fail with.
pub const READ_DENIED: &[Errno] = &[
    Errno::EACCES,
    Errno::EPERM,
    Errno::ENOENT,
    Errno::ENOTDIR,
    Errno::ESRCH,
];

/// Errnos a write outside the writable roots may legitimately fail with.
pub const WRITE_DENIED: &[Errno] = &[
    Errno::EACCES,
    Errno::EPERM,
    Errno::EROFS,
    Errno::ENOENT,
    Errno::ENOTDIR,
    Errno::EBUSY,
    Errno::EXDEV,
    Errno::ETXTBSY,
    Errno::EISDIR,
    Errno::ENOTEMPTY,
];

/// Errnos a filtered syscall returns (seccomp `ERRNO` actions, Landlock).
pub const FILTERED: &[Errno] = &[Errno::EPERM, Errno::ENOSYS, Errno::EACCES];

/// A finished probe run.
pub struct Outcome(pub ProbeReport);

impl Outcome {
    fn make(attack: &str, verdict: Verdict, errno: Option<Errno>, detail: String) -> Outcome {
        Outcome(ProbeReport {
            attack: attack.to_owned(),
            verdict,
            errno: errno.map(|e| e as i32),
            errno_name: errno.map(|e| errno_name(e as i32)),
            signal: None,
            detail,
        })
    }

    /// The attack worked.
    pub fn succeeded(attack: &str, detail: impl Into<String>) -> Outcome {
        Outcome::make(attack, Verdict::Succeeded, None, detail.into())
    }

    /// The attack was stopped without an errno (masked content, nothing visible).
    pub fn blocked_plain(attack: &str, detail: impl Into<String>) -> Outcome {
        Outcome::make(attack, Verdict::Blocked, None, detail.into())
    }

    /// The kernel cannot run this attack at all.
    pub fn not_applicable(attack: &str, detail: impl Into<String>) -> Outcome {
        Outcome::make(attack, Verdict::NotApplicable, None, detail.into())
    }

    /// The probe's own setup failed; never read as blocked.
    pub fn unexpected(attack: &str, errno: Option<Errno>, detail: impl Into<String>) -> Outcome {
        Outcome::make(attack, Verdict::Unexpected, errno, detail.into())
    }

    /// An attack step failed with `errno`: blocked if it is in `expected`.
    pub fn failed(attack: &str, step: &str, errno: Errno, expected: &[Errno]) -> Outcome {
        let verdict = if expected.contains(&errno) {
            Verdict::Blocked
        } else {
            Verdict::Unexpected
        };
        Outcome::make(
            attack,
            verdict,
            Some(errno),
            format!("{step}: {}", errno_name(errno as i32)),
        )
    }

    /// A child running the attack was killed by `signal` (seccomp KILL gives SIGSYS).
    pub fn killed(attack: &str, signal: i32) -> Outcome {
        // SIGSYS: seccomp kill; SIGKILL: OOM or limit; SIGXFSZ: RLIMIT_FSIZE.
        let verdict = if [libc::SIGSYS, libc::SIGKILL, libc::SIGXFSZ].contains(&signal) {
            Verdict::Blocked
        } else {
            Verdict::Unexpected
        };
        let mut out = Outcome::make(
            attack,
            verdict,
            None,
            format!("attack child killed by signal {signal}"),
        );
        out.0.signal = Some(signal);
        out
    }

    /// Print the line and return the fixed exit code.
    pub fn emit(self) -> i32 {
        println!("{}", self.0.to_line());
        self.0.verdict.exit_code()
    }
}

/// Map an `std::io::Error` to an errno (EIO when it carries none).
pub fn io_errno(err: &std::io::Error) -> Errno {
    Errno::from_raw(err.raw_os_error().unwrap_or(libc::EIO))
}

/// True when `bytes` contain a canary.
pub fn has_canary(bytes: &[u8]) -> bool {
    bytes
        .windows(CANARY_MARKER.len())
        .any(|w| w == CANARY_MARKER)
}

/// Try-syscall classification (bwrap's try-syscall technique): the call was
/// made with arguments that make an unfiltered kernel fail harmlessly
/// (`EBADF`, `EFAULT`, `EINVAL`); such a result, or success, means the call
/// reached the kernel, i.e. the filter did not stop it.
pub fn try_syscall<T>(attack: &str, name: &str, res: Result<T, Errno>) -> Outcome {
    match res {
        Ok(_) => Outcome::succeeded(attack, format!("{name}: call succeeded (not filtered)")),
        Err(e) if FILTERED.contains(&e) => Outcome::failed(attack, name, e, FILTERED),
        Err(e @ (Errno::EBADF | Errno::EFAULT | Errno::EINVAL | Errno::E2BIG)) => {
            Outcome::succeeded(
                attack,
                format!(
                    "{name}: reached the kernel ({}), not filtered",
                    errno_name(e as i32)
                ),
            )
        }
        Err(e) => Outcome::failed(attack, name, e, &[]),
    }
}
