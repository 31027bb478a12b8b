//! `oajail audit` output: a table, JSON, JUnit XML and SARIF 2.1.0.
//!
//! JUnit and SARIF are written by hand: both are small fixed shapes, and
//! the crates for them either pull a full XML stack or model far more of
//! SARIF than one run with rules and results; tests validate both against
//! the published schemas (tests/schemas/).

use crate::cli::{AuditFormat, FailOn};
use crate::settings::Origin;
use oajail_audit::audit::channels::Untested;
use oajail_audit::audit::jailinfo::JailInfo;
use oajail_audit::audit::{Finding, Grant, Kind, Verdict, runbook};
use oajail_audit::catalog::FAMILIES;
use serde_json::{Value, json};
use std::fmt::Write;

/// Does a finding fail the run under `fail_on`?
pub fn fails(f: &Finding, fail_on: Option<FailOn>) -> bool {
    match (f.verdict, fail_on) {
        (Verdict::Escape | Verdict::Inconclusive, _) => true,
        (Verdict::Allowed, Some(FailOn::AnyAllowed)) => true,
        (Verdict::Allowed, Some(FailOn::Allowed)) => {
            matches!(f.case.kind, Kind::SecretRead | Kind::Exfiltration)
        }
        _ => false,
    }
}

/// Everything a report is rendered from.
pub struct Report<'a> {
    /// Where the policy came from.
    pub origin: &'a Origin,
    /// The settings file's text (for line numbers), if there is a file.
    pub policy_text: Option<&'a str>,
    /// The policy's canonical hash.
    pub policy_sha256: String,
    /// Every finding, in catalogue order.
    pub findings: &'a [Finding],
    /// Allowed domains the exfiltration family sends nothing to, and why.
    pub untested: &'a [Untested],
    /// The jail the attacks ran in.
    pub jail: &'a JailInfo,
    /// `--fail-on`.
    pub fail_on: Option<FailOn>,
    /// Wall time of the attacks.
    pub elapsed_ms: u64,
}

impl Report<'_> {
    fn count(&self, v: Verdict) -> usize {
        self.findings.iter().filter(|f| f.verdict == v).count()
    }

    /// True when the run must exit non-zero.
    pub fn fails(&self) -> bool {
        self.findings.is_empty() || self.findings.iter().any(|f| fails(f, self.fail_on))
    }

    /// `N attacks: a blocked, b allowed by policy, c escapes, …`.
    pub fn summary_line(&self) -> String {
        format!(
            "{} attacks in {:.1}s: {} blocked, {} allowed by policy, {} escape(s), {} not applicable, {} inconclusive{}",
            self.findings.len(),
            self.elapsed_ms as f64 / 1000.0,
            self.count(Verdict::Blocked),
            self.count(Verdict::Allowed),
            self.count(Verdict::Escape),
            self.count(Verdict::NotApplicable),
            self.count(Verdict::Inconclusive),
            if self.fails() { " (FAIL)" } else { "" }
        )
    }

    /// 1-based line of the settings file where `g` is written (the entry,
    /// else its key, else the enclosing object's key).
    fn line_of(&self, g: &Grant) -> Option<usize> {
        let text = self.policy_text?;
        let keys: Vec<&str> = g.field.split('.').collect();
        let mut at = None;
        for key in keys.iter().rev() {
            if let Some(i) = text.find(&format!("\"{key}\"")) {
                at = Some(i);
                break;
            }
        }
        let start = at?;
        let pos = g
            .entry
            .as_ref()
            .and_then(|e| {
                let quoted = serde_json::to_string(e).unwrap_or_default();
                text[start..].find(&quoted).map(|i| start + i)
            })
            .unwrap_or(start);
        Some(text[..pos].matches('\n').count() + 1)
    }
}

fn family_name(letter: char) -> &'static str {
    if letter == runbook::EXFIL_FAMILY.0 {
        return runbook::EXFIL_FAMILY.1;
    }
    FAMILIES
        .iter()
        .find(|(l, _)| *l == letter)
        .map(|(_, n)| *n)
        .unwrap_or("other")
}

/// The finding in one line ("allowed because …", "blocked by …"); the
/// detail for findings judged before the audit worded them.
fn reason(f: &Finding) -> &str {
    if f.reason.is_empty() {
        &f.detail
    } else {
        &f.reason
    }
}

