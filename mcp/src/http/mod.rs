//! The Streamable HTTP transport: `openagenda-mcp --transport http`.
//!
//! One listener (`--listen ADDR`, or `stdin`: a listening socket handed
//! over as standard input, which is how `--jail` brings a port bound on
//! the host into the jail's own network namespace), hyper serving
//! HTTP/1.1, and these routes ([`front`]):
//!
//! - `GET /health` → `{"status":"ok"}`: no token, no issuer, no worker;
//! - `GET /.well-known/oauth-protected-resource` and the same with the
//!   resource's path appended (`…/mcp`): RFC 9728 metadata;
//! - `/mcp` (POST, GET, DELETE): a verified bearer token first
//!   ([`crate::oauth`]), then the caller's session binding
//!   ([`sessions`]), then the body's checks ([`body`]), then rmcp
//!   ([`crate::mcp::HttpEndpoint`]), which serves both protocol eras:
//!   `initialize` opens a session (`Mcp-Session-Id`) for 2025-11-25
//!   clients, 2026-07-28 requests are served without one.
//!
//! Invariants: every `/mcp` request is verified before anything reads
//! its body; a session is bound to the `sub` that opened it and answers
//! no one else; SIGTERM stops accepting and lets requests in flight
//! finish (up to [`DRAIN`]).

pub mod body;
pub mod front;
pub mod sessions;

use crate::McpError;
use crate::oauth::verify::Verifier;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;

/// How long requests in flight may take after SIGTERM.
pub const DRAIN: Duration = Duration::from_secs(25);
/// Time a client has to send a request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

// Plain data, parsed with the rest of the transport's configuration
// (`crate::remote`, which needs nothing of this module).
pub use crate::remote::Settings;

/// Assembles the resource server, the token exchange and the MCP server
/// for `tools`, and serves until SIGTERM or SIGINT. `roots` and
/// `extra_ca` are the API client's trust ([`crate::oauth::client`]).
pub async fn run(
    tools: crate::tools::Tools,
    config: &crate::remote::Http,
    roots: Option<&std::path::Path>,
    extra_ca: Option<&std::path::Path>,
) -> Result<(), McpError> {
    use crate::oauth::{client::Client, exchange::Exchanger, jwks::KeyCache};
    let client = Client::new(roots, extra_ca, CLIENT_TIMEOUT)?;
    let o = &config.oauth;
    let keys = KeyCache::new(client.clone(), o);
    let verifier = Arc::new(Verifier::new(o.clone(), keys));
    let access = match &config.exchange {
        Some(x) => crate::access::Access::Exchange(Arc::new(Exchanger::new(x.clone(), client))),
        None => {
            crate::log::line(
                "info",
                "no OA_TOKEN_EXCHANGE_URL: API calls of executes carry no Authorization",
            );
            crate::access::Access::ServerKey(crate::audit::Credential::None)
        }
    };
    let server = crate::mcp::Server::new(Arc::new(tools.with_access(access)));
    serve(server, verifier, config.http.clone()).await
}

/// Timeout of one request to the issuer or the token exchange.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until SIGTERM or SIGINT.
pub async fn serve(
    server: crate::mcp::Server,
    verifier: Arc<Verifier>,
    settings: Settings,
) -> Result<(), McpError> {
    let listener = settings.listen.open()?;
    let local = listener.local_addr().map_err(|e| McpError::Io {
        what: "the listener's address".into(),
        source: e,
    })?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let endpoint = server.http_endpoint(crate::mcp::HttpOptions {
        allowed_hosts: front::allowed_hosts(&settings, verifier.settings()),
        session_idle: settings.session_idle,
        cancel: cancel.clone(),
    });
    let front = Arc::new(front::Front::new(endpoint, verifier, &settings));
    crate::log::line(
        "info",
        &format!(
            "listening on http://{local}/mcp (resource {}, issuer {})",
            front.resource(),
            front.issuer()
        ),
    );
    accept_loop(listener, front, settings.max_connections, cancel).await;
    Ok(())
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    front: Arc<front::Front>,
    max: usize,
    cancel: tokio_util::sync::CancellationToken,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(max.max(1)));
    let stop = crate::stdio::termination();
    tokio::pin!(stop);
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    crate::log::line("warning", &format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let service = hyper::service::service_fn(move |req| {
            let front = front.clone();
            async move { Ok::<_, std::convert::Infallible>(front.handle(req, peer).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        let watched = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = watched.await;
            drop(permit);
        });
    }
    drop(listener);
    // Requests in flight finish and are answered; then the sessions end
    // (their event streams close) and the connections with them.
    if tokio::time::timeout(DRAIN, front.idle()).await.is_err() {
        crate::log::line(
            "warning",
            &format!(
                "requests still running {} s after SIGTERM: stopping",
                DRAIN.as_secs()
            ),
        );
    }
    cancel.cancel();
    let _ = tokio::time::timeout(CLOSE, graceful.shutdown()).await;
}

/// How long connections get to close once the requests are answered.
const CLOSE: Duration = Duration::from_secs(2);
