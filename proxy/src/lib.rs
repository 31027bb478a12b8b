//! oajail-proxy: the jail's only way out.
//!
//! One listener (created inside the jail's network namespace and handed to
//! the supervisor, so host processes cannot reach it) serves HTTP/1.1
//! absolute-form requests, `CONNECT` tunnels and SOCKS5 `CONNECT`,
//! dispatched on the first byte. Every destination goes through one path
//! (`route.rs`):
//!
//! canonicalise → deny list → allow list → resolve once → every address
//! public (or deliberately admitted) → dial exactly the checked address →
//! only then answer success → for tunnels, peek the TLS ClientHello and
//! require SNI == the CONNECT host.
//!
//! Invariants:
//! - a refused name is never sent to DNS;
//! - the address dialed is the address checked (no second resolution);
//! - no success answer (`200`, SOCKS `0`) before the upstream connection
//!   exists; no client byte reaches the upstream before the allow;
//! - malformed input gets an error answer and a close, never a panic, and
//!   other connections keep being served;
//! - every decision and every closed tunnel writes one JSON log line;
//! - a terminated tunnel passes every check above first, its upstream is
//!   the checked socket, and every request in it is checked and logged.
//!
//! Modules: `server` (runtime, accept, first-byte dispatch, limits),
//! `shared` (the state every connection shares), `head` (strict head
//! parser, body framing, header helpers, error answers; no I/O), `http`
//! (the client's request loop, refusals, CONNECT), `forward` + `response`
//! (absolute-form HTTP), `socks` (SOCKS5), `route` (the decision path),
//! `addr` (which addresses are public), `tls` (ClientHello peek), `relay` +
//! `flow` (tunnels: splice or copy, half-close, idle), `conn` (buffered
//! reads and body framing), `log` (decision log and summary), `resolve`
//! (the resolver trait), `helper` (the ssh ProxyCommand client);
//! TLS termination (`tlsTerminate`, `oajail.httpRules`): `terminate` (the
//! terminated tunnel: upstream TLS over the checked socket, then the
//! client's, hyper both ways), `mitm` (the run's CA, cached leaves, the
//! upstream roots), `inspect` (per-request name, framing and rule checks),
//! `sniff` (client-side streams: replayed ClientHello bytes, the strict
//! HTTP/1.1 framing check before hyper), `unreached` (an upstream that
//! failed, answered inside TLS with the reason); `masked` (srt `credentials` with
//! `mode: "mask"`: sentinels swapped in headers to `injectHosts` only,
//! refused everywhere else), `issued` (`oajail.issuedTokens`: tokens a
//! token endpoint issues reach the jail as sentinels), `unswap` (a real
//! value echoed in a response body reaches the jail as its sentinel). The modules form no import cycle
//! (`.ci/module-imports.py`).
//! Design, answers and log format: docs/proxy.md.
#![deny(missing_docs)]

mod addr;
mod conn;
mod flow;
mod form;
mod forward;
mod head;
mod helper;
mod http;
mod inspect;
mod issued;
mod log;
mod log_gate;
mod log_sink;
mod masked;
mod mitm;
mod relay;
mod resolve;
mod response;
mod route;
mod server;
mod shared;
mod sniff;
mod socks;
mod terminate;
mod tls;
mod unreached;
mod unswap;

pub use addr::{LocalAddrs, classify};
pub use helper::ssh_connect_helper;
pub use log::Summary;
pub use masked::Credentials;
pub use resolve::{ResolveFuture, Resolver, SystemResolver};

use oajail_policy::egress::EgressPlan;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What the supervisor hands the proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The compiled allowlist.
    pub egress: EgressPlan,
    /// `--log-json FILE`: one JSON line per decision and per closed tunnel.
    pub log_json: Option<PathBuf>,
    /// Timeouts and size limits.
    pub limits: Limits,
}

/// Timeouts and size limits; the defaults are what oajail runs with.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; more get `503` (SOCKS: reply 1).
    pub max_connections: usize,
    /// A request head must be complete this long after its first byte
    /// (slowloris); also the wait for the next request on keep-alive.
    pub header_timeout: Duration,
    /// A tunnel with no traffic either way for this long is closed.
    pub idle_timeout: Duration,
    /// A tunnel's first client bytes (the ClientHello) must arrive within.
    pub peek_timeout: Duration,
    /// Dialing the upstream.
    pub connect_timeout: Duration,
    /// One name resolution.
    pub dns_timeout: Duration,
    /// Largest request or response head, in bytes (`431` above it).
    pub max_head_bytes: usize,
    /// Most header fields in one head (`431` above it).
    pub max_headers: usize,
    /// Most bytes buffered while looking for the complete ClientHello.
    pub max_client_hello: usize,
    /// Relay buffer per direction when copying, allocated only while data
    /// flows.
    pub relay_buffer: usize,
    /// Move tunnel bytes with `splice(2)` instead of copying them through
    /// user space (see docs/benchmarks.md for both).
    pub splice: bool,
    /// `SO_SNDBUF` of a tunnel's jail-side socket, set when the relay
    /// starts; `None` keeps the kernel's autotuning. That socket is always
    /// loopback (the listener lives in the jail's network namespace), where
    /// a small buffer costs no throughput and bounds the bytes queued
    /// towards the client. The upstream socket keeps autotuning, which a
    /// real network path needs for its bandwidth-delay product. A caller
    /// that serves clients over a real network should set `None`.
    pub client_send_buffer: Option<usize>,
    /// Size cap of the `--log-json` output; at the cap one `log_capped`
    /// line and one stderr line are written, then nothing more.
    pub log_max_bytes: u64,
}

