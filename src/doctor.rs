//! `oajail doctor`: the run, tried. Every step a run takes is tried in a
//! throw-away child; for each refused one, the setting that refuses it here
//! and the change that lets it through, in the engine's terms; then the
//! negotiation a run without flags would make, and its verdict.

use crate::{Fail, settings};
use oajail_jail::doctor::KernelFeatures;
use oajail_jail::negotiate::{
    LayerName, LayerStatus, Negotiation, NegotiationError, Outcome, PlanFacts, StepName, Tier,
};

/// `oajail doctor`.
pub fn doctor(common: &crate::cli::Common) -> Result<i32, Fail> {
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    let k = KernelFeatures::probe();
    let f = k.features;
    let show = |v: Option<u64>| v.map_or("absent".to_string(), |v| v.to_string());
    let yes = |b: bool| if b { "yes" } else { "no" };
    println!("kernel: {}", k.kernel);
    println!("place: {}", f.place.describe());
    match f.landlock_abi {
        Some(v) => println!("landlock: abi {v}"),
        None => println!("landlock: unavailable"),
    }
    println!("seccomp filters: {}", yes(f.seccomp));
    println!(
        "seccomp user notification with addfd: {}",
        yes(f.user_notif)
    );
    println!(
        "mount api (open_tree, move_mount, mount_setattr): {}",
        yes(f.mount_api)
    );
    println!("user.max_user_namespaces: {}", show(k.max_user_namespaces));
    println!(
        "kernel.unprivileged_userns_clone: {}",
        show(k.unprivileged_userns_clone)
    );
    println!(
        "kernel.apparmor_restrict_unprivileged_userns: {}",
        show(k.apparmor_restrict_unprivileged_userns)
    );
    for line in step_lines(&f) {
        println!("{line}");
    }
    let refused_ns = f.steps.user_namespace.refused() || f.steps.id_maps.refused();
    if let (true, Some(hint)) = (refused_ns, oajail_jail::doctor::apparmor_userns_hint()) {
        println!("fix: {hint}");
    }
    println!("policy: {origin}");
    let limits = oajail_policy::compile::limits::plan(&loaded.policy.oajail.limits);
    println!(
        "{}",
        oajail_jail::doctor::whole_jail_bounds(&limits.rlimits)
    );
    let facts = PlanFacts::of(&loaded.policy);
    for line in crate::commands::negotiation_table(f, facts) {
        println!("{line}");
    }
    let request = crate::run::settings_request(&loaded.policy);
    let decided = Negotiation::decide(f, facts, &request);
    // The plans for this working directory, as a run compiles them: a
    // policy this place refuses (a cwd in the private /tmp) refuses the run.
    if let (Ok(_), Err(fail)) = (
        &decided,
        crate::plans::compile_all(&loaded.policy, &origin, &[]),
    ) {
        println!("verdict: refused: {:#}", fail.err);
        return Ok(1);
    }
    println!("verdict: {}", verdict(&decided));
    Ok(if decided.is_ok() { 0 } else { 1 })
}

/// One line per step: what it did, and for a refused one what refuses it
/// here and how to let it through.
fn step_lines(f: &oajail_jail::negotiate::Kernel) -> Vec<String> {
    let s = &f.steps;
    (s.each().into_iter())
        .map(|(step, outcome)| {
            let what = match (step, outcome) {
                (StepName::MoveChroot, Outcome::Untried) if s.pivot_root.works() => {
                    "not needed (pivot_root works)".to_owned()
                }
                (_, Outcome::Refused { errno }) if !fallback_only(step) => format!(
                    "{}: {}; fix: {}",
                    outcome.describe(),
                    f.place.blocked_by(step, errno),
                    f.place.fix(step, errno)
                ),
                _ => outcome.describe(),
            };
            format!("step {}: {what}", step.describe())
        })
        .collect()
}

/// Steps whose refusal only takes away a fallback.
fn fallback_only(step: StepName) -> bool {
    matches!(
        step,
        StepName::MoveChroot | StepName::Landlock | StepName::SeccompListener
    )
}

/// The verdict a run without flags would reach.
fn verdict(decided: &Result<Negotiation, NegotiationError>) -> String {
    let n = match decided {
        Err(e) => return format!("refused: {e}"),
        Ok(n) => n,
    };
    let fallbacks = (n.layers.iter()).any(|(_, s)| matches!(s, LayerStatus::Fallback { .. }));
    // The connect hand-off is off where the network namespace holds TCP.
    let all_full = (n.layers.iter()).all(|(name, s)| {
        *s == LayerStatus::Full
            || (*name == LayerName::Connect && matches!(s, LayerStatus::Off { .. }))
    }) && n.tier == Tier::Namespaces;
    if n.unheld.is_empty() && all_full {
        return "every layer at its planned level; runs".into();
    }
    if n.unheld.is_empty() {
        let with = if fallbacks { ", with fallbacks" } else { "" };
        return format!(
            "every rule held by at least one layer{with}; runs (--strict would refuse)"
        );
    }
    let lost: Vec<&str> = n.unheld.iter().map(|c| c.describe()).collect();
    format!(
        "runs in the {} tier, with these rules not held in full (accepted by the \
         settings): {}",
        match n.tier {
            Tier::Namespaces => "namespace",
            Tier::Container => "container",
        },
        lost.join(", ")
    )
}
