//! Layer negotiation: the one front door that decides, for this kernel, at
//! which level each layer runs and which layers hold each rule class of the
//! policy.
//!
//! Modelled on rust-landlock's compatibility levels: the plan is written
//! for the newest kernel; each layer gets a [`LayerStatus`] (full, at a lower
//! level, or off and why); each [`RuleClass`] lists its holders ([`Holder`]).
//! A run is *full* when every rule class that applies has at least one
//! available holder that holds it completely; then it runs without any flag,
//! with Landlock as defence in depth at whatever ABI the kernel has. A rule
//! class with no holder refuses the run, naming the rule and the kernel
//! feature its holders need, unless the user accepts fewer rules
//! (`--allow-degraded`), in which case the banner names them. `--strict`
//! (or `oajail.strict`) refuses any layer below the level the plan was
//! written for.
//!
//! The decision is pure data ([`Negotiation::decide`] over a [`Kernel`], the
//! policy's [`PlanFacts`] and a [`Request`]), unit-tested as a table of
//! kernel feature sets. `run`, `doctor`, `explain` and `-d` read its result.

mod rules;
mod spec;
#[cfg(test)]
mod tests;

pub use rules::{Holder, RuleClass, RuleHolding};
pub use spec::Command;

use crate::spec::Layers;
use oajail_policy::Policy;
use oajail_policy::compile::landlock::MIN_ABI;
use serde::Serialize;

/// What the kernel offers, as far as the jail is concerned (plain data;
/// [`Kernel::probe`] fills it from the running kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kernel {
    /// Landlock ABI version; `None` when Landlock is not built or not enabled.
    pub landlock_abi: Option<u8>,
    /// seccomp filters with the KILL_PROCESS and ERRNO actions.
    pub seccomp: bool,
    /// seccomp user notification with `SECCOMP_IOCTL_NOTIF_ADDFD` (Linux 5.9).
    pub user_notif: bool,
    /// The new mount API (`open_tree`, `move_mount`) and `mount_setattr` (Linux 5.12).
    pub mount_api: bool,
    /// User namespaces with capabilities inside. Not probed before a run (it
    /// costs a process): assumed until the clone or the first privileged
    /// step says otherwise ([`Negotiation::without_namespaces`]).
    pub user_namespaces: bool,
}

impl Kernel {
    /// Probe the running kernel with cheap syscalls (no process is created).
    pub fn probe() -> Self {
        Kernel {
            landlock_abi: crate::layers::landlock_abi(),
            seccomp: crate::layers::seccomp_available(),
            user_notif: crate::layers::user_notif_available(),
            mount_api: crate::sys::probe::mount_api_available(),
            user_namespaces: true,
        }
    }
}

/// What the policy asks of the kernel layers (derived from the policy, so
/// the decision can be made before the plans are compiled: the jail is
/// cloned first and the plans compiled while its namespaces come up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFacts {
    /// TCP is restricted to the proxy (no `allowLocalBinding`): Landlock
    /// can hold it from ABI 4.
    pub restrict_tcp: bool,
    /// `socket(AF_UNIX)` is refused by seccomp (no `allowAllUnixSockets`).
    pub unix_sockets_denied: bool,
}

impl PlanFacts {
    /// The facts of `policy` (the same fields the plans are compiled from).
    pub fn of(policy: &Policy) -> Self {
        PlanFacts {
            restrict_tcp: !policy.network.allow_local_binding,
            unix_sockets_denied: !policy.network.allow_all_unix_sockets,
        }
    }
}

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// Every layer at the level the plan was written for (`--strict`,
    /// `oajail.strict`).
    pub strict: bool,
    /// Run even when rule classes have no holder (`--allow-degraded`,
    /// `oajail.allowDegraded`); the banner names them.
    pub accept_unheld: bool,
    /// Layers a `test-layers` build switches off (`OAJAIL_TEST_DISABLE`);
    /// always empty in release builds. These never refuse a run: the
    /// security suite uses them to show what each layer holds.
    pub test_disabled: Vec<String>,
}

