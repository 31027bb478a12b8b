//! The egress policy this server asks its wrapper to enforce, and the boot
//! check that the wrapper really enforces it.
//!
//! The policy is srt settings JSON: network allowed only to the API host,
//! its TLS terminated by the wrapper's proxy (a CA made per run; the CA of
//! `--extra-ca-certs`, when given, trusted for the upstream);
//! `OA_API_KEY` masked (srt `credentials`: the jail holds a stand-in, the
//! proxy swaps the real key in for the API host only); every request to
//! the API host judged by `oajail.httpRules` derived from the spec
//! ([`crate::http_rules`]: the read operations, plus the write operations
//! with `--allow-writes`); the jail's memory and tasks bounded as a whole
//! (`oajail.limits`, [`JailBounds`]); reads denied under `~`
//! but re-allowed for exactly the files the server
//! opens (its binary, the worker binary, the CA bundle and OpenAPI file when
//! given), by absolute canonical path; no writes. Nothing is relative to the
//! working directory, so the same server gets the same policy and hash from
//! any cwd (a `.` entry used to re-open all of `~` when a client started the
//! server in the home directory).
//!
//! Layout: [`Needs`] is what the server derives from its configuration and
//! catalogue, [`srt_settings`] the one place that
//! turns it into policy JSON, [`print()`] the printed forms, [`check_wrapper`]
//! the boot check against the wrapper's hash. Its hash is
//! computed by `oajail-policy` from the very JSON text printed, so
//! `print-egress-policy --format json` and `oajail policy hash` agree by
//! construction.
//!
//! Confinement check (authority `wrapper`): `OAJAIL_POLICY_SHA256` must equal
//! our hash; `/proc/self/status` must show `NoNewPrivs: 1` and `Seccomp: 2`;
//! the network namespace must not be the initial one. "Initial" is detected
//! two ways, both must pass: the namespace inode is not the kernel's fixed
//! init-netns inode (`PROC_NET_INIT_INO`, 0xEFFFFFF9, fixed since Linux
//! 6.x), and the namespace has no interface other than loopback (oajail's
//! namespace has only `lo`; its one way out is the proxy listener on
//! 127.0.0.1). The second test also catches older kernels, where the init
//! inode is allocated dynamically, and any namespace that has a route out.

use crate::McpError;
use crate::http_rules::ApiRules;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `PROC_NET_INIT_INO` from the kernel's `proc_ns.h`.
const INIT_NETNS_INODE: u64 = 0xEFFF_FFF9;

/// What the policy for `--jail` bounds the jail with as a whole
/// (`oajail.limits`): memory (`addressSpaceBytes`: `RLIMIT_AS` of every
/// process, and a memory cgroup for the whole jail where oajail can make
/// one) and tasks (`processes`: `RLIMIT_NPROC`, and a pids cgroup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JailBounds {
    /// `limits.addressSpaceBytes`.
    pub address_space_bytes: u64,
    /// `limits.processes` (threads count).
    pub processes: u64,
}

/// What the server needs from its wrapper: the one host it talks to and the
/// files it reads after start (its own binary, the worker binary, the CA
/// bundle and OpenAPI file when given). Every path is absolute and
/// canonical, so the policy (and its hash) is the same from any working
/// directory and never names a directory the server does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    /// The API host (`allowedDomains`).
    pub api_host: String,
    /// This server binary (canonical).
    pub exe: PathBuf,
    /// Files re-allowed for reading under the denied home.
    pub files: Vec<PathBuf>,
    /// The extra CA the API client trusts (absolute): the proxy must trust
    /// it for the upstream too (`tlsTerminate.extraCaCertPaths`).
    pub extra_ca: Option<PathBuf>,
    /// The request rules for the API host.
    pub rules: ApiRules,
    /// Other hosts the server itself talks to (the OAuth issuer, its key
    /// set, the token exchange), allowed without request rules.
    pub hosts: Vec<String>,
    /// Masked variables and the hosts that get their real value: the API
    /// key to the API host on stdio, the token exchange's client secret to
    /// its host over HTTP.
    pub masked: Vec<(String, String)>,
    /// Configuration variables whose names look secret to oajail but are
    /// not (`OA_OAUTH_ISSUER`…): kept by the policy (`oajail.envKeep`).
    pub env_keep: Vec<String>,
    /// Token endpoints whose issued tokens the wrapper masks, and the host
    /// that gets the real token (`oajail.issuedTokens`): the token
    /// exchange, for the API host.
    pub issued: Vec<(String, String)>,
    /// The jail's memory and task bounds (`oajail.limits`), when set.
    pub bounds: Option<JailBounds>,
}

