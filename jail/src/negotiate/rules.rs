//! The rule classes of a policy and the layers that hold each one: the
//! table of docs/enforcement.md as data.

use super::{Kernel, LayerName, LayerStatus, PlanFacts, Tier};
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
            if !h.note.is_empty() {
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

/// What the negotiation knows of the jail's shape when it lists holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) facts: PlanFacts,
    pub(super) tier: Tier,
    /// The namespace tier with the container's `/proc`.
    pub(super) proc_fallback: bool,
    /// The Landlock ABI the ruleset is built for (0: off).
    pub(super) landlock_abi: u8,
}

/// `(layer, landlock abi, complete, note)`: a designed holder.
type Design = (LayerName, u8, bool, &'static str);

fn design(class: RuleClass, shape: Shape) -> Vec<Design> {
    if shape.tier == Tier::Container {
        return container_design(class, shape.facts);
    }
    use LayerName::{Guard, Landlock, Mounts, Namespaces, NetNamespace, Seccomp};
    let facts = shape.facts;
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
        // A read-only mount does not stop `connect` or `sendto` on a socket
        // in view, so the mounts hold only the places they hide; seccomp
        // refuses every unix socket that could address one (`socket`, and
        // `socketpair` but for connection-mode pairs).
        RuleClass::HostSockets if facts.unix_sockets_denied => vec![
            (Mounts, 0, false, HIDDEN_SOCKET_DIRS),
            (
                Seccomp,
                0,
                true,
                "no unix socket of its own but stream and seqpacket pairs",
            ),
        ],
        RuleClass::HostSockets => vec![full(Mounts)],
        // Landlock's TCP rule names a port, not an address: the proxy's port
        // on any other address is open to it.
        RuleClass::TcpEgress if facts.restrict_tcp => {
            vec![full(NetNamespace), (Landlock, 4, false, PORT_ONLY)]
        }
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
        RuleClass::Processes if shape.proc_fallback => vec![
            (Namespaces, 0, false, CONTAINER_PROC),
            (Landlock, 1, false, PTRACE_SCOPE),
        ],
        RuleClass::Processes => vec![full(Namespaces)],
        RuleClass::Syscalls => vec![full(Seccomp)],
    }
}

/// What the mounts hold of host unix sockets.
const HIDDEN_SOCKET_DIRS: &str =
    "/run, /var/run and the host /tmp's agent sockets hidden; not a socket elsewhere in view";
/// What Landlock's TCP rule holds of "only through the proxy".
const PORT_ONLY: &str = "the proxy's port, but on every address";
/// What the pid namespace holds beside the container's `/proc`.
const CONTAINER_PROC: &str =
    "the pid namespace; the container's process list and command lines show through its /proc";
/// What Landlock holds of other processes.
const PTRACE_SCOPE: &str = "their memory, environment and descriptors (ptrace restriction)";

/// The container tier's holders: no namespace and no mount view. Landlock
/// holds the file system (its plan is the container tier's: a private
/// `TMPDIR`, `/tmp` and `/dev/shm` out of reach, only the harmless device
/// nodes), seccomp limits sockets to TCP (and to stream pairs when unix
/// sockets are denied), the connect hand-off makes every TCP connect end
/// at the proxy.
fn container_design(class: RuleClass, facts: PlanFacts) -> Vec<Design> {
    use LayerName::{Connect, Guard, Landlock, Seccomp};
    let full = |l| (l, 0, true, "");
    let ll = |abi| (Landlock, abi, true, "");
    match class {
        RuleClass::ReadDeny | RuleClass::WriteAllow => vec![ll(1)],
        RuleClass::WriteDeny | RuleClass::MandatoryDenies => vec![full(Guard)],
        RuleClass::PrivateTmp => vec![(
            Landlock,
            1,
            true,
            "a private TMPDIR, the only writable tmp; /tmp and /dev/shm out of reach",
        )],
        RuleClass::HostSockets if facts.unix_sockets_denied => vec![(
            Seccomp,
            0,
            true,
            "no unix socket but stream pairs; connect handed to pid 1",
        )],
        RuleClass::HostSockets => vec![],
        RuleClass::TcpEgress if facts.restrict_tcp => vec![
            (Landlock, 4, false, PORT_ONLY),
            (
                Connect,
                0,
                true,
                "every connect made by pid 1: to the proxy, or refused",
            ),
        ],
        RuleClass::TcpEgress => vec![(
            Connect,
            0,
            true,
            "every connect made by pid 1: to the proxy or the jail's own listeners",
        )],
        RuleClass::OtherEgress => vec![(
            Seccomp,
            0,
            true,
            "sockets limited to tcp: no udp, raw, packet or netlink",
        )],
        RuleClass::Signals => vec![ll(6)],
        RuleClass::AbstractSockets if facts.unix_sockets_denied => {
            vec![ll(6), (Seccomp, 0, true, "no unix socket but stream pairs")]
        }
        RuleClass::AbstractSockets => vec![ll(6)],
        RuleClass::Devices => vec![
            (Landlock, 1, true, "only the harmless nodes of /dev"),
            (Seccomp, 0, false, "terminal injection ioctls"),
        ],
        RuleClass::Truncate => vec![ll(3)],
        RuleClass::CrossDirectoryRename => vec![
            (
                Landlock,
                1,
                true,
                "refer from abi 2; abi 1 refuses every such move",
            ),
            (Guard, 0, false, "links of protected files"),
        ],
        RuleClass::Processes => vec![(Landlock, 1, false, PTRACE_SCOPE)],
        RuleClass::Syscalls => vec![full(Seccomp)],
    }
}

