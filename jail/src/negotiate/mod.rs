//! Layer negotiation: the one front door that decides, for this kernel and
//! this environment, at which level each layer runs and which layers hold
//! each rule class of the policy.
//!
//! Modelled on rust-landlock's compatibility levels: the plan is written
//! for the newest kernel; each layer gets a [`LayerStatus`] (full, at a lower
//! level, with a fallback, or off and why); each [`RuleClass`] lists its
//! holders ([`Holder`]). A run is *full* when every rule class that applies
//! has at least one available holder that holds it completely; then it runs
//! without any flag, with Landlock as defence in depth at whatever ABI the
//! kernel has.
//!
//! The environment decides the *tier* ([`Tier`]): with user namespaces the
//! jail has its own namespaces and mount view (each refused step that has
//! a fallback takes it: no uts namespace when `sethostname` is refused, the
//! container's `/proc` read-only when a fresh one is refused, `move_mount`
//! and `chroot` when `pivot_root` is); where a container refuses them, the
//! *container tier* runs on Landlock, seccomp (sockets limited to TCP), the
//! guard and the connect hand-off, with a private `TMPDIR`.
//!
//! A rule class with no complete holder refuses the run, naming the rule
//! and what its holders need, unless the user accepts fewer rules: srt's
//! `enableWeakerNestedSandbox` accepts the losses the environment's tier
//! brings (what a jail with every namespace step would hold), and
//! `--allow-degraded` accepts every loss; the banner names each one.
//! `--strict` (or `oajail.strict`) refuses any layer below the level the
//! plan was written for.
//!
//! The decision is pure data ([`Negotiation::decide`] over a [`Kernel`] with
//! its [`Steps`] and [`Place`], the policy's [`PlanFacts`] and a
//! [`Request`]), unit-tested as a table of kernels and environments.
//! `run`, `doctor`, `explain` and `-d` read its result.

mod place;
mod rules;
mod spec;
mod steps;
#[cfg(test)]
mod tests;
mod tier;

pub use place::{Ci, Engine, Place};
pub use rules::{Holder, RuleClass, RuleHolding};
pub use spec::{Command, ContainerTier};
pub use steps::{Outcome, StepName, Steps};
pub use tier::{Fallbacks, Tier};

use crate::spec::Layers;
use oajail_policy::Policy;
use oajail_policy::compile::landlock::MIN_ABI;
use serde::Serialize;

/// What the kernel and the environment offer, as far as the jail is
/// concerned (plain data; [`Kernel::probe`] fills it cheaply, and
/// `crate::envprobe` adds what the steps did when they were tried).
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
    /// What each step of a run did when tried ([`Steps::ASSUMED`] when not).
    pub steps: Steps,
    /// Where oajail runs.
    pub place: Place,
}

impl Kernel {
    /// Probe the running kernel with cheap syscalls and look for the marks
    /// of a container engine (no process is created; the steps are
    /// assumed).
    pub fn probe() -> Self {
        Kernel {
            landlock_abi: crate::layers::landlock_abi(),
            seccomp: crate::layers::seccomp_available(),
            user_notif: crate::layers::user_notif_available(),
            mount_api: crate::sys::probe::mount_api_available(),
            steps: Steps::ASSUMED,
            place: Place::detect(),
        }
    }

    /// `self` with every namespace step working: the jail this kernel
    /// would give where the environment refuses nothing.
    fn unconfined(self) -> Kernel {
        Kernel {
            steps: self.steps.namespace_steps(Outcome::Works),
            ..self
        }
    }
}

/// What the policy asks of the kernel layers (derived from the policy, so
/// the decision can be made before the plans are compiled: the jail is
/// cloned first and the plans compiled while its namespaces come up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanFacts {
    /// TCP is restricted to the proxy (no `allowLocalBinding`).
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
    /// Run with the losses of the tier the environment allows (srt's
    /// `enableWeakerNestedSandbox`): the rule classes a jail with every
    /// namespace step would hold and this one does not; the banner names
    /// them. Never asks for a loss: where the full jail runs, it runs.
    pub accept_container: bool,
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
    /// The container tier's network: every `connect`, `bind` and `listen`
    /// of the command made by pid 1 (through the guard's listener), so a
    /// TCP connect ends at the proxy whatever address it names, or is
    /// refused.
    Connect,
}

impl LayerName {
    /// Every layer, in the order the banner lists them.
    pub const ALL: [LayerName; 7] = [
        LayerName::Namespaces,
        LayerName::Mounts,
        LayerName::NetNamespace,
        LayerName::Landlock,
        LayerName::Seccomp,
        LayerName::Guard,
        LayerName::Connect,
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
            LayerName::Connect => "connect",
        }
    }
}

