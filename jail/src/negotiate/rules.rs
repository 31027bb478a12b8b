//! The rule classes of a policy and the layers that hold each one: the
//! table of docs/enforcement.md as data.

use super::{Kernel, LayerName, LayerStatus, PlanFacts};
use oajail_policy::compile::landlock::MIN_ABI;
use serde::Serialize;

/// A class of rules of the policy, enforced as a whole by some layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleClass {
    /// `denyRead` (and the reads a policy leaves hidden).
    ReadDeny,
    /// Writes, creations and removals only inside `allowWrite` roots.
    WriteAllow,
    /// `denyWrite` inside writable roots.
    WriteDeny,
    /// The mandatory write denies (shell start-up files, git hooks and
    /// configuration, editor and agent directories …).
    MandatoryDenies,
    /// The private `/tmp`.
    PrivateTmp,
    /// Host unix sockets (`/run`, D-Bus, docker, the ssh agent …).
    HostSockets,
    /// TCP only through the proxy.
    TcpEgress,
    /// UDP, raw and every other network traffic: none.
    OtherEgress,
    /// No signals to processes outside the jail.
    Signals,
    /// No abstract unix sockets outside the jail.
    AbstractSockets,
    /// Only the harmless device nodes, no device ioctls beyond them.
    Devices,
    /// No truncation outside writable roots.
    Truncate,
    /// Renames and links across directories only inside writable roots
    /// (no hard link of a hidden file into view).
    CrossDirectoryRename,
    /// Host processes invisible; nothing outlives the command.
    Processes,
    /// The syscall deny list (mount api, new namespaces, ptrace, bpf …).
    Syscalls,
}

impl RuleClass {
    /// The class in words (messages, doctor, explain).
    pub fn describe(self) -> &'static str {
        match self {
            RuleClass::ReadDeny => "read deny (denyRead)",
            RuleClass::WriteAllow => "writes only in allowWrite",
            RuleClass::WriteDeny => "write deny (denyWrite)",
            RuleClass::MandatoryDenies => "mandatory write denies",
            RuleClass::PrivateTmp => "private /tmp",
            RuleClass::HostSockets => "host unix sockets",
            RuleClass::TcpEgress => "tcp egress only through the proxy",
            RuleClass::OtherEgress => "no udp or other network egress",
            RuleClass::Signals => "signals stay inside the jail",
            RuleClass::AbstractSockets => "abstract unix sockets stay inside the jail",
            RuleClass::Devices => "devices and device ioctls",
            RuleClass::Truncate => "truncate only in allowWrite",
            RuleClass::CrossDirectoryRename => "cross-directory rename and link",
            RuleClass::Processes => "host processes hidden",
            RuleClass::Syscalls => "syscall deny list",
        }
    }
}

/// One layer's part in holding a rule class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// The layer.
    pub layer: LayerName,
    /// For Landlock: the ABI that brings the right or scope.
    pub landlock_abi: u8,
    /// Whether the layer holds the whole class (or only a part: `note`).
    pub complete: bool,
    /// What part it holds, when not complete.
    pub note: &'static str,
    /// Whether it runs on this kernel.
    pub available: bool,
}

/// A rule class and its holders on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleHolding {
    /// The class.
    pub class: RuleClass,
    /// Every layer designed to hold it, available or not.
    pub holders: Vec<Holder>,
}

impl RuleHolding {
    /// At least one available layer holds the whole class.
    pub fn held(&self) -> bool {
        self.holders.iter().any(|h| h.available && h.complete)
    }

    /// The parts that run here when no complete holder does:
    /// `mounts (what they do not hold)`, or `None`.
    pub fn partly(&self) -> Option<String> {
        let parts: Vec<String> = (self.holders.iter())
            .filter(|h| h.available && !h.complete)
            .map(|h| format!("{} ({})", h.layer.as_str(), h.note))
            .collect();
        (!self.held() && !parts.is_empty()).then(|| parts.join(", "))
    }

    /// `rule <class>: held by a, b (part); not here: c (…)`.
    pub fn line(&self) -> String {
        let name = |h: &Holder| {
            let mut s = h.layer.as_str().to_owned();
            if h.layer == LayerName::Landlock {
                s.push_str(&format!(" abi {}", h.landlock_abi));
            }
            if !h.complete {
                s.push_str(&format!(" ({})", h.note));
            }
            s
        };
        let list = |available: bool| {
            let v: Vec<String> = (self.holders.iter())
                .filter(|h| h.available == available)
                .map(name)
                .collect();
            v.join(", ")
        };
        let (on, missing) = (list(true), list(false));
        let on = if self.held() {
            on
        } else if on.is_empty() {
            "NOTHING".to_owned()
        } else {
            format!("only {on}: NOT ENFORCED in full")
        };
        let mut line = format!("rule {}: {on}", self.class.describe());
        if !missing.is_empty() {
            line.push_str(&format!("; not running here: {missing}"));
        }
        line
    }
}

/// What the mounts do not hold of a read deny.
const HOST_CHANGES: &str =
    "not a denied file the host creates, replaces or makes again during the run";

