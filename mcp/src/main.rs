//! `openagenda-mcp`: the code-mode MCP server binary.
//!
//! `openagenda-mcp` serves MCP on stdio; `openagenda-mcp print-egress-policy`
//! prints the srt settings it needs from its wrapper. The hidden first
//! argument `__execute-worker` turns the process into a single-use worker
//! (see `openagenda_mcp::worker`).

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use openagenda_mcp::config::{self, Config, EgressAuthority, Limits};
use openagenda_mcp::executor::Executor;
use openagenda_mcp::spec::Catalogue;
use openagenda_mcp::tools::Tools;
use openagenda_mcp::{
    access, api, audit, callers, egress, http, log, mcp, relaunch, remote, worker,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "openagenda-mcp",
    version,
    about = "Code-mode MCP server (search_docs + execute) for the OpenAgenda v3 API or any OpenAPI"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    opts: Opts,
}

#[derive(Subcommand)]
enum Command {
    /// Print the egress policy (srt settings) this server needs from its wrapper.
    PrintEgressPolicy {
        /// `srt` (settings JSON) or `json` (settings plus policySha256).
        #[arg(long, default_value = "srt")]
        format: String,
    },
}

#[derive(clap::Args)]
struct Opts {
    /// API base URL; calls go only to its host.
    #[arg(long, env = "OA_BASE_URL", default_value = config::DEFAULT_BASE_URL, global = true)]
    base_url: String,
    /// Extra PEM CA bundle for the API client (development and tests).
    #[arg(long, env = "OA_EXTRA_CA_CERTS")]
    extra_ca_certs: Option<PathBuf>,
    /// OpenAPI 3.0/3.1 file (YAML or JSON) replacing the built-in OpenAgenda v3 catalogue.
    #[arg(long, env = "OA_OPENAPI")]
    openapi: Option<PathBuf>,
    /// Expose write operations (POST/PUT/PATCH/DELETE); execute is then annotated destructive.
    #[arg(long)]
    allow_writes: bool,
    /// Disable execute (search_docs stays up); also `OA_EXECUTE_DISABLED=1`.
    #[arg(long)]
    execute_disabled: bool,
    /// Deadline of one execute, in ms.
    #[arg(long, env = "OA_SANDBOX_TIMEOUT_MS", default_value_t = 5000)]
    timeout_ms: u64,
    /// QuickJS heap cap of one execute, in MiB.
    #[arg(long, env = "OA_SANDBOX_MEMORY_MB", default_value_t = 256)]
    memory_mb: u64,
    /// Executes running at once.
    #[arg(long, env = "OA_MAX_CONCURRENCY", default_value_t = 4)]
    max_concurrency: usize,
    /// Executes allowed to wait for a slot.
    #[arg(long, env = "OA_EXEC_MAX_QUEUE", default_value_t = 64)]
    exec_max_queue: usize,
    /// How long a queued execute waits before answering busy, in ms.
    #[arg(long, env = "OA_EXEC_QUEUE_TIMEOUT_MS", default_value_t = 30_000)]
    exec_queue_timeout_ms: u64,
    /// API calls one execute may make.
    #[arg(long, env = "OA_MAX_API_CALLS", default_value_t = 50)]
    max_api_calls: u32,
    /// Per-request timeout of the API client, in ms.
    #[arg(long, env = "OA_API_TIMEOUT_MS", default_value_t = 10_000)]
    api_timeout_ms: u64,
    /// Pre-started workers (default: the concurrency).
    #[arg(long, env = "OA_WORKER_POOL")]
    worker_pool: Option<usize>,
    /// Run under oajail (beside this binary, or `OA_OAJAIL`) with this
    /// server's own egress policy: the one-entry setup for MCP clients.
    #[arg(long)]
    jail: bool,
    /// Send the API key over plain http:// (tests against a local mock only).
    #[arg(long, env = "OA_ALLOW_INSECURE_HTTP", value_parser = clap::builder::BoolishValueParser::new())]
    allow_insecure_http: bool,
    #[command(flatten)]
    remote: openagenda_mcp::remote::Args,
}

