//! The crate's one error type for start-up and configuration failures.
//!
//! Failures of a single `execute` are not errors of this type: they are
//! tool results with a code (see [`crate::executor::ExecError`]).

/// Everything that can stop the server from starting or a subcommand from
/// completing.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// An OpenAPI document could not be read or understood.
    #[error("openapi {origin}: {message}")]
    Spec {
        /// File name or `built-in`.
        origin: String,
        /// What was wrong, naming the field.
        message: String,
    },
    /// A configuration value (flag or environment variable) is invalid.
    #[error("config {field}: {message}")]
    Config {
        /// Flag or variable name.
        field: &'static str,
        /// What was wrong.
        message: String,
    },
    /// An environment variable is unknown or has a value this server does
    /// not implement.
    #[error("config {name}: {message}")]
    Env {
        /// The variable.
        name: String,
        /// What was wrong.
        message: String,
    },
    /// The API base URL does not parse.
    #[error("api client: base url: {0}")]
    ClientUrl(#[source] url::ParseError),
    /// A PEM bundle named by a variable could not be read or holds a
    /// certificate rustls refuses.
    #[error("api client: {var} {}: {source}", path.display())]
    ClientPem {
        /// The variable that names the bundle.
        var: &'static str,
        /// The bundle.
        path: std::path::PathBuf,
        /// The reader's or rustls' error.
        #[source]
        source: PemError,
    },
    /// The egress boot check refused to start the server.
    #[error("egress check: {0}")]
    Egress(String),
    /// The worker got a frame it did not expect from the server.
    #[error("worker setup pipe: {0}")]
    WorkerProtocol(&'static str),
    /// QuickJS failed while the worker built its runtime or its JS world.
    #[error("worker setup {step}: {source}")]
    WorkerJs {
        /// What was being built.
        step: &'static str,
        /// QuickJS's error.
        #[source]
        source: rquickjs::Error,
    },
    /// Reading or writing a file or pipe failed.
    #[error("io {what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A system call of the worker's set-up failed.
    #[error("worker setup {step}: {source}")]
    WorkerCall {
        /// The step that failed (rlimit, pdeathsig...).
        step: &'static str,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// The worker's seccomp program could not be built.
    #[error("worker setup seccomp: {0}")]
    WorkerFilter(#[source] oajail_bpf::BpfError),
    /// The kernel refused the worker's seccomp program.
    #[error("worker setup seccomp: {0}")]
    WorkerSeccomp(#[source] seccompiler::Error),
    /// The pipe to the server failed.
    #[error("worker setup pipe: {0}")]
    WorkerPipe(#[source] FrameError),
    /// The HTTP client could not be built.
    #[error("api client: {0}")]
    ClientBuild(#[source] reqwest::Error),
    /// The TLS configuration could not be built.
    #[error("api client: {0}")]
    ClientTls(#[source] rustls::Error),
    /// The egress policy does not load in `oajail-policy`.
    #[error("egress check: policy: {0}")]
    EgressPolicy(#[source] oajail_policy::PolicyError),
    /// The egress policy could not be written out.
    #[error("egress check: {0}")]
    EgressJson(#[source] serde_json::Error),
}

/// Why a PEM bundle was refused (see [`McpError::ClientPem`]).
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The file could not be read or is not PEM.
    #[error("{0}")]
    Read(#[source] rustls_pki_types::pem::Error),
    /// rustls refused a certificate of it.
    #[error("{0}")]
    Certificate(#[source] rustls::Error),
}

impl McpError {
    /// Shorthand for a spec error.
    pub fn spec(origin: &str, message: impl Into<String>) -> Self {
        Self::Spec {
            origin: origin.to_owned(),
            message: message.into(),
        }
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The pipe failed or closed.
    #[error("pipe: {0}")]
    Io(#[from] std::io::Error),
    /// The announced length is above the reader's maximum.
    #[error("frame of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The bytes are not the expected message.
    #[error("bad frame: {0}")]
    Json(#[from] serde_json::Error),
}
