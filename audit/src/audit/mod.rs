//! `oajail audit`: the suite's attacks run against a USER's policy.
//!
//! The suite proves that oajail enforces the project's own fixture policies;
//! the audit answers another question: "under MY settings file, what can a
//! hostile command read, write, persist or send out?". It reuses the suite's
//! catalogue ([`crate::catalog`]), probe and lab ([`crate::lab`]) and adds
//! three things: the [`runbook`] (which probe invocation exercises which
//! catalogue attack, and what it targets), [`grant`] (which policy entry, if
//! any, permits that target) and [`evidence`] (what the lab saw, judged
//! relative to the policy).
//!
//! Invariants:
//! - a finding is `escape` only when the attack worked AND no policy entry
//!   grants its target; `allowed` always names the granting entry;
//! - a run that proves nothing (the lab failed, the probe gave no verdict,
//!   an unexpected errno) is `inconclusive`, never `blocked`: an audit that
//!   could not run can never read as "0 escapes";
//! - "worked" is observed, not claimed: a canary in a sink, a DNS query,
//!   the command's stdout/stderr, a changed fake home, a killed host canary,
//!   or the probe's own `succeeded` verdict.

pub mod abspaths;
pub mod channels;
pub mod evidence;
pub mod grant;
pub mod jailinfo;
pub mod layer;
pub mod lines;
pub mod runbook;
pub mod session;
pub mod sources;
pub mod staged;

use serde::{Deserialize, Serialize};

/// What an attack is after (how a finding is weighed by `--fail-on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Reading a secret store.
    SecretRead,
    /// Writing outside the workspace or into protected names (persistence).
    Persistence,
    /// A canary leaving through a sink, a DNS query or the output channel.
    Exfiltration,
    /// Network egress the proxy should own.
    Egress,
    /// Other processes, IPC, the terminal, the syscall surface.
    Isolation,
    /// Memory, disk, processes and time.
    Resources,
}

impl Kind {
    /// Lower-case label for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::SecretRead => "secret read",
            Kind::Persistence => "persistence",
            Kind::Exfiltration => "exfiltration",
            Kind::Egress => "egress",
            Kind::Isolation => "isolation",
            Kind::Resources => "resources",
        }
    }
}

/// A path of the lab, relative to the fake home or the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Loc {
    /// Relative to the fake `$HOME` (`""` is the home itself).
    Home(String),
    /// Relative to the workspace (the command's cwd, the policy's `.`).
    Ws(String),
    /// An absolute path the policy names (`/etc/shadow`); the lab shows a
    /// fake file there through an overlay of its nearest existing directory.
    Abs(String),
}

impl Loc {
    /// The path as a user writes it in a policy (`~/.ssh/id_rsa`, `./.env`).
    pub fn shown(&self) -> String {
        match self {
            Loc::Home(r) if r.is_empty() => "~".into(),
            Loc::Home(r) => format!("~/{r}"),
            Loc::Ws(r) if r.is_empty() => ".".into(),
            Loc::Ws(r) => format!("./{r}"),
            Loc::Abs(p) => p.clone(),
        }
    }
}

/// How an exfiltration attack sends its loot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    /// The command's own stdout (what an MCP server hands to the model).
    Stdout,
    /// A TLS tunnel through the proxy to this domain.
    Https(String),
    /// A plain HTTP POST through the proxy to this domain.
    Http(String),
    /// A DNS name `<canary>.<domain>` handed to the proxy.
    DnsName(String),
    /// Straight to an address, around the proxy (never granted).
    Direct,
}

/// What an attack targets, for deciding whether the policy grants it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// Read this path.
    Read(Loc),
    /// Write this path.
    Write(Loc),
    /// Read every secret source it can, send it through the channel.
    Exfil(Channel),
    /// Reach this name through the proxy.
    Domain(String),
    /// Read the secret-named environment variables.
    Env,
    /// Reach the host's unix sockets.
    UnixSockets,
    /// Create user namespaces (and mount namespaces inside them).
    NestedUserNamespaces,
    /// Use more of a resource than this (`oajail.limits.<name>`, amount).
    Limit(String, u64),
    /// Run at all where user namespaces are refused: the container tier,
    /// which `enableWeakerNestedSandbox` accepts.
    ContainerTier,
    /// No policy entry can grant this (mandatory denies, kernel surface,
    /// other processes, direct egress): success is always an escape.
    Never,
}

