//! Asking before a refusal (`--ask`, `"oajail": {"ask": true}`,
//! `--decider CMD`): a host the policy refuses, and an allow entry would
//! admit, is put to the user at the caller's terminal (through the pty
//! relay: `oajail_jail::prompt`, never readable or answerable by the jailed
//! command) or to a decider program. The answers: allow once, allow for
//! this run, add the entry to the settings file (and allow for the run),
//! or deny. Anything else (no answer within [`LIMIT`], Ctrl-C, a decider
//! that fails) denies.
//!
//! A decider is run as `sh -c CMD` outside the jail, once per question:
//! one JSON request on its stdin, one answer on its stdout
//! (docs/enforcement.md, "Asking").

use anyhow::{Context, anyhow};
use oajail_jail::events::{Answer, Stream, Verdict};
use oajail_jail::prompt::Prompter;
use oajail_proxy::Question;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a question waits for its answer.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Refuse the asked call as the policy says.
pub fn deny(stream: &Stream, id: u64) {
    let _ = stream.answer(
        &Answer {
            id,
            verdict: Verdict::Deny,
        },
        None,
    );
}

/// An answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// This one connection or call.
    Once,
    /// Every one like it until the run ends.
    Run,
    /// Add the entry to the settings file, and for this run.
    Add,
    /// Refuse it.
    Deny,
}

/// Who answers.
enum Who {
    /// The user, at the caller's terminal (set once the relay runs).
    Terminal(OnceLock<Prompter>),
    /// `sh -c CMD`.
    Decider(String),
}

/// The run's asking.
pub struct Asking {
    who: Who,
    /// What "for this run" allowed (`host:port`).
    run: Mutex<BTreeSet<String>>,
    /// The settings file "add" writes, when the run has one.
    settings: Option<PathBuf>,
    /// The command, for the decider's request.
    argv: Vec<String>,
}

impl Asking {
    /// Ask at the terminal.
    pub fn terminal(settings: Option<PathBuf>, argv: Vec<String>) -> Arc<Asking> {
        Self::new(Who::Terminal(OnceLock::new()), settings, argv)
    }

    /// Ask `sh -c CMD`.
    pub fn decider(cmd: String, settings: Option<PathBuf>, argv: Vec<String>) -> Arc<Asking> {
        Self::new(Who::Decider(cmd), settings, argv)
    }

    fn new(who: Who, settings: Option<PathBuf>, argv: Vec<String>) -> Arc<Asking> {
        Arc::new(Asking {
            who,
            run: Mutex::default(),
            settings,
            argv,
        })
    }

    /// The relay runs: questions can go to the terminal.
    pub fn attach(&self, prompter: Option<Prompter>) {
        if let (Who::Terminal(slot), Some(p)) = (&self.who, prompter) {
            let _ = slot.set(p);
        }
    }

    /// The proxy's question: true admits the destination.
    pub fn host(&self, q: &Question) -> bool {
        let entry = oajail_policy::learn::host_entry(&q.host, q.port, "not_allowed")
            .unwrap_or_else(|_| format!("{}:{}", q.host, q.port));
        if self.lock_run().contains(&entry) {
            return true;
        }
        let choice = match &self.who {
            Who::Terminal(slot) => match slot.get() {
                Some(p) => self.at_terminal(p, &entry, &q.message),
                // Not relayed (yet): no one to ask.
                None => Choice::Deny,
            },
            Who::Decider(cmd) => {
                let request = json!({
                    "version": 1,
                    "kind": "network",
                    "host": q.host,
                    "port": q.port,
                    "entry": entry,
                    "reason": q.message,
                    "command": self.argv,
                    "settings": self.settings,
                });
                decide(cmd, &request)
            }
        };
        self.apply(choice, "network.allowedDomains", &entry)
    }

    fn at_terminal(&self, p: &Prompter, entry: &str, why: &str) -> Choice {
        let add = match &self.settings {
            Some(path) => format!(", [a]dd to {}", path.display()),
            None => String::new(),
        };
        let keys = if self.settings.is_some() {
            "orad"
        } else {
            "ord"
        };
        let question = format!(
            "oajail: the policy refuses {entry} ({why}).\r\noajail: allow [o]nce, for this [r]un{add}, or [d]eny? "
        );
        match p.ask(&question, keys, LIMIT) {
            Some('o') => Choice::Once,
            Some('r') => Choice::Run,
            Some('a') => Choice::Add,
            _ => Choice::Deny,
        }
    }

