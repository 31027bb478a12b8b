//! Reading srt settings JSON into a [`Policy`], and writing a policy back out
//! as srt settings.
//!
//! Reading is three steps: strict JSON (`json.rs`: repeated keys refused),
//! the schema walk (`schema.rs` tables, `check.rs` walker: types, required
//! keys, ranges, warnings for ignored and unknown keys), then this module
//! reads the implemented keys into a `Draft` that `normalize.rs` validates
//! and normalises. A document
//! with a top-level `"process"` key is oajail's canonical JSON instead and is
//! read by `canonical.rs`; srt has no such key.
//!
//! Writing produces settings srt 0.0.83 accepts: its required keys are always
//! present, optional keys appear only when they differ from srt's default,
//! and oajail-only settings go in the `"oajail"` object, which srt ignores
//! and which is left out when all of it is default.

use crate::check::{self, as_integer};
use crate::error::At;
use crate::error::{JsonPath, Problem, quote};
use crate::json::{self, type_name};
use crate::normalize::Draft;
use crate::{Limits, PathEntry, Policy, PolicyError};
use serde_json::{Map, Value, json};

pub use crate::model::Loaded;

impl Policy {
    /// Parse srt settings JSON (or oajail's canonical JSON); `origin` names the
    /// file in error messages.
    pub fn from_settings_json(text: &str, origin: &str) -> Result<Loaded, PolicyError> {
        let value = json::parse(text, origin)?;
        let Value::Object(root) = &value else {
            let message = format!("expected an object, found {}", type_name(&value));
            return Err(Problem::new(&JsonPath::root(), message).with_origin(origin));
        };
        if root.contains_key("process") {
            return crate::canonical::read(root, origin);
        }
        let loaded = (|| {
            let mut warnings = check::check_document(&value)?;
            let draft = draft_from_srt(root)?;
            let policy = draft.build(&mut warnings)?;
            Ok(Loaded {
                policy,
                warnings,
                builtin_deny_read: Vec::new(),
            })
        })();
        loaded.map_err(|p: Problem| p.with_origin(origin))
    }

    /// srt settings JSON for this policy (with an `"oajail"` object when needed).
    pub fn to_srt_json(&self) -> Value {
        let mut root = Map::new();
        root.insert("network".into(), network_json(self));
        root.insert("filesystem".into(), filesystem_json(self));
        let process = &self.process;
        if process.enable_weaker_nested_sandbox {
            root.insert("enableWeakerNestedSandbox".into(), Value::Bool(true));
        }
        if process.allow_nested_user_namespaces {
            root.insert("allowNestedUserNamespaces".into(), Value::Bool(true));
        }
        if !process.git_safe_directories.is_empty() {
            root.insert(
                "git".into(),
                json!({"safeDirectories": process.git_safe_directories}),
            );
        }
        // srt removes these variables itself (`--unsetenv`), so the srt
        // spelling keeps the meaning for both tools.
        let mut vars: Vec<Value> = (self.oajail.env_deny.iter())
            .map(|name| json!({"name": name, "mode": "deny"}))
            .collect();
        vars.extend(self.credentials.iter().map(|m| {
            let hosts: Vec<&str> = m.inject_hosts.iter().map(|h| h.as_str()).collect();
            json!({"name": m.name, "mode": "mask", "injectHosts": hosts})
        }));
        let files: Vec<Value> = (self.credential_files.iter())
            .map(|m| {
                let hosts: Vec<&str> = m.inject_hosts.iter().map(|h| h.as_str()).collect();
                json!({"path": m.path.path, "mode": "mask", "injectHosts": hosts})
            })
            .collect();
        let mut creds = Map::new();
        if !files.is_empty() {
            creds.insert("files".into(), Value::Array(files));
        }
        if !vars.is_empty() {
            creds.insert("envVars".into(), Value::Array(vars));
        }
        if !creds.is_empty() {
            root.insert("credentials".into(), Value::Object(creds));
        }
        let oajail = oajail_json(self);
        if !oajail.is_empty() {
            root.insert("oajail".into(), Value::Object(oajail));
        }
        Value::Object(root)
    }
}

