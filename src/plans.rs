//! Compiling every plan for this host: what `run` enforces and `explain` prints.

use crate::Fail;
use crate::settings::Origin;
use anyhow::anyhow;
use oajail_jail::HostFs;
use oajail_jail::net::PROXY_PORT;
use oajail_policy::Policy;
use oajail_policy::compile::{self, CompiledPolicy, HostFacts};
use oajail_policy::egress::EgressPlan;
use oajail_policy::env::{EnvInputs, EnvPlan, ProxyEnv};
use std::ffi::OsString;
use std::path::PathBuf;

/// Every plan for one run.
#[derive(Debug)]
pub struct Plans {
    /// Mounts, Landlock, seccomp, limits.
    pub compiled: CompiledPolicy,
    /// The proxy's allowlist.
    pub egress: EgressPlan,
    /// The command's environment.
    pub env: EnvPlan,
}

/// Facts about this host and caller.
pub fn host_facts(origin: &Origin) -> Result<HostFacts, Fail> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Fail::setup(anyhow!("host facts: HOME is not set")))?;
    let cwd = std::env::current_dir().map_err(|e| Fail::setup(anyhow!("host facts: cwd: {e}")))?;
    Ok(HostFacts {
        home,
        cwd,
        uid: oajail_jail::caller_ids().0,
        gid: oajail_jail::caller_ids().1,
        exe: exe_path()?,
        settings_path: match origin {
            Origin::File(p) => std::fs::canonicalize(p).ok().or_else(|| Some(p.clone())),
            Origin::Builtin => None,
        },
        ssh_auth_sock: std::env::var_os("SSH_AUTH_SOCK")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        mem_total_bytes: mem_total(),
        xdg_config_home: absolute_var("XDG_CONFIG_HOME"),
        xdg_data_home: absolute_var("XDG_DATA_HOME"),
        xdg_state_home: absolute_var("XDG_STATE_HOME"),
    })
}

/// An environment variable naming an absolute directory (relative ones are
/// ignored, as the XDG specification says).
fn absolute_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Compile mounts, Landlock, seccomp, limits, egress and environment.
pub fn compile_all(policy: &Policy, origin: &Origin, env_keep: &[String]) -> Result<Plans, Fail> {
    let facts = host_facts(origin)?;
    let compiled = compile::compile(policy, &facts, &HostFs)
        .map_err(|e| Fail::usage(anyhow!("{origin}: {e}")))?;
    let egress =
        EgressPlan::from_policy(policy).map_err(|e| Fail::usage(anyhow!("{origin}: {e}")))?;
    let proxy = ProxyEnv {
        url: format!("http://127.0.0.1:{PROXY_PORT}"),
        ssh_helper: vec![facts.exe.to_string_lossy().into_owned(), "ssh-proxy".into()],
    };
    let inherited: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut env = oajail_policy::env::plan(&EnvInputs {
        inherited: &inherited,
        policy,
        extra_keep: env_keep,
        policy_sha256: &compiled.policy_sha256,
        proxy: Some(&proxy),
    });
    if egress.needs_ca() {
        add_ca_vars(&mut env);
    }
    Ok(Plans {
        compiled,
        egress,
        env,
    })
}

/// The variables srt points at its trust bundle (`CA_TRUST_VARS`): each
/// names the jail's bundle of the host's roots plus the run's CA.
const CA_VARS: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
    "DENO_CERT",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "NIX_SSL_CERT_FILE",
    // Not in srt's list: these replace a client's roots too, and hosts
    // set them (a value naming the host's store would fail every
    // terminated host).
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "HTTPLIB2_CA_CERTS",
];