/// One layer of the jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerName {
    /// User, pid, ipc and uts namespaces.
    Namespaces,
    /// The mount namespace and its plan.
    Mounts,
    /// The network namespace (only loopback, the proxy on it).
    NetNamespace,
    /// Landlock.
    Landlock,
    /// The seccomp deny list.
    Seccomp,
    /// The guard (seccomp user notification served by pid 1).
    Guard,
}

impl LayerName {
    /// Every layer, in the order the banner lists them.
    pub const ALL: [LayerName; 6] = [
        LayerName::Namespaces,
        LayerName::Mounts,
        LayerName::NetNamespace,
        LayerName::Landlock,
        LayerName::Seccomp,
        LayerName::Guard,
    ];

    /// The name used in messages (and by `OAJAIL_TEST_DISABLE`).
    pub fn as_str(self) -> &'static str {
        match self {
            LayerName::Namespaces => "namespaces",
            LayerName::Mounts => "mounts",
            LayerName::NetNamespace => "netns",
            LayerName::Landlock => "landlock",
            LayerName::Seccomp => "seccomp",
            LayerName::Guard => "guard",
        }
    }
}

/// At which level a layer runs on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum LayerStatus {
    /// At the level the plan was written for.
    Full,
    /// Below it: Landlock at an older ABI (its rights and scopes up to that ABI).
    Partial {
        /// The level applied.
        abi: u8,
        /// What the lower level lacks.
        lacks: String,
    },
    /// Not applied.
    Off {
        /// Why (the missing kernel feature, or the reason to leave it off).
        why: String,
    },
}

/// The outcome: the layers to run and what holds each rule class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Negotiation {
    /// The kernel this was decided for.
    pub kernel: Kernel,
    /// Every layer's status, in [`LayerName::ALL`] order.
    pub layers: Vec<(LayerName, LayerStatus)>,
    /// The Landlock ABI the ruleset is built for; 0 when Landlock is off.
    pub landlock_abi: u8,
    /// Every rule class that applies and its holders.
    pub rules: Vec<RuleHolding>,
    /// Rule classes no running layer holds (only with `accept_unheld`, or
    /// because a test build switched layers off).
    pub unheld: Vec<RuleClass>,
    /// Layers a test build switched off.
    pub test_disabled: Vec<String>,
}

/// Why a run is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiationError {
    /// A rule class has no complete holder on this kernel: the class and
    /// `needs <feature>[; here only <partial holders>]`.
    #[error(
        "kernel: no layer holds {list} on this kernel; refusing to run (`oajail doctor` \
         explains; --allow-degraded runs anyway, after a banner naming {them})",
        list = unheld_list(.0),
        them = if .0.len() == 1 { "it" } else { "them" }
    )]
    Unheld(Vec<(RuleClass, String)>),
    /// `--strict`: a layer runs below the planned level.
    #[error("strict: {layer} {why}; refusing to run (strict demands every layer as planned)")]
    Strict {
        /// The layer.
        layer: &'static str,
        /// Its status.
        why: String,
    },
}

