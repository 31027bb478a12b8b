//! `execute`: admission (concurrency and queue), one worker per run, the
//! deadline kill, API calls on the worker's behalf, and error codes.
//!
//! The server's clock is the authority: the worker's own interrupt handler
//! usually reports `timeout` first, but if the script is stuck inside a
//! native builtin the server kills the process at the deadline plus a small
//! grace and answers `timeout` itself. A worker that dies for any reason
//! becomes an error result; it never takes the server down.

// An execute ends with at most one ExecError, moved once into the reply; its
// size is irrelevant and boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use crate::api::ApiClient;
use crate::config::Limits;
use crate::spec::Catalogue;
use crate::worker::frame::{self, FrameError};
use crate::worker::pool::{Pool, Worker};
use crate::worker::{LogLine, Outcome, ToServer, ToWorker};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Extra time after the deadline before the server kills the worker, so the
/// worker's own interrupt can report first when it can.
const KILL_GRACE: Duration = Duration::from_millis(100);
/// Frames above the output cap plus this are refused (and the worker killed).
const FRAME_SLACK: usize = 256 * 1024;

/// A successful execute.
#[derive(Debug)]
pub struct ExecOutput {
    /// The script's value.
    pub result: Value,
    /// Console lines.
    pub logs: Vec<LogLine>,
    /// API calls made.
    pub api_calls: u32,
}

/// A failed execute: one of the documented codes.
#[derive(Debug)]
pub struct ExecError {
    /// `js_runtime_error`, `api_error`, `timeout`, `memory_limit`,
    /// `output_limit`, `busy`, `invalid_params`, `cancelled`.
    pub code: String,
    /// Human text (bounded, redacted).
    pub message: String,
    /// JS stack, when there is one.
    pub stack: Option<String>,
    /// HTTP status of the failing API call (`api_error`).
    pub status: Option<u16>,
    /// Bounded body excerpt of the failing API call (`api_error`).
    pub excerpt: Option<String>,
    /// Whether retrying the same call later may succeed.
    pub retryable: bool,
    /// Console lines captured before the failure.
    pub logs: Vec<LogLine>,
    /// API calls made.
    pub api_calls: u32,
}

impl ExecError {
    /// An error with just a code and a message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            stack: None,
            status: None,
            excerpt: None,
            retryable: code == "busy",
            logs: Vec::new(),
            api_calls: 0,
        }
    }
}

/// The execute engine shared by all requests.
pub struct Executor {
    pool: Arc<Pool>,
    api: Arc<ApiClient>,
    catalogue: Arc<Catalogue>,
    ops: Vec<(String, String)>,
    limits: Limits,
    slots: Semaphore,
    waiting: AtomicUsize,
}

/// Per-run bookkeeping of API calls.
#[derive(Default)]
struct Calls {
    count: u32,
    last_error: Option<(u16, String)>,
}

impl Executor {
    /// Builds the executor and starts filling the worker pool.
    pub fn new(
        pool: Arc<Pool>,
        api: Arc<ApiClient>,
        catalogue: Arc<Catalogue>,
        limits: Limits,
    ) -> Self {
        let ops = catalogue
            .ops
            .iter()
            .map(|o| (o.js_path.clone(), o.id.clone()))
            .collect();
        pool.refill();
        Self {
            pool,
            api,
            catalogue,
            ops,
            slots: Semaphore::new(limits.max_concurrency.max(1)),
            limits,
            waiting: AtomicUsize::new(0),
        }
    }

    /// Runs one script; `cancel` aborts it (the worker is killed).
    pub async fn execute(
        &self,
        code: &str,
        cancel: &CancellationToken,
    ) -> Result<ExecOutput, ExecError> {
        let _permit = self.admit().await?;
        let worker = self
            .pool
            .take()
            .await
            .map_err(|e| ExecError::new("js_runtime_error", e))?;
        let deadline = self.limits.timeout + KILL_GRACE;
        let mut calls = Calls::default();
        let mut worker = worker;
        let outcome = tokio::select! {
            r = self.exchange(&mut worker, code, &mut calls) => r,
            () = tokio::time::sleep(deadline) => Err(timeout_error(self.limits.timeout)),
            () = cancel.cancelled() => Err(ExecError::new("cancelled", "the request was cancelled by the client")),
        };
        let outcome = match outcome {
            Err(e) if e.code == "worker_gone" => {
                Err(crash_error(&mut worker, self.limits.timeout).await)
            }
            other => other,
        };
        let _ = worker.child.start_kill();
        drop(worker);
        self.pool.refill();
        finish(outcome, calls)
    }

    async fn admit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, ExecError> {
        if let Ok(p) = self.slots.try_acquire() {
            return Ok(p);
        }
        let busy = || {
            ExecError::new(
                "busy",
                "the server is at its concurrency limit; retry shortly",
            )
        };
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.limits.max_queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(busy());
        }
        let got = tokio::time::timeout(self.limits.queue_timeout, self.slots.acquire()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match got {
            Ok(Ok(p)) => Ok(p),
            _ => Err(busy()),
        }
    }

