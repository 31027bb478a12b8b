//! The built-in policy, used when no settings file exists.
//!
//! It keeps the shape of srt's built-in default (no network, no writes, reads
//! everywhere) and closes its biggest gap: srt's default lets the command
//! read every credential in the home directory. Here the usual secret stores
//! are denied. The list aims at files that hold *credentials or keys*, or a
//! person's private history, not at configuration in general, so that
//! ordinary tools keep working; each entry says why it is there.
//! `docs/policy-format.md` carries the same list (a test keeps them equal).
//!
//! Not listed on purpose: project files such as `.env` (they are the working
//! set of the command; deny them in a settings file with `**/.env`), and
//! whole configuration trees such as `~/.config` (too much breaks).
//!
//! The list holds under every settings file too, not only when there is
//! none ([`Policy::deny_builtin_secret_stores`]): a small settings file
//! written for one project would otherwise leave every credential store
//! readable. A store comes back only when the file names it (or a path
//! inside it) in `allowRead` or `allowWrite` — srt's re-allow, decided by
//! srt's precedence: the deepest rule on a path wins, an allow on the same
//! path beats a deny. A divergence from srt (whose file replaces its empty
//! default), safer, in `docs/srt-compatibility.md`.

use crate::{FilesystemPolicy, NetworkPolicy, OajailSettings, PathEntry, Policy, ProcessPolicy};