/// Render the report in `format`.
pub fn render(r: &Report<'_>, format: AuditFormat) -> String {
    match format {
        AuditFormat::Text => text(r),
        AuditFormat::Json => pretty(&json_value(r)),
        AuditFormat::Junit => junit(r),
        AuditFormat::Sarif => pretty(&sarif(r)),
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

fn text(r: &Report<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "oajail audit of {} (sha256 {})",
        r.origin, r.policy_sha256
    );
    let _ = writeln!(out, "jail: {}", r.jail.summary());
    let mut family = None;
    for f in r.findings {
        if family != Some(f.case.family) {
            family = Some(f.case.family);
            let _ = writeln!(out, "\n{} · {}", f.case.family, family_name(f.case.family));
        }
        let why = reason(f);
        let mark = if fails(f, r.fail_on) { "!" } else { " " };
        let _ = writeln!(
            out,
            "{mark} {:<17} {:<44} {why}",
            f.verdict.as_str(),
            f.case.id
        );
    }
    if !r.untested.is_empty() {
        let _ = writeln!(
            out,
            "\nallowed domains the exfiltration attacks did not target:"
        );
        for u in r.untested {
            let _ = writeln!(out, "  {}: {}", u.entry, u.why);
        }
    }
    let _ = writeln!(out, "\n{}", r.summary_line());
    out
}

fn json_value(r: &Report<'_>) -> Value {
    let findings: Vec<Value> = r
        .findings
        .iter()
        .map(|f| {
            let grants: Vec<Value> = f
                .grants
                .iter()
                .map(|g| json!({"field": g.field, "entry": g.entry, "why": g.why, "line": r.line_of(g)}))
                .collect();
            json!({
                "id": f.case.id,
                "family": f.case.family.to_string(),
                "familyName": family_name(f.case.family),
                "title": f.case.title,
                "kind": f.case.kind,
                "verdict": f.verdict,
                "fails": fails(f, r.fail_on),
                "grantedBy": grants,
                "reason": reason(f),
                "detail": f.detail,
                "elapsedMs": f.elapsed_ms,
            })
        })
        .collect();
    json!({
        "tool": "oajail audit",
        "version": env!("CARGO_PKG_VERSION"),
        "policy": r.origin.to_string(),
        "policySha256": r.policy_sha256,
        "jail": r.jail,
        "summary": {
            "attacks": r.findings.len(),
            "blocked": r.count(Verdict::Blocked),
            "allowed": r.count(Verdict::Allowed),
            "escape": r.count(Verdict::Escape),
            "notApplicable": r.count(Verdict::NotApplicable),
            "inconclusive": r.count(Verdict::Inconclusive),
            "elapsedMs": r.elapsed_ms,
            "fails": r.fails(),
        },
        "findings": findings,
        "untestedDomains": r.untested,
    })
}

fn xml(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            '\'' => "&apos;".into(),
            c => c.to_string(),
        })
        .collect()
}