/// At which level a layer runs here.
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
    /// Running, with a negotiated fallback for a step the environment
    /// refuses (what it does instead, and what that loses).
    Fallback {
        /// The fallbacks, in words.
        instead: String,
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
    /// The kernel and environment this was decided for.
    pub kernel: Kernel,
    /// The policy's facts it was decided for.
    pub facts: PlanFacts,
    /// The jail's tier.
    pub tier: Tier,
    /// The fallbacks taken (namespace tier only).
    pub fallbacks: Fallbacks,
    /// Every layer's status, in [`LayerName::ALL`] order.
    pub layers: Vec<(LayerName, LayerStatus)>,
    /// The Landlock ABI the ruleset is built for; 0 when Landlock is off.
    pub landlock_abi: u8,
    /// Every rule class that applies and its holders.
    pub rules: Vec<RuleHolding>,
    /// Rule classes no running layer holds in full (accepted by the
    /// request, or because a test build switched layers off).
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
    /// The environment refuses steps of the full jail and the run did not
    /// accept the losses of the tier it allows.
    #[error("{}", container_refusal(.place, .refused, .losses))]
    Container {
        /// Where oajail runs.
        place: Place,
        /// The refused steps and their errno.
        refused: Vec<(StepName, i32)>,
        /// The rule classes the allowed tier does not hold in full.
        losses: Vec<RuleClass>,
    },
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

/// `container: docker refuses user and pid namespaces (EPERM: docker's
/// default seccomp profile …); its tier loses: …; set … or …`.
fn container_refusal(place: &Place, refused: &[(StepName, i32)], losses: &[RuleClass]) -> String {
    let steps: Vec<String> = (refused.iter())
        .filter(|(step, _)| *step != StepName::MoveChroot)
        .map(|(step, errno)| {
            format!(
                "{} ({}: {})",
                step.describe(),
                crate::error::errno_name(*errno),
                place.blocked_by(*step, *errno)
            )
        })
        .collect();
    let lost: Vec<&str> = losses.iter().map(|c| c.describe()).collect();
    let chroot = !refused.iter().any(|(s, _)| *s == StepName::MoveChroot);
    let what = if place.in_container() {
        "container"
    } else {
        "namespaces"
    };
    format!(
        "{what}: {} refuses {}; the jail it allows does not hold in full: {}; refusing to \
         run (set \"enableWeakerNestedSandbox\": true in the settings, or --allow-degraded, \
         to accept these losses; for the full jail: {})",
        place.describe(),
        steps.join(", "),
        lost.join(", "),
        place.full_jail(refused, chroot)
    )
}

impl Negotiation {
    /// Decide the layers for `kernel`, the policy's `facts` and `request`.
    pub fn decide(
        kernel: Kernel,
        facts: PlanFacts,
        request: &Request,
    ) -> Result<Negotiation, NegotiationError> {
        let mut decided = Negotiation::holding(kernel, facts);
        if request.strict {
            check_strict(&decided.layers)?;
        }
        if !decided.unheld.is_empty() && !request.accept_unheld {
            decided.check_losses(request)?;
        }
        decided.switch_off(&request.test_disabled);
        Ok(decided)
    }

    /// The layers, rules and unheld classes for `kernel`, nothing refused.
    fn holding(kernel: Kernel, facts: PlanFacts) -> Negotiation {
        let (tier, fallbacks) = tier::choose(&kernel);
        let layers = tier::statuses(&kernel, tier, fallbacks);
        let abi = landlock_level(&layers);
        let shape = rules::Shape {
            facts,
            tier,
            proc_fallback: fallbacks.container_proc,
            landlock_abi: abi,
        };
        let rules = rules::holdings(&layers, abi, shape);
        let unheld = rules
            .iter()
            .filter(|r| !r.held())
            .map(|r| r.class)
            .collect();
        Negotiation {
            kernel,
            facts,
            tier,
            fallbacks,
            layers,
            landlock_abi: abi,
            rules,
            unheld,
            test_disabled: Vec::new(),
        }
    }

    /// Refuse unless the request accepts every unheld class: the losses of
    /// the environment's tier need `accept_container` (srt's key), the
    /// others (a kernel feature missing) `accept_unheld`.
    fn check_losses(&self, request: &Request) -> Result<(), NegotiationError> {
        let unconfined = Negotiation::holding(self.kernel.unconfined(), self.facts);
        let (tier_losses, kernel_losses): (Vec<RuleClass>, Vec<RuleClass>) = self
            .unheld
            .iter()
            .partition(|c| !unconfined.unheld.contains(c));
        if !kernel_losses.is_empty() {
            let shape = self.shape();
            let named = (self.rules.iter())
                .filter(|r| kernel_losses.contains(&r.class))
                .map(|r| {
                    let need = rules::needed_feature(r.class, &self.kernel, shape);
                    let mut why = format!("needs {need}");
                    if let Some(part) = r.partly() {
                        why.push_str(&format!("; here only {part}"));
                    }
                    (r.class, why)
                })
                .collect();
            return Err(NegotiationError::Unheld(named));
        }
        if !tier_losses.is_empty() && !request.accept_container {
            let refused = (self.kernel.steps.each().into_iter())
                .filter_map(|(step, o)| match o {
                    Outcome::Refused { errno } => Some((step, errno)),
                    _ => None,
                })
                .collect();
            return Err(NegotiationError::Container {
                place: self.kernel.place,
                refused,
                losses: tier_losses,
            });
        }
        Ok(())
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
            uts: !self.fallbacks.no_uts,
            fresh_proc: !self.fallbacks.container_proc,
            pivot: !self.fallbacks.chroot,
            connect: is_on(LayerName::Connect),
        }
    }

    /// The status of one layer.
    pub fn status(&self, name: LayerName) -> Option<&LayerStatus> {
        self.layers.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    /// The lines printed before the command runs: each fallback taken, and
    /// one line per rule class not held in full, with its loss (empty for
    /// a full run without fallbacks).
    pub fn banner(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        // Layers off for one reason share a line.
        let mut off: Vec<(Vec<&str>, &str)> = Vec::new();
        for (name, status) in &self.layers {
            match status {
                LayerStatus::Fallback { instead } => {
                    lines.push(format!("fallback: {}: {instead}", name.as_str()));
                }
                // Off where the network namespace holds TCP: not a loss.
                LayerStatus::Off { .. } if *name == LayerName::Connect => {}
                LayerStatus::Off { why } if !self.unheld.is_empty() => {
                    match off.iter_mut().find(|(_, w)| w == why) {
                        Some((names, _)) => names.push(name.as_str()),
                        None => off.push((vec![name.as_str()], why)),
                    }
                }
                _ => {}
            }
        }
        for (names, why) in off {
            lines.push(format!("layer off: {}: {why}", names.join(", ")));
        }
        let shape = self.shape();
        lines.extend(
            (self.rules.iter())
                .filter(|r| self.unheld.contains(&r.class))
                .map(|r| {
                    let loss = rules::loss(r, shape);
                    format!("NOT ENFORCED in full: {}: {loss}", r.class.describe())
                }),
        );
        lines
    }

    /// One line per layer and per rule class: what `doctor`, `explain` and
    /// `-d` print.
    pub fn report_lines(&self) -> Vec<String> {
        let mut out = vec![format!("tier: {}", self.tier.describe())];
        for (name, status) in &self.layers {
            let text = match status {
                LayerStatus::Full if *name == LayerName::Landlock => {
                    format!("full (abi {})", self.landlock_abi)
                }
                LayerStatus::Full => "full".to_owned(),
                LayerStatus::Partial { abi, lacks } => format!("abi {abi}: {lacks}"),
                LayerStatus::Fallback { instead } => format!("fallback: {instead}"),
                LayerStatus::Off { why } => format!("off: {why}"),
            };
            out.push(format!("layer {}: {text}", name.as_str()));
        }
        for rule in &self.rules {
            out.push(rule.line());
        }
        out
    }

    fn shape(&self) -> rules::Shape {
        rules::Shape {
            facts: self.facts,
            tier: self.tier,
            proc_fallback: self.fallbacks.container_proc,
            landlock_abi: self.landlock_abi,
        }
    }

    fn set_status(&mut self, name: LayerName, status: LayerStatus) {
        if let Some(entry) = self.layers.iter_mut().find(|(n, _)| *n == name) {
            entry.1 = status;
        }
    }

    /// Apply a test build's switches: the layers go off, and the rule
    /// classes they leave without a holder are listed (never refused).
    fn switch_off(&mut self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        for name in LayerName::ALL {
            if names.iter().any(|n| n == name.as_str()) {
                self.set_status(name, off("switched off by OAJAIL_TEST_DISABLE"));
            }
        }
        // The connect hand-off is served through the guard's listener.
        if names.iter().any(|n| n == "guard") {
            self.set_status(LayerName::Connect, off("its listener is the guard's"));
        }
        self.landlock_abi = landlock_level(&self.layers);
        self.rules = rules::holdings(&self.layers, self.landlock_abi, self.shape());
        self.unheld = (self.rules.iter())
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
            // Not needed where the network namespace holds TCP.
            LayerStatus::Off { .. } if *name == LayerName::Connect => continue,
            LayerStatus::Partial { abi, lacks } => {
                format!("runs at abi {abi}, the plan is written for abi {MIN_ABI} ({lacks})")
            }
            LayerStatus::Fallback { instead } => format!("runs with a fallback: {instead}"),
            LayerStatus::Off { why } => format!("is off: {why}"),
        };
        return Err(NegotiationError::Strict {
            layer: name.as_str(),
            why,
        });
    }
    Ok(())
}