/// Paths the built-in policy denies reading, each with the reason.
pub const DEFAULT_DENY_READ: &[(&str, &str)] = &[
    // Keys and agents.
    (
        "~/.ssh",
        "ssh private keys, known_hosts and config naming every host",
    ),
    ("~/.gnupg", "gpg private keys"),
    (
        "~/.pki",
        "nss database: client certificates and their keys (chromium, curl-nss)",
    ),
    ("~/.password-store", "pass(1) password store"),
    ("~/.local/share/keyrings", "gnome keyring files"),
    ("~/.local/share/kwalletd", "kde wallet files"),
    // Cloud and cluster credentials.
    ("~/.aws", "aws access keys and sso tokens"),
    ("~/.azure", "azure cli tokens"),
    (
        "~/.config/gcloud",
        "google cloud credentials and access tokens",
    ),
    ("~/.oci", "oracle cloud api keys"),
    ("~/.kube", "kubernetes cluster credentials"),
    ("~/.docker/config.json", "registry credentials"),
    (
        "~/.config/containers/auth.json",
        "podman/buildah registry credentials",
    ),
    ("~/.config/doctl", "digitalocean api token"),
    ("~/.config/hcloud", "hetzner cloud api token"),
    (
        "~/.terraform.d/credentials.tfrc.json",
        "terraform cloud api tokens",
    ),
    ("~/.vault-token", "hashicorp vault token"),
    ("~/.s3cfg", "s3cmd access keys"),
    ("~/.boto", "boto/gsutil credentials"),
    ("~/.config/rclone", "rclone remotes with their secrets"),
    ("~/.databrickscfg", "databricks tokens"),
    ("~/.fly", "fly.io access token"),
    // Forges and version control.
    (
        "~/.git-credentials",
        "git credential-store passwords and tokens",
    ),
    (
        "~/.config/git/credentials",
        "git credential-store (xdg location)",
    ),
    (
        "~/.cache/git/credential",
        "git credential-cache daemon socket",
    ),
    ("~/.config/gh", "github cli oauth token"),
    // Coding agents: their own login tokens.
    ("~/.codex/auth.json", "codex cli login tokens"),
    ("~/.claude/.credentials.json", "claude code login tokens"),
    ("~/.config/hub", "hub github token"),
    ("~/.config/glab-cli", "gitlab cli token"),
    (
        "~/.netrc",
        "logins and passwords for any host (curl, git, ftp)",
    ),
    // Package registries.
    ("~/.npmrc", "npm registry tokens"),
    ("~/.yarnrc.yml", "yarn registry tokens"),
    ("~/.pypirc", "pypi upload tokens"),
    ("~/.cargo/credentials", "crates.io token (old name)"),
    ("~/.cargo/credentials.toml", "crates.io token"),
    ("~/.gem/credentials", "rubygems api key"),
    ("~/.m2/settings.xml", "maven repository passwords"),
    ("~/.m2/settings-security.xml", "maven master password"),
    (
        "~/.gradle/gradle.properties",
        "gradle repository and signing credentials",
    ),
    (
        "~/.config/pip/pip.conf",
        "pip index urls with embedded credentials",
    ),
    // Databases.
    ("~/.pgpass", "postgresql passwords"),
    ("~/.my.cnf", "mysql passwords"),
    // Browsers and mail: cookies, saved passwords, session tokens.
    ("~/.mozilla", "firefox profiles"),
    ("~/snap/firefox", "firefox (snap) profiles"),
    ("~/.thunderbird", "thunderbird profiles and mail"),
    ("~/.config/google-chrome", "chrome profiles"),
    ("~/.config/chromium", "chromium profiles"),
    ("~/.config/BraveSoftware", "brave profiles"),
    ("~/.config/microsoft-edge", "edge profiles"),
    // Password managers.
    ("~/.config/op", "1password cli session and config"),
    ("~/.config/Bitwarden CLI", "bitwarden cli session"),
    // Shell and tool history: often holds pasted secrets.
    ("~/.bash_history", "shell history"),
    ("~/.zsh_history", "shell history"),
    ("~/.histfile", "shell history (zsh alternative name)"),
    ("~/.local/share/fish/fish_history", "shell history"),
    ("~/.python_history", "python repl history"),
    ("~/.node_repl_history", "node repl history"),
    ("~/.psql_history", "psql history"),
    ("~/.mysql_history", "mysql client history"),
    ("~/.sqlite_history", "sqlite shell history"),
    (
        "~/.rediscli_history",
        "redis-cli history (often AUTH commands)",
    ),
    ("~/.local/share/atuin", "atuin history database and its key"),
    // System secrets, readable when oajail runs as root.
    ("/etc/shadow", "password hashes"),
    ("/etc/gshadow", "group password hashes"),
    ("/etc/ssh/ssh_host_*_key", "ssh host private keys"),
    ("/etc/shadow-", "backup of the password hashes"),
    ("/etc/gshadow-", "backup of the group password hashes"),
    (
        "/etc/security/opasswd",
        "previous password hashes (pam_pwhistory)",
    ),
    ("/etc/ssl/private", "tls private keys (debian layout)"),
    ("/etc/pki/tls/private", "tls private keys (red hat layout)"),
    (
        "/etc/letsencrypt",
        "acme account keys and certificate private keys",
    ),
    ("/etc/wireguard", "wireguard private keys"),
    (
        "/etc/NetworkManager/system-connections",
        "wifi passwords, vpn secrets and 802.1x credentials",
    ),
    (
        "/var/lib/NetworkManager/secret_key",
        "networkmanager's own secret key",
    ),
    ("/var/lib/iwd", "iwd wifi passphrases"),
    (
        "/etc/ipsec.secrets",
        "ipsec pre-shared keys and private keys",
    ),
    ("/etc/ipsec.d/private", "ipsec private keys"),
    ("/etc/openvpn", "openvpn keys and passwords"),
    ("/etc/ppp/chap-secrets", "ppp passwords"),
    ("/etc/ppp/pap-secrets", "ppp passwords"),
    ("/etc/krb5.keytab", "kerberos host keys"),
    ("/var/lib/tailscale", "tailscale node and machine keys"),
    ("/var/lib/zerotier-one", "zerotier identity secret"),
    ("/var/lib/sss/secrets", "sssd secrets database"),
];

impl Policy {
    /// The built-in default policy used when no settings file exists: no
    /// network, no writes (the jail's private `/tmp` is always writable),
    /// reads everywhere except [`DEFAULT_DENY_READ`].
    pub fn builtin_default() -> Policy {
        let mut deny_read: Vec<PathEntry> = DEFAULT_DENY_READ
            .iter()
            .map(|(path, _)| PathEntry {
                path: (*path).to_owned(),
                literal: false,
            })
            .collect();
        deny_read.sort();
        deny_read.dedup();
        Policy {
            network: NetworkPolicy {
                allowed_domains: Vec::new(),
                denied_domains: Vec::new(),
                denied_domain_reasons: Default::default(),
                denied_resolved_addresses: Vec::new(),
                allow_all_unix_sockets: false,
                allow_local_binding: false,
                http_proxy_port: None,
                socks_proxy_port: None,
                tls_terminate: None,
            },
            filesystem: FilesystemPolicy {
                deny_read,
                allow_read: Vec::new(),
                allow_write: Vec::new(),
                deny_write: Vec::new(),
                allow_git_config: false,
            },
            process: ProcessPolicy::default(),
            oajail: OajailSettings::default(),
            credentials: Vec::new(),
            credential_files: Vec::new(),
        }
    }
}

