//! `execute`: admission (concurrency and queue), one worker per run, the
//! deadline kill, API calls on the worker's behalf ([`exchange`]), and
//! error codes.
//!
//! The server's clock is the authority: the worker's own interrupt handler
//! usually reports `timeout` first, but if the script is stuck inside a
//! native builtin the server kills the process at the deadline plus a small
//! grace and answers `timeout` itself. The deadline starts when the execute
//! is accepted (it has one of the concurrency slots), not when it has a
//! worker: a pool emptied by a burst, or a slow spawn, counts against it.
//! A worker that dies for any reason becomes an error result; it never
//! takes the server down.

// An execute ends with at most one ExecError, moved once into the reply; its
// size is irrelevant and boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

mod exchange;

use crate::api::ApiClient;
use crate::config::Limits;
use crate::spec::Catalogue;
use crate::worker::LogLine;
use crate::worker::pool::{Pool, Worker};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Extra time after the deadline before the server kills the worker, so the
/// worker's own interrupt can report first when it can.
const KILL_GRACE: Duration = Duration::from_millis(100);

/// A successful execute.
#[derive(Debug)]
pub struct ExecOutput {
    /// The script's value.
    pub result: Value,
    /// Console lines.
    pub logs: Vec<LogLine>,
    /// API calls made.
    pub api_calls: u32,
    /// Bytes of the result as the script's `JSON.stringify` wrote it.
    pub result_bytes: usize,
}

/// A failed execute: one of the documented codes.
#[derive(Debug)]
pub struct ExecError {
    /// `js_runtime_error`, `api_error`, `timeout`, `memory_limit`,
    /// `output_limit`, `request_limit`, `busy`, `invalid_params`,
    /// `cancelled`.
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
        pool.refill();
        Self {
            pool,
            api,
            catalogue,
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
        self.execute_as(code, cancel, None).await
    }

    /// [`Executor::execute`] with `token` replacing the API client's key
    /// for this run's calls ([`crate::access`]).
    pub async fn execute_as(
        &self,
        code: &str,
        cancel: &CancellationToken,
        token: Option<String>,
    ) -> Result<ExecOutput, ExecError> {
        let api = match token {
            Some(t) => Arc::new(self.api.with_key(t)),
            None => self.api.clone(),
        };
        let _permit = self.admit().await?;
        let deadline = Instant::now() + self.limits.timeout;
        let mut worker: Option<Worker> = None;
        let mut calls = Calls::default();
        let outcome = tokio::select! {
            r = self.run(&mut worker, code, deadline, &mut calls, api) => r,
            () = tokio::time::sleep_until(deadline + KILL_GRACE) => Err(timeout_error(self.limits.timeout)),
            () = cancel.cancelled() => Err(ExecError::new("cancelled", "the request was cancelled by the client")),
        };
        let outcome = match (outcome, worker.as_mut()) {
            (Err(e), Some(w)) if e.code == "worker_gone" => {
                Err(crash_error(w, self.limits.timeout, deadline).await)
            }
            (Err(e), None) if e.code == "worker_gone" => {
                Err(ExecError::new("js_runtime_error", e.message))
            }
            (other, _) => other,
        };
        if let Some(mut w) = worker.take() {
            let _ = w.child.start_kill();
        }
        self.pool.refill();
        finish(outcome, calls)
    }

    /// Takes a worker (within the deadline: the caller's select bounds
    /// this) and runs the code in it.
    async fn run(
        &self,
        slot: &mut Option<Worker>,
        code: &str,
        deadline: Instant,
        calls: &mut Calls,
        api: Arc<ApiClient>,
    ) -> Result<ExecOutput, ExecError> {
        let taken = self
            .pool
            .take()
            .await
            .map_err(|e| ExecError::new("js_runtime_error", e))?;
        let w = slot.insert(taken);
        exchange::Exchange::new(self, calls, api)
            .run(w, code, deadline)
            .await
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
async fn crash_error(w: &mut Worker, limit: Duration, deadline: Instant) -> ExecError {
    let status = tokio::time::timeout(Duration::from_millis(200), w.child.wait()).await;
    match status.ok().and_then(Result::ok).and_then(|s| s.signal()) {
        Some(libc::SIGXCPU) => timeout_error(limit),
        Some(libc::SIGKILL) => killed_error(limit, deadline),
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

/// A worker killed by SIGKILL. Its CPU limit (`RLIMIT_CPU`, hard at the
/// deadline + 3 s) cannot fire before the deadline: the single-threaded
/// worker cannot have used more CPU than wall time. A kill before it comes
/// from outside, and in a container or cgroup with a memory limit (a
/// Kubernetes pod's `limits.memory`) that is the out-of-memory killer,
/// which picks the largest process: the worker holding the script's heap.
fn killed_error(limit: Duration, deadline: Instant) -> ExecError {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return ExecError::new(
            "timeout",
            format!(
                "the worker was killed (SIGKILL) at its {} ms deadline (possible infinite loop or too-heavy processing)",
                limit.as_millis()
            ),
        );
    }
    ExecError::new(
        "memory_limit",
        format!(
            "the worker was killed (SIGKILL) after {} ms, before its {} ms deadline: most likely by the out-of-memory killer of the container's or cgroup's memory limit (or by an outside kill); use less memory",
            (limit - left).as_millis(),
            limit.as_millis()
        ),
    )
}

fn finish(outcome: Result<ExecOutput, ExecError>, calls: Calls) -> Result<ExecOutput, ExecError> {
    outcome.map_err(|mut e| {
        e.api_calls = calls.count;
        e
    })
}