/// One attack of the audit: a catalogue row (or an audit-only
/// exfiltration) and how to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    /// Stable id: the catalogue id, with `:<path or domain>` when the
    /// audit runs one row against several targets.
    pub id: String,
    /// Family letter (catalogue families; `X` for exfiltration).
    pub family: char,
    /// What the attack does.
    pub title: String,
    /// What it is after.
    pub kind: Kind,
    /// What the policy would have to grant for it to be allowed.
    pub target: Target,
    /// The probe's arguments; `@HOME@`, `@WS@`, `@LAB@`, `@PID@`,
    /// `@ABSTRACT@` and `@TOKEN@` are replaced per lab.
    pub probe: Vec<String>,
    /// What the lab sets up for this attack beyond the usual.
    #[serde(default, skip_serializing_if = "Stage::is_plain")]
    pub stage: Stage,
}

/// What a lab sets up for one attack beyond the fake home, the workspace
/// and the sinks (the suite's `RunOptions` for the same catalogue row).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The command runs on a pty that is its controlling terminal; the lab
    /// reports bytes injected into it and any state left changed.
    pub pty: bool,
    /// The lab's session keyring holds a canary key `oaj_canary_<token>`.
    pub keyring: bool,
    /// Processes carrying `oajail-daemon-<token>` must be gone after the run.
    pub daemon: bool,
    /// User namespaces are unavailable to oajail (fail-closed).
    pub no_userns: bool,
    /// oajail arguments before `--` (placeholders filled per lab).
    pub oajail_args: Vec<String>,
    /// A path of the workspace planted as a symlink to the home before the
    /// run (a previous run's leftover).
    pub symlink_to_home: Option<String>,
    /// A directory planted as a small project (`Cargo.toml`,
    /// `package.json`) before the run: a `denyWrite` directory of the
    /// policy, whose tools read configuration from above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Loc>,
    /// What a refusal by oajail (no probe verdict, an `oajail:` line, a
    /// non-zero status) means for this attack.
    pub refusal: Refusal,
    /// The command's exit status must come back as this (pid 1 passes it
    /// through).
    pub exit_code: Option<i32>,
}

/// What oajail refusing to run the command means for an attack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// Nothing: the attack was never tried (`inconclusive`).
    #[default]
    ProvesNothing,
    /// The attack is stopped (a refused symlinked write root).
    Blocks,
    /// Only a refusal stops it: the command running at all is the attack
    /// working (family I, fail-closed).
    Required,
}

impl Stage {
    /// Nothing beyond the usual lab.
    pub fn is_plain(&self) -> bool {
        *self == Stage::default()
    }
}

/// The verdict of one attack relative to the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The jail stopped it.
    Blocked,
    /// It worked, and a policy entry grants it.
    Allowed,
    /// It worked although the policy says no: a defect in oajail.
    Escape,
    /// The kernel cannot run it at all (shown, never counted as blocked).
    NotApplicable,
    /// The run proves nothing (lab failure, no verdict, unexpected errno).
    Inconclusive,
}

impl Verdict {
    /// Lower-case label for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Blocked => "blocked",
            Verdict::Allowed => "allowed by policy",
            Verdict::Escape => "ESCAPE",
            Verdict::NotApplicable => "not applicable",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// The policy entry that grants a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// JSON path of the field (`filesystem.allowWrite`).
    pub field: String,
    /// The entry as written (`~`), or `None` when the grant is the
    /// ABSENCE of a deny entry covering the path.
    pub entry: Option<String>,
    /// One line for humans, the tail of "allowed because …".
    pub why: String,
    /// What it covers: a path as a policy writes it (`~/.npmrc`), a
    /// `host:port`, or nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub covers: String,
}

/// The result of one attack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// The case that ran.
    pub case: Case,
    /// Its verdict.
    pub verdict: Verdict,
    /// The granting entries (for `allowed`; what the policy would allow
    /// otherwise, for context).
    pub grants: Vec<Grant>,
    /// What the probe and the lab saw.
    pub detail: String,
    /// The finding in one line: "allowed because <entry>", "blocked by
    /// <layer>: <rule>", "ESCAPE: it worked although <rule>".
    #[serde(default)]
    pub reason: String,
    /// Wall time of the lab run, in milliseconds.
    pub elapsed_ms: u64,
}

/// The catalogue row `id` as an audit case (`None`: not in the catalogue).
pub(crate) fn row(id: &str, kind: Kind, target: Target, probe: &[&str]) -> Option<Case> {
    let a = crate::catalog::attack(id)?;
    Some(Case {
        id: id.to_owned(),
        family: a.family,
        title: a.title.to_owned(),
        kind,
        target,
        probe: probe.iter().map(|s| (*s).to_owned()).collect(),
        stage: Stage::default(),
    })
}
