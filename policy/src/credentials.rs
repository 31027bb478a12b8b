//! srt `credentials` entries with `mode: "mask"`: the model, its validation
//! and its canonical form.
//!
//! A masked environment variable is never passed into the jail: the jailed
//! command gets a per-run sentinel in its place, and the proxy swaps the
//! sentinel back for the real value only in the headers of requests over
//! terminated TLS to one of the entry's `injectHosts`. The sentinel itself
//! is made by the supervisor for each run and is not part of the policy (nor
//! of its hash); the entry (name and hosts) is.
//!
//! Invariants checked here, each refused with the JSON path of the field:
//! - masking needs `network.tlsTerminate` (the proxy must see the headers);
//! - every inject host is allowed by `allowedDomains`, not denied by
//!   `deniedDomains`, and not kept opaque by `tlsTerminate.excludeDomains`,
//!   so a swap can only ever happen inside a terminated tunnel;
//! - `extract`, `decode`, `maskClaims` and `maskDuplicates` (srt's partial
//!   masking) are refused rather than silently ignored;
//! - one name is never both masked and denied.
//!
//!
//! A masked file (`credentials.files[i]`) follows the same rules: its path
//! stays in `denyRead` (the real file is never readable inside), and the
//! supervisor shows the jail a read-only file at the same path holding the
//! sentinel (see `docs/policy-format.md` 3.4.1). Here the entry is checked
//! as data only: one literal path (no glob), and the host rules above.
use crate::domain::{DomainPattern, ListKind};
use crate::error::{At, JsonPath, Problem, quote};
use crate::l7::TlsTerminate;
use crate::{NetworkPolicy, host};

pub use crate::model::{MaskedFile, MaskedVar};

/// A masked entry (variable or file) before validation.
#[derive(Debug, Clone)]
pub(crate) struct MaskDraft {
    /// Where the entry is (`credentials.envVars[i]` or `credentials.files[i]`).
    pub path: JsonPath,
    /// The variable name, or the file's `path` text.
    pub name: String,
    /// `injectHosts`, each with its path.
    pub inject_hosts: Vec<At<String>>,
    /// srt keys oajail does not build, present on the entry.
    pub unsupported: Vec<&'static str>,
}

/// srt keys of a credential entry that change what is masked; refused.
pub(crate) const UNSUPPORTED_KEYS: [&str; 5] = [
    "extract",
    "onExtractNoMatch",
    "decode",
    "maskClaims",
    "maskDuplicates",
];

/// Validate the masked variables against the rest of the policy.
pub(crate) fn build(
    drafts: &[MaskDraft],
    network: &NetworkPolicy,
    env_deny: &[String],
) -> Result<Vec<MaskedVar>, Problem> {
    let mut out: Vec<MaskedVar> = Vec::new();
    for draft in drafts {
        unsupported(&draft.path, &draft.unsupported)?;
        if !crate::env::valid_env_name(&draft.name) {
            let message = format!("{} is not an environment variable name", quote(&draft.name));
            return Err(Problem::new(&draft.path.key("name"), message));
        }
        let tls = needs_tls(&draft.path, network)?;
        if env_deny.iter().any(|d| d == &draft.name) {
            let message = format!("{} is both masked and denied", quote(&draft.name));
            return Err(Problem::new(&draft.path.key("name"), message));
        }
        let hosts = inject_hosts(&draft.inject_hosts, network, tls)?;
        match out.iter_mut().find(|m| m.name == draft.name) {
            Some(same) => same.inject_hosts.extend(hosts),
            None => out.push(MaskedVar {
                name: draft.name.clone(),
                inject_hosts: hosts,
            }),
        }
    }
    Ok(sorted(out, |m| &mut m.inject_hosts))
}

/// Validate the masked files: one literal path each (a glob could name
/// several files or none), and the same host rules as variables.
pub(crate) fn build_files(
    drafts: &[MaskDraft],
    network: &NetworkPolicy,
) -> Result<Vec<MaskedFile>, Problem> {
    let mut out: Vec<MaskedFile> = Vec::new();
    for draft in drafts {
        unsupported(&draft.path, &draft.unsupported)?;
        let at = draft.path.key("path");
        if crate::paths::has_glob_chars(&draft.name) {
            let message = format!(
                "{} is a glob; mode \"mask\" applies to one file, write its path out",
                quote(&draft.name)
            );
            return Err(Problem::new(&at, message));
        }
        let path = crate::PathEntry::parse(&draft.name, true)
            .map_err(|e| Problem::new(&at, e.to_string()))?;
        let tls = needs_tls(&draft.path, network)?;
        let hosts = inject_hosts(&draft.inject_hosts, network, tls)?;
        match out.iter_mut().find(|m| m.path == path) {
            Some(same) => same.inject_hosts.extend(hosts),
            None => out.push(MaskedFile {
                path,
                inject_hosts: hosts,
            }),
        }
    }
    Ok(sorted(out, |m| &mut m.inject_hosts))
}