/// Default [`Limits::log_max_bytes`]: 64 MiB.
pub const LOG_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Default [`Limits::client_send_buffer`]: 128 KiB (the kernel doubles it
/// for its own bookkeeping). Chosen by the bulk runs in docs/benchmarks.md.
pub const CLIENT_SEND_BUFFER: usize = 128 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            peek_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            dns_timeout: Duration::from_secs(5),
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            max_client_hello: 64 * 1024,
            relay_buffer: 64 * 1024,
            splice: true,
            client_send_buffer: Some(CLIENT_SEND_BUFFER),
            log_max_bytes: LOG_MAX_BYTES,
        }
    }
}

/// Errors of the proxy's own operations (never of a client's input, which
/// is answered and logged instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The tokio runtime could not start.
    #[error("proxy: cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// A listener could not be registered with the runtime.
    #[error("proxy: cannot use the listener: {0}")]
    Listener(std::io::Error),
    /// `--log-json` could not be opened.
    #[error("proxy: cannot open the decision log {path}: {source}")]
    Log {
        /// The log path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The ssh helper could not reach the proxy or relay.
    #[error("ssh-proxy: {0}")]
    Helper(String),
    /// The TLS-termination CA could not be loaded or made, or the upstream
    /// roots could not be read.
    #[error("proxy: {0}")]
    Ca(String),
    /// A masked credential could not be set up.
    #[error("proxy: {0}")]
    Credential(String),
}

/// Extra start-up options; [`start`] uses the defaults (system resolver).
#[derive(Clone)]
pub struct StartOptions {
    resolver: Arc<dyn Resolver>,
    worker_threads: usize,
    authority: Option<Authority>,
    credentials: Credentials,
    observer: Option<Observer>,
    asker: Option<Asker>,
    #[cfg(feature = "test-lab")]
    lab_public: Vec<std::net::IpAddr>,
}

/// A destination the policy refuses and an allow entry would admit, put to
/// [`StartOptions::asker`].
#[derive(Debug, Clone)]
pub struct Question {
    /// The host as the client named it (canonical).
    pub host: String,
    /// The port.
    pub port: u16,
    /// Why the policy refuses it, with the entry that would allow it.
    pub message: String,
}

/// Answers a [`Question`]: true admits the destination for this one
/// connection or request (called on a blocking thread; it may wait for a
/// person).
pub type Asker = Arc<dyn Fn(&Question) -> bool + Send + Sync>;

/// A refused destination, as [`StartOptions::observer`] is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Refused<'a> {
    /// The host the client named (redacted of masked credentials).
    pub host: Option<&'a str>,
    /// Its port.
    pub port: Option<u16>,
    /// `http`, `connect` or `socks5`.
    pub proto: &'a str,
    /// The log's machine-readable reason (`not_allowed`, `deny_list` …).
    pub reason: &'a str,
    /// The explanation the client got, with the setting that would allow it.
    pub message: Option<&'a str>,
}

/// Told of every refusal as it is logged (on a proxy thread: return soon).
pub type Observer = Arc<dyn Fn(&Refused<'_>) + Send + Sync>;

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            resolver: Arc::new(SystemResolver),
            worker_threads: 2,
            authority: None,
            credentials: Credentials::default(),
            observer: None,
            asker: None,
            #[cfg(feature = "test-lab")]
            lab_public: Vec::new(),
        }
    }
}

impl StartOptions {
    /// Resolve names with `resolver` instead of the system resolver.
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Runtime worker threads (default 2).
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = n.max(1);
        self
    }

    /// Terminate with `ca`, made ahead by the caller (whose jail trusts its
    /// certificate), instead of a CA made at start from the plan.
    pub fn authority(mut self, ca: Authority) -> Self {
        self.authority = Some(ca);
        self
    }

    /// Swap and police these masked credentials (their sentinels are in
    /// the jail's environment).
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Tell `observer` of every refusal (oajail's desk counts and learns
    /// them with the jail's own).
    pub fn observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Ask `asker` before refusing a destination an allow entry would admit
    /// (not one a deny entry, an address check or the protocol refuses).
    pub fn asker(mut self, asker: Asker) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Test-only (`test-lab` feature): treat exactly these addresses as
    /// public internet hosts, so hermetic tests can exercise the real
    /// public-address check against loopback stand-ins.
    #[cfg(feature = "test-lab")]
    pub fn lab_public(mut self, addrs: Vec<std::net::IpAddr>) -> Self {
        self.lab_public = addrs;
        self
    }
}