impl Opts {
    fn config(&self) -> Result<Config> {
        config::check_env(std::env::vars())?;
        let authority = std::env::var("OA_CODE_EGRESS_AUTHORITY").ok();
        let jailed = std::env::var_os("OAJAIL").is_some();
        let mut egress = EgressAuthority::parse(authority.as_deref(), jailed)?;
        if self.jail && jailed {
            // `--jail` inside the jail it asked for: the boot check is not optional.
            egress = EgressAuthority::Wrapper;
        }
        let execute_disabled = config::env_flag(
            "OA_EXECUTE_DISABLED",
            std::env::var("OA_EXECUTE_DISABLED").ok().as_deref(),
        )?;
        let transport = self.remote.transport(&|name| std::env::var(name).ok())?;
        let api_key = config::api_key(
            std::env::var("OA_API_KEY").ok().as_deref(),
            &self.base_url,
            self.allow_insecure_http,
        )?;
        if self.timeout_ms == 0 || self.memory_mb < 8 || self.max_concurrency == 0 {
            bail!("config: timeout must be > 0, memory at least 8 MiB and concurrency at least 1");
        }
        Ok(Config {
            base_url: self.base_url.clone(),
            extra_ca_certs: self.extra_ca_certs.clone(),
            openapi: self.openapi.clone(),
            allow_writes: self.allow_writes,
            execute_disabled: self.execute_disabled || execute_disabled,
            egress,
            api_key,
            transport,
            caller_limits: self.remote.limits(),
            limits: Limits {
                timeout: Duration::from_millis(self.timeout_ms),
                memory_mb: self.memory_mb,
                output_cap: config::OUTPUT_CAP,
                max_concurrency: self.max_concurrency,
                max_queue: self.exec_max_queue,
                queue_timeout: Duration::from_millis(self.exec_queue_timeout_ms),
                max_api_calls: self.max_api_calls,
                api_timeout: Duration::from_millis(self.api_timeout_ms),
                pool_size: self.worker_pool.unwrap_or(self.max_concurrency),
            },
        })
    }
}

/// Threads of tokio's blocking pool (see the runtime's construction).
const BLOCKING_THREADS: usize = 2;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(worker::WORKER_ARG) {
        std::process::exit(worker::main_with_args(&args));
    }
    if args.get(1).map(String::as_str) == Some(worker::sandbox::SELFTEST_ARG) {
        std::process::exit(run_selftest());
    }
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        log::line("error", &format!("{e:#}"));
        std::process::exit(2);
    }
}