impl Policy {
    /// Deny reading every built-in secret store ([`DEFAULT_DENY_READ`]) the
    /// policy does not already deny, except those an `allowRead` or
    /// `allowWrite` entry names exactly (a path *inside* a store named
    /// there is re-allowed by srt's precedence, the rest of the store stays
    /// denied). Returns the entries added, sorted. Idempotent, so a printed
    /// policy read back in is the same policy (and hash).
    pub fn deny_builtin_secret_stores(&mut self) -> Vec<PathEntry> {
        let fs = &mut self.filesystem;
        let mut added: Vec<PathEntry> = DEFAULT_DENY_READ
            .iter()
            .map(|(path, _)| *path)
            .filter(|path| {
                let named = |list: &[PathEntry]| list.iter().any(|e| e.path == *path);
                !named(&fs.deny_read) && !named(&fs.allow_read) && !named(&fs.allow_write)
            })
            .map(|path| PathEntry {
                path: path.to_owned(),
                literal: false,
            })
            .collect();
        added.sort();
        added.dedup();
        fs.deny_read.extend(added.iter().cloned());
        fs.deny_read.sort();
        fs.deny_read.dedup();
        added
    }
}

/// Why the built-in list denies `path` (`None`: not on the list).
pub fn builtin_reason(path: &str) -> Option<&'static str> {
    DEFAULT_DENY_READ
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_entries_are_already_normal() {
        for (path, reason) in DEFAULT_DENY_READ {
            let entry = PathEntry::parse(path, false).unwrap();
            assert_eq!(entry.path, *path, "{path} is not in normal form");
            assert!(!reason.is_empty() && !reason.ends_with('.'));
        }
    }

    #[test]
    fn default_round_trips_through_srt_json() {
        let policy = Policy::builtin_default();
        let text = policy.to_srt_json().to_string();
        let loaded = Policy::from_settings_json(&text, "default").unwrap();
        assert_eq!(loaded.policy, policy);
        assert!(loaded.warnings.is_empty());
    }

    #[test]
    fn a_settings_file_keeps_the_secret_stores_denied_unless_it_names_them() {
        let text = r#"{"network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": ["~/.ssh"], "allowRead": ["~/.aws", "~/.config/gh/config.yml"],
            "allowWrite": ["~/.kube"], "denyWrite": []}}"#;
        let mut policy = Policy::from_settings_json(text, "t").unwrap().policy;
        let added = policy.deny_builtin_secret_stores();
        let denied = |p: &str| policy.filesystem.deny_read.iter().any(|e| e.path == p);
        for store in [
            "~/.ssh",
            "~/.git-credentials",
            "~/.config/gh",
            "/etc/shadow",
        ] {
            assert!(denied(store), "{store}");
        }
        // Named exactly in allowRead or allowWrite: re-allowed.
        assert!(!denied("~/.aws") && !denied("~/.kube"));
        assert!(!added.iter().any(|e| e.path == "~/.ssh"), "the file's own");
        assert_eq!(added.len(), DEFAULT_DENY_READ.len() - 3);
        // Idempotent, through the printed form too.
        let hash = policy.sha256();
        assert!(policy.deny_builtin_secret_stores().is_empty());
        let printed = policy.to_srt_json().to_string();
        let mut again = Policy::from_settings_json(&printed, "t").unwrap().policy;
        assert!(again.deny_builtin_secret_stores().is_empty());
        assert_eq!(again.sha256(), hash);
    }

    #[test]
    fn default_has_no_network_and_no_writes() {
        let policy = Policy::builtin_default();
        assert!(policy.network.allowed_domains.is_empty());
        assert!(policy.filesystem.allow_write.is_empty());
        assert_eq!(policy.oajail.limits.core_bytes, Some(0));
    }
}
