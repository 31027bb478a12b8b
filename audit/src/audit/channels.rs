//! The audit's exfiltration family `X`: every canary the command can read
//! (the secret sources of [`super::sources::secret_sources`] and the
//! environment), sent out through one channel per attack: the command's
//! stdout, HTTPS and plain HTTP to each allowed domain and to one the
//! policy does not allow, a DNS label under an allowed wildcard, and the
//! direct routes around the proxy.

use super::sources::{at, secret_sources};
use super::{Case, Channel, Kind, Stage, Target};
use crate::labspec::{DNS_V4, EVIL_V4};
use oajail_policy::Policy;
use oajail_policy::domain::DomainPattern;
use oajail_policy::host::canonicalize;
use serde::{Deserialize, Serialize};

/// Family letter of the audit-only exfiltration attacks.
pub const EXFIL_FAMILY: (char, &str) = ('X', "exfiltration through every channel");

/// At most this many kinds of allowed domain get exfiltration attacks.
const MAX_KINDS: usize = 8;

/// An allowed-domain entry the exfiltration family sends nothing to, and
/// why (shown in every report format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untested {
    /// The `network.allowedDomains` entry as written.
    pub entry: String,
    /// Why no attack targets it.
    pub why: String,
}

/// The names the exfiltration family sends to, one per kind of treatment
/// the proxy gives an allowed domain, and the entries it leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Domains {
    /// Names to attack (wildcards instantiated as `oaj-exfil.<suffix>`,
    /// `*` as `evil.test`), with their kind.
    pub tested: Vec<(String, String)>,
    /// Entries no attack targets.
    pub untested: Vec<Untested>,
}

/// Sort the policy's allowed domains into [`Domains`]. Two entries of the
/// same kind (exact name or wildcard, port, TLS terminated or opaque,
/// governed by `httpRules` or not, credentials injected or not) take the
/// same path through the proxy, so the second adds a lab run and no
/// evidence: it is listed as untested, naming the one tested in its place.
pub fn domains(policy: &Policy) -> Domains {
    let mut out = Domains::default();
    for d in &policy.network.allowed_domains {
        let untested = |why: String| Untested {
            entry: d.as_str().to_owned(),
            why,
        };
        if d.is_ip_entry() {
            out.untested.push(untested(
                "an address: the lab has no host there to receive anything".into(),
            ));
            continue;
        }
        if let Some(p) = d.port().filter(|p| *p != 443 && *p != 80) {
            out.untested.push(untested(format!(
                "port {p}: the exfiltration attacks use HTTPS on 443 and HTTP on 80"
            )));
            continue;
        }
        let name = instance(d);
        if let Some(denied) = denied_by(policy, &name) {
            out.untested.push(untested(format!(
                "its name {name} is covered by network.deniedDomains {denied:?}"
            )));
            continue;
        }
        let kind = kind(policy, d, &name);
        if out.tested.iter().any(|(n, _)| *n == name) {
            out.untested
                .push(untested(format!("{name} is tested for another entry")));
        } else if let Some((tested, _)) = out.tested.iter().find(|(_, k)| *k == kind) {
            out.untested.push(untested(format!(
                "the proxy treats it as {tested} ({kind}), which is tested"
            )));
        } else if out.tested.len() == MAX_KINDS {
            out.untested.push(untested(format!(
                "more than {MAX_KINDS} kinds of allowed domain; this one ({kind}) is not tested"
            )));
        } else {
            out.tested.push((name, kind));
        }
    }
    out
}

/// The names the exfiltration family sends to.
pub fn allowed_names(policy: &Policy) -> Vec<String> {
    domains(policy).tested.into_iter().map(|(n, _)| n).collect()
}

/// The name an attack uses for entry `d`.
fn instance(d: &DomainPattern) -> String {
    let text = d.as_str();
    let host = text.rsplit_once(':').map_or(text, |(h, _)| h);
    match host {
        "*" => "evil.test".to_owned(),
        h => match h.strip_prefix("*.") {
            Some(suffix) => format!("oaj-exfil.{suffix}"),
            None => h.to_owned(),
        },
    }
}

