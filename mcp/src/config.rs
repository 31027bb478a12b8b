//! Runtime configuration: limits, API location and egress authority.
//!
//! Every value can be given as a flag or as the reference server's
//! environment variable; the API key is read from `OA_API_KEY` only, so it
//! never appears in argv (`/proc/<pid>/cmdline` is world-readable).

use crate::McpError;
use std::path::PathBuf;
use std::time::Duration;

/// The default API base URL (OpenAgenda v3 production).
pub const DEFAULT_BASE_URL: &str = "https://api.openagenda.com/v3";
/// The output cap of one `execute` (result plus logs), in bytes.
pub const OUTPUT_CAP: usize = 1024 * 1024;

/// Who bounds the egress of the code this server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EgressAuthority {
    /// An oajail wrapper: verified at boot.
    Wrapper,
    /// Nobody: the server boots with a loud banner.
    None,
}

impl EgressAuthority {
    /// Parses `wrapper|none`; absent means `wrapper` iff `OAJAIL` is set.
    pub fn parse(value: Option<&str>, oajail_set: bool) -> Result<Self, McpError> {
        match value {
            None | Some("") if oajail_set => Ok(Self::Wrapper),
            None | Some("") => Ok(Self::None),
            Some("wrapper") => Ok(Self::Wrapper),
            Some("none") => Ok(Self::None),
            Some(other) => Err(McpError::Config {
                field: "OA_CODE_EGRESS_AUTHORITY",
                message: format!("expected wrapper or none, got {other:?}"),
            }),
        }
    }
}

/// Limits of the `execute` tool.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock deadline of one execute.
    pub timeout: Duration,
    /// QuickJS heap cap in MiB (RLIMIT_AS of the worker is derived from it).
    pub memory_mb: u64,
    /// Cap on result plus logs, in bytes.
    pub output_cap: usize,
    /// Executes running at once.
    pub max_concurrency: usize,
    /// Executes allowed to wait for a slot; more answer `busy` at once.
    pub max_queue: usize,
    /// How long a queued execute waits before answering `busy`.
    pub queue_timeout: Duration,
    /// API calls one execute may make.
    pub max_api_calls: u32,
    /// Per-request timeout of the API client.
    pub api_timeout: Duration,
    /// Pre-started workers kept ready.
    pub pool_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(5000),
            memory_mb: 256,
            output_cap: OUTPUT_CAP,
            max_concurrency: 4,
            max_queue: 64,
            queue_timeout: Duration::from_millis(30_000),
            max_api_calls: 50,
            api_timeout: Duration::from_millis(10_000),
            pool_size: 4,
        }
    }
}

pub use crate::egress::JailBounds;

// The sizes the bounds are made of, measured on the release build
// (docs/mcp.md, "Memory and tasks of the jailed server"): the server idles
// at 12 MiB and peaked at 177 MiB with four executes returning 40,000
// small records each (a 29 MiB tree apiece, under the 32 MiB tree budget,
// plus its reply); a worker idles at 4 MiB and holds its heap cap plus
// about 10 MiB at most; oajail's pid 1 holds 4 MiB; the server's virtual
// size peaked at 370 MB; the jail's tasks at 19 with the default limits.
const MIB: u64 = 1024 * 1024;
const SERVER_IDLE_MB: u64 = 16;
const SERVER_PER_EXECUTE_MB: u64 = 48;
const WORKER_OVER_HEAP_MB: u64 = 32;
const IDLE_WORKER_MB: u64 = 8;
const JAIL_INIT_MB: u64 = 8;
/// Virtual size the server needs whatever the memory it uses (arenas and
/// stacks reserve address space): `RLIMIT_AS` is per process.
const SERVER_VIRTUAL_MB: u64 = 512;
/// The worker lowers its own `RLIMIT_AS` to its heap cap plus this
/// (`worker::sandbox`), which must fit under the jail's.
const WORKER_AS_HEADROOM_MB: u64 = 192;
/// Tasks besides the workers: pid 1, the server's threads (main, the spawn
/// and search lanes, two blocking threads) and slack.
const BASE_TASKS: u64 = 16;

impl Limits {
    /// The jail's bounds for this configuration: the server's own share
    /// (idle, plus its per-execute budget at every concurrency slot), each
    /// running worker's heap and overhead, the pooled workers, pid 1; tasks
    /// for the pool and for running, dying and replacement workers.
    pub fn jail_bounds(&self) -> JailBounds {
        let running = self.max_concurrency as u64;
        let pool = self.pool_size as u64;
        let per_execute = SERVER_PER_EXECUTE_MB + self.memory_mb + WORKER_OVER_HEAP_MB;
        let mb = SERVER_IDLE_MB + JAIL_INIT_MB + running * per_execute + pool * IDLE_WORKER_MB;
        let mb = mb
            .max(SERVER_VIRTUAL_MB)
            .max(self.memory_mb + WORKER_AS_HEADROOM_MB);
        JailBounds {
            address_space_bytes: mb * MIB,
            processes: BASE_TASKS + pool + 3 * running,
        }
    }
}