/// When some tunnel may be terminated, point every CA variable at the
/// bundle pid 1 installs (an inherited value is replaced: the command must
/// trust the run's CA to reach a terminated host at all).
fn add_ca_vars(env: &mut EnvPlan) {
    let path = oajail_jail::mount::trust::BUNDLE_PATH;
    for name in CA_VARS {
        // Inherited (kept or dropped as secret-looking, like AWS_*): the
        // value is replaced by the bundle's path.
        let dropped = env.dropped.iter().position(|d| d == name);
        let inherited = dropped.is_some() || env.set.iter().any(|(k, _)| k == name);
        if let Some(i) = dropped {
            env.dropped.remove(i);
            env.why.retain(|(k, _)| k != name);
        }
        env.set.retain(|(k, _)| k != name);
        env.set.push(((*name).to_owned(), path.to_owned()));
        if inherited && !env.replaced.iter().any(|r| r == name) {
            env.replaced.push((*name).to_owned());
        }
    }
    env.replaced.sort();
}

/// The read watch (`--watch-reads`): the guard's filter sends every open
/// to pid 1, not only those that can write; returns the paths the jail
/// hides (its masks), whose opens pid 1 reports.
pub fn watch_reads(plans: &mut Plans) -> Vec<PathBuf> {
    use oajail_policy::compile::mounts::MountStep;
    let filter = &mut plans.compiled.guard.filter;
    let opens: Vec<_> = filter.notify_if_write.drain(..).collect();
    for open in opens {
        if open.legacy {
            filter.legacy.push(open.syscall);
        } else {
            filter.notify.push(open.syscall);
        }
    }
    (plans.compiled.mounts.steps.iter())
        .filter_map(|s| match s {
            MountStep::MaskDir { path, .. } | MountStep::MaskFile { path, .. } => {
                Some(PathBuf::from(path))
            }
            _ => None,
        })
        .collect()
}

/// `socket(AF_UNIX)` and datagram `socketpair(AF_UNIX)`, which the policy
/// refuses without `allowAllUnixSockets`, are refused by pid 1 instead of
/// the deny filter, so that the refusal is seen and reported (pid 1 lets
/// stream and seqpacket pairs go on): seccomp keeps the most severe
/// answer of all filters, and the deny filter's `EPERM` would win over the
/// guard's notification. Only while the guard runs (`run.rs` checks);
/// pid 1 answers `EPERM` to every such call, and a jail whose pid 1 no
/// longer answers fails them (`ENOSYS`). Nothing changes when the policy
/// allows unix sockets.
pub fn unix_sockets_to_guard(compiled: &mut oajail_policy::compile::CompiledPolicy) {
    use oajail_policy::compile::seccomp::{AF_UNIX, ArgCmp, ArgOp};
    use oajail_policy::guard::ArgEq;
    let rule = compiled
        .seccomp
        .deny
        .iter_mut()
        .find(|d| d.syscall == "socket");
    let Some(families) = rule.and_then(|r| r.when.first_mut()) else {
        return;
    };
    let lets_through = |c: &ArgCmp| c.arg == 0 && c.op == ArgOp::Ne && c.value == AF_UNIX;
    if families.iter().any(lets_through) {
        return;
    }
    families.push(ArgCmp {
        arg: 0,
        op: ArgOp::Ne,
        value: AF_UNIX,
    });
    compiled.guard.filter.notify_if_eq.push(ArgEq {
        syscall: "socket".into(),
        arg: 0,
        value: AF_UNIX,
    });
    let deny = &mut compiled.seccomp.deny;
    if let Some(at) = deny.iter().position(|d| d.syscall == "socketpair") {
        deny.remove(at);
        compiled.guard.filter.notify_if_eq.push(ArgEq {
            syscall: "socketpair".into(),
            arg: 0,
            value: AF_UNIX,
        });
    }
}

/// Whether [`unix_sockets_to_guard`] moved the refusal.
pub fn unix_sockets_at_guard(compiled: &oajail_policy::compile::CompiledPolicy) -> bool {
    (compiled.guard.filter.notify_if_eq.iter()).any(|e| e.syscall == "socket")
}

