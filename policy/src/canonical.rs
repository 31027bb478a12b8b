//! Reading oajail's canonical JSON (the output of [`Policy::canonical_json`],
//! optionally with the `policySha256` member that `oajail policy print
//! --format json` adds).
//!
//! The canonical form is a machine format, so it is strict: every object
//! refuses unknown keys and needs every member, `null` ones included. It is not
//! trusted either: after deserialising, every value is turned back into a
//! draft and goes through the same validation as srt input, so a
//! hand-edited canonical file cannot smuggle in a pattern srt input would
//! refuse. A `policySha256` member must match the policy it comes with.

use crate::error::{JsonPath, Problem};
use crate::json::type_name;
use crate::model::Loaded;
use crate::normalize::Draft;
use crate::{PathEntry, Policy, PolicyError};
use serde_json::{Map, Value};

/// Reads a canonical document (already known to be a JSON object).
pub(crate) fn read(root: &Map<String, Value>, origin: &str) -> Result<Loaded, PolicyError> {
    let mut members = root.clone();
    let claimed = members.remove("policySha256");
    let input = Value::Object(members);
    let policy: Policy = serde_path_to_error::deserialize(input.clone())
        .map_err(|err| serde_problem(&err).with_origin(origin))?;
    missing_member(&members_value(&policy), &input, &JsonPath::root())
        .map_or(Ok(()), |p| Err(p.with_origin(origin)))?;
    let mut warnings = Vec::new();
    let policy = draft_from_policy(&policy)
        .build(&mut warnings)
        .map_err(|p| p.with_origin(origin))?;
    if let Some(claimed) = claimed {
        check_claimed_hash(&claimed, &policy).map_err(|p| p.with_origin(origin))?;
    }
    Ok(Loaded {
        policy,
        warnings,
        builtin_deny_read: Vec::new(),
    })
}

/// The serde form of `policy`, to compare member names with the input.
fn members_value(policy: &Policy) -> Value {
    serde_json::to_value(policy).unwrap_or(Value::Null)
}

/// The first member the canonical form has and `input` lacks. serde reads a
/// missing optional number as `null`; canonical input must spell it out.
fn missing_member(expected: &Value, input: &Value, path: &JsonPath) -> Option<Problem> {
    let (Value::Object(expected), Value::Object(input)) = (expected, input) else {
        return None;
    };
    for (key, value) in expected {
        let Some(given) = input.get(key) else {
            return Some(Problem::new(&path.key(key), "required key is missing"));
        };
        // Reasons are a free-keyed map, not a struct.
        if key == "deniedDomainReasons" {
            continue;
        }
        if let Some(problem) = missing_member(value, given, &path.key(key)) {
            return Some(problem);
        }
    }
    None
}

fn check_claimed_hash(claimed: &Value, policy: &Policy) -> Result<(), Problem> {
    let path = JsonPath::root().key("policySha256");
    let Value::String(claimed) = claimed else {
        return Err(Problem::new(
            &path,
            format!("expected a string, found {}", type_name(claimed)),
        ));
    };
    let actual = policy.sha256();
    if *claimed != actual {
        return Err(Problem::new(
            &path,
            format!("does not match the policy, whose sha256 is {actual}"),
        ));
    }
    Ok(())
}

/// A serde error with the JSON path it happened at.
fn serde_problem(err: &serde_path_to_error::Error<serde_json::Error>) -> Problem {
    use serde_path_to_error::Segment;
    let mut path = JsonPath::root();
    for segment in err.path().iter() {
        path = match segment {
            Segment::Seq { index } => path.index(*index),
            Segment::Map { key } | Segment::Enum { variant: key } => path.key(key),
            Segment::Unknown => path.key("?"),
        };
    }
    // serde quotes unknown keys raw; control characters would break the
    // one-line rule.
    let message: String = (err.inner().to_string().chars())
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Problem::new(&path, message)
}