/// Entries and each entry's hosts in one order with no repeats, so the
/// canonical form and the hash do not depend on how the settings listed them.
fn sorted<T: Ord>(mut out: Vec<T>, hosts: impl Fn(&mut T) -> &mut Vec<DomainPattern>) -> Vec<T> {
    for m in &mut out {
        let h = hosts(m);
        h.sort();
        h.dedup();
    }
    out.sort();
    out
}

/// srt's partial-masking keys are refused rather than silently ignored.
fn unsupported(entry: &JsonPath, keys: &[&'static str]) -> Result<(), Problem> {
    let Some(key) = keys.first() else {
        return Ok(());
    };
    let message = format!(
        "{} is not supported by oajail (it masks the whole value); remove it or use mode \"deny\"",
        quote(key)
    );
    Err(Problem::new(&entry.key(key), message))
}

/// Masking needs terminated TLS: the proxy must see the headers.
pub(crate) fn needs_tls<'a>(
    entry: &JsonPath,
    network: &'a NetworkPolicy,
) -> Result<&'a TlsTerminate, Problem> {
    network.tls_terminate.as_ref().ok_or_else(|| {
        let message = "mode \"mask\" needs network.tlsTerminate: the proxy swaps the \
                       sentinel only inside terminated tls";
        Problem::new(&entry.key("mode"), message)
    })
}

/// Each `injectHosts` entry, checked by [`inject_host`].
pub(crate) fn inject_hosts(
    items: &[At<String>],
    network: &NetworkPolicy,
    tls: &TlsTerminate,
) -> Result<Vec<DomainPattern>, Problem> {
    (items.iter())
        .map(|(path, text)| inject_host(path, text, network, tls))
        .collect()
}

/// One `injectHosts` entry: parsed, and reachable only through a
/// terminated tunnel.
fn inject_host(
    path: &JsonPath,
    text: &str,
    network: &NetworkPolicy,
    tls: &TlsTerminate,
) -> Result<DomainPattern, Problem> {
    let pattern = DomainPattern::parse(text, ListKind::Allow)
        .map_err(|e| Problem::new(path, e.to_string()))?;
    let (sample, port) = sample(&pattern).ok_or_else(|| {
        Problem::new(
            path,
            format!(
                "{} must be a host name or an ip address",
                quote(pattern.as_str())
            ),
        )
    })?;
    let refuse = |why: String| Err(Problem::new(path, format!("{} {why}", quote(text))));
    if let Some(d) = (network.denied_domains.iter()).find(|d| d.matches(&sample, port)) {
        return refuse(format!("is denied by deniedDomains {}", quote(d.as_str())));
    }
    if !(network.allowed_domains.iter()).any(|a| a.matches(&sample, port)) {
        return refuse("is not in allowedDomains".to_owned());
    }
    if let Some(d) = (tls.exclude_domains.iter()).find(|d| d.matches(&sample, port)) {
        return refuse(format!(
            "is excluded from tls termination by {}: the sentinel could not be swapped",
            quote(d.as_str())
        ));
    }
    Ok(pattern)
}