/// Undo [`unix_sockets_to_guard`]: the deny filter refuses them again.
pub fn unix_sockets_to_deny_filter(compiled: &mut oajail_policy::compile::CompiledPolicy) {
    use oajail_policy::compile::seccomp::{AF_UNIX, ArgOp};
    let notify = &mut compiled.guard.filter.notify_if_eq;
    let pairs = notify.iter().any(|e| e.syscall == "socketpair");
    notify.retain(|e| e.syscall != "socket" && e.syscall != "socketpair");
    if pairs {
        let deny = &mut compiled.seccomp.deny;
        let at = (deny.iter().position(|d| d.syscall == "socket")).map_or(0, |i| i + 1);
        deny.insert(at, oajail_policy::compile::seccomp::socketpair_rule());
    }
    let rule = compiled
        .seccomp
        .deny
        .iter_mut()
        .find(|d| d.syscall == "socket");
    if let Some(families) = rule.and_then(|r| r.when.first_mut()) {
        families.retain(|c| !(c.arg == 0 && c.op == ArgOp::Ne && c.value == AF_UNIX));
    }
}

fn exe_path() -> Result<PathBuf, Fail> {
    std::env::current_exe()
        .map_err(|e| Fail::setup(anyhow!("host facts: cannot locate the oajail binary: {e}")))
}

fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report
    use super::*;

    fn compiled(json: &str) -> oajail_policy::compile::CompiledPolicy {
        let policy = Policy::from_settings_json(json, "t").unwrap().policy;
        let fs = oajail_policy::compile::MemFs::new().dirs(&["/h/w", "/tmp"]);
        let facts = oajail_policy::compile::HostFacts::with_dirs("/h", "/h/w");
        oajail_policy::compile::compile(&policy, &facts, &fs).unwrap()
    }

    #[test]
    fn unix_socket_refusals_move_to_the_guard_and_back() {
        let net = |unix: bool| {
            format!(
                r#"{{"network":{{"allowedDomains":[],"deniedDomains":[],"allowAllUnixSockets":{unix}}},
                    "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}}}}"#
            )
        };
        let before = compiled(&net(false));
        let mut c = before.clone();
        unix_sockets_to_guard(&mut c);
        assert!(unix_sockets_at_guard(&c));
        assert_ne!(c.seccomp, before.seccomp);
        unix_sockets_to_guard(&mut c); // once only
        // socket(AF_UNIX) and socketpair(AF_UNIX): pid 1 sees both (the
        // plan's own entry, unlinkat by path, is not the supervisor's).
        let sockets = |c: &oajail_policy::compile::CompiledPolicy| {
            (c.guard.filter.notify_if_eq.iter())
                .filter(|e| e.syscall.starts_with("socket"))
                .count()
        };
        assert_eq!(sockets(&c), 2);
        assert!(c.seccomp.deny.iter().all(|d| d.syscall != "socketpair"));
        unix_sockets_to_deny_filter(&mut c);
        assert_eq!(c, before);
        // Allowed by the policy: nothing to see, nothing moves.
        let allowed = compiled(&net(true));
        let mut c = allowed.clone();
        unix_sockets_to_guard(&mut c);
        assert_eq!(c, allowed);
    }

    #[test]
    fn ca_vars_name_the_bundle_whatever_was_inherited() {
        let mut env = EnvPlan {
            set: vec![
                ("PATH".into(), "/bin".into()),
                ("SSL_CERT_FILE".into(), "/etc/ssl/host.pem".into()),
            ],
            dropped: vec!["AWS_CA_BUNDLE".into(), "AWS_SECRET_ACCESS_KEY".into()],
            replaced: Vec::new(),
            why: vec![
                ("AWS_CA_BUNDLE".into(), "secret name".into()),
                ("AWS_SECRET_ACCESS_KEY".into(), "secret name".into()),
            ],
        };
        add_ca_vars(&mut env);
        let bundle = oajail_jail::mount::trust::BUNDLE_PATH;
        for name in CA_VARS {
            let values: Vec<_> = env.set.iter().filter(|(k, _)| k == name).collect();
            assert_eq!(values.len(), 1, "{name}");
            assert_eq!(values[0].1, bundle, "{name}");
        }
        assert_eq!(env.dropped, ["AWS_SECRET_ACCESS_KEY"]);
        assert_eq!(env.why.len(), 1, "{:?}", env.why);
        assert_eq!(env.replaced, ["AWS_CA_BUNDLE", "SSL_CERT_FILE"]);
        assert!(env.set.contains(&("PATH".into(), "/bin".into())));
    }
}