impl Needs {
    /// The needs of this process: `exe` and its worker, plus the extra CA
    /// bundle and OpenAPI document when given, each made absolute and
    /// canonical, and the API's request rules.
    pub fn of(
        api_host: &str,
        exe: &Path,
        extra_ca: Option<&Path>,
        openapi: Option<&Path>,
        rules: ApiRules,
    ) -> Result<Self, McpError> {
        let mut files = vec![exe.to_path_buf()];
        let worker = crate::worker::worker_exe(exe);
        if worker != exe {
            files.push(worker);
        }
        let extra_ca = extra_ca.map(absolute).transpose()?;
        files.extend(extra_ca.iter().cloned());
        if let Some(path) = openapi {
            files.push(absolute(path)?);
        }
        files.sort();
        files.dedup();
        Ok(Self {
            api_host: api_host.to_owned(),
            exe: exe.to_path_buf(),
            files,
            extra_ca,
            masked: vec![(KEY_VAR.to_owned(), api_host.to_owned())],
            rules,
            hosts: Vec::new(),
            env_keep: Vec::new(),
            issued: Vec::new(),
            bounds: None,
        })
    }

    /// The same needs, with the jail bounded by `bounds` as a whole.
    #[must_use]
    pub fn with_bounds(mut self, bounds: JailBounds) -> Self {
        self.bounds = Some(bounds);
        self
    }

    /// The needs of the HTTP transport: `hosts` allowed beside the API's,
    /// `masked` instead of the API key (which HTTP never uses), the
    /// configuration variables kept, and the token endpoints whose issued
    /// tokens the wrapper masks (for the API host).
    pub fn for_http(
        mut self,
        hosts: Vec<String>,
        masked: Vec<(String, String)>,
        env_keep: Vec<String>,
        issued: Vec<String>,
    ) -> Self {
        self.issued = (issued.into_iter())
            .map(|url| (url, self.api_host.clone()))
            .collect();
        self.hosts = hosts;
        self.hosts.retain(|h| *h != self.api_host);
        self.hosts.sort();
        self.hosts.dedup();
        self.masked = masked;
        self.env_keep = env_keep;
        self
    }
}

/// `path` resolved against the working directory and its symbolic links, so
/// the policy names the file the server will really open.
pub fn absolute(path: &Path) -> Result<PathBuf, McpError> {
    std::fs::canonicalize(path).map_err(|e| McpError::Io {
        what: path.display().to_string(),
        source: e,
    })
}

/// The environment variable holding the API key, masked by the wrapper.
pub const KEY_VAR: &str = "OA_API_KEY";

/// The srt settings for these needs. No relative entry: `.` would re-open
/// the whole home directory when a client starts the server in `~`.
/// `tlsTerminate` names no CA files: the wrapper makes one per run and its
/// key never exists outside the wrapper's memory.
pub fn srt_settings(needs: &Needs) -> Value {
    let display = |p: &PathBuf| p.display().to_string();
    let files: Vec<String> = needs.files.iter().map(display).collect();
    let mut tls = json!({});
    if let Some(ca) = &needs.extra_ca {
        tls["extraCaCertPaths"] = json!([display(ca)]);
    }
    let mut rules = json!({"allow": needs.rules.allow});
    if !needs.rules.deny.is_empty() {
        rules["deny"] = json!(needs.rules.deny);
    }
    let mut domains = vec![needs.api_host.clone()];
    domains.extend(needs.hosts.iter().cloned());
    let masked: Vec<Value> = (needs.masked.iter())
        .map(|(name, host)| json!({"name": name, "mode": "mask", "injectHosts": [host]}))
        .collect();
    let mut oajail = json!({"httpRules": rules});
    if is_loopback_host(&needs.api_host) {
        // A local mock of the API: the proxy (on the host) may dial the
        // host's loopback, and only because the API host is there.
        oajail["allowPrivateDestinations"] = json!(["127.0.0.1", "::1"]);
    }
    if !needs.env_keep.is_empty() {
        oajail["envKeep"] = json!(needs.env_keep);
    }
    if !needs.issued.is_empty() {
        let list: Vec<Value> = (needs.issued.iter())
            .map(|(url, host)| json!({"tokenUrl": url, "injectHosts": [host]}))
            .collect();
        oajail["issuedTokens"] = json!(list);
    }
    json!({
        "network": {
            "allowedDomains": domains,
            "deniedDomains": [],
            "tlsTerminate": tls
        },
        "filesystem": {
            "denyRead": ["~"],
            "allowRead": files,
            "allowWrite": [],
            "denyWrite": []
        },
        "credentials": {"envVars": masked},
        "oajail": oajail_keys(needs, oajail)
    })
}

