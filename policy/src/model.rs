//! The validated policy: the one struct every layer is compiled from.
//!
//! Values here are already checked and normalised: lists are sorted and
//! deduplicated, hosts are canonical, paths are lexically clean. Two inputs
//! that mean the same thing produce equal `Policy` values, which is what makes
//! the canonical hash (see `hash.rs`) stable across key order and list order.

use crate::domain::DomainPattern;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A validated, normalised policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Network rules (srt `network`).
    pub network: NetworkPolicy,
    /// Filesystem rules (srt `filesystem`).
    pub filesystem: FilesystemPolicy,
    /// srt top-level switches that change enforcement.
    pub process: ProcessPolicy,
    /// oajail's own settings (the `"oajail"` object of the settings file).
    pub oajail: OajailSettings,
    /// srt `credentials.envVars` with `mode: "mask"`. Absent from the
    /// canonical form when empty, so policies without it keep their hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<MaskedVar>,
    /// srt `credentials.files` with `mode: "mask"` (their paths are also in
    /// `filesystem.denyRead`). Absent from the canonical form when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credential_files: Vec<MaskedFile>,
}

/// srt `network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Destinations the proxy may reach; empty means no network at all.
    pub allowed_domains: Vec<DomainPattern>,
    /// Destinations always refused; checked before `allowed_domains`.
    pub denied_domains: Vec<DomainPattern>,
    /// Reason text per `deniedDomains` entry (keyed by the entry as written canonically).
    pub denied_domain_reasons: BTreeMap<String, String>,
    /// Extra IPs/CIDRs an allowed hostname must not resolve to.
    pub denied_resolved_addresses: Vec<String>,
    /// Linux: permit `socket(AF_UNIX)` (and AF_VSOCK, as srt does).
    pub allow_all_unix_sockets: bool,
    /// Permit bind/listen and connect to loopback ports other than the proxy's.
    pub allow_local_binding: bool,
    /// Hand the jail's HTTP listener to the user's own proxy on this host port.
    pub http_proxy_port: Option<u16>,
    /// Hand the jail's SOCKS traffic to the user's own proxy on this host port.
    pub socks_proxy_port: Option<u16>,
    /// srt `tlsTerminate`: terminate TLS in the proxy. Absent from the
    /// canonical form when off, so policies without it keep their hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_terminate: Option<crate::l7::TlsTerminate>,
}

/// srt `filesystem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilesystemPolicy {
    /// Read access is denied under these paths.
    pub deny_read: Vec<PathEntry>,
    /// Re-allows reads inside a denied region (a more specific deny still wins).
    pub allow_read: Vec<PathEntry>,
    /// Writable paths; writes are denied everywhere else.
    pub allow_write: Vec<PathEntry>,
    /// Carve-outs inside writable paths; beats `allow_write`.
    pub deny_write: Vec<PathEntry>,
    /// Allow writes to `.git/config` (`.git/hooks` stays protected).
    pub allow_git_config: bool,
}

/// One filesystem entry: `"path"` or `{"path": …, "literal": true}`.
///
/// `path` is kept symbolic so the hash does not depend on the machine: it is
/// absolute (`/…`), home-relative (`~` or `~/…`) or cwd-relative (`.` or a
/// relative path), lexically normalised (no `//`, no `/./`, no trailing `/`).
/// It is resolved against the real home and cwd only when compiling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathEntry {
    /// The normalised path text.
    pub path: String,
    /// True when glob characters in `path` are literal.
    pub literal: bool,
}

/// srt top-level keys that change how the process is confined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessPolicy {
    /// srt `allowNestedUserNamespaces`: the command may create user namespaces.
    pub allow_nested_user_namespaces: bool,
    /// srt `enableWeakerNestedSandbox`: accepts the losses of the tier the
    /// environment allows (a container that refuses steps of the full
    /// jail); never asks for one.
    pub enable_weaker_nested_sandbox: bool,
    /// srt `git.safeDirectories`, injected as `GIT_CONFIG_*` variables.
    pub git_safe_directories: Vec<String>,
}

