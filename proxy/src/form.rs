//! A POST's form body read before it goes upstream, when a `_method` field
//! in it (Rails, Laravel, Symfony: `oajail_policy::l7::form`) could make
//! `oajail.httpRules` refuse a request they allow as POST.
//!
//! The body is read only then: on a governed host, for a `POST` with a
//! form content type, where the rules refuse some method on that URL. It
//! is buffered up to [`FORM_BODY_LIMIT`] bytes and then relayed as it came
//! (plain HTTP: from the connection's read-ahead buffer; terminated TLS: as
//! one buffered body). A body over the limit is refused with one line: its
//! `_method` is unknown, and a method it could name is refused here.
use crate::conn::{BufConn, ReadError};
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full, Limited};
use oajail_policy::l7::form::{self, FORM_BODY_LIMIT, FormKind};
use oajail_policy::l7::path::Override;
use oajail_policy::l7::{HttpRules, RequestFacts, RuleVerdict};
use std::time::Duration;

/// What a form check needs: how the body reads, and the methods the rules
/// refuse here (named when the body cannot be read).
pub(crate) struct Need {
    kind: FormKind,
    refused: String,
}

/// Whether this request's body must be read: `None` for anything but a
/// POST form on a governed URL where some override would be refused.
pub(crate) fn need<'a>(
    rules: &HttpRules,
    facts: &RequestFacts<'_>,
    content_types: impl Iterator<Item = &'a [u8]>,
) -> Option<Need> {
    let mut types = content_types.peekable();
    let kind = if types.peek().is_none() {
        form::form_kind(facts.method, None)?
    } else {
        types.find_map(|t| form::form_kind(facts.method, Some(t)))?
    };
    let refused = rules.refused_override(facts)?;
    Some(Need { kind, refused })
}

impl Need {
    /// Why a body over the limit is refused (after "is refused: ").
    pub(crate) fn too_large(&self, size: Option<u64>) -> String {
        let size = size.map_or("more than the limit".to_owned(), |n| format!("{n} bytes"));
        format!(
            "oajail.httpRules: the form body ({size}) is over the {FORM_BODY_LIMIT} bytes the proxy reads to find a _method override, and it could ask for what is refused here ({})",
            self.refused
        )
    }

    /// The verdict with the body's `_method` fields added to `overrides`.
    pub(crate) fn judge(
        &self,
        rules: &HttpRules,
        facts: &RequestFacts<'_>,
        mut overrides: Vec<Override>,
        body: &[u8],
    ) -> Result<(), String> {
        overrides.extend(form::body_overrides(&self.kind, body));
        match rules.judge_with(facts, &overrides) {
            RuleVerdict::Refused(why) => Err(why),
            RuleVerdict::Ungoverned | RuleVerdict::Allowed(_) => Ok(()),
        }
    }
}

/// Why a plain-HTTP form check stopped the request.
pub(crate) enum Stop {
    /// Refused by the rules (the reason, after "is refused: ").
    Rule(String),
    /// The body could not be read.
    Read(ReadError),
}

/// Plain HTTP: read the body ahead (left in `client`'s buffer for the
/// relay) and judge it. `length` is the `Content-Length`, `None` for a
/// chunked body.
pub(crate) async fn check_plain(
    need: &Need,
    rules: &HttpRules,
    facts: &RequestFacts<'_>,
    overrides: Vec<Override>,
    client: &mut BufConn,
    length: Option<u64>,
    idle: Duration,
) -> Result<(), Stop> {
    let body = match length {
        Some(n) if n > FORM_BODY_LIMIT as u64 => return Err(Stop::Rule(need.too_large(Some(n)))),
        Some(n) => client.peek_exact(n as usize, idle).await,
        None => match client.peek_chunked(FORM_BODY_LIMIT, idle).await {
            Ok(Some(body)) => Ok(body),
            Ok(None) => return Err(Stop::Rule(need.too_large(None))),
            Err(e) => Err(e),
        },
    };
    let body = body.map_err(Stop::Read)?;
    need.judge(rules, facts, overrides, &body)
        .map_err(Stop::Rule)
}

/// Terminated TLS: buffer the body (at most the limit) and judge it; the
/// request comes back with the buffered body.
pub(crate) async fn check_buffered<B>(
    need: &Need,
    rules: &HttpRules,
    facts: &RequestFacts<'_>,
    overrides: Vec<Override>,
    req: Request<B>,
) -> Result<Request<Full<Bytes>>, String>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let declared = (parts.headers.get(http::header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > FORM_BODY_LIMIT as u64) {
        return Err(need.too_large(Some(n)));
    }
    let bytes = match Limited::new(body, FORM_BODY_LIMIT).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(need.too_large(None)),
        Err(e) => return Err(format!("the request body could not be read: {e}")),
    };
    need.judge(rules, facts, overrides, &bytes)?;
    Ok(Request::from_parts(parts, Full::new(bytes)))
}
