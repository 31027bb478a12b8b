//! The environment of the jailed command, planned as plain data.
//!
//! [`plan`] is a pure function of the inherited environment, the policy, the
//! caller's `--env-keep` names, the policy hash and the proxy settings. srt
//! passes the whole environment through; oajail passes it through *minus*
//! what would hand the command a credential or a way out of the jail, then
//! sets its own variables. For each inherited variable, in order:
//!
//! 1. a malformed entry (empty name, `=` or NUL in the name, not UTF-8) or a
//!    repeated name (libc's `getenv` takes the first, other readers may not)
//!    is dropped, and keeping cannot bring it back;
//! 2. a variable oajail sets itself (below) is replaced, and keeping does
//!    not change that: the jail's proxy and tmp must be the ones in use;
//! 3. a name in the policy's `envDeny` is dropped (deny beats keep);
//! 4. a name kept by the policy's `envKeep` or by `--env-keep` (exact, or a
//!    prefix ending in `*`) passes;
//! 5. a name that looks secret ([`SECRET_SUBSTRINGS`], [`SECRET_SEGMENTS`],
//!    [`SECRET_PREFIXES`]), names a socket, agent or display
//!    ([`SOCKET_NAMES`]), is another proxy setting (`*_PROXY`), carries git
//!    config (`GIT_CONFIG_*`, which can hold `http.extraHeader` tokens), or
//!    whose value is a URL with user information (`postgres://u:p@h/db`) or
//!    holds a recognisable secret (a well-known token prefix such as `ghp_`,
//!    `github_pat_`, `xoxb-`, `AKIA`, `sk-`; a PEM private key; a JWT; an
//!    assignment of a password or key such as `password=`, `Pwd=`,
//!    `AccountKey=` in a query or connection string; an `Authorization`
//!    scheme with its credentials: see `env_values.rs`) is dropped;
//!    `explain` shows why;
//! 6. everything else passes unchanged.
//!
//! Then oajail's own variables are appended in a fixed order:
//! `SANDBOX_RUNTIME=1`, `OAJAIL=1`, `OAJAIL_POLICY_SHA256`, `TMPDIR=/tmp`
//! (and `TMP`/`TEMP=/tmp` when they were inherited), the proxy variables when
//! a proxy is configured, and `GIT_CONFIG_*` for `git.safeDirectories`.

use crate::Policy;
pub use crate::env_values::secret_in_value;
use std::collections::BTreeSet;
use std::ffi::OsString;

/// Substrings (of the upper-cased name) that mark a secret.
pub const SECRET_SUBSTRINGS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "APIKEY",
    "MNEMONIC",
];

/// `_`-separated words (of the upper-cased name) that mark a secret; a word
/// ending in `KEY` (`APIKEY`, `PRIVKEY`) counts as `KEY`.
pub const SECRET_SEGMENTS: &[&str] = &[
    "KEY",
    "KEYS",
    "AUTH",
    "OAUTH",
    "AUTHN",
    "AUTHZ",
    "AUTHORIZATION",
    "AUTHENTICATION",
    "BEARER",
    "COOKIE",
    "COOKIES",
    "PASS",
    "PW",
    "PWD",
    "PAT",
    "JWT",
    "DSN",
    "WEBHOOK",
    "SIGNING",
    "HOOK",
    "LOGIN",
];

/// Name prefixes that mark a secret.
pub const SECRET_PREFIXES: &[&str] = &["AWS_", "OP_SESSION_", "BW_SESSION"];

/// Variables that point at a socket, agent, display or ticket outside the
/// jail: unreachable from inside (or a way out if they were reachable).
pub const SOCKET_NAMES: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_ASKPASS",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "GNOME_KEYRING_PID",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "SESSION_MANAGER",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "PULSE_SERVER",
    "PIPEWIRE_REMOTE",
    "DOCKER_HOST",
    "DOCKER_CERT_PATH",
    "CONTAINER_HOST",
    "KRB5CCNAME",
    "KRB5_KTNAME",
    "KRB5_CLIENT_KTNAME",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "KITTY_LISTEN_ON",
    "ALACRITTY_SOCKET",
    "WEZTERM_UNIX_SOCKET",
    "VSCODE_IPC_HOOK",
    "VSCODE_IPC_HOOK_CLI",
    "VSCODE_GIT_IPC_HANDLE",
    "VSCODE_GIT_ASKPASS_NODE",
    "VSCODE_GIT_ASKPASS_MAIN",
    "VSCODE_GIT_ASKPASS_EXTRA_ARGS",
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

