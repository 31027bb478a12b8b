//! Subcommands: `policy print|hash|check`, `explain`, `completions`, `man`
//! (`doctor` is in doctor.rs).

use crate::cli::{Common, Format, PolicyCmd};
use crate::plans;
use crate::{Fail, settings};
use anyhow::anyhow;
use oajail_jail::negotiate::{Kernel, Negotiation, PlanFacts, Request};
use oajail_jail::seccomp::SeccompProgram;
use serde_json::json;

/// `oajail policy …`.
pub fn policy(common: &Common, cmd: PolicyCmd) -> Result<i32, Fail> {
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    let policy = &loaded.policy;
    match cmd {
        PolicyCmd::Print {
            format: Format::Srt,
        } => {
            settings::print_warnings(&loaded.warnings);
            println!("{}", pretty(&policy.to_srt_json()));
        }
        PolicyCmd::Print {
            format: Format::Json,
        } => {
            settings::print_warnings(&loaded.warnings);
            let mut value: serde_json::Value = serde_json::from_str(&policy.canonical_json())
                .map_err(|e| Fail::setup(anyhow!("canonical json: {e}")))?;
            if let Some(map) = value.as_object_mut() {
                map.insert("policySha256".into(), json!(policy.sha256()));
            }
            println!("{}", pretty(&value));
        }
        PolicyCmd::Hash => println!("{}", policy.sha256()),
        PolicyCmd::Check => {
            println!("ok: {origin}");
            for w in &loaded.warnings {
                println!("warning: {w}");
            }
        }
    }
    Ok(0)
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// `oajail explain [--json]`: every compiled plan.
pub fn explain(common: &Common, as_json: bool) -> Result<i32, Fail> {
    let (loaded, origin) = settings::load(common.settings.as_deref()).map_err(Fail::usage)?;
    settings::print_warnings(&loaded.warnings);
    let mut plans = plans::compile_all(&loaded.policy, &origin, &[])?;
    let kernel = crate::run::kernel_for_run();
    let tier = container_tier_plans(kernel, &loaded.policy, &mut plans.compiled);
    let bpf =
        SeccompProgram::compile(&plans.compiled.seccomp).map_err(|e| Fail::setup(e.into()))?;
    let env_names: Vec<&str> = plans.env.set.iter().map(|(k, _)| k.as_str()).collect();
    let value = json!({
        "origin": origin.to_string(),
        "tier": tier,
        "policySha256": plans.compiled.policy_sha256,
        "entryOrigins": entry_origins(&loaded, &origin),
        "mounts": plans.compiled.mounts,
        "landlock": plans.compiled.landlock,
        "seccomp": plans.compiled.seccomp,
        "seccompBpfInstructions": bpf.len(),
        "guard": plans.compiled.guard,
        "guardProtects": guard_protects(&plans.compiled.guard),
        "limits": plans.compiled.limits,
        "wholeJailBounds": oajail_jail::doctor::whole_jail_bounds(&plans.compiled.limits.rlimits),
        "egress": plans.egress,
        "env": {
            "set": env_names,
            "dropped": plans.env.dropped,
            "replaced": plans.env.replaced,
            "droppedBecause": plans.env.why.iter().map(|(n, w)| format!("{n}: {w}")).collect::<Vec<_>>(),
        },
        "negotiation": negotiated(kernel, PlanFacts::of(&loaded.policy))
            .map_or_else(|e| json!(e.to_string()), |n| json!(n)),
    });
    if as_json {
        println!("{}", pretty(&value));
        return Ok(0);
    }
    println!("policy: {origin}\nsha256: {}", plans.compiled.policy_sha256);
    println!("tier: {tier}");
    for name in [
        "entryOrigins",
        "mounts",
        "landlock",
        "seccomp",
        "guard",
        "guardProtects",
        "limits",
        "wholeJailBounds",
        "egress",
        "env",
    ] {
        println!("\n== {name} ==");
        print_human(&value[name], "");
    }
    println!("\n== negotiation (this kernel) ==");
    for line in negotiation_table(kernel, PlanFacts::of(&loaded.policy)) {
        println!("{line}");
    }
    println!(
        "\n(seccomp: {} BPF instructions; `--json` for the machine-readable form)",
        bpf.len()
    );
    Ok(0)
}

/// The tier a run would have here; in the container tier, the plans as
/// that tier adapts them (its run directory and proxy ports shown as
/// placeholders: each run makes its own).
fn container_tier_plans(
    kernel: Kernel,
    policy: &oajail_policy::Policy,
    plans: &mut oajail_policy::compile::CompiledPolicy,
) -> String {
    use oajail_jail::negotiate::{ContainerTier, Tier};
    let Ok(n) = negotiated(kernel, PlanFacts::of(policy)) else {
        return "refused here (see `oajail doctor`)".into();
    };
    if n.tier == Tier::Container {
        let run = std::path::PathBuf::from("/tmp/oajail-<uid>-<unique>");
        let tier = ContainerTier {
            tmpdir: run.join("tmp"),
            readonly: run.join("etc"),
            proxy: vec![std::net::SocketAddr::from(([127, 0, 0, 1], 0))],
            jail_port: oajail_jail::net::PROXY_PORT,
        };
        n.adapt(plans, &tier);
    }
    n.tier.describe().to_owned()
}

/// Where each `denyRead` entry comes from: the settings file, or the
/// built-in secret list (with its reason), which holds under every file.
fn entry_origins(
    loaded: &oajail_policy::srt::Loaded,
    origin: &settings::Origin,
) -> serde_json::Value {
    let deny: Vec<String> = (loaded.policy.filesystem.deny_read.iter())
        .map(|e| {
            let builtin = loaded.builtin_deny_read.contains(e);
            match oajail_policy::builtin_reason(&e.path) {
                Some(why) if builtin => format!("{}  (built-in: {why})", e.path),
                Some(_) => format!("{}  ({origin}; also built in)", e.path),
                None => format!("{}  ({origin})", e.path),
            }
        })
        .collect();
    json!({
        "denyRead": deny,
        "otherLists": format!("from {origin}"),
    })
}

/// What the guard protects below its roots, in words (the tables of
/// `policy::guard::names` and the git rules; docs/enforcement.md).
fn guard_protects(plan: &oajail_policy::guard::GuardPlan) -> serde_json::Value {
    use oajail_policy::guard::names::{ANYWHERE, CLAUDE, CONFIG_PREFIX, Entry, HOME};
    let show = |e: &Entry, at: &str| {
        let slash = if e.dir { "/" } else { "" };
        format!("{at}{}{slash}  ({})", e.path, e.why)
    };
    let mut home: Vec<String> = HOME
        .iter()
        .map(|e| show(e, &format!("{}/", plan.home)))
        .collect();
    if let Some(ch) = &plan.config_home {
        home.extend(HOME.iter().filter_map(|e| {
            let rest = e.path.strip_prefix(CONFIG_PREFIX)?;
            Some(show(&Entry { path: rest, ..*e }, &format!("{ch}/")))
        }));
    }
    json!({
        "anywhere": ANYWHERE.iter().map(|e| show(e, "")).collect::<Vec<_>>(),
        "inClaudeDirectories": CLAUDE.iter().map(|e| show(e, ".claude/")).collect::<Vec<_>>(),
        "home": home,
        "git": [
            "every git directory (named .git, or holding HEAD with objects, commondir or config): config (unless allowGitConfig), commondir, gitdir, hooks/ (new *.sample files allowed), info/ (a new info/exclude allowed)",
            "no directory other than a .git may come to hold HEAD with objects, commondir, config or gitdir",
            "a .git may only be made as a new directory; a .git file or link is never written, made or moved",
            "core.hooksPath directories, included configuration files and the programs of command-valued keys of the repositories and of the global configuration",
        ],
        "always": [
            "denyWrite entries (existing or not), the settings file and the oajail binary",
            "a protected name's link target when the link is in a writable root, the working directory or the home directory",
            "a hard link of a protected file",
            "links and moved directories are judged by what they are; a link or directory may not replace one that holds protected paths",
        ],
    })
}

/// Text form of one plan section: object keys as headings, list items one
/// per line as compact JSON (plans are long lists of small records).
fn print_human(value: &serde_json::Value, indent: &str) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::Array(items) if items.is_empty() => println!("{indent}{key}: []"),
                    Value::Array(_) | Value::Object(_) => {
                        println!("{indent}{key}:");
                        print_human(v, &format!("{indent}  "));
                    }
                    scalar => println!("{indent}{key}: {scalar}"),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                println!("{indent}- {item}");
            }
        }
        scalar => println!("{indent}{scalar}"),
    }
}