fn network_json(policy: &Policy) -> Value {
    let net = &policy.network;
    let names = |list: &[crate::domain::DomainPattern]| -> Vec<String> {
        list.iter().map(|d| d.as_str().to_owned()).collect()
    };
    let mut out = Map::new();
    out.insert("allowedDomains".into(), json!(names(&net.allowed_domains)));
    out.insert("deniedDomains".into(), json!(names(&net.denied_domains)));
    if !net.denied_domain_reasons.is_empty() {
        out.insert(
            "deniedDomainReasons".into(),
            json!(net.denied_domain_reasons),
        );
    }
    if !net.denied_resolved_addresses.is_empty() {
        out.insert(
            "deniedResolvedAddresses".into(),
            json!(net.denied_resolved_addresses),
        );
    }
    if net.allow_all_unix_sockets {
        out.insert("allowAllUnixSockets".into(), Value::Bool(true));
    }
    if net.allow_local_binding {
        out.insert("allowLocalBinding".into(), Value::Bool(true));
    }
    if let Some(port) = net.http_proxy_port {
        out.insert("httpProxyPort".into(), json!(port));
    }
    if let Some(port) = net.socks_proxy_port {
        out.insert("socksProxyPort".into(), json!(port));
    }
    if let Some(t) = &net.tls_terminate {
        out.insert("tlsTerminate".into(), tls_json(t));
    }
    Value::Object(out)
}

fn tls_json(t: &crate::l7::TlsTerminate) -> Value {
    let mut out = Map::new();
    if let (Some(cert), Some(key)) = (&t.ca_cert_path, &t.ca_key_path) {
        out.insert("caCertPath".into(), json!(cert));
        out.insert("caKeyPath".into(), json!(key));
    }
    if !t.exclude_domains.is_empty() {
        let names: Vec<&str> = t.exclude_domains.iter().map(|d| d.as_str()).collect();
        out.insert("excludeDomains".into(), json!(names));
    }
    if !t.extra_ca_cert_paths.is_empty() {
        out.insert("extraCaCertPaths".into(), json!(t.extra_ca_cert_paths));
    }
    if t.max_tunnels != crate::l7::DEFAULT_MAX_TUNNELS {
        out.insert("maxTunnels".into(), json!(t.max_tunnels));
    }
    if t.handshake_timeout_ms != crate::l7::DEFAULT_HANDSHAKE_TIMEOUT_MS {
        out.insert("handshakeTimeoutMs".into(), json!(t.handshake_timeout_ms));
    }
    Value::Object(out)
}

fn filesystem_json(policy: &Policy) -> Value {
    let fs = &policy.filesystem;
    let list =
        |entries: &[PathEntry]| -> Value { Value::Array(entries.iter().map(entry_json).collect()) };
    let mut out = Map::new();
    out.insert("denyRead".into(), list(&fs.deny_read));
    out.insert("allowRead".into(), list(&fs.allow_read));
    out.insert("allowWrite".into(), list(&fs.allow_write));
    out.insert("denyWrite".into(), list(&fs.deny_write));
    if fs.allow_git_config {
        out.insert("allowGitConfig".into(), Value::Bool(true));
    }
    Value::Object(out)
}

fn entry_json(entry: &PathEntry) -> Value {
    if entry.literal {
        json!({"path": entry.path, "literal": true})
    } else {
        Value::String(entry.path.clone())
    }
}