/// Proxy variables set (and so owned) by oajail when a proxy is configured.
const PROXY_URL_NAMES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "GRPC_PROXY",
    "grpc_proxy",
    "DOCKER_HTTP_PROXY",
    "DOCKER_HTTPS_PROXY",
];

/// What `NO_PROXY` says inside the jail: loopback only.
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// How the jailed command reaches oajail's proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEnv {
    /// The proxy URL, e.g. `http://127.0.0.1:3128`.
    pub url: String,
    /// The argv of the ssh ProxyCommand helper, e.g.
    /// `["/usr/bin/oajail", "ssh-proxy-helper"]`; ssh appends host and port.
    /// Empty: `GIT_SSH_COMMAND` is not set.
    pub ssh_helper: Vec<String>,
}

/// The inputs of [`plan`].
#[derive(Debug, Clone, Copy)]
pub struct EnvInputs<'a> {
    /// The environment oajail was started with, in order.
    pub inherited: &'a [(OsString, OsString)],
    /// The enforced policy (`oajail.envKeep`, `oajail.envDeny`, `git.safeDirectories`).
    pub policy: &'a Policy,
    /// Names from `--env-keep` (same syntax as `envKeep`).
    pub extra_keep: &'a [String],
    /// [`Policy::sha256`] of the enforced policy.
    pub policy_sha256: &'a str,
    /// The proxy, or `None` when the jail has no network path at all.
    pub proxy: Option<&'a ProxyEnv>,
}

/// The planned environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPlan {
    /// The environment to exec with, in order.
    pub set: Vec<(String, String)>,
    /// Inherited names removed (sorted, unique), for `oajail explain`.
    pub dropped: Vec<String>,
    /// Inherited names whose value oajail replaced (sorted, unique).
    pub replaced: Vec<String>,
    /// Why each dropped name was dropped (in the order of the inherited
    /// environment), for `oajail explain`.
    pub why: Vec<(String, String)>,
}

/// Why an inherited variable is not passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Bad name, not UTF-8, or a repeat of an earlier name.
    Malformed,
    /// Listed in the policy's `envDeny` (or srt `credentials.envVars`).
    PolicyDeny,
    /// The name looks like it holds a secret.
    SecretName,
    /// A socket, agent, display or ticket variable.
    Socket,
    /// A proxy setting oajail does not set itself.
    Proxy,
    /// Git configuration injected through the environment.
    GitConfig,
    /// The value is a URL with user information (a password or token).
    CredentialUrl,
    /// The value holds a secret recognised by its form (what it is).
    SecretValue(&'static str),
    /// Masked by srt `credentials` (`mode: "mask"`): the supervisor puts a
    /// per-run sentinel in its place.
    Masked,
}

impl DropReason {
    /// The reason in words, as `oajail explain` shows it.
    pub fn describe(self) -> String {
        match self {
            DropReason::Malformed => "malformed or repeated".into(),
            DropReason::PolicyDeny => "listed in envDeny".into(),
            DropReason::SecretName => "the name looks secret".into(),
            DropReason::Socket => "points at a socket, agent or display outside the jail".into(),
            DropReason::Proxy => "a proxy setting oajail does not own".into(),
            DropReason::GitConfig => "git configuration through the environment".into(),
            DropReason::CredentialUrl => "the value is a url with user information".into(),
            DropReason::SecretValue(what) => format!("the value holds a {what}"),
            DropReason::Masked => "masked: the jail gets a per-run sentinel instead".into(),
        }
    }
}

/// Why `name=value` would be dropped if it were not kept, or `None`.
/// Does not cover [`DropReason::Malformed`] or [`DropReason::PolicyDeny`].
pub fn drop_reason(name: &str, value: &str) -> Option<DropReason> {
    let upper = name.to_ascii_uppercase();
    if is_secret_name(&upper) {
        Some(DropReason::SecretName)
    } else if SOCKET_NAMES.contains(&name) {
        Some(DropReason::Socket)
    } else if upper.ends_with("_PROXY") {
        Some(DropReason::Proxy)
    } else if upper.starts_with("GIT_CONFIG_") || upper == "GIT_CONFIG_PARAMETERS" {
        Some(DropReason::GitConfig)
    } else if has_userinfo(value) {
        Some(DropReason::CredentialUrl)
    } else {
        crate::env_values::secret_in_value(value).map(DropReason::SecretValue)
    }
}