/// `(layer, landlock abi, complete, note)`: a designed holder.
type Design = (LayerName, u8, bool, &'static str);

fn design(class: RuleClass, facts: PlanFacts) -> Vec<Design> {
    use LayerName::{Guard, Landlock, Mounts, Namespaces, NetNamespace, Seccomp};
    let full = |l| (l, 0, true, "");
    let ll = |abi| (Landlock, abi, true, "");
    match class {
        // The mounts mask a denied path as it is when the jail is built; the
        // kernel detaches a mask whose file or directory the host replaces or
        // removes, and a file created later at a denied path has none
        // (attacks A13-A15). Landlock's read complement holds those too.
        RuleClass::ReadDeny => vec![(Mounts, 0, false, HOST_CHANGES), ll(1)],
        RuleClass::WriteAllow => vec![full(Mounts), ll(1)],
        RuleClass::WriteDeny => vec![full(Guard), (Mounts, 0, false, "existing paths")],
        RuleClass::MandatoryDenies => vec![full(Guard)],
        RuleClass::PrivateTmp => vec![full(Mounts)],
        RuleClass::HostSockets if facts.unix_sockets_denied => vec![full(Mounts), full(Seccomp)],
        RuleClass::HostSockets => vec![full(Mounts)],
        RuleClass::TcpEgress if facts.restrict_tcp => vec![full(NetNamespace), ll(4)],
        RuleClass::TcpEgress | RuleClass::OtherEgress => vec![full(NetNamespace)],
        RuleClass::Signals => vec![full(Namespaces), ll(6)],
        RuleClass::AbstractSockets => vec![full(NetNamespace), ll(6)],
        RuleClass::Devices => vec![
            full(Mounts),
            (Landlock, 5, false, "device ioctls"),
            (Seccomp, 0, false, "terminal injection ioctls"),
        ],
        RuleClass::Truncate => vec![full(Mounts), ll(3)],
        RuleClass::CrossDirectoryRename => vec![
            full(Mounts),
            ll(2),
            (Guard, 0, false, "links of protected files"),
        ],
        RuleClass::Processes => vec![full(Namespaces)],
        RuleClass::Syscalls => vec![full(Seccomp)],
    }
}

/// Every rule class, in the order they are listed.
pub const ALL: [RuleClass; 15] = [
    RuleClass::ReadDeny,
    RuleClass::WriteAllow,
    RuleClass::WriteDeny,
    RuleClass::MandatoryDenies,
    RuleClass::PrivateTmp,
    RuleClass::HostSockets,
    RuleClass::TcpEgress,
    RuleClass::OtherEgress,
    RuleClass::Signals,
    RuleClass::AbstractSockets,
    RuleClass::Devices,
    RuleClass::Truncate,
    RuleClass::CrossDirectoryRename,
    RuleClass::Processes,
    RuleClass::Syscalls,
];

/// The holders of every class, given the layers' statuses and Landlock's ABI.
pub(super) fn holdings(
    layers: &[(LayerName, LayerStatus)],
    landlock_abi: u8,
    facts: PlanFacts,
) -> Vec<RuleHolding> {
    let runs = |layer: LayerName| {
        layers
            .iter()
            .any(|(n, s)| *n == layer && !matches!(s, LayerStatus::Off { .. }))
    };
    ALL.iter()
        .map(|&class| RuleHolding {
            class,
            holders: design(class, facts)
                .into_iter()
                .map(|(layer, abi, complete, note)| Holder {
                    layer,
                    landlock_abi: abi,
                    complete,
                    note,
                    available: runs(layer) && (layer != LayerName::Landlock || landlock_abi >= abi),
                })
                .collect(),
        })
        .collect()
}

/// The kernel features that would give `class` a complete holder.
pub(super) fn needed_feature(class: RuleClass, kernel: &Kernel, facts: PlanFacts) -> String {
    let mut needs: Vec<String> = Vec::new();
    for (layer, abi, complete, _) in design(class, facts) {
        if !complete {
            continue;
        }
        let need = match layer {
            LayerName::Namespaces | LayerName::NetNamespace => "user namespaces".to_owned(),
            LayerName::Mounts if !kernel.user_namespaces => "user namespaces".to_owned(),
            LayerName::Mounts => "the mount api (linux 5.12)".to_owned(),
            // The one case where Landlock is offered at the ABI yet not run.
            LayerName::Landlock if abi <= 1 && kernel.landlock_abi == Some(1) => {
                "landlock abi 2 (linux 5.19), or abi 1 with the guard".to_owned()
            }
            LayerName::Landlock => format!("landlock abi {abi}"),
            LayerName::Seccomp => "seccomp filters".to_owned(),
            LayerName::Guard => "seccomp user notification with addfd (linux 5.9)".to_owned(),
        };
        if !needs.contains(&need) {
            needs.push(need);
        }
    }
    needs.join(" or ")
}

/// What Landlock at ABI `v` lacks compared with the plan's ABI.
pub(super) fn landlock_lacks(v: u8) -> String {
    let parts = [
        (2, "refer"),
        (3, "truncate"),
        (4, "tcp port rules"),
        (5, "device ioctls"),
        (6, "signal and abstract-socket scopes"),
    ];
    let missing: Vec<String> = parts
        .iter()
        .filter(|(abi, _)| *abi > v && *abi <= MIN_ABI)
        .map(|(abi, what)| format!("{what} (abi {abi})"))
        .collect();
    format!("no {}", missing.join(", "))
}
