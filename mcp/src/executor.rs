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
use crate::api::ApiReply;
use crate::config::Limits;
use crate::spec::Catalogue;
use crate::worker::frame::{self, FrameError};
use crate::worker::pool::{Pool, Worker};
use crate::worker::{LogLine, Outcome, ToServer, ToWorker};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::process::ChildStdout;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Extra time after the deadline before the server kills the worker, so the
/// worker's own interrupt can report first when it can.
const KILL_GRACE: Duration = Duration::from_millis(100);
/// Frames above the output cap plus this are refused (and the worker killed).
const FRAME_SLACK: usize = 256 * 1024;
/// API requests one execute has in flight at once (`Promise.all`).
const MAX_IN_FLIGHT: usize = 6;

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
        let worker = self
            .pool
            .take()
            .await
            .map_err(|e| ExecError::new("js_runtime_error", e))?;
        let deadline = self.limits.timeout + KILL_GRACE;
        let mut calls = Calls::default();
        let mut worker = worker;
        let outcome = tokio::select! {
            r = self.exchange(&mut worker, code, &mut calls, &api) => r,
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
        api: &Arc<ApiClient>,
    ) -> Result<ExecOutput, ExecError> {
        let exec = ToWorker::Exec {
            code: code.to_owned(),
            timeout_ms: u64::try_from(self.limits.timeout.as_millis()).unwrap_or(u64::MAX),
        };
        frame::write_async(&mut w.stdin, &exec)
            .await
            .map_err(gone)?;
        let stdout = w
            .stdout
            .take()
            .ok_or_else(|| ExecError::new("worker_gone", "no stdout"))?;
        // A frame budget bounds what a misbehaving worker can queue here.
        let budget = self.limits.max_api_calls as usize + 8;
        let mut frames = FrameReader::spawn(stdout, self.limits.output_cap + FRAME_SLACK, budget);
        let mut running: JoinSet<(u64, ApiReply)> = JoinSet::new();
        // Queued calls name their operation by index into the catalogue, so
        // no call copies an operation's documentation and schemas.
        let mut queued: VecDeque<(u64, usize, Value)> = VecDeque::new();
        loop {
            tokio::select! {
                msg = frames.rx.recv() => match msg {
                    Some(Ok(ToServer::Call { id, op, args })) => {
                        if let Some(json) = self.admit_call(&op, &args, calls, id, &mut queued) {
                            let reply = ToWorker::ApiResult { id, json };
                            frame::write_async(&mut w.stdin, &reply).await.map_err(gone)?;
                        }
                    }
                    Some(Ok(ToServer::Done { outcome, logs })) => return done(outcome, logs, calls),
                    Some(Ok(ToServer::Ready)) => {
                        return Err(ExecError::new("js_runtime_error", "worker protocol error"));
                    }
                    Some(Err(FrameError::TooLarge(n))) => return Err(self.too_large(n)),
                    Some(Err(e)) => return Err(gone(e)),
                    None => return Err(ExecError::new("worker_gone", "worker pipe closed")),
                },
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    let (id, reply) = joined.map_err(|e| ExecError::new("js_runtime_error", e.to_string()))?;
                    if let Some(status) = reply.failed_status {
                        calls.last_error = Some((status, reply.excerpt.clone()));
                    }
                    let msg = ToWorker::ApiResult { id, json: reply.json.to_string() };
                    frame::write_async(&mut w.stdin, &msg).await.map_err(gone)?;
                }
            }
            while running.len() < MAX_IN_FLIGHT
                && let Some((id, op, args)) = queued.pop_front()
            {
                let api = api.clone();
                let catalogue = self.catalogue.clone();
                running.spawn(async move { (id, api.call(&catalogue.ops[op], &args).await) });
            }
        }
    }

    fn too_large(&self, n: usize) -> ExecError {
        ExecError::new(
            "output_limit",
            format!(
                "output of {n} bytes exceeds {} bytes; return only the data you need",
                self.limits.output_cap
            ),
        )
    }

    /// Counts a call and queues it, or returns the immediate error answer.
    fn admit_call(
        &self,
        op_id: &str,
        args: &str,
        calls: &mut Calls,
        id: u64,
        queued: &mut VecDeque<(u64, usize, Value)>,
    ) -> Option<String> {
        calls.count += 1;
        let refuse = |msg: String| {
            Some(json!({"data": null, "error": {"status": 0, "message": msg}}).to_string())
        };
        if calls.count > self.limits.max_api_calls {
            return refuse(format!(
                "API call cap reached ({} calls per execute)",
                self.limits.max_api_calls
            ));
        }
        let Some(op) = self.catalogue.ops.iter().position(|o| o.id == op_id) else {
            return refuse(format!("unknown operation {op_id}"));
        };
        if let Some(why) = self.catalogue.refusal(&self.catalogue.ops[op]) {
            return refuse(why);
        }
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        queued.push_back((id, op, args));
        None
    }
}

/// Reads the worker's frames on its own task, so that waiting for a frame
/// never races with (and never loses bytes to) the other branches of the
/// exchange loop; the task ends when the run does.
struct FrameReader {
    rx: mpsc::UnboundedReceiver<Result<ToServer, FrameError>>,
    task: tokio::task::JoinHandle<()>,
}

impl FrameReader {
    fn spawn(mut stdout: ChildStdout, max: usize, budget: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            for _ in 0..budget {
                let frame = frame::read_async::<ToServer>(&mut stdout, max).await;
                let stop = frame.is_err();
                if tx.send(frame).is_err() || stop {
                    return;
                }
            }
            let _ = tx.send(Err(FrameError::Io(std::io::Error::other(
                "too many frames from the worker",
            ))));
        });
        Self { rx, task }
    }
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        self.task.abort();
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