/// The run's TLS-termination CA and upstream TLS configuration. The
/// supervisor makes it before the jail is set up, so the jail's trust
/// bundle can carry the certificate, and hands it to the proxy with
/// [`StartOptions::authority`]. The private key stays inside this value:
/// nothing returns it.
#[derive(Clone)]
pub struct Authority(Arc<mitm::Mitm>);

impl Authority {
    /// The CA `egress` terminates with (`tlsTerminate`'s `caCertPath`/
    /// `caKeyPath`, else an ephemeral one made in memory), or `None` when
    /// no tunnel may be terminated.
    pub fn for_plan(egress: &EgressPlan) -> Result<Option<Self>, ProxyError> {
        if !egress.needs_ca() {
            return Ok(None);
        }
        let mitm = mitm::Mitm::new(egress.tls_terminate.as_ref())?;
        Ok(Some(Self(Arc::new(mitm))))
    }

    /// The CA certificate (PEM) the jail's trust bundle adds to the roots.
    pub fn cert_pem(&self) -> &str {
        self.0.ca_pem()
    }

    /// The jail's trust bundle (PEM): the host's roots, then
    /// [`Authority::cert_pem`].
    pub fn trust_bundle(&self) -> String {
        self.0.trust_bundle()
    }

    /// How many of the host's roots the bundle (and the upstream check)
    /// holds; 0 means only the run's CA is trusted inside the jail.
    pub fn host_roots(&self) -> usize {
        self.0.host_roots()
    }

    pub(crate) fn mitm(&self) -> Arc<mitm::Mitm> {
        self.0.clone()
    }
}

/// The running proxy.
pub struct ProxyHandle {
    inner: server::Running,
}

impl ProxyHandle {
    /// The addresses the listeners are bound to.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.local_addrs()
    }

    /// Stop accepting, close every connection, flush the log and return the
    /// summary of denials.
    pub fn shutdown(self) -> Summary {
        self.inner.shutdown()
    }

    /// The run's TLS-termination CA certificate (PEM), when the policy
    /// terminates TLS for some host (`tlsTerminate` or `httpRules`): the
    /// jail's trust bundle adds it to the system roots. Its private key
    /// never leaves the proxy.
    pub fn ca_cert_pem(&self) -> Option<String> {
        self.inner.ca_pem()
    }

    /// Whether no client ever connected. The supervisor then skips the
    /// graceful [`ProxyHandle::shutdown`] (which waits for the runtime's
    /// threads) at exit: there is nothing to close, log or summarise.
    pub fn untouched(&self) -> bool {
        self.inner.untouched()
    }
}

/// Start the proxy on its own multi-thread runtime (background threads) and
/// serve every listener. The caller may be a plain synchronous program.
pub fn start(
    config: ProxyConfig,
    listeners: Vec<std::net::TcpListener>,
) -> Result<ProxyHandle, ProxyError> {
    start_with(config, listeners, StartOptions::default())
}

/// [`start`] with explicit options (an injected resolver, for tests).
pub fn start_with(
    config: ProxyConfig,
    listeners: Vec<std::net::TcpListener>,
    options: StartOptions,
) -> Result<ProxyHandle, ProxyError> {
    prepare(config, options)?.serve(listeners)
}

/// The first half of [`start_with`]: everything that can fail on the
/// caller's input (the decision log's file, the TLS-termination CA), done
/// without a thread. `oajail` prepares before it lets the jail run its
/// command, and serves only once a connection waits in a listener's
/// backlog, so a command that never connects never starts the runtime.
pub fn prepare(config: ProxyConfig, options: StartOptions) -> Result<Prepared, ProxyError> {
    server::Prepared::new(config, options).map(Prepared)
}

/// A proxy ready to serve ([`prepare`]).
pub struct Prepared(server::Prepared);

/// The decision log, for lines of other kinds ([`Prepared::events`]).
#[derive(Clone)]
pub struct EventLog(Arc<shared::Shared>);

impl EventLog {
    /// Write `value` (a JSON object; `time` is added) to the `--log-json`
    /// target, rate-gated under `key` as the proxy's own refusals are.
    /// Nothing happens without a target.
    pub fn write(&self, key: &str, value: serde_json::Value) {
        self.0.log.write_event(key, value);
    }

    /// Wait (bounded) until the lines written so far reach the target: a
    /// run that never started the proxy's runtime still gets them out
    /// before it exits.
    pub fn flush(&self) {
        self.0.log.flush();
    }
}

impl Prepared {
    /// The decision log, shared with the caller (one log, one schema).
    pub fn events(&self) -> EventLog {
        EventLog(self.0.shared())
    }

    /// Start the runtime and serve every listener.
    pub fn serve(self, listeners: Vec<std::net::TcpListener>) -> Result<ProxyHandle, ProxyError> {
        self.0.serve(listeners).map(|inner| ProxyHandle { inner })
    }
}