/// The whole server configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// API base URL; requests go only to its host.
    pub base_url: String,
    /// Extra PEM CA bundle trusted by the API client (development, tests).
    pub extra_ca_certs: Option<PathBuf>,
    /// OpenAPI file replacing the built-in catalogue.
    pub openapi: Option<PathBuf>,
    /// Expose POST/PUT/PATCH/DELETE operations.
    pub allow_writes: bool,
    /// `execute` answers an error; `search_docs` stays up.
    pub execute_disabled: bool,
    /// Execute limits.
    pub limits: Limits,
    /// Egress authority (boot check).
    pub egress: EgressAuthority,
    /// `OA_API_KEY`, trimmed ([`api_key`]).
    pub api_key: Option<String>,
    /// stdio, or HTTP with its OAuth settings ([`crate::remote`]).
    pub transport: crate::remote::Transport,
    /// Per-caller limits ([`crate::callers`]), when any applies.
    pub caller_limits: Option<crate::callers::Limits>,
}

impl Config {
    /// What this configuration, serving `catalogue`, needs from its wrapper
    /// (see [`crate::egress`] and [`crate::http_rules`]).
    pub fn egress_needs(
        &self,
        catalogue: &crate::spec::Catalogue,
    ) -> Result<crate::egress::Needs, McpError> {
        let exe = crate::egress::current_exe()?;
        let mut rules =
            crate::http_rules::ApiRules::derive(&self.base_url, catalogue, self.allow_writes)?;
        if let crate::remote::Transport::Http(h) = &self.transport {
            rules = rules.with_extra(&h.rules(), "the OAuth settings")?;
        }
        let needs = crate::egress::Needs::of(
            &self.api_host()?,
            &exe,
            self.extra_ca_certs.as_deref(),
            self.openapi.as_deref(),
            rules,
        )?
        .with_bounds(self.limits.jail_bounds());
        Ok(match &self.transport {
            crate::remote::Transport::Http(h) => {
                needs.for_http(h.hosts(), h.masked(), h.env_keep(), h.issuers())
            }
            crate::remote::Transport::Stdio => needs,
        })
    }

    /// The host of [`Config::base_url`], the only host the API client talks to.
    pub fn api_host(&self) -> Result<String, McpError> {
        let url = reqwest::Url::parse(&self.base_url).map_err(|e| McpError::Config {
            field: "OA_BASE_URL",
            message: e.to_string(),
        })?;
        if url.scheme() != "https" && url.scheme() != "http" {
            return Err(McpError::Config {
                field: "OA_BASE_URL",
                message: format!("unsupported scheme {}", url.scheme()),
            });
        }
        url.host_str().map(str::to_owned).ok_or(McpError::Config {
            field: "OA_BASE_URL",
            message: "no host".into(),
        })
    }
}

/// Reads a boolean environment-style value (`1`, `true`, `yes`).
pub fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Every `OA_*` variable this server reads. Any other `OA_*` name is refused
/// at start (one line), except the reference server's selectors when they
/// ask for what this server does anyway (`ACCEPTED_FOREIGN`): a setting the
/// user believes in must never be silently ignored.
pub const KNOWN_ENV: &[&str] = &[
    "OA_API_KEY",
    "OA_API_TIMEOUT_MS",
    "OA_BASE_URL",
    "OA_CODE_EGRESS_AUTHORITY",
    "OA_EXECUTE_DISABLED",
    "OA_EXEC_MAX_QUEUE",
    "OA_EXEC_QUEUE_TIMEOUT_MS",
    "OA_EXTRA_CA_CERTS",
    "OA_MAX_API_CALLS",
    "OA_MAX_CONCURRENCY",
    "OA_OAJAIL",
    "OA_OPENAPI",
    "OA_SANDBOX_MEMORY_MB",
    "OA_SANDBOX_TIMEOUT_MS",
    "OA_WORKER_POOL",
    "OA_ALLOW_INSECURE_HTTP",
    "OA_TRANSPORT",
    "OA_RATE_LIMIT_PER_MIN",
    "OA_RATE_LIMIT_BURST",
    "OA_MAX_CONCURRENCY_PER_CALLER",
];

/// Reference-server variables accepted only with the value that names what
/// this server does: QuickJS workers, stdio, the sandbox on.
const ACCEPTED_FOREIGN: &[(&str, &[&str])] = &[
    ("OA_EXECUTOR", &["quickjs"]),
    // Must also agree with the transport (crate::remote).
    ("OA_MCP_MODE", &["stdio", "http"]),
    ("OA_LOCAL_NO_SANDBOX", &["", "0", "false", "no", "off"]),
];

