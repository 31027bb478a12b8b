//! One request inside a terminated tunnel, before it goes upstream: the
//! names must agree (Host / `:authority` / absolute-form URL = the CONNECT
//! host = SNI), the framing must be unambiguous, and `oajail.httpRules`
//! must allow it.
//!
//! hyper's parser already refuses obsolete line folding, bare LF, invalid
//! or conflicting `Content-Length` values and malformed chunking (400 and
//! close). What hyper accepts but a second parser could read differently
//! is refused here: `Content-Length` together with `Transfer-Encoding`,
//! codings other than `chunked`, two `Host` headers, a `Host` that names
//! another site than the URL or the tunnel.
use http::{HeaderMap, Method, Request, Version};
use oajail_policy::egress::EgressPlan;
use oajail_policy::host::{self, Host};
use oajail_policy::l7::{RequestFacts, RuleVerdict};

/// A refused request: status, log reason, message (also the body).
#[derive(Debug, Clone)]
pub(crate) struct Refused {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
}

fn refuse(status: u16, reason: &'static str, message: String) -> Refused {
    Refused {
        status,
        reason,
        message,
    }
}

/// The tunnel a request arrived on.
pub(crate) struct Dest<'a> {
    pub host: &'a Host,
    pub port: u16,
}

/// Check one request; `Ok(Some(rule))` names the rule that allowed it on a
/// governed host.
pub(crate) fn check<B>(
    plan: &EgressPlan,
    tunnel: &Dest<'_>,
    req: &Request<B>,
) -> Result<Option<String>, Refused> {
    if req.method() == Method::CONNECT {
        let msg = "CONNECT inside a terminated tunnel is refused".to_owned();
        return Err(refuse(405, "bad_request", msg));
    }
    check_framing(req.version(), req.headers())?;
    check_names(tunnel, req)?;
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let facts = RequestFacts {
        https: true,
        host: tunnel.host,
        port: tunnel.port,
        method: req.method().as_str(),
        path,
    };
    let headers = (req.headers().iter()).map(|(n, v)| (n.as_str(), v.as_bytes()));
    let overrides = oajail_policy::l7::path::header_overrides(headers);
    match plan.http_rules.judge_with(&facts, &overrides) {
        RuleVerdict::Ungoverned => Ok(None),
        RuleVerdict::Allowed(rule) => Ok(Some(rule)),
        RuleVerdict::Refused(why) => Err(refuse(
            403,
            "http_rule",
            format!(
                "{} https://{}{path} is refused: {why}",
                req.method(),
                tunnel.host.authority(tunnel.port)
            ),
        )),
    }
}

fn check_framing(version: Version, headers: &HeaderMap) -> Result<(), Refused> {
    let bad = |m: &str| Err(refuse(400, "bad_request", m.to_owned()));
    let te: Vec<_> = headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .collect();
    if te.is_empty() {
        return Ok(());
    }
    if headers.contains_key(http::header::CONTENT_LENGTH) {
        return bad("both Content-Length and Transfer-Encoding");
    }
    if version == Version::HTTP_10 {
        return bad("Transfer-Encoding in an HTTP/1.0 request");
    }
    let chunked_only = te.len() == 1
        && te[0]
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"chunked");
    if !chunked_only {
        return bad("only Transfer-Encoding: chunked is accepted");
    }
    Ok(())
}

/// Host header, URL authority and the tunnel must name one destination.
fn check_names<B>(tunnel: &Dest<'_>, req: &Request<B>) -> Result<(), Refused> {
    let mismatch = |what: &str, got: &str| {
        Err(refuse(
            421,
            "host_mismatch",
            format!(
                "{what} {got:?} does not match the tunnel to {} (CONNECT host and TLS SNI)",
                tunnel.host.authority(tunnel.port)
            ),
        ))
    };
    let hosts: Vec<_> = req.headers().get_all(http::header::HOST).iter().collect();
    if hosts.len() > 1 {
        return Err(refuse(
            400,
            "bad_request",
            "more than one Host header".into(),
        ));
    }
    if let Some(authority) = req.uri().authority()
        && !same_destination(tunnel, authority.as_str())
    {
        return mismatch("the request's authority", authority.as_str());
    }
    match hosts.first() {
        Some(h) => {
            let text = String::from_utf8_lossy(h.as_bytes());
            if !same_destination(tunnel, &text) {
                return mismatch("the Host header", &text);
            }
        }
        None if req.uri().authority().is_none() => {
            let msg = "the request names no host (no Host header or :authority)".to_owned();
            return Err(refuse(400, "bad_request", msg));
        }
        None => {}
    }
    Ok(())
}

/// `authority` (`host[:port]`) names the tunnel's host and port; without a
/// port it means 443.
fn same_destination(tunnel: &Dest<'_>, authority: &str) -> bool {
    if authority.contains('@') {
        return false;
    }
    let (h, port) = if authority.ends_with(']') || !authority.contains(':') {
        (authority, 443)
    } else {
        match host::split_authority(authority) {
            Some(pair) => pair,
            None => return false,
        }
    };
    port == tunnel.port && host::canonicalize(h).is_ok_and(|c| &c == tunnel.host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_agree() {
        let host = host::canonicalize("api.test").unwrap();
        let t = Dest {
            host: &host,
            port: 443,
        };
        for ok in ["api.test", "API.test.", "api.test:443"] {
            assert!(same_destination(&t, ok), "{ok}");
        }
        for bad in [
            "evil.test",
            "api.test:8443",
            "user@api.test",
            "api.test:",
            "api.test.evil",
        ] {
            assert!(!same_destination(&t, bad), "{bad}");
        }
    }
}