/// Applies the worker sandbox to this process and reports what it blocks
/// (used by the tests; harmless, it only confines itself).
fn run_selftest() -> i32 {
    match worker::sandbox::selftest() {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            let ok = std::io::Write::write_all(&mut out, format!("{report}\n").as_bytes()).is_ok();
            if ok { 0 } else { 1 }
        }
        Err(e) => {
            log::line("error", &format!("selftest: {e}"));
            1
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let cfg = cli.opts.config()?;
    // The request rules come from the catalogue, so it is loaded before the
    // policy is printed or handed to oajail.
    let catalogue = Arc::new(match &cfg.openapi {
        Some(path) => Catalogue::from_file(path, cfg.allow_writes)?,
        None => Catalogue::builtin(cfg.allow_writes)?,
    });
    let needs = cfg.egress_needs(&catalogue)?;
    if let Some(Command::PrintEgressPolicy { format }) = &cli.command {
        let text = egress::print(format, &needs)?;
        let mut out = std::io::stdout().lock();
        std::io::Write::write_all(&mut out, format!("{text}\n").as_bytes())?;
        return Ok(());
    }
    if cli.opts.jail && std::env::var_os("OAJAIL").is_none() {
        let configured = std::env::var(relaunch::OAJAIL_ENV).ok();
        let oajail = relaunch::oajail_path(&needs.exe, configured.as_deref())?;
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let mut files = Vec::new();
        if let Some(p) = &cfg.openapi {
            files.push(("OA_OPENAPI", egress::absolute(p)?));
        }
        if let Some(p) = &cfg.extra_ca_certs {
            files.push(("OA_EXTRA_CA_CERTS", egress::absolute(p)?));
        }
        // HTTP: the port is bound here, on the host's network, and handed
        // to the jailed server as its stdin (listen.rs).
        let listener = match &cfg.transport {
            remote::Transport::Http(h) => match &h.http.listen {
                openagenda_mcp::listen::Listen::Addr(a) => Some(openagenda_mcp::listen::bind(*a)?),
                openagenda_mcp::listen::Listen::Stdin => None,
            },
            remote::Transport::Stdio => None,
        };
        return Err(relaunch::exec_under_oajail(&oajail, &needs, &args, &files, listener).into());
    }
    let host = cfg.api_host()?;
    let stdio = matches!(cfg.transport, remote::Transport::Stdio);
    if stdio && cfg.api_key.is_none() && !cfg.execute_disabled {
        log::line(
            "warning",
            "OA_API_KEY is not set: API calls go out without authorization and most will fail",
        );
    }
    let egress_note = match cfg.egress {
        EgressAuthority::Wrapper => {
            egress::check_wrapper(
                &needs,
                std::env::var("OAJAIL_POLICY_SHA256").ok().as_deref(),
            )?;
            format!("Egress is bounded by oajail to {host}.")
        }
        EgressAuthority::None => {
            log::banner(egress::UNBOUNDED_BANNER);
            "Egress of this server is not bounded by a jail.".to_owned()
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Workers are spawned, and searches run, on lanes of their own
        // (mcp/src/lane.rs). The blocking pool takes what is left: large
        // responses and results, DNS lookups, and tokio's blocking stdin
        // read when stdin is not a pipe. Each thread that ever allocates
        // keeps a malloc arena (~200 KiB resident) for good, and tokio's
        // default (512) would let a burst leave hundreds behind: two.
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(Duration::from_secs(u64::from(u32::MAX)))
        .build()
        .context("tokio runtime")?;
    let served = rt.block_on(serve(cfg, catalogue, egress_note));
    // A blocking stdin read (stdin not a pipe) cannot be cancelled: do not
    // wait for it. Workers were killed when the pool was dropped.
    rt.shutdown_background();
    served
}

/// Under an oajail wrapper the API host's TLS is terminated by its proxy
/// (the policy says so and the boot check verified the policy): the API
/// client must trust the bundle the wrapper names, and nothing else works.
fn wrapper_roots(egress: EgressAuthority) -> Result<Option<std::path::PathBuf>> {
    if egress != EgressAuthority::Wrapper {
        return Ok(None);
    }
    match std::env::var_os("SSL_CERT_FILE") {
        Some(path) if !path.is_empty() => Ok(Some(path.into())),
        _ => bail!(
            "egress: the wrapper set no SSL_CERT_FILE, so its proxy's certificate for the api host cannot be verified"
        ),
    }
}

async fn serve(cfg: Config, catalogue: Arc<Catalogue>, egress_note: String) -> Result<()> {
    let key = cfg.api_key.clone();
    let executor = if cfg.execute_disabled {
        log::line("info", "execute is disabled (OA_EXECUTE_DISABLED)");
        None
    } else {
        let api = api::ApiClient::new(
            &cfg.base_url,
            key,
            wrapper_roots(cfg.egress)?.as_deref(),
            cfg.extra_ca_certs.as_deref(),
            cfg.limits.api_timeout,
        )?;
        let exe = worker::worker_exe(
            &std::env::current_exe().context("locating this binary for workers")?,
        );
        let l = &cfg.limits;
        let timeout_ms = u64::try_from(l.timeout.as_millis()).unwrap_or(u64::MAX);
        let init = worker::ToWorker::Init {
            ops: catalogue.js_ops(),
            output_cap: l.output_cap,
            max_calls: l.max_api_calls,
        };
        let pool = worker::pool::Pool::new(exe, l.memory_mb, timeout_ms, l.pool_size, &init)
            .context("encoding the worker init frame")?;
        Some(Executor::new(
            pool,
            Arc::new(api),
            catalogue.clone(),
            l.clone(),
        ))
    };
    let tools = Tools::new(
        catalogue.clone(),
        executor,
        cfg.limits.timeout,
        cfg.limits.memory_mb,
        egress_note,
    );
    let tools = match cfg.caller_limits {
        Some(limits) => tools.with_gate(callers::Gate::new(limits)),
        None => tools,
    };
    let transport = match &cfg.transport {
        remote::Transport::Stdio => "stdio",
        remote::Transport::Http(_) => "http",
    };
    log::line(
        "info",
        &format!(
            "serving {} operations of {} on {transport}",
            catalogue.ops.len(),
            catalogue.title
        ),
    );
    match &cfg.transport {
        remote::Transport::Stdio => {
            let key = audit::Credential::key(cfg.api_key.as_deref());
            let tools = tools.with_access(access::Access::ServerKey(key));
            mcp::Server::new(Arc::new(tools))
                .serve_stdio()
                .await
                .map_err(anyhow::Error::msg)
        }
        remote::Transport::Http(h) => {
            let roots = wrapper_roots(cfg.egress)?;
            http::run(tools, h, roots.as_deref(), cfg.extra_ca_certs.as_deref()).await?;
            Ok(())
        }
    }
}