    /// Carry out `choice` for `entry` of `field`; true when allowed.
    fn apply(&self, choice: Choice, field: &str, entry: &str) -> bool {
        match choice {
            Choice::Deny => false,
            Choice::Once => true,
            Choice::Run => {
                self.lock_run().insert(entry.to_owned());
                true
            }
            Choice::Add => {
                self.lock_run().insert(entry.to_owned());
                match &self.settings {
                    Some(path) => match add_to_settings(path, field, entry) {
                        Ok(()) => {
                            eprintln!("oajail: added \"{entry}\" to {field} in {}", path.display())
                        }
                        Err(e) => eprintln!("oajail: ask: {e:#} (allowed for this run only)"),
                    },
                    None => eprintln!(
                        "oajail: ask: this run has no settings file; \"{entry}\" is allowed for this run only"
                    ),
                }
                true
            }
        }
    }

    fn lock_run(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Add `entry` to `field` of the settings file at `path`, atomically (a
/// new file renamed over it), only if the result still loads.
fn add_to_settings(path: &std::path::Path, field: &str, entry: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let base: Value = serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let add = oajail_policy::learn::Addition {
        field: field.to_owned(),
        value: entry.to_owned(),
        reasons: Vec::new(),
    };
    let (settings, _) = oajail_policy::learn::merge(&base, &[add]);
    let body = serde_json::to_string_pretty(&settings)? + "\n";
    oajail_policy::Policy::from_settings_json(&body, &path.display().to_string())
        .map_err(|e| anyhow!("the new settings would not load: {e}"))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or_else(|| std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.oajail-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("{}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = file.set_permissions(meta.permissions());
    }
    let written = file
        .write_all(body.as_bytes())
        .and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("{}", path.display()));
    }
    Ok(())
}

/// Run the decider with `request`; its first line decides.
fn decide(cmd: &str, request: &Value) -> Choice {
    match run_decider(cmd, request) {
        Ok(choice) => choice,
        Err(e) => {
            eprintln!("oajail: decider: {e:#}; refused");
            Choice::Deny
        }
    }
}

fn run_decider(cmd: &str, request: &Value) -> anyhow::Result<Choice> {
    let mut child = Command::new("/bin/sh")
        .args(["-c", cmd])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start it")?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        // A decider that does not read its request still answers.
        let _ = stdin.write_all(&line);
    }
    let mut stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    let started = Instant::now();
    let out = rx.recv_timeout(LIMIT);
    let status = match out {
        Ok(_) => child.wait().ok(),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    let out = out.map_err(|_| anyhow!("no answer within {}s", started.elapsed().as_secs()))?;
    if !status.is_some_and(|s| s.success()) {
        return Err(anyhow!("it failed ({status:?})"));
    }
    parse_answer(out.lines().next().unwrap_or(""))
}

/// `{"decision": "allow"}` or a bare word: `allow` (once), `allow_run`,
/// `add`, `deny`.
fn parse_answer(line: &str) -> anyhow::Result<Choice> {
    let line = line.trim();
    let word = match serde_json::from_str::<Value>(line) {
        Ok(v) => v
            .get("decision")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("answer without \"decision\": {line}"))?,
        Err(_) => line.to_owned(),
    };
    match word.as_str() {
        "allow" | "allow_once" => Ok(Choice::Once),
        "allow_run" => Ok(Choice::Run),
        "add" => Ok(Choice::Add),
        "deny" => Ok(Choice::Deny),
        other => Err(anyhow!("unknown decision {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_words_or_json() {
        assert_eq!(parse_answer("allow").unwrap(), Choice::Once);
        assert_eq!(
            parse_answer(r#"{"decision":"allow_run"}"#).unwrap(),
            Choice::Run
        );
        assert_eq!(parse_answer(" deny \n").unwrap(), Choice::Deny);
        assert_eq!(parse_answer(r#"{"decision":"add"}"#).unwrap(), Choice::Add);
        assert!(parse_answer("yes").is_err());
        assert!(parse_answer(r#"{"allow":true}"#).is_err());
    }
}