/// The non-default part of the `"oajail"` object.
fn oajail_json(policy: &Policy) -> Map<String, Value> {
    let settings = &policy.oajail;
    let mut out = Map::new();
    let limits = limits_json(&settings.limits);
    if !limits.is_empty() {
        out.insert("limits".into(), Value::Object(limits));
    }
    if !settings.env_keep.is_empty() {
        out.insert("envKeep".into(), json!(settings.env_keep));
    }
    if settings.allow_degraded {
        out.insert("allowDegraded".into(), Value::Bool(true));
    }
    if !settings.allow_private_destinations.is_empty() {
        out.insert(
            "allowPrivateDestinations".into(),
            json!(settings.allow_private_destinations),
        );
    }
    if settings.ask {
        out.insert("ask".into(), Value::Bool(true));
    }
    if settings.strict {
        out.insert("strict".into(), Value::Bool(true));
    }
    if !settings.http_rules.is_empty() {
        let text = |rules: &[crate::l7::HttpRule]| -> Vec<String> {
            rules.iter().map(|r| r.as_str().to_owned()).collect()
        };
        let mut rules = Map::new();
        if !settings.http_rules.allow.is_empty() {
            rules.insert("allow".into(), json!(text(&settings.http_rules.allow)));
        }
        if !settings.http_rules.deny.is_empty() {
            rules.insert("deny".into(), json!(text(&settings.http_rules.deny)));
        }
        out.insert("httpRules".into(), Value::Object(rules));
    }
    if !settings.issued_tokens.is_empty() {
        let list: Vec<Value> = (settings.issued_tokens.iter())
            .map(|e| {
                let hosts: Vec<&str> = e.inject_hosts.iter().map(|h| h.as_str()).collect();
                json!({"tokenUrl": e.token_url, "injectHosts": hosts})
            })
            .collect();
        out.insert("issuedTokens".into(), json!(list));
    }
    out
}

fn limits_json(limits: &Limits) -> Map<String, Value> {
    let defaults = Limits::default();
    let mut out = Map::new();
    for ((key, value), (_, default)) in limit_fields(limits)
        .into_iter()
        .zip(limit_fields(&defaults))
    {
        if value != default {
            out.insert(key.into(), json!(value));
        }
    }
    out
}

/// The limits with their JSON names, in schema order.
fn limit_fields(limits: &Limits) -> [(&'static str, Option<u64>); 8] {
    [
        ("coreBytes", limits.core_bytes),
        ("openFiles", limits.open_files),
        ("processes", limits.processes),
        ("addressSpaceBytes", limits.address_space_bytes),
        ("fileSizeBytes", limits.file_size_bytes),
        ("cpuSeconds", limits.cpu_seconds),
        ("tmpSizeBytes", limits.tmp_size_bytes),
        ("wallSeconds", limits.wall_seconds),
    ]
}

// ---- reading: the document has passed `check::check_document` ----------

fn object<'a>(parent: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    parent.get(key).and_then(Value::as_object)
}