/// What is lost when `rule` has no complete holder: what the command can
/// do that the rule forbids. One phrase, printed in the banner.
pub(super) fn loss(rule: &RuleHolding, shape: Shape) -> String {
    let container = shape.tier == Tier::Container;
    let text = match rule.class {
        RuleClass::ReadDeny => {
            "a denied file the host creates, replaces or makes again during \
                                the run is readable"
        }
        RuleClass::WriteAllow => "files outside allowWrite that the user may write are writable",
        RuleClass::WriteDeny => "denyWrite paths are writable",
        RuleClass::MandatoryDenies => {
            "shell start-up files, git hooks and configuration and \
                                       editor settings in writable roots are writable"
        }
        RuleClass::PrivateTmp => "the host's /tmp is the jail's",
        RuleClass::HostSockets => {
            "unix sockets outside the jail (/run, docker.sock, agents) can be connected to"
        }
        RuleClass::TcpEgress if rule.partly().is_some() => {
            "tcp to the proxy's port on any other address skips the proxy"
        }
        RuleClass::TcpEgress => "tcp to any address skips the proxy",
        RuleClass::OtherEgress => "udp (dns included), icmp and raw packets leave the jail",
        RuleClass::Signals => "the command can signal other processes of its user",
        RuleClass::AbstractSockets => "abstract unix sockets outside the jail can be connected to",
        RuleClass::Devices => "device nodes beyond the harmless ones, and their ioctls",
        RuleClass::Truncate => {
            "files outside allowWrite that the user may write can be \
                                truncated"
        }
        RuleClass::CrossDirectoryRename => "a hidden file can be linked into view",
        // With the signal scope the command cannot kill pid 1, which ends
        // every process of the jail when the command or the supervisor goes.
        RuleClass::Processes if container && shape.landlock_abi >= 6 => {
            "processes outside the jail and their command lines are visible"
        }
        RuleClass::Processes if container => {
            "processes outside the jail and their command lines are visible, and the \
             command's processes can outlive oajail (without Landlock's signal scope the \
             command can kill pid 1)"
        }
        RuleClass::Processes => "the container's process list and command lines are visible",
        RuleClass::Syscalls => "the syscall deny list does not apply",
    };
    text.to_owned()
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
    shape: Shape,
) -> Vec<RuleHolding> {
    let runs = |layer: LayerName| {
        layers
            .iter()
            .any(|(n, s)| *n == layer && !matches!(s, LayerStatus::Off { .. }))
    };
    ALL.iter()
        .map(|&class| RuleHolding {
            class,
            holders: design(class, shape)
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
pub(super) fn needed_feature(class: RuleClass, kernel: &Kernel, shape: Shape) -> String {
    let mut needs: Vec<String> = Vec::new();
    let ns = kernel.steps.namespaces_usable();
    let unconfined = Shape {
        tier: Tier::Namespaces,
        ..shape
    };
    let designed = design(class, unconfined)
        .into_iter()
        .chain(design(class, shape));
    for (layer, abi, complete, _) in designed {
        if !complete {
            continue;
        }
        let need = match layer {
            LayerName::Namespaces | LayerName::NetNamespace => "user namespaces".to_owned(),
            LayerName::Mounts if !ns => "user namespaces".to_owned(),
            LayerName::Mounts => "the mount api (linux 5.12)".to_owned(),
            // The one case where Landlock is offered at the ABI yet not run.
            LayerName::Landlock if abi <= 1 && kernel.landlock_abi == Some(1) => {
                "landlock abi 2 (linux 5.19), or abi 1 with the guard".to_owned()
            }
            LayerName::Landlock => format!("landlock abi {abi}"),
            LayerName::Seccomp => "seccomp filters".to_owned(),
            LayerName::Guard | LayerName::Connect => {
                "seccomp user notification with addfd (linux 5.9)".to_owned()
            }
        };
        if !needs.contains(&need) {
            needs.push(need);
        }
    }
    needs.join(" or ")
}
