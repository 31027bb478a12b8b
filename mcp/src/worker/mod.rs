//! The single-use worker process that runs one `execute`.
//!
//! The server re-executes its own binary with the hidden subcommand
//! [`WORKER_ARG`] and sends it one [`ToWorker::Init`] (the `oa` operations and
//! the per-run caps, never code); the child ([`child`]) applies rlimits,
//! builds a QuickJS context with `console` and `oa` already bound, applies
//! its seccomp filter, says [`ToServer::Ready`] and waits for exactly one
//! [`ToWorker::Exec`], so only the script itself is left for the hot path. API calls go back to the server over the same pipes
//! ([`ToServer::Call`] / [`ToWorker::ApiResult`], matched by id, several in
//! flight so `Promise.all` runs calls concurrently); the worker ends with
//! [`ToServer::Done`] and exits. Messages are JSON, each preceded by its
//! length as a big-endian u32 ([`frame`]), in serde's externally tagged
//! form (`{"call":{…}}`, `"ready"`): unlike a tag field inside the object it
//! is parsed in one pass, without buffering the message first. A call's
//! arguments, an API result and the script's result are JSON values inside
//! the message (serde_json's `RawValue`), not JSON text escaped into a
//! string: a frame's length is what the script produced, and neither side
//! escapes or unescapes them on the way.

pub mod child;
pub mod frame;
pub mod pool;
pub mod sandbox;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `argv[1]` that turns the binary into a worker.
pub const WORKER_ARG: &str = "__execute-worker";

/// File name of the dedicated worker binary, looked up next to the server.
/// It is built from this crate but links neither the MCP SDK, tokio nor the
/// HTTP/TLS stack, so exec, dynamic loading and relocation cost less than
/// re-executing the server; without it the server re-executes itself.
pub const WORKER_BIN: &str = "openagenda-mcp-worker";

/// The worker's `main`: `ARGV0 __execute-worker MEMORY_MB TIMEOUT_MS`, then
/// [`child::run`]; returns the exit status.
pub fn main_with_args(args: &[String]) -> i32 {
    main_with(args, None)
}

/// [`main_with_args`] with a [`child::StandIn`] in place of the script (the
/// tests' syscall probe, `src/probe_main.rs`).
pub fn main_with(args: &[String], stand_in: Option<child::StandIn>) -> i32 {
    let num = |i: usize| args.get(i).and_then(|s| s.parse::<u64>().ok());
    let (Some(WORKER_ARG), Some(memory_mb), Some(timeout_ms)) =
        (args.get(1).map(String::as_str), num(2), num(3))
    else {
        crate::log::line(
            "error",
            "worker: usage: __execute-worker MEMORY_MB TIMEOUT_MS",
        );
        return 2;
    };
    match child::run_with(memory_mb, timeout_ms, stand_in) {
        Ok(()) => 0,
        Err(e) => {
            crate::log::line("error", &format!("worker: {e}"));
            1
        }
    }
}

/// The program workers are started from: [`WORKER_BIN`] next to `server_exe`
/// when it is there, else the server binary itself.
pub fn worker_exe(server_exe: &std::path::Path) -> std::path::PathBuf {
    let dedicated = server_exe.with_file_name(WORKER_BIN);
    if dedicated.is_file() {
        dedicated
    } else {
        server_exe.to_path_buf()
    }
}

/// Server → worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToWorker {
    /// Everything that does not depend on the code (sent once, at spawn,
    /// before the worker closes its sandbox and says ready).
    Init {
        /// `oa.` paths and the operation ids they call.
        ops: Vec<(String, String)>,
        /// Output cap (result plus logs) in bytes.
        output_cap: usize,
        /// API calls one run may make; further calls resolve with an error
        /// without leaving the worker.
        max_calls: u32,
    },
    /// Run this code (sent once, after ready).
    Exec {
        /// The model's code.
        code: String,
        /// Deadline, in ms from receipt, enforced by QuickJS's interrupt
        /// handler (the server kills the process a little later anyway).
        timeout_ms: u64,
    },
    /// The answer to one [`ToServer::Call`].
    ApiResult {
        /// The call's id.
        id: u64,
        /// `{data, error}`.
        json: Box<RawValue>,
    },
}

/// One captured console line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LogLine {
    /// `log`, `info`, `warn` or `error`.
    pub level: String,
    /// The formatted arguments.
    pub text: String,
}

/// How the script ended, as seen from inside the worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The script's value (`null` for undefined).
    Ok {
        /// The result, as the script's `JSON.stringify` wrote it.
        result_json: Box<RawValue>,
    },
    /// The script failed.
    Err {
        /// One of the `execute` error codes.
        code: String,
        /// Message (bounded by the worker).
        message: String,
        /// JS stack, when there is one.
        stack: Option<String>,
    },
}

/// Worker → server.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToServer {
    /// Sandbox applied, context and `oa` built; waiting for [`ToWorker::Exec`].
    Ready,
    /// Please perform this API call.
    Call {
        /// Id chosen by the worker; answers may come back in any order.
        id: u64,
        /// operationId.
        op: String,
        /// `{path, query, header, body}`.
        args: Box<RawValue>,
    },
    /// The execute is over.
    Done {
        /// Result or error.
        outcome: Outcome,
        /// console lines, in order.
        logs: Vec<LogLine>,
    },
}