fn flag(parent: Option<&Map<String, Value>>, key: &str) -> bool {
    parent
        .and_then(|p| p.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn strings(parent: Option<&Map<String, Value>>, key: &str, path: &JsonPath) -> Vec<At<String>> {
    let items = parent.and_then(|p| p.get(key)).and_then(Value::as_array);
    let path = path.key(key);
    (items.into_iter().flatten().enumerate())
        .filter_map(|(i, v)| Some((path.index(i), v.as_str()?.to_owned())))
        .collect()
}

/// Path entries: a string, or `{"path": …, "literal": true}`.
fn entries(
    parent: Option<&Map<String, Value>>,
    key: &str,
    path: &JsonPath,
) -> Vec<At<(String, bool)>> {
    let items = parent.and_then(|p| p.get(key)).and_then(Value::as_array);
    let path = path.key(key);
    let read = |(i, item): (usize, &Value)| match item {
        Value::String(text) => Some((path.index(i), (text.clone(), false))),
        Value::Object(members) => {
            let text = members.get("path")?.as_str()?;
            Some((path.index(i).key("path"), (text.to_owned(), true)))
        }
        _ => None,
    };
    items
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(read)
        .collect()
}

fn port(parent: Option<&Map<String, Value>>, key: &str, path: &JsonPath) -> Option<At<i128>> {
    let value = parent?.get(key)?;
    Some((path.key(key), as_integer(value)?))
}

fn draft_from_srt(root: &Map<String, Value>) -> Result<Draft, Problem> {
    let top = JsonPath::root();
    let net_path = top.key("network");
    let fs_path = top.key("filesystem");
    let (net, fs) = (object(root, "network"), object(root, "filesystem"));
    let reasons_path = net_path.key("deniedDomainReasons");
    let reasons = net.and_then(|n| object(n, "deniedDomainReasons"));
    let mut draft = Draft {
        allowed_domains: strings(net, "allowedDomains", &net_path),
        denied_domains: strings(net, "deniedDomains", &net_path),
        denied_domain_reasons: (reasons.into_iter().flatten())
            .filter_map(|(k, v)| Some((reasons_path.key(k), k.clone(), v.as_str()?.to_owned())))
            .collect(),
        denied_resolved_addresses: strings(net, "deniedResolvedAddresses", &net_path),
        allow_all_unix_sockets: flag(net, "allowAllUnixSockets"),
        allow_local_binding: flag(net, "allowLocalBinding"),
        http_proxy_port: port(net, "httpProxyPort", &net_path),
        socks_proxy_port: port(net, "socksProxyPort", &net_path),
        deny_read: entries(fs, "denyRead", &fs_path),
        allow_read: entries(fs, "allowRead", &fs_path),
        allow_write: entries(fs, "allowWrite", &fs_path),
        deny_write: entries(fs, "denyWrite", &fs_path),
        allow_git_config: flag(fs, "allowGitConfig"),
        allow_nested_user_namespaces: flag(Some(root), "allowNestedUserNamespaces"),
        enable_weaker_nested_sandbox: flag(Some(root), "enableWeakerNestedSandbox"),
        git_safe_directories: strings(object(root, "git"), "safeDirectories", &top.key("git")),
        ..Draft::default()
    };
    draft.tls_terminate = net
        .and_then(|n| object(n, "tlsTerminate"))
        .map(|t| tls_draft(t, &net_path.key("tlsTerminate")));
    // The CA's private key is read by the supervisor only: the jail never
    // reads it, whatever the other filesystem rules say.
    if let Some((path, key)) = draft
        .tls_terminate
        .as_ref()
        .and_then(|t| t.ca_key_path.clone())
    {
        draft.deny_read.push((path, (key, false)));
    }
    read_credentials(root, &mut draft)?;
    read_oajail(object(root, "oajail"), &top.key("oajail"), &mut draft);
    Ok(draft)
}

/// srt `credentials`. A `"mask"` variable becomes a masked entry (checked
/// against the network settings by `credentials.rs`); every other variable
/// is removed (added to `envDeny`). Every listed file is denied (added to
/// `denyRead`), whatever the mode; a `"mask"` file is also a masked entry,
/// whose sentinel the supervisor places over the denied path.
fn read_credentials(root: &Map<String, Value>, draft: &mut Draft) -> Result<(), Problem> {
    let Some(creds) = object(root, "credentials") else {
        return Ok(());
    };
    let path = JsonPath::root().key("credentials");
    for list in ["files", "envVars"] {
        let items = creds.get(list).and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let at = path.key(list).index(i);
            if list == "files" {
                read_credential_file(item, &at, draft)?;
            } else {
                read_credential_var(item, &at, draft);
            }
        }
    }
    Ok(())
}

fn is_mask(item: &Value) -> bool {
    item.get("mode").and_then(Value::as_str) == Some("mask")
}

/// One `credentials.files[i]` entry. The path is denied whatever the mode
/// (the real file is never readable inside); a `"mask"` entry also becomes
/// a masked file, checked against the network settings by `credentials.rs`.
fn read_credential_file(item: &Value, path: &JsonPath, draft: &mut Draft) -> Result<(), Problem> {
    let text = item.get("path").and_then(Value::as_str).unwrap_or_default();
    if is_mask(item) {
        if text.ends_with('/') {
            let message = format!(
                "credential mode \"mask\" applies to a single file, not a directory; use mode \"deny\" for {}",
                quote(text)
            );
            return Err(Problem::new(&path.key("path"), message));
        }
        draft.file_masks.push(crate::credentials::MaskDraft {
            path: path.clone(),
            name: text.to_owned(),
            inject_hosts: inject_hosts(item, path),
            unsupported: unsupported_keys(item),
        });
    }
    // An empty text cannot pass the schema walk; it is refused again by
    // validation if it ever gets here.
    draft
        .deny_read
        .push((path.key("path"), (text.to_owned(), false)));
    Ok(())
}

fn inject_hosts(item: &Value, path: &JsonPath) -> Vec<(JsonPath, String)> {
    item.as_object()
        .map(|o| strings(Some(o), "injectHosts", path))
        .unwrap_or_default()
}

fn unsupported_keys(item: &Value) -> Vec<&'static str> {
    (crate::credentials::UNSUPPORTED_KEYS.into_iter())
        .filter(|k| item.get(k).is_some())
        .collect()
}