fn junit(r: &Report<'_>) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let failures = r
        .findings
        .iter()
        .filter(|f| fails(f, r.fail_on) && f.verdict != Verdict::Inconclusive)
        .count();
    let _ = writeln!(
        out,
        "<testsuites name=\"oajail audit\" tests=\"{}\" failures=\"{failures}\" errors=\"{}\" time=\"{:.3}\">",
        r.findings.len(),
        r.count(Verdict::Inconclusive),
        r.elapsed_ms as f64 / 1000.0
    );
    let mut letters: Vec<char> = r.findings.iter().map(|f| f.case.family).collect();
    letters.dedup();
    for (i, letter) in letters.into_iter().enumerate() {
        let cases: Vec<&Finding> = r
            .findings
            .iter()
            .filter(|f| f.case.family == letter)
            .collect();
        let fail = cases
            .iter()
            .filter(|f| fails(f, r.fail_on) && f.verdict != Verdict::Inconclusive)
            .count();
        let errors = cases
            .iter()
            .filter(|f| f.verdict == Verdict::Inconclusive)
            .count();
        let skipped = cases
            .iter()
            .filter(|f| f.verdict == Verdict::NotApplicable)
            .count();
        let time: u64 = cases.iter().map(|f| f.elapsed_ms).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{} {}\" id=\"{i}\" package=\"oajail.audit\" hostname=\"localhost\" timestamp=\"{}\" tests=\"{}\" failures=\"{fail}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">",
            letter,
            xml(family_name(letter)),
            timestamp(),
            cases.len(),
            time as f64 / 1000.0
        );
        out.push_str("    <properties>\n");
        let _ = writeln!(
            out,
            "      <property name=\"jail\" value=\"{}\"/>",
            xml(&r.jail.summary())
        );
        let _ = writeln!(
            out,
            "      <property name=\"policy\" value=\"{}\"/>",
            xml(&r.origin.to_string())
        );
        let _ = writeln!(
            out,
            "      <property name=\"policySha256\" value=\"{}\"/>",
            r.policy_sha256
        );
        if letter == runbook::EXFIL_FAMILY.0 {
            for u in r.untested {
                let _ = writeln!(
                    out,
                    "      <property name=\"untestedDomain\" value=\"{}: {}\"/>",
                    xml(&u.entry),
                    xml(&u.why)
                );
            }
        }
        out.push_str("    </properties>\n");
        for f in cases {
            junit_case(&mut out, r, f, letter);
        }
        out.push_str("    <system-out/>\n    <system-err/>\n  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn junit_case(out: &mut String, r: &Report<'_>, f: &Finding, letter: char) {
    let _ = write!(
        out,
        "    <testcase name=\"{}: {}\" classname=\"oajail.audit.{letter}\" time=\"{:.3}\"",
        xml(&f.case.id),
        xml(&f.case.title),
        f.elapsed_ms as f64 / 1000.0
    );
    let body = match f.verdict {
        Verdict::Escape => format!(
            "<failure message=\"escape: the policy does not allow this and it worked\" type=\"escape\">{}</failure>",
            xml(&f.detail)
        ),
        Verdict::Inconclusive => format!(
            "<error message=\"inconclusive\" type=\"inconclusive\">{}</error>",
            xml(&f.detail)
        ),
        Verdict::NotApplicable => format!("<skipped message=\"{}\"/>", xml(&f.detail)),
        Verdict::Allowed if fails(f, r.fail_on) => format!(
            "<failure message=\"{}\" type=\"allowed-by-policy\">{}</failure>",
            xml(reason(f)),
            xml(&f.detail)
        ),
        Verdict::Allowed => format!("<system-out>{}</system-out>", xml(reason(f))),
        Verdict::Blocked => String::new(),
    };
    if body.is_empty() {
        out.push_str("/>\n");
    } else {
        let _ = writeln!(out, ">\n      {body}\n    </testcase>");
    }
}

/// ISO 8601 UTC, second precision, without a date crate.
fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn sarif(r: &Report<'_>) -> Value {
    let reported: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| !matches!(f.verdict, Verdict::Blocked | Verdict::NotApplicable))
        .collect();
    let rules: Vec<Value> = reported
        .iter()
        .map(|f| {
            json!({
                "id": f.case.id,
                "name": f.case.id.split(':').next().unwrap_or(&f.case.id),
                "shortDescription": {"text": f.case.title},
                "fullDescription": {"text": format!("{} ({}): {}", family_name(f.case.family), f.case.kind.as_str(), f.case.title)},
                "properties": {"tags": ["security", f.case.kind.as_str()]},
            })
        })
        .collect();
    let uri = match r.origin {
        Origin::File(p) => Some(p.display().to_string()),
        Origin::Builtin => None,
    };
    let results: Vec<Value> = reported
        .iter()
        .enumerate()
        .map(|(i, f)| sarif_result(r, f, i, uri.as_deref()))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "oajail audit",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
            "properties": {"untestedDomains": r.untested, "jail": r.jail},
        }],
    })
}

fn sarif_result(r: &Report<'_>, f: &Finding, index: usize, uri: Option<&str>) -> Value {
    let level = if fails(f, r.fail_on) {
        "error"
    } else {
        "warning"
    };
    let message = match f.verdict {
        Verdict::Escape => format!("{}: {} ({})", f.case.title, reason(f), f.detail),
        _ => format!("{}: {}", f.case.title, reason(f)),
    };
    let line = f.grants.iter().find_map(|g| r.line_of(g)).unwrap_or(1);
    let mut result = json!({
        "ruleId": f.case.id,
        "ruleIndex": index,
        "level": level,
        "message": {"text": message},
    });
    if let Some(uri) = uri {
        result["locations"] = json!([{
            "physicalLocation": {
                "artifactLocation": {"uri": uri},
                "region": {"startLine": line},
            }
        }]);
    }
    result
}
