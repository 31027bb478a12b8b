//! oajail's own stderr lines: which one is a run's refusal, and which a
//! result record keeps, bounded.
//!
//! A run prints start-up warnings (one per `denyRead` entry inside a
//! writable home, say) before the lines that judge a finding: the banner
//! of rules not held in full, the guard's or the proxy's refusal. A plain
//! "first N lines" lets the warnings push those out, and a finding loses
//! its cause. So repeats are dropped, every other line is kept before any
//! warning (the first and last halves when there are too many: the banner
//! comes first, the refusal last), warnings fill what room is left, and
//! one closing note counts what was left out. For the same reason the
//! refusal a finding names ("blocked by oajail refusing to run …") is the
//! last `oajail` line that is not a warning, never the first line.

use std::collections::HashSet;

/// The most `oajail:` lines a record keeps (plus one note when some were
/// left out).
pub const MAX_LINES: usize = 40;

/// Start-up warnings and `-d` notes: never a refusal, kept in a record
/// only where room is left.
pub fn is_chatter(line: &str) -> bool {
    line.starts_with("oajail: warning") || line.starts_with("oajail: [")
}

/// oajail's refusal on `stderr`: its last own line that is not a warning
/// or a note (trimmed); `None` when it printed none.
pub fn refusal(stderr: &str) -> Option<&str> {
    (stderr.lines().rev())
        .find(|l| l.starts_with("oajail") && !is_chatter(l))
        .map(str::trim)
}

/// The `oajail:` lines of `stderr` a record keeps, in their order.
pub fn keep(stderr: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let all: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("oajail:"))
        .collect();
    let unique: Vec<(usize, &str)> = (all.iter().copied())
        .filter(|l| seen.insert(*l))
        .enumerate()
        .collect();
    let (chatter, events): (Vec<_>, Vec<_>) = unique.iter().partition(|(_, l)| is_chatter(l));
    let mut kept: Vec<(usize, &str)> = if events.len() <= MAX_LINES {
        events.clone()
    } else {
        let half = MAX_LINES / 2;
        (events[..half].iter())
            .chain(&events[events.len() - (MAX_LINES - half)..])
            .copied()
            .collect()
    };
    let room = MAX_LINES - kept.len();
    kept.extend(chatter.iter().take(room));
    kept.sort_unstable_by_key(|(i, _)| *i);
    let mut out: Vec<String> = kept.iter().map(|(_, l)| (*l).to_owned()).collect();
    let repeats = all.len() - unique.len();
    let left_events = events.len() - (kept.len() - chatter.len().min(room));
    let left_chatter = chatter.len() - chatter.len().min(room);
    if repeats + left_events + left_chatter > 0 {
        out.push(format!(
            "(left out: {left_chatter} warnings, {left_events} other oajail lines, {repeats} repeats)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_never_push_out_the_banner_or_the_refusal() {
        let mut err = String::from("oajail: NOT ENFORCED: private /tmp\n");
        for i in 0..60 {
            err.push_str(&format!(
                "oajail: warning: filesystem.denyRead: /h/.x{i} is inside the writable root /h\n"
            ));
        }
        err.push_str("probe output\n");
        err.push_str("oajail: guard: refused write to ~/.bashrc (mandatory deny)\n");
        let kept = keep(&err);
        assert_eq!(kept.len(), MAX_LINES + 1, "{kept:#?}");
        assert_eq!(kept[0], "oajail: NOT ENFORCED: private /tmp");
        assert_eq!(
            kept[MAX_LINES - 1],
            "oajail: guard: refused write to ~/.bashrc (mandatory deny)"
        );
        assert!(
            kept[1].contains(".x0 "),
            "warnings kept in order: {kept:#?}"
        );
        assert_eq!(
            kept[MAX_LINES],
            "(left out: 22 warnings, 0 other oajail lines, 0 repeats)"
        );
    }

    #[test]
    fn the_refusal_is_the_last_line_that_is_not_a_warning() {
        let err = "oajail: warning: filesystem.denyRead: a\n\
                   oajail: NOT ENFORCED: private /tmp\n\
                   oajail: cannot run: user namespaces are refused  \n\
                   oajail: warning: late\nplain\n";
        assert_eq!(
            refusal(err),
            Some("oajail: cannot run: user namespaces are refused")
        );
        assert_eq!(refusal("oajail: warning: a\noajail: [x] note\n"), None);
    }

    #[test]
    fn repeats_are_dropped_and_many_events_keep_both_ends() {
        let err = "oajail: guard: x\n".repeat(5);
        assert_eq!(
            keep(&err),
            [
                "oajail: guard: x",
                "(left out: 0 warnings, 0 other oajail lines, 4 repeats)"
            ]
        );
        let err: String = (0..100)
            .map(|i| format!("oajail: proxy refused {i}\n"))
            .collect();
        let kept = keep(&err);
        assert_eq!(kept.len(), MAX_LINES + 1);
        assert_eq!(kept[0], "oajail: proxy refused 0");
        assert_eq!(kept[MAX_LINES / 2], "oajail: proxy refused 80");
        assert_eq!(kept[MAX_LINES - 1], "oajail: proxy refused 99");
        assert!(
            kept[MAX_LINES].contains("60 other oajail lines"),
            "{kept:?}"
        );
        // Few lines: all of them, nothing noted.
        let err = "oajail: warning: a\nother\noajail: guard: b\n";
        assert_eq!(keep(err), ["oajail: warning: a", "oajail: guard: b"]);
    }
}
