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
        xdg_config_home: std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
    })
}

/// Compile mounts, Landlock, seccomp, limits, egress and environment.
pub fn compile_all(policy: &Policy, origin: &Origin, env_keep: &[String]) -> Result<Plans, Fail> {
    let facts = host_facts(origin)?;
    let compiled = compile::compile(policy, &facts, &HostFs)
        .map_err(|e| Fail::usage(anyhow!("{origin}: {e}")))?;
    let mut egress =
        EgressPlan::from_policy(policy).map_err(|e| Fail::usage(anyhow!("{origin}: {e}")))?;
    crate::settings::print_warnings(&without_jail_ca(&mut egress));
    let proxy = ProxyEnv {
        url: format!("http://127.0.0.1:{PROXY_PORT}"),
        ssh_helper: vec![facts.exe.to_string_lossy().into_owned(), "ssh-proxy".into()],
    };
    let inherited: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let env = oajail_policy::env::plan(&EnvInputs {
        inherited: &inherited,
        policy,
        extra_keep: env_keep,
        policy_sha256: &compiled.policy_sha256,
        proxy: Some(&proxy),
    });
    Ok(Plans {
        compiled,
        egress,
        env,
    })
}

/// The jail does not install a trust bundle with the run's CA yet
/// (docs/proxy.md, "TLS termination"). A per-run CA would then only break
/// https inside the jail, so srt's `tlsTerminate` without CA paths keeps
/// the opaque tunnel (as before termination existed). A CA from
/// `caCertPath` is kept: the host's roots, which the jail reads, may trust
/// it. Hosts governed by `httpRules` stay terminated: their requests must
/// be checked, so a client that cannot verify the CA is refused, never let
/// through unchecked.
fn without_jail_ca(egress: &mut EgressPlan) -> Vec<String> {
    let mut warnings = Vec::new();
    let per_run = |t: &oajail_policy::l7::TlsTerminate| t.ca_cert_path.is_none();
    if egress.tls_terminate.as_ref().is_some_and(per_run) {
        egress.tls_terminate = None;
        warnings.push("network.tlsTerminate: without caCertPath the jail cannot trust a per-run ca yet, so https stays end to end (opaque, sni-checked tunnels)".to_owned());
    }
    if !egress.http_rules.is_empty() && egress.tls_terminate.is_none() {
        warnings.push("oajail.httpRules: https to the hosts they govern is terminated with a per-run ca that the jail does not trust yet: those requests fail the client's certificate check (plain http is checked by the rules)".to_owned());
    }
    warnings
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
