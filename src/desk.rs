//! What the user sees of refusals during a run: one line per refusal as it
//! happens, naming what was refused, the rule, and the settings entry that
//! would allow it (or why none can); the decision log's line for it; the
//! count per kind at exit. `oajail learn` reads the same record.
//!
//! Two sources: pid 1's refusals (writes the mounts, Landlock or the guard
//! refused, reads of hidden paths with the read watch on), which come
//! without an explanation and are explained here with the policy
//! (`oajail_policy::compile::explain`); and the proxy's, which explains
//! and prints its own and is only counted and recorded here.
//!
//! A refusal is printed once per path and kind; repeats are counted. After
//! [`LIVE_MAX`] distinct lines the rest are counted only, and the exit
//! line says so: nothing refused goes unmentioned.

use oajail_jail::events::{JailEvent, Refusal, RefusalKind, Stream};
use oajail_policy::Policy;
use oajail_policy::compile::HostFacts;
use oajail_policy::compile::explain::{Explainer, Explanation, Fix};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Distinct refusals printed as they happen; the rest are counted.
const LIVE_MAX: usize = 100;

/// The socket glibc opens at every user or host lookup to ask nscd (its
/// name-service cache, which never runs in a jail: `/run` is hidden).
/// Refusing it is not news, and every run would say it: it is neither
/// printed, counted nor logged (docs/enforcement.md: libuv opens its
/// sockets the same way, and is missed with it).
const NSCD_PROBE: &str = "AF_UNIX SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC";
/// Distinct refusals kept for `learn`.
const RECORD_MAX: usize = 10_000;

/// One distinct refusal, as `learn` reads it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `write`, `protected write`, `read`, `unix socket` or `network`.
    pub kind: &'static str,
    /// The operation (`mkdir`, `open`, `connect` …).
    pub op: String,
    /// The path, or `host:port`.
    pub subject: String,
    /// How often.
    pub count: u64,
    /// The explanation (filesystem kinds).
    pub explanation: Option<Explanation>,
    /// The proxy's reason and message (network).
    pub network: Option<(String, String)>,
}

/// The refusals of one run.
pub struct Desk {
    state: Mutex<State>,
    policy: Policy,
    facts: HostFacts,
}

#[derive(Default)]
struct State {
    explainer: Option<Result<Explainer, String>>,
    /// Index into `record` by kind, op and subject.
    seen: HashMap<(&'static str, String, String), usize>,
    record: Vec<Seen>,
    counts: BTreeMap<&'static str, u64>,
    /// Refusals pid 1 could not send (its channel was full).
    lost: u64,
    printed: usize,
    log: Option<oajail_proxy::EventLog>,
}

impl Desk {
    /// A desk for a run of `policy` on the host of `facts`.
    pub fn new(policy: Policy, facts: HostFacts) -> Arc<Desk> {
        Arc::new(Desk {
            state: Mutex::new(State::default()),
            policy,
            facts,
        })
    }

    /// Log refusals to the decision log too (`--log-json`).
    pub fn log_to(&self, log: oajail_proxy::EventLog) {
        self.lock().log = Some(log);
    }

    /// Read pid 1's events on a thread of its own until the jail's last
    /// one; the returned handle waits for it.
    pub fn listen(self: &Arc<Self>, stream: Stream) -> Listening {
        let (done, finished) = mpsc::channel();
        let desk = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("oajail-desk".into())
            .spawn(move || {
                while let Ok(Some(event)) = stream.recv() {
                    match event {
                        JailEvent::Refusal { refusal, lost } => {
                            desk.lost(lost);
                            desk.refused(&refusal);
                        }
                        JailEvent::Ask(ask) => {
                            desk.refused(&ask.refusal);
                            crate::ask::deny(&stream, ask.id);
                        }
                        JailEvent::End { lost } => {
                            desk.lost(lost);
                            break;
                        }
                    }
                }
                let _ = done.send(());
            });
        Listening(spawned.ok().map(|_| finished))
    }

    /// A refusal of the proxy's (it printed and logged it already).
    pub fn network(&self, r: &oajail_proxy::Refused<'_>) {
        let subject = match (r.host, r.port) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => format!("({})", r.proto),
        };
        let mut s = self.lock();
        *s.counts.entry("network").or_default() += 1;
        let network = Some((r.reason.to_owned(), r.message.unwrap_or("").to_owned()));
        s.note("network", r.proto.to_owned(), subject, None, network);
    }

    /// One refusal pid 1 reported: explain, print (once), log, count.
    pub fn refused(&self, r: &Refusal) {
        if r.kind == RefusalKind::UnixSocket && r.path == NSCD_PROBE {
            return;
        }
        let mut s = self.lock();
        let explanation = match s.explain(&self.policy, &self.facts, r) {
            Some(e) if !e.by_policy => return,
            other => other,
        };
        let kind = kind_word(r.kind);
        *s.counts.entry(kind).or_default() += 1;
        let first = s.note(
            kind,
            r.op.clone(),
            r.path.clone(),
            explanation.clone(),
            None,
        );
        let line = line(r, explanation.as_ref());
        if let Some(log) = &s.log {
            log.write(
                &format!("{kind} {}", r.path),
                record(r, explanation.as_ref(), &line),
            );
        }
        if first {
            s.printed += 1;
            if s.printed <= LIVE_MAX {
                oajail_jail::say(format_args!("oajail: {line}"));
            } else if s.printed == LIVE_MAX + 1 {
                oajail_jail::say(format_args!(
                    "oajail: more than {LIVE_MAX} different refusals: the rest are counted \
                     (the total is printed at exit; --log-json FILE lists each)"
                ));
            }
        }
    }

