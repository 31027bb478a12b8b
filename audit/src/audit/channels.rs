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

/// Family letter of the audit-only exfiltration attacks.
pub const EXFIL_FAMILY: (char, &str) = ('X', "exfiltration through every channel");

/// At most this many allowed domains get their own exfiltration attacks.
const MAX_DOMAINS: usize = 4;

/// Names (not IPs) the policy allows, wildcards instantiated as
/// `oaj-exfil.<suffix>`; `*` alone becomes `evil.test`.
pub fn allowed_names(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for d in &policy.network.allowed_domains {
        if d.is_ip_entry() || d.port().is_some_and(|p| p != 443 && p != 80) {
            continue;
        }
        let text = d.as_str();
        let host = text.rsplit_once(':').map_or(text, |(h, _)| h);
        let name = match host {
            "*" => "evil.test".to_owned(),
            h => match h.strip_prefix("*.") {
                Some(suffix) => format!("oaj-exfil.{suffix}"),
                None => h.to_owned(),
            },
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out.truncate(MAX_DOMAINS);
    out
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