/// A host the pattern names (a sample subdomain for `*.`) and its port.
fn sample(pattern: &DomainPattern) -> Option<(host::Host, u16)> {
    let text = pattern.as_str();
    let name = match pattern.port() {
        Some(port) => text.strip_suffix(&format!(":{port}"))?,
        None => text,
    };
    // A CIDR range is no one host; an IP address is (a lab or LAN API).
    if pattern.is_ip_entry() && name.contains('/') {
        return None;
    }
    let name = match name.strip_prefix("*.") {
        Some(suffix) => format!("x.{suffix}"),
        None => name.to_owned(),
    };
    let h = host::canonicalize(&name).ok()?;
    Some((h, pattern.port().unwrap_or(443)))
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    fn load(credentials: &str, tls: &str) -> Result<Policy, String> {
        let text = format!(
            r#"{{"network": {{"allowedDomains": ["api.test", "*.cdn.test"], "deniedDomains": ["bad.cdn.test"] {tls}}},
               "filesystem": {{"denyRead": [], "allowWrite": [], "denyWrite": []}},
               "credentials": {credentials}}}"#
        );
        Policy::from_settings_json(&text, "t.json")
            .map(|l| l.policy)
            .map_err(|e| e.to_string())
    }

    const TLS: &str = r#", "tlsTerminate": {"excludeDomains": ["z.cdn.test"]}"#;

    fn env(hosts: &str, extra: &str) -> String {
        format!(
            r#"{{"envVars": [{{"name": "K", "mode": "mask", "injectHosts": {hosts} {extra}}}]}}"#
        )
    }

    #[test]
    fn a_valid_mask_is_canonical() {
        let p = load(&env(r#"["API.test", "api.test", "*.cdn.test"]"#, ""), TLS).unwrap();
        let hosts: Vec<&str> = p.credentials[0]
            .inject_hosts
            .iter()
            .map(|h| h.as_str())
            .collect();
        assert_eq!(hosts, ["*.cdn.test", "api.test"]);
        assert!(p.oajail.env_deny.is_empty(), "a masked var is not denied");
        let again = Policy::from_settings_json(&p.to_srt_json().to_string(), "again").unwrap();
        assert_eq!(again.policy, p);
        let canonical = Policy::from_settings_json(&p.canonical_json(), "c").unwrap();
        assert_eq!(canonical.policy.sha256(), p.sha256());
    }

    fn file(path: &str, extra: &str) -> String {
        format!(
            r#"{{"files": [{{"path": "{path}", "mode": "mask", "injectHosts": ["api.test"] {extra}}}]}}"#
        )
    }

    #[test]
    fn a_masked_file_is_canonical_and_stays_denied() {
        let p = load(&file("~/.config/tok/../token", ""), TLS).unwrap();
        assert_eq!(p.credential_files.len(), 1);
        assert_eq!(p.credential_files[0].path.path, "~/.config/token");
        assert_eq!(p.credential_files[0].inject_hosts[0].as_str(), "api.test");
        assert!(
            (p.filesystem.deny_read.iter()).any(|e| e.path == "~/.config/token"),
            "the real file stays in denyRead"
        );
        let again = Policy::from_settings_json(&p.to_srt_json().to_string(), "again").unwrap();
        assert_eq!(again.policy, p);
        let canonical = Policy::from_settings_json(&p.canonical_json(), "c").unwrap();
        assert_eq!(canonical.policy.sha256(), p.sha256());
        let other = load(&file("~/.config/other", ""), TLS).unwrap();
        assert_ne!(other.sha256(), p.sha256(), "the entry is in the hash");
    }

    #[test]
    fn bad_masked_files_name_the_field() {
        let cases = [
            (
                file("~/t", ""),
                "",
                "credentials.files[0].mode: mode \"mask\" needs",
            ),
            (
                file("~/t*", ""),
                TLS,
                "credentials.files[0].path: \"~/t*\" is a glob",
            ),
            (
                file("~/d/", ""),
                TLS,
                "credentials.files[0].path: credential mode \"mask\" applies to a single file",
            ),
            (
                file("~/t", r#", "decode": "jwt""#),
                TLS,
                "credentials.files[0].decode: \"decode\" is not supported",
            ),
        ];
        for (creds, tls, want) in cases {
            let err = load(&creds, tls).unwrap_err();
            assert!(err.contains(want), "{creds}: got {err}, want {want}");
        }
        let bad_host = file("~/t", "").replace("api.test", "other.test");
        let err = load(&bad_host, TLS).unwrap_err();
        assert!(
            err.contains(
                "credentials.files[0].injectHosts[0]: \"other.test\" is not in allowedDomains"
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_masks_name_the_field() {
        let cases = [
            (
                env(r#"["api.test"]"#, ""),
                "",
                "credentials.envVars[0].mode: mode \"mask\" needs network.tlsTerminate",
            ),
            (
                env(r#"["other.test"]"#, ""),
                TLS,
                "credentials.envVars[0].injectHosts[0]: \"other.test\" is not in allowedDomains",
            ),
            (
                env(r#"["z.cdn.test"]"#, ""),
                TLS,
                "credentials.envVars[0].injectHosts[0]: \"z.cdn.test\" is excluded from tls termination",
            ),
            (
                env(r#"["bad.cdn.test"]"#, ""),
                TLS,
                "credentials.envVars[0].injectHosts[0]: \"bad.cdn.test\" is denied by deniedDomains",
            ),
            (
                env(r#"["api.test"]"#, r#", "extract": "a(.*)""#),
                TLS,
                "credentials.envVars[0].extract: \"extract\" is not supported",
            ),
            (
                r#"{"envVars": [{"name": "K", "mode": "mask"}, {"name": "K", "mode": "deny"}]}"#
                    .to_owned(),
                TLS,
                "credentials.envVars[0].name: \"K\" is both masked and denied",
            ),
        ];
        for (creds, tls, want) in cases {
            let err = load(&creds, tls).unwrap_err();
            assert!(err.contains(want), "{creds}: got {err}, want {want}");
        }
    }
}