    fn lost(&self, n: u64) {
        self.lock().lost += n;
    }

    /// Wait (bounded) until the decision log has what was written to it.
    pub fn flush_log(&self) {
        let log = self.lock().log.clone();
        if let Some(log) = log {
            log.flush();
        }
    }

    /// Everything refused, distinct, in order (for `learn`).
    pub fn record(&self) -> Vec<Seen> {
        self.lock().record.clone()
    }

    /// The exit line: the count per kind, when anything was refused.
    pub fn summary(&self) -> Option<String> {
        let s = self.lock();
        if s.counts.is_empty() && s.lost == 0 {
            return None;
        }
        let mut parts: Vec<String> = (s.counts.iter())
            .map(|(kind, n)| {
                let noun = if *kind == "network" {
                    "connection"
                } else {
                    kind
                };
                format!("{n} {noun}{}", if *n == 1 { "" } else { "s" })
            })
            .collect();
        if s.lost > 0 {
            parts.push(format!("{} more not reported (too many at once)", s.lost));
        }
        let hidden = s.printed.saturating_sub(LIVE_MAX);
        let more = if hidden > 0 {
            format!(" ({hidden} different ones not shown above)")
        } else {
            String::new()
        };
        Some(format!(
            "oajail: in all, refused {}{more}",
            parts.join(", ")
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn explain(&mut self, policy: &Policy, facts: &HostFacts, r: &Refusal) -> Option<Explanation> {
        let built = self.explainer.get_or_insert_with(|| {
            Explainer::new(policy, facts, &oajail_jail::HostFs).map_err(|e| e.to_string())
        });
        let explainer = built.as_ref().ok()?;
        let path = Path::new(&r.path);
        let fs = &oajail_jail::HostFs;
        Some(match (r.kind, &r.rule) {
            (RefusalKind::Guard, Some(rule)) => explainer.guard(fs, path, rule, r.op == "mkdir"),
            (RefusalKind::UnixSocket, _) => explainer.unix_socket(),
            (RefusalKind::Read, _) => explainer.read(fs, path),
            _ => explainer.write(fs, path, r.op == "mkdir"),
        })
    }

    /// Count a refusal; true the first time this one is seen.
    fn note(
        &mut self,
        kind: &'static str,
        op: String,
        subject: String,
        explanation: Option<Explanation>,
        network: Option<(String, String)>,
    ) -> bool {
        let key = (kind, op.clone(), subject.clone());
        if let Some(&i) = self.seen.get(&key) {
            self.record[i].count += 1;
            return false;
        }
        if self.record.len() < RECORD_MAX {
            self.seen.insert(key, self.record.len());
            self.record.push(Seen {
                kind,
                op,
                subject,
                count: 1,
                explanation,
                network,
            });
        }
        true
    }
}

fn kind_word(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::Write | RefusalKind::Guard => "write",
        RefusalKind::Read => "read",
        RefusalKind::UnixSocket => "unix socket",
    }
}

/// `refused write /h/.npm (mkdir): <rule>; <fix>`.
fn line(r: &Refusal, e: Option<&Explanation>) -> String {
    let what = format!("refused {} {} ({})", kind_word(r.kind), r.path, r.op);
    match e {
        Some(e) => format!("{what}: {}; {}", e.rule, e.fix.text()),
        None => format!(
            "{what}: {}",
            r.rule.as_deref().unwrap_or("refused by the policy")
        ),
    }
}

/// The decision log's line (docs/enforcement.md, "Refusals").
fn record(r: &Refusal, e: Option<&Explanation>, line: &str) -> serde_json::Value {
    let layer = match r.kind {
        RefusalKind::Guard => "guard",
        RefusalKind::UnixSocket => "seccomp",
        _ => "filesystem",
    };
    let mut v = json!({
        "event": "decision",
        "kind": kind_word(r.kind).replace(' ', "_"),
        "decision": "deny",
        "op": r.op,
        "path": r.path,
        "layer": layer,
        "errno": r.errno,
        "pid": r.pid,
        "message": line,
    });
    if let (Some(e), Some(map)) = (e, v.as_object_mut()) {
        map.insert("reason".into(), e.reason.into());
        map.insert("rule".into(), e.rule.clone().into());
        map.insert("fix".into(), fix_json(&e.fix));
    }
    v
}

fn fix_json(fix: &Fix) -> serde_json::Value {
    serde_json::to_value(fix).unwrap_or_default()
}

/// The listening thread ([`Desk::listen`]).
pub struct Listening(Option<mpsc::Receiver<()>>);

impl Listening {
    /// Wait (at most `limit`) until pid 1's last event is read.
    pub fn wait(self, limit: Duration) {
        if let Some(done) = self.0 {
            let _ = done.recv_timeout(limit);
        }
    }
}