    async fn exchange(
        &self,
        w: &mut Worker,
        code: &str,
        calls: &mut Calls,
    ) -> Result<ExecOutput, ExecError> {
        let exec = ToWorker::Exec {
            code: code.to_owned(),
            timeout_ms: u64::try_from(self.limits.timeout.as_millis()).unwrap_or(u64::MAX),
            ops: self.ops.clone(),
            output_cap: self.limits.output_cap,
        };
        frame::write_async(&mut w.stdin, &exec)
            .await
            .map_err(gone)?;
        let max = self.limits.output_cap + FRAME_SLACK;
        loop {
            match frame::read_async::<ToServer>(&mut w.stdout, max).await {
                Ok(ToServer::Call { op, args }) => {
                    let json = self.api_call(&op, &args, calls).await;
                    frame::write_async(&mut w.stdin, &ToWorker::ApiResult { json })
                        .await
                        .map_err(gone)?;
                }
                Ok(ToServer::Done { outcome, logs }) => return done(outcome, logs, calls),
                Ok(ToServer::Ready) => {
                    return Err(ExecError::new("js_runtime_error", "worker protocol error"));
                }
                Err(FrameError::TooLarge(n)) => {
                    return Err(ExecError::new(
                        "output_limit",
                        format!(
                            "output of {n} bytes exceeds {} bytes; return only the data you need",
                            self.limits.output_cap
                        ),
                    ));
                }
                Err(e) => return Err(gone(e)),
            }
        }
    }

    async fn api_call(&self, op_id: &str, args: &str, calls: &mut Calls) -> String {
        calls.count += 1;
        if calls.count > self.limits.max_api_calls {
            let msg = format!(
                "API call cap reached ({} calls per execute)",
                self.limits.max_api_calls
            );
            return serde_json::json!({"data": null, "error": {"status": 0, "message": msg}})
                .to_string();
        }
        let Some(op) = self.catalogue.op(op_id) else {
            let msg = format!("unknown operation {op_id}");
            return serde_json::json!({"data": null, "error": {"status": 0, "message": msg}})
                .to_string();
        };
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let reply = self.api.call(op, &args).await;
        if let Some(status) = reply.failed_status {
            calls.last_error = Some((status, reply.excerpt.clone()));
        }
        reply.json.to_string()
    }
}

fn gone(e: FrameError) -> ExecError {
    ExecError::new("worker_gone", e.to_string())
}

fn timeout_error(limit: Duration) -> ExecError {
    ExecError::new(
        "timeout",
        format!(
            "execution timed out after {} ms (possible infinite loop or too-heavy processing)",
            limit.as_millis()
        ),
    )
}

/// Explains a worker that went away mid-run from its exit status.
async fn crash_error(w: &mut Worker, limit: Duration) -> ExecError {
    let status = tokio::time::timeout(Duration::from_millis(200), w.child.wait()).await;
    match status.ok().and_then(Result::ok).and_then(|s| s.signal()) {
        Some(libc::SIGXCPU) => timeout_error(limit),
        Some(libc::SIGKILL) => ExecError::new(
            "timeout",
            format!(
                "the worker was killed (SIGKILL) before finishing: CPU time limit ({} ms deadline) or an outside kill",
                limit.as_millis()
            ),
        ),
        Some(libc::SIGABRT) => ExecError::new(
            "memory_limit",
            "the worker aborted, most likely out of memory (address-space limit reached)",
        ),
        Some(sig) => ExecError::new(
            "js_runtime_error",
            format!("the worker crashed (signal {sig})"),
        ),
        None => ExecError::new("js_runtime_error", "the worker exited unexpectedly"),
    }
}

fn done(outcome: Outcome, logs: Vec<LogLine>, calls: &Calls) -> Result<ExecOutput, ExecError> {
    match outcome {
        Outcome::Ok { result_json } => {
            let result = serde_json::from_str(&result_json).unwrap_or(Value::String(result_json));
            Ok(ExecOutput {
                result,
                logs,
                api_calls: calls.count,
            })
        }
        Outcome::Err {
            code,
            message,
            stack,
        } => {
            let mut e = ExecError::new(&code, message);
            e.stack = stack;
            e.logs = logs;
            if code == "js_runtime_error"
                && let Some((status, excerpt)) = &calls.last_error
            {
                e.code = "api_error".into();
                e.status = Some(*status);
                e.excerpt = Some(excerpt.clone());
                e.message = format!(
                    "uncaught after a failed API call (HTTP {status}): {}",
                    e.message
                );
            }
            Err(e)
        }
    }
}

fn finish(outcome: Result<ExecOutput, ExecError>, calls: Calls) -> Result<ExecOutput, ExecError> {
    outcome.map_err(|mut e| {
        e.api_calls = calls.count;
        e
    })
}