fn is_secret_name(upper: &str) -> bool {
    if matches!(upper, "PWD" | "OLDPWD") {
        return false;
    }
    SECRET_SUBSTRINGS.iter().any(|s| upper.contains(s))
        || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
        || upper.split('_').any(|seg| {
            SECRET_SEGMENTS.contains(&seg)
                    || (seg.len() > 3 && seg.ends_with("KEY"))
                    // SSHPASS, MYSQLPASS: a word ending in PASS.
                    || (seg.len() > 4 && seg.ends_with("PASS"))
        })
}

/// True when `value` contains `scheme://user@…` or `scheme://user:pass@…`.
fn has_userinfo(value: &str) -> bool {
    value.match_indices("://").any(|(at, _)| {
        let authority = &value[at + 3..];
        let end = authority
            .find(['/', '?', '#', ' '])
            .unwrap_or(authority.len());
        authority[..end].contains('@')
    })
}

/// Checks one `--env-keep` value: a variable name, or a prefix ending in
/// `*` (`AWS_*`). A bare `*` is refused: it would keep every secret.
/// [`plan`] ignores entries that fail this check, so the CLI should call it
/// and refuse them with this message.
pub fn check_keep_name(name: &str) -> Result<(), String> {
    if valid_env_pattern(name) {
        Ok(())
    } else {
        Err(format!(
            "--env-keep {}: not an environment variable name (letters, digits and _, optionally ending in *)",
            crate::error::quote(name)
        ))
    }
}

/// True when `name` is matched by a valid keep entry (exact, or `PREFIX*`).
fn is_kept(name: &str, keep: &[String]) -> bool {
    let mut valid = keep.iter().filter(|k| check_keep_name(k).is_ok());
    valid.any(|k| match k.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == k,
    })
}

/// Plans the jailed command's environment; see the module docs for the rules.
pub fn plan(inputs: &EnvInputs<'_>) -> EnvPlan {
    let owned = owned_variables(inputs);
    let mut plan = EnvPlan::default();
    pass_inherited(inputs, &owned, &mut plan);
    let kept_git_count = git_config_base(&plan.set);
    let git = git_safe_directories(inputs.policy, kept_git_count);
    if !git.is_empty() && plan.set.iter().any(|(n, _)| n == "GIT_CONFIG_COUNT") {
        plan.set.retain(|(n, _)| n != "GIT_CONFIG_COUNT");
        plan.replaced.push("GIT_CONFIG_COUNT".to_owned());
    }
    plan.set.extend(owned);
    plan.set.extend(git);
    for list in [&mut plan.dropped, &mut plan.replaced] {
        list.sort();
        list.dedup();
    }
    plan
}

/// Steps 1 to 6 of the module docs: sorts each inherited variable into
/// `set`, `dropped` or `replaced`.
fn pass_inherited(inputs: &EnvInputs<'_>, owned: &[(String, String)], plan: &mut EnvPlan) {
    let settings = &inputs.policy.oajail;
    let keep: Vec<String> = (settings.env_keep.iter().chain(inputs.extra_keep))
        .cloned()
        .collect();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (name, value) in inputs.inherited {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            plan.drop(&name.to_string_lossy(), DropReason::Malformed);
            continue;
        };
        // `insert` is false for a repeated name.
        if name.is_empty() || name.contains(['=', '\0']) || !seen.insert(name) {
            plan.drop(name, DropReason::Malformed);
        } else if owned.iter().any(|(n, _)| n == name) {
            plan.replaced.push(name.to_owned());
        } else if settings.env_deny.iter().any(|d| d == name) {
            plan.drop(name, DropReason::PolicyDeny);
        } else if inputs.policy.credentials.iter().any(|m| m.name == name) {
            plan.drop(name, DropReason::Masked);
        } else if let Some(why) = drop_reason(name, value).filter(|_| !is_kept(name, &keep)) {
            plan.drop(name, why);
        } else {
            plan.set.push((name.to_owned(), value.to_owned()));
        }
    }
}