/// One `credentials.envVars[i]` entry.
fn read_credential_var(item: &Value, path: &JsonPath, draft: &mut Draft) {
    let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
    if !is_mask(item) {
        draft.env_deny.push((path.key("name"), name.to_owned()));
        return;
    }
    draft.masks.push(crate::credentials::MaskDraft {
        path: path.clone(),
        name: name.to_owned(),
        inject_hosts: inject_hosts(item, path),
        unsupported: unsupported_keys(item),
    });
}

/// `network.tlsTerminate` (types already checked by the schema walk).
fn tls_draft(t: &Map<String, Value>, path: &JsonPath) -> crate::l7::TlsDraft {
    let text = |key: &str| {
        let v = t.get(key)?.as_str()?;
        Some((path.key(key), v.to_owned()))
    };
    let number = |key: &str| {
        let n = as_integer(t.get(key)?)?;
        u32::try_from(n).ok()
    };
    crate::l7::TlsDraft {
        ca_cert_path: text("caCertPath"),
        ca_key_path: text("caKeyPath"),
        exclude_domains: strings(Some(t), "excludeDomains", path),
        extra_ca_cert_paths: strings(Some(t), "extraCaCertPaths", path),
        max_tunnels: number("maxTunnels"),
        handshake_timeout_ms: number("handshakeTimeoutMs"),
    }
}

/// `oajail.issuedTokens` (types already checked by the schema walk).
fn issued_drafts(
    settings: Option<&Map<String, Value>>,
    path: &JsonPath,
) -> Vec<crate::issued::IssuedDraft> {
    let list = settings
        .and_then(|s| s.get("issuedTokens"))
        .and_then(Value::as_array);
    let path = path.key("issuedTokens");
    (list.into_iter().flatten().enumerate())
        .filter_map(|(i, v)| {
            let entry = v.as_object()?;
            let at = path.index(i);
            Some(crate::issued::IssuedDraft {
                token_url: entry.get("tokenUrl")?.as_str()?.to_owned(),
                inject_hosts: strings(Some(entry), "injectHosts", &at),
                path: at,
            })
        })
        .collect()
}

fn read_oajail(settings: Option<&Map<String, Value>>, path: &JsonPath, draft: &mut Draft) {
    draft.env_keep = strings(settings, "envKeep", path);
    draft.env_deny.extend(strings(settings, "envDeny", path));
    draft.allow_degraded = flag(settings, "allowDegraded");
    draft.allow_private_destinations = strings(settings, "allowPrivateDestinations", path);
    let rules = settings.and_then(|s| object(s, "httpRules"));
    draft.http_allow = strings(rules, "allow", &path.key("httpRules"));
    draft.http_deny = strings(rules, "deny", &path.key("httpRules"));
    draft.strict = flag(settings, "strict");
    draft.ask = flag(settings, "ask");
    draft.issued = issued_drafts(settings, path);
    let Some(limits) = settings.and_then(|s| object(s, "limits")) else {
        return;
    };
    let mut out = Limits::default();
    let read = |key: &str, default: Option<u64>| match limits.get(key) {
        None => default,
        Some(value) => as_integer(value).and_then(|n| u64::try_from(n).ok()),
    };
    out.core_bytes = read("coreBytes", out.core_bytes);
    out.open_files = read("openFiles", out.open_files);
    out.processes = read("processes", out.processes);
    out.address_space_bytes = read("addressSpaceBytes", out.address_space_bytes);
    out.file_size_bytes = read("fileSizeBytes", out.file_size_bytes);
    out.cpu_seconds = read("cpuSeconds", out.cpu_seconds);
    out.tmp_size_bytes = read("tmpSizeBytes", out.tmp_size_bytes);
    out.wall_seconds = read("wallSeconds", out.wall_seconds);
    draft.limits = Some((path.key("limits"), out));
}