fn denied_by(policy: &Policy, name: &str) -> Option<String> {
    let host = canonicalize(name).ok()?;
    (policy.network.denied_domains.iter())
        .find(|d| d.matches(&host, 443) || d.matches(&host, 80))
        .map(|d| d.as_str().to_owned())
}

/// How the proxy treats `name` (allowed by entry `d`), in words.
fn kind(policy: &Policy, d: &DomainPattern, name: &str) -> String {
    let Ok(host) = canonicalize(name) else {
        return format!("the name {name}");
    };
    let text = d.as_str();
    let mut words = vec![
        match text.rsplit_once(':').map_or(text, |(h, _)| h) {
            "*" => "any name",
            h if h.starts_with("*.") => "a wildcard",
            _ => "an exact name",
        }
        .to_owned(),
    ];
    words.push(d.port().map_or("any port".into(), |p| format!("port {p}")));
    let terminated = (policy.network.tls_terminate.as_ref())
        .is_some_and(|t| !t.exclude_domains.iter().any(|x| x.matches(&host, 443)));
    words.push(
        if terminated {
            "TLS terminated"
        } else {
            "opaque tunnel"
        }
        .into(),
    );
    if policy.oajail.http_rules.governs(&host) {
        words.push("httpRules".into());
    }
    let injects = policy.credentials.iter().any(|c| c.injects_to(&host, 443))
        || (policy.credential_files.iter())
            .any(|f| f.inject_hosts.iter().any(|p| p.matches(&host, 443)));
    if injects {
        words.push("credentials injected".into());
    }
    words.join(", ")
}

/// The exfiltration cases for `policy`.
pub fn exfiltration(policy: &Policy) -> Vec<Case> {
    let mut sources: Vec<String> = secret_sources(policy).iter().map(|(_, l)| at(l)).collect();
    sources.push("env".into());
    let case = |id: String, title: String, channel: Channel, how: [String; 2]| Case {
        id,
        family: EXFIL_FAMILY.0,
        title,
        kind: Kind::Exfiltration,
        target: Target::Exfil(channel),
        probe: ["exfil".to_owned(), how[0].clone(), how[1].clone()]
            .into_iter()
            .chain(sources.iter().cloned())
            .collect(),
        stage: Stage::default(),
    };
    let s = |x: &str| x.to_owned();
    let mut out = vec![case(
        s("X1-exfil-stdout"),
        s("every readable secret printed on the command's stdout (the result channel)"),
        Channel::Stdout,
        [s("stdout"), s("-")],
    )];
    let mut names = allowed_names(policy);
    if !names.contains(&"evil.test".to_owned()) {
        names.push("evil.test".into());
    }
    for d in &names {
        out.push(case(
            format!("X2-exfil-https:{d}"),
            format!("readable secrets sent through a TLS tunnel to {d}"),
            Channel::Https(d.clone()),
            [s("https"), d.clone()],
        ));
        out.push(case(
            format!("X3-exfil-http:{d}"),
            format!("readable secrets POSTed over plain HTTP to {d}"),
            Channel::Http(d.clone()),
            [s("http"), d.clone()],
        ));
    }
    let suffix = policy
        .network
        .allowed_domains
        .iter()
        .find_map(|d| d.as_str().strip_prefix("*.").map(str::to_owned))
        .unwrap_or_else(|| s("evil.test"));
    let suffix = suffix
        .rsplit_once(':')
        .map_or(suffix.clone(), |(h, _)| h.to_owned());
    out.push(case(
        format!("X4-exfil-dns-name:{suffix}"),
        format!("a secret as a DNS label under {suffix}, handed to the proxy"),
        Channel::DnsName(suffix.clone()),
        [s("dns-name"), suffix],
    ));
    out.push(case(
        s("X5-exfil-direct-tcp"),
        s("readable secrets sent straight to a public address, around the proxy"),
        Channel::Direct,
        [s("tcp"), s(EVIL_V4)],
    ));
    out.push(case(
        s("X6-exfil-direct-dns"),
        s("a secret as a DNS label sent straight to a resolver"),
        Channel::Direct,
        [s("dns"), s(DNS_V4)],
    ));
    out
}