impl EnvPlan {
    fn drop(&mut self, name: &str, why: DropReason) {
        self.dropped.push(name.to_owned());
        self.why.push((name.to_owned(), why.describe()));
    }
}

/// The variables oajail sets (other than `GIT_CONFIG_*`), in order.
fn owned_variables(inputs: &EnvInputs<'_>) -> Vec<(String, String)> {
    let mut vars = vec![
        ("SANDBOX_RUNTIME".to_owned(), "1".to_owned()),
        ("OAJAIL".to_owned(), "1".to_owned()),
        (
            "OAJAIL_POLICY_SHA256".to_owned(),
            inputs.policy_sha256.to_owned(),
        ),
        ("TMPDIR".to_owned(), "/tmp".to_owned()),
    ];
    // TMP and TEMP are only replaced when present, so that a tool reading
    // them never sees a host directory it cannot write.
    for name in ["TMP", "TEMP"] {
        if inputs.inherited.iter().any(|(n, _)| n == name) {
            vars.push((name.to_owned(), "/tmp".to_owned()));
        }
    }
    let Some(proxy) = inputs.proxy else {
        return vars;
    };
    for name in PROXY_URL_NAMES {
        vars.push(((*name).to_owned(), proxy.url.clone()));
    }
    vars.push(("NO_PROXY".to_owned(), NO_PROXY.to_owned()));
    vars.push(("no_proxy".to_owned(), NO_PROXY.to_owned()));
    // Node's fetch ignores the proxy variables unless told (srt sets this on
    // Windows only, so `fetch` fails inside srt on Linux).
    vars.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
    if !proxy.ssh_helper.is_empty() {
        vars.push((
            "GIT_SSH_COMMAND".to_owned(),
            git_ssh_command(&proxy.ssh_helper),
        ));
    }
    vars
}

/// The value of a kept, well-formed `GIT_CONFIG_COUNT` (0 when absent or
/// not a number; it is replaced whenever oajail adds entries).
fn git_config_base(set: &[(String, String)]) -> usize {
    set.iter()
        .find(|(n, _)| n == "GIT_CONFIG_COUNT")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// `GIT_CONFIG_COUNT/KEY_n/VALUE_n` adding one `safe.directory` per entry,
/// numbered after any kept inherited ones.
fn git_safe_directories(policy: &Policy, base: usize) -> Vec<(String, String)> {
    let dirs = &policy.process.git_safe_directories;
    if dirs.is_empty() {
        return Vec::new();
    }
    let mut vars = vec![(
        "GIT_CONFIG_COUNT".to_owned(),
        (base + dirs.len()).to_string(),
    )];
    for (i, dir) in dirs.iter().enumerate() {
        vars.push((
            format!("GIT_CONFIG_KEY_{}", base + i),
            "safe.directory".to_owned(),
        ));
        vars.push((format!("GIT_CONFIG_VALUE_{}", base + i), dir.clone()));
    }
    vars
}

/// `ssh` through the proxy: the helper argv is quoted for the shell that
/// ssh runs ProxyCommand with (and `%` doubled, since ssh expands `%`
/// tokens), then the whole option is quoted again for the shell git runs
/// `GIT_SSH_COMMAND` with.
pub fn git_ssh_command(helper: &[String]) -> String {
    let words: Vec<String> = helper
        .iter()
        .map(|w| shell_quote(&w.replace('%', "%%")))
        .collect();
    let proxy_command = format!("ProxyCommand={} %h %p", words.join(" "));
    format!(
        "ssh -o ControlMaster=no -o ControlPath=none -o {}",
        shell_quote(&proxy_command)
    )
}

/// `word` quoted for POSIX `sh` (unchanged when it has no special characters).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// srt's environment-variable name rule: `^[A-Za-z_][A-Za-z0-9_]*$`.
pub(crate) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A name, or a prefix followed by `*` (`AWS_*`).
pub(crate) fn valid_env_pattern(name: &str) -> bool {
    match name.strip_suffix('*') {
        Some("") => false,
        Some(prefix) => valid_env_name(prefix),
        None => valid_env_name(name),
    }
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