/// Under an oajail wrapper (`roots` given: the wrapper's bundle), the
/// proxy every request of this server must use, whatever `NO_PROXY` says.
///
/// oajail sets `NO_PROXY=localhost,127.0.0.1,::1` for the programs it
/// jails: a loopback address is the jail's own. This server never wants
/// the jail's loopback: an API (or issuer) on `localhost` is the host's,
/// reachable only through the proxy, which dials from the host and
/// admits loopback only when the policy does (the printed policy does for
/// a loopback API host). Without this a local mock is refused with
/// "connection refused" and no line from oajail.
pub fn wrapper_proxy(roots: Option<&Path>) -> Result<Option<reqwest::Proxy>, McpError> {
    if roots.is_none() {
        return Ok(None);
    }
    let raw = std::env::var("HTTPS_PROXY")
        .or_else(|_| std::env::var("https_proxy"))
        .map_err(|_| McpError::Egress("the wrapper set no HTTPS_PROXY".into()))?;
    reqwest::Proxy::all(&raw)
        .map(Some)
        .map_err(|e| McpError::Egress(format!("HTTPS_PROXY {raw:?}: {e}")))
}

/// `localhost`, `127.0.0.0/8` or `::1`.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The `oajail` object's bounds, when set, added to `keys`.
fn oajail_keys(needs: &Needs, mut keys: Value) -> Value {
    if let Some(b) = needs.bounds {
        keys["limits"] = json!({
            "addressSpaceBytes": b.address_space_bytes,
            "processes": b.processes,
        });
    }
    keys
}

/// This binary, canonical (what `/proc/self/exe` names).
pub fn current_exe() -> Result<PathBuf, McpError> {
    let exe = std::env::current_exe().map_err(|e| McpError::Io {
        what: "current executable".into(),
        source: e,
    })?;
    absolute(&exe)
}

/// The policy hash of srt settings text, computed by `oajail-policy`.
pub fn policy_hash(srt_text: &str) -> Result<String, McpError> {
    let mut loaded = oajail_policy::Policy::from_settings_json(srt_text, "print-egress-policy")
        .map_err(McpError::EgressPolicy)?;
    // oajail keeps the built-in secret stores denied under every settings
    // file (those it does not re-allow), and exports the hash of that
    // policy as OAJAIL_POLICY_SHA256: so does the hash the boot check wants.
    loaded.policy.deny_builtin_secret_stores();
    Ok(loaded.policy.sha256())
}

/// The text printed by `print-egress-policy --format srt|json`.
pub fn print(format: &str, needs: &Needs) -> Result<String, McpError> {
    let settings = srt_settings(needs);
    let text = serde_json::to_string_pretty(&settings).map_err(McpError::EgressJson)?;
    match format {
        "srt" => Ok(text),
        "json" => {
            let hash = policy_hash(&text)?;
            let mut out = settings;
            out["policySha256"] = json!(hash);
            serde_json::to_string_pretty(&out).map_err(McpError::EgressJson)
        }
        other => Err(McpError::Config {
            field: "--format",
            message: format!("expected srt or json, got {other:?}"),
        }),
    }
}

/// What `/proc` says about this process's confinement.
#[derive(Debug, PartialEq, Eq)]
pub struct Confinement {
    /// `NoNewPrivs` is 1.
    pub no_new_privs: bool,
    /// `Seccomp` mode (2 = filter).
    pub seccomp: u8,
    /// Inode of `/proc/self/ns/net`.
    pub netns_inode: u64,
    /// Interfaces other than `lo`.
    pub interfaces: Vec<String>,
}

