//! `--log-json` targets, live refusal lines and the bounds of the decision
//! log, through the real binary and its proxy (issue 12 "live denials",
//! issue 13 "decision log").
//!
//! Hermetic: every request names a `.test` host that the policy does not
//! allow, so the proxy refuses it without resolving anything.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

const POLICY: &str = r#"{"network":{"allowedDomains":["example.com"],"deniedDomains":[]},
    "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]}}"#;

fn settings(tag: &str) -> String {
    let path = scratch_home(tag).join("settings.json");
    std::fs::write(&path, POLICY).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `n` refused plain-HTTP requests to `host` (`{i}` is replaced by the index).
fn refusals(host: &str, n: usize) -> String {
    format!(
        "for i in $(seq 1 {n}); do curl -s -o /dev/null --noproxy '' -x $HTTP_PROXY http://{}/; done",
        host.replace("{i}", "$i")
    )
}

fn decisions(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn log_json_dash_and_dev_stderr_write_json_lines_to_stderr() {
    for (i, target) in ["-", "/dev/stderr"].into_iter().enumerate() {
        let tag = format!("log-stderr-{i}");
        let s = settings(&tag);
        let o = oajail(
            &tag,
            &[
                "-s",
                &s,
                "--log-json",
                target,
                "-c",
                &refusals("evil.test", 1),
            ],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{target}: {}", err(&o));
        let lines = decisions(&err(&o));
        assert_eq!(lines.len(), 1, "{target}: {}", err(&o));
        assert_eq!(lines[0]["decision"], "deny");
        assert_eq!(lines[0]["host"], "evil.test");
        // `-` is a name for stderr, never a file in the working directory.
        assert!(!scratch_home(&tag).join("-").exists());
    }
}

#[test]
fn log_json_refuses_stdout() {
    let s = settings("log-stdout");
    let o = oajail(
        "log-stdout",
        &["-s", &s, "--log-json", "/dev/stdout", "-c", "true"],
    )
    .output()
    .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(
        err(&o).contains("stdout belongs to the jailed command"),
        "{}",
        err(&o)
    );
}

/// The proxy's threads start after the command (issue 11's start-up
/// work), but what can fail on the caller's input is checked before it:
/// a log that cannot be opened refuses the run, and the command never ran.
#[test]
fn an_unopenable_log_refuses_before_the_command_runs() {
    let home = scratch_home("log-unopenable");
    let out = home.join("out");
    std::fs::create_dir_all(&out).unwrap();
    // The marker's directory is writable in the jail, so only the refusal
    // can keep the command from creating it.
    let policy = POLICY.replace(
        r#""allowWrite":[]"#,
        &format!(r#""allowWrite":["{}"]"#, out.display()),
    );
    assert_ne!(policy, POLICY);
    let s = home.join("writable.json");
    std::fs::write(&s, policy).unwrap();
    let marker = out.join("ran");
    let cmd = format!("touch {}", marker.display());
    let run = |log: &str| {
        let _ = std::fs::remove_file(&marker);
        let args = ["-s", s.to_str().unwrap(), "--log-json", log, "-c", &cmd];
        oajail("log-unopenable", &args).output().unwrap()
    };
    // With a log that opens, the same command does create the marker.
    let o = run(home.join("log.json").to_str().unwrap());
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        marker.exists(),
        "the control run wrote nothing: {}",
        err(&o)
    );
    let o = run("/nonexistent/dir/log.json");
    assert_ne!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("cannot open the decision log"),
        "{}",
        err(&o)
    );
    assert!(!marker.exists(), "the command ran: {}", err(&o));
}

#[test]
fn log_json_writes_to_a_fifo_with_a_reader() {
    let dir = scratch_home("log-fifo");
    let fifo = dir.join("decisions.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read_to_string(reader_path).unwrap());
    let s = settings("log-fifo");
    // The reader's open may lag behind ours: retry until it is there.
    let deadline = Instant::now() + Duration::from_secs(10);
    let o = loop {
        let o = oajail(
            "log-fifo",
            &[
                "-s",
                &s,
                "--log-json",
                fifo.to_str().unwrap(),
                "-c",
                &refusals("evil.test", 2),
            ],
        )
        .output()
        .unwrap();
        if o.status.success() || Instant::now() > deadline || !err(&o).contains("no reader") {
            break o;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(o.status.success(), "{}", err(&o));
    let text = reader.join().unwrap();
    let lines = decisions(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l["host"] == "evil.test"));
}

use std::process::Command;

#[test]
fn refusals_are_printed_live_with_the_fix() {
    let s = settings("live");
    let script = format!("{}; sleep 4", refusals("evil.test", 1));
    let mut child = oajail("live", &["-s", &s, "-c", &script])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let seen_after = start.elapsed();
    // The command is still sleeping: the line came while it ran.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the jail already exited: {line}"
    );
    assert!(seen_after < Duration::from_secs(3), "{seen_after:?}");
    assert!(
        line.starts_with("oajail: refused evil.test:80 (http): "),
        "{line}"
    );
    assert!(
        line.contains(r#"add "evil.test""#) && line.contains("network.allowedDomains"),
        "{line}"
    );
    child.wait().unwrap();
}

#[test]
fn repeated_refusals_are_rate_limited_live_and_coalesced_in_the_log() {
    let dir = scratch_home("coalesce");
    let log = dir.join("decisions.jsonl");
    let _ = std::fs::remove_file(&log);
    let s = settings("coalesce");
    let o = oajail(
        "coalesce",
        &[
            "-s",
            &s,
            "--log-json",
            log.to_str().unwrap(),
            "-c",
            &refusals("evil.test", 200),
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let live = err(&o)
        .lines()
        .filter(|l| l.starts_with("oajail: refused "))
        .count();
    assert_eq!(
        live,
        1,
        "one live line per destination per 30 s:\n{}",
        err(&o)
    );
    assert!(err(&o).contains("evil.test:80 (200x)"), "{}", err(&o));
    let lines = decisions(&std::fs::read_to_string(&log).unwrap());
    let written = lines.iter().filter(|l| l["event"] == "decision").count() as u64;
    let coalesced: u64 = lines
        .iter()
        .filter(|l| l["event"] == "coalesced")
        .map(|l| l["count"].as_u64().unwrap())
        .sum();
    assert!(
        written < 100,
        "{written} decision lines for 200 identical refusals"
    );
    assert_eq!(
        written + coalesced,
        200,
        "every refusal is written or counted"
    );
}

#[test]
fn the_decision_log_stops_at_its_size_cap() {
    let dir = scratch_home("log-cap");
    let log = dir.join("decisions.jsonl");
    let _ = std::fs::remove_file(&log);
    let s = settings("log-cap");
    let o = oajail(
        "log-cap",
        &[
            "-s",
            &s,
            "--log-json",
            log.to_str().unwrap(),
            "-c",
            &refusals("e{i}.test", 40),
        ],
    )
    .env("OAJAIL_LOG_JSON_MAX_BYTES", "4000")
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.len() < 4000 + 300, "{} bytes", text.len());
    let last = decisions(&text).pop().unwrap();
    assert_eq!(last["event"], "log_capped", "{text}");
    assert_eq!(
        err(&o).matches("reached its 4000-byte cap").count(),
        1,
        "{}",
        err(&o)
    );
    // Still counted for the summary.
    assert!(err(&o).contains("refused 40 connection(s)"), "{}", err(&o));
}

#[test]
fn a_bad_log_cap_is_refused() {
    let s = settings("log-cap-bad");
    let o = oajail("log-cap-bad", &["-s", &s, "-c", "true"])
        .env("OAJAIL_LOG_JSON_MAX_BYTES", "lots")
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(err(&o).contains("OAJAIL_LOG_JSON_MAX_BYTES"), "{}", err(&o));
}