fn unheld_list(items: &[(RuleClass, String)]) -> String {
    items
        .iter()
        .map(|(class, why)| format!("{} ({why})", class.describe()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Negotiation {
    /// Decide the layers for `kernel`, the policy's `facts` and `request`.
    pub fn decide(
        kernel: Kernel,
        facts: PlanFacts,
        request: &Request,
    ) -> Result<Negotiation, NegotiationError> {
        let layers = statuses(&kernel);
        if request.strict {
            check_strict(&layers)?;
        }
        let abi = landlock_level(&layers);
        let rules = rules::holdings(&layers, abi, facts);
        let unheld: Vec<RuleClass> = rules
            .iter()
            .filter(|r| !r.held())
            .map(|r| r.class)
            .collect();
        if !unheld.is_empty() && !request.accept_unheld {
            let named = (rules.iter())
                .filter(|r| !r.held())
                .map(|r| {
                    let mut why =
                        format!("needs {}", rules::needed_feature(r.class, &kernel, facts));
                    if let Some(part) = r.partly() {
                        why.push_str(&format!("; here only {part}"));
                    }
                    (r.class, why)
                })
                .collect();
            return Err(NegotiationError::Unheld(named));
        }
        let mut decided = Negotiation {
            kernel,
            layers,
            landlock_abi: abi,
            rules,
            unheld,
            test_disabled: Vec::new(),
        };
        decided.switch_off(&request.test_disabled, facts);
        Ok(decided)
    }

    /// Decide again after the clone found user namespaces unusable (`why`).
    pub fn without_namespaces(
        &self,
        why: &str,
        facts: PlanFacts,
        request: &Request,
    ) -> Result<Negotiation, NegotiationError> {
        let kernel = Kernel {
            user_namespaces: false,
            ..self.kernel
        };
        let mut decided = Negotiation::decide(kernel, facts, request)?;
        decided.set_status(LayerName::Namespaces, off(why));
        Ok(decided)
    }

    /// The layer switches the jail is cloned with.
    pub fn layers(&self) -> Layers {
        let is_on = |name| !matches!(self.status(name), Some(LayerStatus::Off { .. }) | None);
        Layers {
            namespaces: is_on(LayerName::Namespaces),
            mounts: is_on(LayerName::Mounts),
            landlock: is_on(LayerName::Landlock),
            landlock_abi: self.landlock_abi,
            seccomp: is_on(LayerName::Seccomp),
            netns: is_on(LayerName::NetNamespace),
            caps: !self.test_disabled.iter().any(|l| l == "caps"),
            guard: is_on(LayerName::Guard),
        }
    }

    /// The status of one layer.
    pub fn status(&self, name: LayerName) -> Option<&LayerStatus> {
        self.layers.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    /// The banner printed before a run with rule classes nobody holds
    /// (empty for a full run).
    pub fn banner(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .layers
            .iter()
            .filter_map(|(name, status)| match status {
                LayerStatus::Off { why } => Some(format!("layer off: {}: {why}", name.as_str())),
                _ => None,
            })
            .collect();
        lines.extend(
            (self.rules.iter())
                .filter(|r| self.unheld.contains(&r.class))
                .map(|r| match r.partly() {
                    Some(part) => {
                        format!("NOT ENFORCED in full: {}: only {part}", r.class.describe())
                    }
                    None => format!("NOT ENFORCED: {}", r.class.describe()),
                }),
        );
        if self.unheld.is_empty() {
            lines.clear();
        }
        lines
    }

    /// One line per layer and per rule class: what `doctor`, `explain` and
    /// `-d` print.
    pub fn report_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, status) in &self.layers {
            let text = match status {
                LayerStatus::Full if *name == LayerName::Landlock => {
                    format!("full (abi {})", self.landlock_abi)
                }
                LayerStatus::Full => "full".to_owned(),
                LayerStatus::Partial { abi, lacks } => format!("abi {abi}: {lacks}"),
                LayerStatus::Off { why } => format!("off: {why}"),
            };
            out.push(format!("layer {}: {text}", name.as_str()));
        }
        for rule in &self.rules {
            out.push(rule.line());
        }
        out
    }

    fn set_status(&mut self, name: LayerName, status: LayerStatus) {
        if let Some(entry) = self.layers.iter_mut().find(|(n, _)| *n == name) {
            entry.1 = status;
        }
    }

    /// Apply a test build's switches: the layers go off, and the rule
    /// classes they leave without a holder are listed (never refused).
    fn switch_off(&mut self, names: &[String], facts: PlanFacts) {
        if names.is_empty() {
            return;
        }
        for name in LayerName::ALL {
            if names.iter().any(|n| n == name.as_str()) {
                self.set_status(name, off("switched off by OAJAIL_TEST_DISABLE"));
            }
        }
        self.landlock_abi = landlock_level(&self.layers);
        self.rules = rules::holdings(&self.layers, self.landlock_abi, facts);
        self.unheld = self
            .rules
            .iter()
            .filter(|r| !r.held())
            .map(|r| r.class)
            .collect();
        self.test_disabled = names.to_vec();
    }
}

fn off(why: &str) -> LayerStatus {
    LayerStatus::Off {
        why: why.to_owned(),
    }
}

/// Each layer's status on `kernel`.
fn statuses(kernel: &Kernel) -> Vec<(LayerName, LayerStatus)> {
    let ns = kernel.user_namespaces;
    let ns_off = || off("user namespaces unavailable");
    let mounts = match (ns, kernel.mount_api) {
        (false, _) => ns_off(),
        (true, false) => off("no mount api (open_tree, move_mount, mount_setattr: linux 5.12)"),
        (true, true) => LayerStatus::Full,
    };
    let guard = match (kernel.seccomp, kernel.user_notif) {
        (false, _) => off("no seccomp filters"),
        (true, false) => off("no seccomp user notification with addfd (linux 5.9)"),
        (true, true) => LayerStatus::Full,
    };
    let mounts_run = mounts == LayerStatus::Full;
    vec![
        (
            LayerName::Namespaces,
            if ns { LayerStatus::Full } else { ns_off() },
        ),
        (LayerName::Mounts, mounts),
        (
            LayerName::NetNamespace,
            if ns { LayerStatus::Full } else { ns_off() },
        ),
        (
            LayerName::Landlock,
            landlock_status(kernel.landlock_abi, mounts_run, guard == LayerStatus::Full),
        ),
        (
            LayerName::Seccomp,
            if kernel.seccomp {
                LayerStatus::Full
            } else {
                off("no seccomp filters (kill, errno)")
            },
        ),
        (LayerName::Guard, guard),
    ]
}

/// Landlock at the kernel's best ABI up to the plan's. ABI 1 has no
/// `refer` right: any Landlock domain there refuses every rename or link
/// across directories (`EXDEV`), which would break `mv`, git and package
/// managers in writable roots. Beside the mounts and the guard, pid 1's
/// mover makes those moves outside the domain after checking what ABI 2
/// would (`guard/mover.rs`), so ABI 1 runs. Without the guard no call
/// reaches the mover, so it stays off there (the mounts then hold read
/// deny only in part: `rules::design`); without the mounts it is applied,
/// as the only holder of the filesystem rules, and renames across
/// directories fail.
fn landlock_status(abi: Option<u8>, mounts_run: bool, guard_runs: bool) -> LayerStatus {
    match abi {
        None => off("not offered by the kernel (not built, or not in the lsm= list)"),
        Some(1) if mounts_run && !guard_runs => off(
            "abi 1 refuses every cross-directory rename and link (no refer right), \
             and without the guard nothing makes them in its place",
        ),
        Some(1) => {
            let moves = if mounts_run {
                "pid 1's mover makes the moves across directories"
            } else {
                "moves across directories fail"
            };
            LayerStatus::Partial {
                abi: 1,
                lacks: format!("{}; {moves}", rules::landlock_lacks(1)),
            }
        }
        Some(v) if v >= MIN_ABI => LayerStatus::Full,
        Some(v) => LayerStatus::Partial {
            abi: v,
            lacks: rules::landlock_lacks(v),
        },
    }
}

/// The ABI the ruleset is built for (0: Landlock off).
fn landlock_level(layers: &[(LayerName, LayerStatus)]) -> u8 {
    match layers.iter().find(|(n, _)| *n == LayerName::Landlock) {
        Some((_, LayerStatus::Full)) => MIN_ABI,
        Some((_, LayerStatus::Partial { abi, .. })) => *abi,
        _ => 0,
    }
}

fn check_strict(layers: &[(LayerName, LayerStatus)]) -> Result<(), NegotiationError> {
    for (name, status) in layers {
        let why = match status {
            LayerStatus::Full => continue,
            LayerStatus::Partial { abi, lacks } => {
                format!("runs at abi {abi}, the plan is written for abi {MIN_ABI} ({lacks})")
            }
            LayerStatus::Off { why } => format!("is off: {why}"),
        };
        return Err(NegotiationError::Strict {
            layer: name.as_str(),
            why,
        });
    }
    Ok(())
}