/// The negotiation's layer and rule lines for `kernel` (what a run would
/// hold, decided as if every unheld rule were accepted, so that the table
/// is shown even when the run would be refused).
pub(crate) fn negotiation_table(kernel: Kernel, facts: PlanFacts) -> Vec<String> {
    negotiated(kernel, facts)
        .map(|n| n.report_lines())
        .unwrap_or_else(|e| vec![format!("negotiation: {e}")])
}

/// The negotiation with every unheld rule accepted (what `doctor` and
/// `explain` show; a run decides again with the user's request).
fn negotiated(
    kernel: Kernel,
    facts: PlanFacts,
) -> Result<Negotiation, oajail_jail::negotiate::NegotiationError> {
    let accept = Request {
        accept_unheld: true,
        ..Request::default()
    };
    Negotiation::decide(kernel, facts, &accept)
}

/// `oajail completions SHELL`: the completion script, from the clap definitions.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, Fail> {
    use clap::CommandFactory;
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "oajail", &mut std::io::stdout());
    Ok(0)
}

/// `oajail man`: the manual page (roff), from the clap definitions.
pub fn man() -> Result<i32, Fail> {
    use clap::CommandFactory;
    clap_mangen::Man::new(crate::cli::Cli::command())
        .render(&mut std::io::stdout())
        .map_err(|e| Fail::setup(anyhow!("man page: {e}")))?;
    Ok(0)
}