/// Refuses unknown `OA_*` variables and foreign values we do not implement.
pub fn check_env<I: IntoIterator<Item = (String, String)>>(vars: I) -> Result<(), McpError> {
    for (name, value) in vars {
        if !name.starts_with("OA_")
            || KNOWN_ENV.contains(&name.as_str())
            || crate::remote::HTTP_ONLY.contains(&name.as_str())
        {
            continue;
        }
        let v = value.trim().to_ascii_lowercase();
        match ACCEPTED_FOREIGN.iter().find(|(n, _)| *n == name) {
            Some((_, ok)) if ok.contains(&v.as_str()) => {}
            Some((_, ok)) => {
                return Err(McpError::Env {
                    name,
                    message: format!(
                        "{value:?} is not supported by this server (accepted: {})",
                        ok.iter()
                            .filter(|s| !s.is_empty())
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            None => {
                return Err(McpError::Env {
                    name,
                    message: "unknown variable; unset it (docs/mcp.md lists the supported ones)"
                        .into(),
                });
            }
        }
    }
    Ok(())
}

/// Reads a boolean variable strictly: absent is `false`, anything but a
/// true or false spelling is refused.
pub fn env_flag(name: &'static str, value: Option<&str>) -> Result<bool, McpError> {
    let Some(value) = value else { return Ok(false) };
    if truthy(value) {
        return Ok(true);
    }
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(McpError::Env {
            name: name.to_owned(),
            message: format!("{value:?} is not a boolean (1/0, true/false, yes/no, on/off)"),
        }),
    }
}

/// The API key from `OA_API_KEY`: surrounding whitespace (a pasted trailing
/// newline) is trimmed; a key with whitespace or control characters inside
/// is refused, since no HTTP header can carry it. Sending a key over plain
/// `http://` is refused unless `allow_insecure`.
pub fn api_key(
    raw: Option<&str>,
    base_url: &str,
    allow_insecure: bool,
) -> Result<Option<String>, McpError> {
    let Some(key) = raw.map(str::trim).filter(|k| !k.is_empty()) else {
        return Ok(None);
    };
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(McpError::Env {
            name: "OA_API_KEY".into(),
            message: "contains whitespace or control characters inside the key".into(),
        });
    }
    if base_url
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("http://")
        && !allow_insecure
    {
        return Err(McpError::Env {
            name: "OA_API_KEY".into(),
            message: "refusing to send the key over plain http:// (OA_BASE_URL); use https or set OA_ALLOW_INSECURE_HTTP=1".into(),
        });
    }
    Ok(Some(key.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn unknown_and_unsupported_oa_variables_are_refused() {
        assert!(check_env(vars(&[("OA_BASE_URL", "x"), ("PATH", "/bin")])).is_ok());
        assert!(
            check_env(vars(&[
                ("OA_EXECUTOR", "quickjs"),
                ("OA_MCP_MODE", "stdio")
            ]))
            .is_ok()
        );
        for (k, v) in [
            ("OA_EXECUTOR", "bogus"),
            ("OA_MCP_MODE", "sse"),
            ("OA_LOCAL_NO_SANDBOX", "1"),
            ("OA_TYPO_TIMEOUT", "5"),
        ] {
            let e = check_env(vars(&[(k, v)])).unwrap_err().to_string();
            assert!(e.starts_with(&format!("config {k}:")), "{e}");
        }
    }

    #[test]
    fn key_is_trimmed_checked_and_kept_off_plain_http() {
        let https = "https://api.openagenda.com/v3";
        assert_eq!(
            api_key(Some("k1\n"), https, false).unwrap().as_deref(),
            Some("k1")
        );
        assert_eq!(api_key(Some(" \n"), https, false).unwrap(), None);
        assert!(api_key(Some("a b"), https, false).is_err());
        assert!(api_key(Some("k"), "http://x/v3", false).is_err());
        assert!(api_key(Some("k"), "http://x/v3", true).is_ok());
        assert_eq!(api_key(None, "http://x/v3", false).unwrap(), None);
    }

    #[test]
    fn the_jail_bounds_grow_with_what_the_configuration_allows() {
        let d = Limits::default().jail_bounds();
        assert_eq!(d.address_space_bytes, 1400 * MIB);
        assert_eq!(d.processes, 32);
        let small = Limits {
            max_concurrency: 1,
            pool_size: 1,
            memory_mb: 8,
            ..Limits::default()
        }
        .jail_bounds();
        assert_eq!(small.address_space_bytes, SERVER_VIRTUAL_MB * MIB);
        let big = Limits {
            memory_mb: 4096,
            max_concurrency: 1,
            ..Limits::default()
        }
        .jail_bounds();
        assert_eq!(
            big.address_space_bytes,
            (4096 + WORKER_AS_HEADROOM_MB) * MIB
        );
    }

    #[test]
    fn flags_are_strict() {
        assert!(env_flag("OA_EXECUTE_DISABLED", Some("1")).unwrap());
        assert!(!env_flag("OA_EXECUTE_DISABLED", Some("off")).unwrap());
        assert!(env_flag("OA_EXECUTE_DISABLED", Some("maybe")).is_err());
    }
}
