//! The runtime, the accept loops and first-byte dispatch.
use crate::conn::BufConn;
use crate::route::Ctx;
use crate::shared::Shared;
use crate::{ProxyConfig, ProxyError, StartOptions, Summary};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{Semaphore, watch};

/// The started proxy (behind [`crate::ProxyHandle`]).
pub(crate) struct Running {
    runtime: Option<Runtime>,
    stop: watch::Sender<bool>,
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
}

/// The shared state made, the runtime not yet (`crate::prepare`).
pub(crate) struct Prepared {
    shared: Arc<Shared>,
    worker_threads: usize,
}

impl Prepared {
    pub(crate) fn new(config: ProxyConfig, options: StartOptions) -> Result<Self, ProxyError> {
        Ok(Prepared {
            shared: Shared::start(config, &options)?,
            worker_threads: options.worker_threads,
        })
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    pub(crate) fn serve(
        self,
        listeners: Vec<std::net::TcpListener>,
    ) -> Result<Running, ProxyError> {
        Running::start(self.shared, self.worker_threads, listeners)
    }
}

impl Running {
    fn start(
        shared: Arc<Shared>,
        worker_threads: usize,
        listeners: Vec<std::net::TcpListener>,
    ) -> Result<Self, ProxyError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads)
            .thread_name("oajail-proxy")
            .enable_all()
            .build()
            .map_err(ProxyError::Runtime)?;
        let (stop, stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
        let mut addrs = Vec::new();
        for listener in listeners {
            listener
                .set_nonblocking(true)
                .map_err(ProxyError::Listener)?;
            addrs.push(listener.local_addr().map_err(ProxyError::Listener)?);
            let _enter = runtime.enter();
            let listener = TcpListener::from_std(listener).map_err(ProxyError::Listener)?;
            runtime.spawn(accept_loop(
                listener,
                shared.clone(),
                permits.clone(),
                stop_rx.clone(),
            ));
        }
        Ok(Self {
            runtime: Some(runtime),
            stop,
            shared,
            addrs,
        })
    }

    /// Whether no connection was ever accepted: then there is no tunnel to
    /// close and no record to flush.
    pub(crate) fn untouched(&self) -> bool {
        self.shared.untouched()
    }

    pub(crate) fn ca_pem(&self) -> Option<String> {
        self.shared.ca_pem().map(str::to_owned)
    }

    pub(crate) fn local_addrs(&self) -> Vec<SocketAddr> {
        self.addrs.clone()
    }

    pub(crate) fn shutdown(mut self) -> Summary {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            // Dropping the remaining tasks runs the tunnels' close-record
            // guards, so active tunnels still get their close line.
            rt.shutdown_timeout(Duration::from_millis(500));
        }
        self.shared.log.summary()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(serve(shared.clone(), permits.clone(), stream, peer));
                }
                // Out of fds or similar: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
        }
    }
}

async fn serve(shared: Arc<Shared>, permits: Arc<Semaphore>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let mut ctx = Ctx {
        id: shared.next_id(),
        client: peer,
        proto: "http",
        started: Instant::now(),
    };
    let mut client = BufConn::new(stream);
    let permit = permits.try_acquire_owned().ok();
    match client.fill(shared.limits.header_timeout).await {
        Ok(n) if n > 0 => {}
        _ => return,
    }
    let first = client.buf[0];
    if first == 0x05 || first == 0x04 {
        ctx.proto = "socks5";
    }
    if permit.is_none() {
        return over_limit(&shared, &ctx, client, first).await;
    }
    let user_proxy = match first {
        0x05 | 0x04 => shared.plan.socks_proxy_port,
        _ => shared.plan.http_proxy_port,
    };
    if let Some(port) = user_proxy {
        return crate::relay::to_user_proxy(&shared, &ctx, client, port).await;
    }
    match first {
        0x05 => crate::socks::serve(&shared, &ctx, client).await,
        0x04 => {
            let mut rec = ctx.record("decision", "socks4_refused");
            rec.decision = Some("deny");
            rec.message = Some("SOCKS4 is not supported; use socks5h://".into());
            shared.log.write(rec);
        }
        _ => crate::http::serve(&shared, &mut ctx, client).await,
    }
}

async fn over_limit(shared: &Shared, ctx: &Ctx, mut client: BufConn, first: u8) {
    let mut rec = ctx.record("decision", "connection_limit");
    rec.decision = Some("deny");
    rec.message = Some(format!(
        "more than {} connections at once",
        shared.limits.max_connections
    ));
    shared.log.write(rec);
    if first != 0x05 && first != 0x04 {
        let body =
            crate::head::error_response(503, "Service Unavailable", "too many connections", None);
        let _ = client.stream.write_all(&body).await;
    }
}