/// The `"oajail"` object: settings srt does not have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OajailSettings {
    /// Resource limits applied to the jailed command.
    pub limits: Limits,
    /// Environment variables kept even though their names look secret.
    /// A trailing `*` keeps every name with that prefix (`AWS_*`).
    pub env_keep: Vec<String>,
    /// Environment variables always removed, even though their names look
    /// harmless (also fed by srt `credentials.envVars`).
    pub env_deny: Vec<String>,
    /// Run with missing kernel layers (printed as a banner) instead of refusing.
    pub allow_degraded: bool,
    /// IPs/CIDRs the proxy may reach even though they are not public.
    pub allow_private_destinations: Vec<String>,
    /// Method and path rules per host (`docs/policy-format.md`); absent from
    /// the canonical form when empty.
    #[serde(default, skip_serializing_if = "crate::l7::HttpRules::is_empty")]
    pub http_rules: crate::l7::HttpRules,
    /// Run only with every kernel layer at the level the plans are written
    /// for (same as `--strict`), not merely every rule held by some layer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// On an interactive run, ask at the terminal before refusing a host
    /// or a write (same as `--ask`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ask: bool,
    /// Token endpoints whose issued tokens are masked as they arrive
    /// (`crate::issued`); absent from the canonical form when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issued_tokens: Vec<IssuedTokens>,
}

/// Resource limits; `None` leaves the inherited limit in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// RLIMIT_CORE in bytes (default 0: no core dumps). Validation turns
    /// `None` into `Some(0)`: the jail never inherits the core limit.
    pub core_bytes: Option<u64>,
    /// RLIMIT_NOFILE.
    pub open_files: Option<u64>,
    /// RLIMIT_NPROC (per uid; see docs/threat-model.md for why this is brittle).
    pub processes: Option<u64>,
    /// RLIMIT_AS in bytes.
    pub address_space_bytes: Option<u64>,
    /// RLIMIT_FSIZE in bytes.
    pub file_size_bytes: Option<u64>,
    /// RLIMIT_CPU in seconds.
    pub cpu_seconds: Option<u64>,
    /// Size of the private /tmp tmpfs in bytes.
    pub tmp_size_bytes: Option<u64>,
    /// Wall-clock limit in seconds; the whole pid namespace is killed.
    pub wall_seconds: Option<u64>,
}

impl Default for Limits {
    /// No core dumps; every other limit inherited.
    fn default() -> Self {
        Limits {
            core_bytes: Some(0),
            open_files: None,
            processes: None,
            address_space_bytes: None,
            file_size_bytes: None,
            cpu_seconds: None,
            tmp_size_bytes: None,
            wall_seconds: None,
        }
    }
}

/// A policy together with the warnings produced while loading it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The validated policy.
    pub policy: Policy,
    /// One line per accepted-but-unimplemented key, unknown key, or dropped
    /// value, each `<json path>: <what happened>` (no origin prefix).
    pub warnings: Vec<String>,
    /// The `denyRead` entries the built-in secret list added to a settings
    /// file's own ([`Policy::deny_builtin_secret_stores`]); empty until
    /// that step ran.
    pub builtin_deny_read: Vec<PathEntry>,
}

/// One masked environment variable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaskedVar {
    /// The variable's name.
    pub name: String,
    /// Hosts whose requests get the real value (sorted, unique); empty
    /// means the sentinel is never swapped.
    pub inject_hosts: Vec<DomainPattern>,
}

impl MaskedVar {
    /// Whether requests to `host:port` get the real value.
    pub fn injects_to(&self, host: &crate::host::Host, port: u16) -> bool {
        self.inject_hosts.iter().any(|p| p.matches(host, port))
    }
}

/// One masked file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaskedFile {
    /// The file, kept symbolic like `denyRead` entries (also listed there).
    pub path: PathEntry,
    /// Hosts whose requests get the real content (sorted, unique).
    pub inject_hosts: Vec<DomainPattern>,
}

/// One token endpoint whose issued tokens are masked (`oajail.issuedTokens`,
/// validated by `crate::issued`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuedTokens {
    /// `https://host[:port]/path`: lower-case host, the default port left out.
    pub token_url: String,
    /// Hosts whose requests get the real access token (sorted, unique).
    pub inject_hosts: Vec<DomainPattern>,
}

impl IssuedTokens {
    /// The endpoint's host, port and path.
    pub fn endpoint(&self) -> Option<(crate::host::Host, u16, &str)> {
        let rest = self.token_url.strip_prefix("https://")?;
        let (authority, path) = rest.split_at(rest.find('/')?);
        let (name, port) = match crate::host::split_authority(authority) {
            Some((h, p)) => (h, p),
            None => (authority, 443),
        };
        Some((crate::host::canonicalize(name).ok()?, port, path))
    }

    /// Whether a `POST` to `host:port` with `path` is to this endpoint.
    pub fn is_endpoint(&self, host: &crate::host::Host, port: u16, path: &str) -> bool {
        self.endpoint()
            .is_some_and(|(h, p, want)| &h == host && p == port && want == path)
    }
}