impl Confinement {
    /// Reads the facts from `/proc/self`.
    pub fn read() -> Result<Self, McpError> {
        use std::os::unix::fs::MetadataExt;
        let io = |what: &str| {
            let what = what.to_owned();
            move |e| McpError::Io { what, source: e }
        };
        let status =
            std::fs::read_to_string("/proc/self/status").map_err(io("/proc/self/status"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        let netns_inode = std::fs::metadata("/proc/self/ns/net")
            .map_err(io("/proc/self/ns/net"))?
            .ino();
        let dev =
            std::fs::read_to_string("/proc/self/net/dev").map_err(io("/proc/self/net/dev"))?;
        Ok(Self {
            no_new_privs: field("NoNewPrivs:") == "1",
            seccomp: field("Seccomp:").parse().unwrap_or(0),
            netns_inode,
            interfaces: parse_interfaces(&dev),
        })
    }

    /// Problems that mean "not confined"; empty when confined.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.no_new_privs {
            out.push("NoNewPrivs is not 1".to_owned());
        }
        if self.seccomp != 2 {
            out.push(format!(
                "Seccomp is {} (expected 2, filter mode)",
                self.seccomp
            ));
        }
        if self.netns_inode == INIT_NETNS_INODE {
            out.push("running in the initial network namespace".to_owned());
        }
        if !self.interfaces.is_empty() {
            out.push(format!(
                "network interfaces other than lo: {}",
                self.interfaces.join(", ")
            ));
        }
        out
    }
}

/// Interface names from `/proc/net/dev`, minus `lo`.
pub fn parse_interfaces(dev: &str) -> Vec<String> {
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty() && n != "lo")
        .collect()
}

/// The boot check for authority `wrapper`.
pub fn check_wrapper(needs: &Needs, wrapper_hash: Option<&str>) -> Result<(), McpError> {
    let text = print("srt", needs)?;
    let ours = policy_hash(&text)?;
    let regenerate = "start the server as `openagenda-mcp --jail` (it runs itself under oajail \
                      with this very policy), or pass `openagenda-mcp print-egress-policy` \
                      to `oajail --settings`";
    match wrapper_hash {
        None => {
            return Err(McpError::Egress(format!(
                "OAJAIL_POLICY_SHA256 is not set (expected {ours}); run under oajail: {regenerate}"
            )));
        }
        Some(theirs) if theirs != ours => {
            return Err(McpError::Egress(format!(
                "policy mismatch: wrapper enforces {theirs}, this server needs {ours}; regenerate with: {regenerate}"
            )));
        }
        Some(_) => {}
    }
    let problems = Confinement::read()?.problems();
    if !problems.is_empty() {
        return Err(McpError::Egress(format!(
            "not confined: {}",
            problems.join("; ")
        )));
    }
    Ok(())
}

/// The banner printed when nobody bounds egress.
pub const UNBOUNDED_BANNER: &str = "\
openagenda-mcp: ************************************************************
openagenda-mcp: WARNING: egress is NOT bounded (OA_CODE_EGRESS_AUTHORITY=none).
openagenda-mcp: Model-written code runs in seccomp'd QuickJS workers that
openagenda-mcp: cannot open files or sockets, but this server process itself
openagenda-mcp: is not jailed. Run it as `oajail -- openagenda-mcp` with the
openagenda-mcp: policy from `openagenda-mcp print-egress-policy --format srt`.
openagenda-mcp: ************************************************************
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_skip_header_and_lo() {
        let dev = "Inter-| x\n face |y\n    lo: 1 2\n  eth0: 3 4\n";
        assert_eq!(parse_interfaces(dev), vec!["eth0"]);
    }

    #[test]
    fn initial_netns_is_a_problem() {
        let c = Confinement {
            no_new_privs: true,
            seccomp: 2,
            netns_inode: INIT_NETNS_INODE,
            interfaces: vec![],
        };
        assert_eq!(
            c.problems(),
            vec!["running in the initial network namespace"]
        );
        let ok = Confinement {
            netns_inode: 4026532000,
            ..c
        };
        assert!(ok.problems().is_empty());
    }
}
