//! Which of the jail's layers stopped an attack, read from the run.
//!
//! The evidence, most specific first: oajail's own refusal lines on the
//! command's stderr (the write guard and the proxy name themselves), the
//! probe's account of a proxy answer, then the errno or signal the probe
//! met, read as the layer that returns it in this jail: Landlock answers
//! `EACCES` (and `EXDEV` for a move across its rules), the seccomp filter
//! `EPERM`, `ENOSYS` or `SIGSYS`, the mount namespace `ENOENT` for what it
//! hides and `EROFS` for what it mounts read-only, the pid namespace
//! `ESRCH`, the network namespace (where only the proxy is reachable)
//! `ENETUNREACH`, `EHOSTUNREACH` and `ECONNREFUSED`, the limits `ENOMEM`,
//! `EFBIG` and `ENOSPC`. The errno is always shown beside the layer, so a
//! reader can check the attribution.

use super::{Case, Refusal};
use crate::lab::Run;
use std::path::Path;

/// "the write guard (…)", "Landlock (EACCES on open)": the layer that
/// stopped `case` in `run`, with the evidence; paths of the lab in
/// `lab_dir` are shown as the policy writes them (`~`, `.`).
pub fn blocked_by(case: &Case, run: &Run, lab_dir: &Path) -> String {
    let local = |line: &str| short(&relative(line, lab_dir));
    if let Some(line) = oajail_line(run, "oajail: guard: ") {
        return format!("the write guard ({})", local(&line));
    }
    if let Some(line) = oajail_line(run, "oajail: proxy refused ") {
        return format!("the proxy ({})", local(&line));
    }
    if case.stage.daemon {
        return "the pid namespace (its pid 1 ends every process left when the command exits)"
            .into();
    }
    let Some(report) = &run.report else {
        return match case.stage.refusal {
            Refusal::ProvesNothing => "nothing the run shows".into(),
            _ => {
                let line = super::lines::refusal(&run.stderr).unwrap_or_default();
                format!("oajail refusing to run the command ({})", local(line))
            }
        };
    };
    let detail = local(&report.detail);
    if let Some(signal) = report.signal.or(run.lab.signal) {
        return match signal {
            31 => format!("the seccomp filter (SIGSYS on {detail})"),
            _ => format!("signal {signal} ({detail})"),
        };
    }
    match report.errno_name.as_deref() {
        Some(errno) => by_errno(errno, &detail),
        None => by_detail(&detail),
    }
}

/// The first line of oajail's stderr starting with `prefix`.
fn oajail_line(run: &Run, prefix: &str) -> Option<String> {
    let line = run.stderr.lines().find(|l| l.starts_with(prefix))?;
    Some(line.trim().to_owned())
}

/// `line` with the lab's home and workspace written as `~` and `.`.
fn relative(line: &str, lab_dir: &Path) -> String {
    let lab = lab_dir.display().to_string();
    line.replace(&format!("{lab}/home"), "~")
        .replace(&format!("{lab}/ws"), ".")
}

