//! openagenda-mcp: a code-mode MCP server over an OpenAPI-described API.
//!
//! The crate owns two tools, `search_docs` (a BM25 index over the loaded
//! operations, [`search`] and [`render`]) and `execute` (model-written
//! JavaScript run by QuickJS, [`executor`] and [`worker`]), the Rust-side API
//! client ([`api`]), the egress policy it asks its wrapper for and the boot
//! check of that wrapper ([`egress`]) with its request rules derived from
//! the spec ([`http_rules`]), and the one-entry jailed launch
//! ([`relaunch`]).
//!
//! Invariants:
//! - JavaScript never runs in the server process: every `execute` runs in a
//!   single-use worker process (`openagenda-mcp-worker`, or this binary
//!   re-executed) that gets no code until it has dropped its
//!   privileges (a seccomp allow list: its pipes, memory, clocks, exit;
//!   rlimits), and that the server kills on its deadline;
//! - the API key lives only in the server's [`api::ApiClient`]; it is never
//!   sent to a worker, never logged and redacted from every text a script
//!   sees, as decoded ([`redact`]);
//! - what one execute can make the server hold is bounded whatever its
//!   script does ([`budget`]), and no work of one call runs long on the
//!   event loop: searches and worker spawns have lanes of their own
//!   ([`lane`]), large values are walked on blocking threads;
//! - stdout carries MCP protocol only; every log line goes to stderr
//!   ([`log`]); the MCP SDK is only used from [`mcp`], behind the line
//!   framing of [`stdio`], which answers every input line it refuses;
//! - the egress policy names absolute files only ([`egress`]), so it is the
//!   same from every working directory; `--jail` ([`relaunch`]) runs the
//!   server under oajail with exactly that policy, passed through a pipe;
//! - configuration fails closed: an unknown `OA_*` variable or an
//!   unsupported value refuses to start ([`config`]).
//!
//! Dependencies within the workspace: `oajail-policy` and `oajail-bpf` (the
//! worker's hand-written seccomp program) only; never the jail crate.
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod access;
pub mod api;
pub mod audit;
pub mod budget;
pub mod callers;
pub mod config;
pub mod early_id;
pub mod egress;
pub mod egress_reason;
pub mod error;
pub mod executor;
pub mod http;
pub mod http_rules;
pub mod lane;
pub mod listen;
pub mod log;
pub mod mcp;
pub mod oauth;
pub mod redact;
pub mod relaunch;
pub mod remote;
pub mod render;
pub mod reply;
pub mod search;
pub mod spec;
pub mod stdio;
pub mod tools;
pub mod worker;

pub use error::{McpError, PemError};
