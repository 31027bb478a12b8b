//! A terminated tunnel whose upstream could not be had (its TLS failed,
//! its HTTP handshake failed, or the tunnel limit was reached) says why.
//!
//! The client is in its TLS handshake when that is known. A bare TLS alert
//! tells it nothing ("access denied"): a program in the jail, and the user
//! reading its error, cannot tell a certificate problem upstream from a
//! policy refusal. The client trusts the run's CA for this host (that is
//! what termination means), so the proxy completes the handshake with the
//! host's leaf and answers every request on the connection `502`, with
//! `X-Proxy-Error: upstream-failed` and the reason as the body, and prints
//! the same reason as a live line. No byte of the client's goes upstream.
//! Without a leaf (no CA) it falls back to the alert.
use crate::mitm::Mitm;
use crate::sniff::{Counters, Rewind};
use hyper_util::rt::{TokioExecutor, TokioIo};
use oajail_policy::host::Host;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// Why the tunnel ended before serving (logged, then said to the client).
pub(crate) struct Failed {
    pub reason: &'static str,
    pub message: String,
}

/// Answers the client's requests with the failure; the alert when no
/// leaf can be made.
pub(crate) async fn answer(
    mitm: &Mitm,
    mut client: crate::conn::BufConn,
    host: &Host,
    port: u16,
    counters: Arc<Counters>,
    failed: &Failed,
) {
    let dest = host.authority(port);
    crate::log::say(format_args!(
        "oajail: proxy could not complete https://{dest}: {}",
        failed.message
    ));
    let Ok(config) = mitm.server_config(host) else {
        let _ = client
            .stream
            .write_all(&crate::tls::ALERT_ACCESS_DENIED)
            .await;
        return;
    };
    let io = Rewind::new(client.buf, client.stream, counters);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let Ok(Ok(tls)) = tokio::time::timeout(mitm.handshake_timeout, acceptor.accept(io)).await
    else {
        return;
    };
    let message = format!("oajail proxy: https://{dest}: {}", failed.message);
    let service = hyper::service::service_fn(move |_req| {
        std::future::ready(Ok::<_, std::convert::Infallible>(bad_gateway(&message)))
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let served = builder.serve_connection(TokioIo::new(tls), service);
    let _ = tokio::time::timeout(mitm.handshake_timeout, served).await;
}

/// `502` with `X-Proxy-Error: upstream-failed` and the reason as a line of
/// text (the shape of the proxy's other answers in `crate::terminate`,
/// built here so that this module does not name the one that calls it).
fn bad_gateway(message: &str) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    let mut resp = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(format!(
        "{message}\n"
    ))));
    *resp.status_mut() = http::StatusCode::BAD_GATEWAY;
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        "x-proxy-error",
        http::HeaderValue::from_static("upstream-failed"),
    );
    resp
}