fn short(s: &str) -> String {
    const MAX: usize = 120;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

fn by_errno(errno: &str, detail: &str) -> String {
    let layer = match errno {
        "EACCES" | "EXDEV" => "Landlock",
        "EPERM" | "ENOSYS" | "EAFNOSUPPORT" | "EPROTONOSUPPORT" => "the seccomp filter",
        "ENOENT" | "ENOTDIR" => "the mount namespace, which hides the path",
        "EROFS" | "EBUSY" => "the mount namespace, which mounts it read-only",
        "ESRCH" => "the pid namespace",
        "ENETUNREACH" | "EHOSTUNREACH" | "ECONNREFUSED" | "ETIMEDOUT" => {
            "the network namespace, where only the proxy is reachable"
        }
        "ENOMEM" | "EAGAIN" | "EFBIG" | "ENOSPC" | "EDQUOT" | "EMFILE" => "the limits",
        _ => "an error the audit does not attribute",
    };
    // The probe's detail often ends with the errno it names.
    let step = detail
        .strip_suffix(errno)
        .map_or(detail, |s| s.trim_end_matches([':', ' ']));
    format!("{layer} ({errno} on {step})")
}

fn by_detail(detail: &str) -> String {
    let lower = detail.to_ascii_lowercase();
    let layer = if lower.starts_with("proxy answered") || lower.starts_with("socks") {
        "the proxy"
    } else if lower.contains("tunnel closed") {
        "the proxy, which closed the tunnel"
    } else if lower.contains("masked") || lower.contains("sentinel") {
        "the mount namespace, which masks the file"
    } else if lower.contains("no secret was readable") {
        "the read rules: nothing was readable, so nothing was sent"
    } else if lower.contains("resolution failed") || lower.contains("resolver returned") {
        "the network namespace, where only the proxy resolves names"
    } else {
        "the jail"
    };
    format!("{layer} ({detail})")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::audit::{Kind, Stage, Target};
    use crate::labspec::LabResult;
    use crate::verdict::{ProbeReport, Verdict};

    fn case() -> Case {
        Case {
            id: "A2".into(),
            family: 'A',
            title: "t".into(),
            kind: Kind::SecretRead,
            target: Target::Never,
            probe: vec![],
            stage: Stage::default(),
        }
    }

    fn run(errno: Option<&str>, detail: &str, stderr: &str) -> Run {
        Run {
            argv: vec![],
            lab: LabResult::default(),
            stdout: String::new(),
            stderr: stderr.into(),
            events: vec![],
            report: Some(ProbeReport {
                attack: "a".into(),
                verdict: Verdict::Blocked,
                errno: None,
                errno_name: errno.map(str::to_owned),
                signal: None,
                detail: detail.into(),
            }),
        }
    }

    #[test]
    fn names_the_layer_with_its_evidence() {
        let c = case();
        let lab = Path::new("/var/tmp/lab");
        let guard = run(
            Some("EACCES"),
            "open",
            "oajail: guard: denied creating /var/tmp/lab/ws/.git/hooks/x (a git directory)\n",
        );
        assert_eq!(
            blocked_by(&c, &guard, lab),
            "the write guard (oajail: guard: denied creating ./.git/hooks/x (a git directory))"
        );
        assert_eq!(
            blocked_by(&c, &run(Some("EACCES"), "open: EACCES", ""), lab),
            "Landlock (EACCES on open)"
        );
        assert_eq!(
            blocked_by(
                &c,
                &run(Some("ENOENT"), "open /var/tmp/lab/home/.ssh/id_rsa", ""),
                lab
            ),
            "the mount namespace, which hides the path (ENOENT on open ~/.ssh/id_rsa)"
        );
        assert_eq!(
            blocked_by(&c, &run(None, "proxy answered: 403", ""), lab),
            "the proxy (proxy answered: 403)"
        );
        assert_eq!(
            blocked_by(&c, &run(Some("EWEIRD"), "x", ""), lab),
            "an error the audit does not attribute (EWEIRD on x)"
        );
    }

    #[test]
    fn a_refusal_to_run_is_named_by_its_own_line_not_the_warnings_before_it() {
        let mut c = case();
        c.stage.refusal = crate::audit::Refusal::Blocks;
        let lab = Path::new("/var/tmp/lab");
        let mut stderr = String::new();
        for i in 0..50 {
            stderr.push_str(&format!(
                "oajail: warning: filesystem.denyRead: /var/tmp/lab/home/.s{i} is inside the writable root\n"
            ));
        }
        stderr.push_str("oajail: refusing to run: landlock is not available\n");
        let mut refused = run(None, "", &stderr);
        refused.report = None;
        assert_eq!(
            blocked_by(&c, &refused, lab),
            "oajail refusing to run the command (oajail: refusing to run: landlock is not available)"
        );
    }
}