/// The policy's values as a draft, each with its canonical JSON path.
fn draft_from_policy(policy: &Policy) -> Draft {
    let root = JsonPath::root();
    let net = root.key("network");
    let fs = root.key("filesystem");
    let settings = root.key("oajail");
    let n = &policy.network;
    let f = &policy.filesystem;
    let o = &policy.oajail;
    Draft {
        allowed_domains: list(
            &net,
            "allowedDomains",
            n.allowed_domains.iter().map(|d| d.as_str().to_owned()),
        ),
        denied_domains: list(
            &net,
            "deniedDomains",
            n.denied_domains.iter().map(|d| d.as_str().to_owned()),
        ),
        denied_domain_reasons: (n.denied_domain_reasons.iter())
            .map(|(k, v)| (net.key("deniedDomainReasons").key(k), k.clone(), v.clone()))
            .collect(),
        denied_resolved_addresses: list(
            &net,
            "deniedResolvedAddresses",
            n.denied_resolved_addresses.iter().cloned(),
        ),
        allow_all_unix_sockets: n.allow_all_unix_sockets,
        allow_local_binding: n.allow_local_binding,
        http_proxy_port: n
            .http_proxy_port
            .map(|p| (net.key("httpProxyPort"), i128::from(p))),
        socks_proxy_port: n
            .socks_proxy_port
            .map(|p| (net.key("socksProxyPort"), i128::from(p))),
        deny_read: entries(&fs, "denyRead", &f.deny_read),
        allow_read: entries(&fs, "allowRead", &f.allow_read),
        allow_write: entries(&fs, "allowWrite", &f.allow_write),
        deny_write: entries(&fs, "denyWrite", &f.deny_write),
        allow_git_config: f.allow_git_config,
        allow_nested_user_namespaces: policy.process.allow_nested_user_namespaces,
        enable_weaker_nested_sandbox: policy.process.enable_weaker_nested_sandbox,
        git_safe_directories: list(
            &root.key("process"),
            "gitSafeDirectories",
            policy.process.git_safe_directories.iter().cloned(),
        ),
        limits: Some((settings.key("limits"), o.limits.clone())),
        env_keep: list(&settings, "envKeep", o.env_keep.iter().cloned()),
        env_deny: list(&settings, "envDeny", o.env_deny.iter().cloned()),
        allow_degraded: o.allow_degraded,
        allow_private_destinations: list(
            &settings,
            "allowPrivateDestinations",
            o.allow_private_destinations.iter().cloned(),
        ),
        strict: o.strict,
        ask: o.ask,
        tls_terminate: n
            .tls_terminate
            .as_ref()
            .map(|t| tls_draft(&net.key("tlsTerminate"), t)),
        http_allow: list(
            &settings.key("httpRules"),
            "allow",
            o.http_rules.allow.iter().map(|r| r.as_str().to_owned()),
        ),
        http_deny: list(
            &settings.key("httpRules"),
            "deny",
            o.http_rules.deny.iter().map(|r| r.as_str().to_owned()),
        ),
        masks: (policy.credentials.iter().enumerate())
            .map(|(i, m)| mask_draft(root.key("credentials").index(i), &m.name, &m.inject_hosts))
            .collect(),
        file_masks: (policy.credential_files.iter().enumerate())
            .map(|(i, m)| {
                let path = root.key("credentialFiles").index(i);
                mask_draft(path, &m.path.path, &m.inject_hosts)
            })
            .collect(),
        issued: (o.issued_tokens.iter().enumerate())
            .map(|(i, e)| {
                let path = settings.key("issuedTokens").index(i);
                crate::issued::IssuedDraft {
                    token_url: e.token_url.clone(),
                    inject_hosts: list(
                        &path,
                        "injectHosts",
                        e.inject_hosts.iter().map(|h| h.as_str().to_owned()),
                    ),
                    path,
                }
            })
            .collect(),
    }
}

fn tls_draft(path: &JsonPath, t: &crate::l7::TlsTerminate) -> crate::l7::TlsDraft {
    crate::l7::TlsDraft {
        ca_cert_path: (t.ca_cert_path.clone()).map(|p| (path.key("caCertPath"), p)),
        ca_key_path: (t.ca_key_path.clone()).map(|p| (path.key("caKeyPath"), p)),
        exclude_domains: list(
            path,
            "excludeDomains",
            t.exclude_domains.iter().map(|d| d.as_str().to_owned()),
        ),
        extra_ca_cert_paths: list(
            path,
            "extraCaCertPaths",
            t.extra_ca_cert_paths.iter().cloned(),
        ),
        max_tunnels: Some(t.max_tunnels),
        handshake_timeout_ms: Some(t.handshake_timeout_ms),
    }
}

/// The draft of one masked variable or file read back from its canonical
/// entry at `path` (`name`: the variable's name or the file's path).
fn mask_draft(
    path: JsonPath,
    name: &str,
    hosts: &[crate::domain::DomainPattern],
) -> crate::credentials::MaskDraft {
    crate::credentials::MaskDraft {
        inject_hosts: list(
            &path,
            "injectHosts",
            hosts.iter().map(|h| h.as_str().to_owned()),
        ),
        path,
        name: name.to_owned(),
        unsupported: Vec::new(),
    }
}

fn list(
    parent: &JsonPath,
    key: &str,
    items: impl Iterator<Item = String>,
) -> Vec<(JsonPath, String)> {
    let path = parent.key(key);
    items
        .enumerate()
        .map(|(i, item)| (path.index(i), item))
        .collect()
}

fn entries(parent: &JsonPath, key: &str, items: &[PathEntry]) -> Vec<(JsonPath, (String, bool))> {
    let path = parent.key(key);
    (items.iter().enumerate())
        .map(|(i, e)| (path.index(i).key("path"), (e.path.clone(), e.literal)))
        .collect()
}
