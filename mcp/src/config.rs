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
}

impl Config {
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
