//! One run's conversation with its worker: the code out, the worker's API
//! calls performed within the server's budget (`crate::budget`), their
//! answers back, and the result in.
//!
//! Three tasks share the pipes so that none of them can stall the others:
//! a reader turns the worker's stdout into frames (one at a time, at most
//! one waiting), a writer owns its stdin (the answers queue there, each
//! holding its bytes of the response budget until written), and the loop
//! here decides. A worker that stops reading its stdin therefore cannot
//! stop the server from reading its calls, and one that floods calls meets
//! the argument bounds instead of growing the server.

use super::{Calls, ExecError, ExecOutput, Executor};
use crate::api::ApiClient;
use crate::budget::{Held, MAX_CALL_ARGS, MAX_QUEUED_REQUEST_BYTES, RESULT_TREE_BYTES, parse_tree};
use crate::reply::{self, ApiReply};
use crate::worker::child::cap_text;
use crate::worker::frame::{self, FrameError};
use crate::worker::pool::Worker;
use crate::worker::{LogLine, Outcome, ToServer, ToWorker};
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Frames above the larger of the output cap and the argument bound plus
/// this are refused (and the worker killed).
const FRAME_SLACK: usize = 256 * 1024;
/// API requests one execute has in flight at once (`Promise.all`).
const MAX_IN_FLIGHT: usize = 6;
/// Results up to this size are parsed on the event loop; larger ones on a
/// blocking thread.
const INLINE_RESULT: usize = 64 * 1024;

/// A call accepted and waiting for one of the in-flight places.
struct Queued {
    id: u64,
    op: usize,
    args: Box<RawValue>,
}

/// A call's answer, with the argument bytes it gives back to the queue.
struct Answered {
    id: u64,
    arg_bytes: usize,
    reply: ApiReply,
}

/// One run's state.
pub(super) struct Exchange<'a> {
    ex: &'a Executor,
    calls: &'a mut Calls,
    /// The API client of this run (its caller's credential).
    api: Arc<ApiClient>,
    queue: VecDeque<Queued>,
    /// Argument bytes of the calls queued or in flight.
    queued_bytes: usize,
}

impl<'a> Exchange<'a> {
    pub(super) fn new(ex: &'a Executor, calls: &'a mut Calls, api: Arc<ApiClient>) -> Self {
        Self {
            ex,
            calls,
            api,
            queue: VecDeque::new(),
            queued_bytes: 0,
        }
    }

    /// Sends the code, serves the worker's calls, and returns its outcome.
    pub(super) async fn run(
        mut self,
        w: &mut Worker,
        code: &str,
        deadline: Instant,
    ) -> Result<ExecOutput, ExecError> {
        let (writer, mut frames) = self.start(w, code, deadline)?;
        let mut running: JoinSet<Answered> = JoinSet::new();
        loop {
            tokio::select! {
                msg = frames.rx.recv() => {
                    if let Some((outcome, logs)) = self.on_frame(msg, &writer)? {
                        return self.done(outcome, logs).await;
                    }
                }
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    let a = joined.map_err(|e| ExecError::new("js_runtime_error", e.to_string()))?;
                    self.on_answer(a, &writer)?;
                }
            }
            self.start_calls(&mut running);
        }
    }

    /// Sends the code (with the time left) and starts the pipes' tasks.
    fn start(
        &self,
        w: &mut Worker,
        code: &str,
        deadline: Instant,
    ) -> Result<(FrameWriter, FrameReader), ExecError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let exec = ToWorker::Exec {
            code: code.to_owned(),
            timeout_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
        };
        let (Some(stdin), Some(stdout)) = (w.stdin.take(), w.stdout.take()) else {
            return Err(ExecError::new("worker_gone", "worker pipes missing"));
        };
        let writer = FrameWriter::spawn(stdin);
        writer.send(frame::encode(&exec).map_err(gone)?, Held::none());
        let limits = &self.ex.limits;
        let max = limits.output_cap.max(MAX_CALL_ARGS) + FRAME_SLACK;
        // A frame budget bounds what a misbehaving worker can send at all.
        let budget = limits.max_api_calls as usize + 8;
        Ok((writer, FrameReader::spawn(stdout, max, budget)))
    }

    /// One frame from the worker: a call is admitted (or answered at once),
    /// `done` ends the exchange with the worker's outcome.
    fn on_frame(
        &mut self,
        msg: Option<Result<ToServer, Incoming>>,
        writer: &FrameWriter,
    ) -> Result<Option<(Outcome, Vec<LogLine>)>, ExecError> {
        match msg {
            Some(Ok(ToServer::Call { id, op, args })) => {
                if let Some(json) = self.admit_call(&op, args, id)? {
                    writer.send(frame::api_result(id, &json).map_err(gone)?, Held::none());
                }
                Ok(None)
            }
            Some(Ok(ToServer::Done { outcome, logs })) => Ok(Some((outcome, logs))),
            Some(Ok(ToServer::Ready)) => {
                Err(ExecError::new("js_runtime_error", "worker protocol error"))
            }
            Some(Err(Incoming::TooLarge { bytes, call })) => Err(self.too_large(bytes, call)),
            Some(Err(Incoming::Failed(e))) => Err(gone(e)),
            None => Err(ExecError::new("worker_gone", "worker pipe closed")),
        }
    }

    /// An API answer: its argument bytes leave the queue's count, and the
    /// answer (with the response bytes it holds) goes to the writer.
    fn on_answer(&mut self, a: Answered, writer: &FrameWriter) -> Result<(), ExecError> {
        self.queued_bytes -= a.arg_bytes;
        if let Some(status) = a.reply.failed_status {
            self.calls.last_error = Some((status, a.reply.excerpt.clone()));
        }
        writer.send(
            frame::api_result(a.id, &a.reply.json).map_err(gone)?,
            a.reply.held,
        );
        Ok(())
    }

    /// Starts queued calls while there are free in-flight places.
    fn start_calls(&mut self, running: &mut JoinSet<Answered>) {
        while running.len() < MAX_IN_FLIGHT
            && let Some(q) = self.queue.pop_front()
        {
            let api = self.api.clone();
            let catalogue = self.ex.catalogue.clone();
            running.spawn(async move {
                let arg_bytes = q.args.get().len();
                let reply = api.call(&catalogue.ops[q.op], q.args).await;
                Answered {
                    id: q.id,
                    arg_bytes,
                    reply,
                }
            });
        }
    }

    /// Counts a call and queues it; returns the immediate answer of a call
    /// refused without a request, or ends the run over the argument bounds.
    fn admit_call(
        &mut self,
        op_id: &str,
        args: Box<RawValue>,
        id: u64,
    ) -> Result<Option<String>, ExecError> {
        self.calls.count += 1;
        let max_calls = self.ex.limits.max_api_calls;
        if self.calls.count > max_calls {
            return Ok(Some(reply::refusal(&format!(
                "API call cap reached ({max_calls} calls per execute)"
            ))));
        }
        let bytes = args.get().len();
        if bytes > MAX_CALL_ARGS {
            return Err(request_limit(format!(
                "the argument of API call {id} (oa.{op_id}) is {bytes} bytes of JSON; one call takes at most {MAX_CALL_ARGS}"
            )));
        }
        if self.queued_bytes + bytes > MAX_QUEUED_REQUEST_BYTES {
            return Err(request_limit(format!(
                "API call {id} (oa.{op_id}) would bring the arguments of the calls queued or in flight to {} bytes; at most {MAX_QUEUED_REQUEST_BYTES}: await some calls before starting more",
                self.queued_bytes + bytes
            )));
        }
        let catalogue = &self.ex.catalogue;
        let Some(op) = catalogue.ops.iter().position(|o| o.id == op_id) else {
            return Ok(Some(reply::refusal(&format!("unknown operation {op_id}"))));
        };
        if let Some(why) = catalogue.refusal(&catalogue.ops[op]) {
            return Ok(Some(reply::refusal(&why)));
        }
        self.queued_bytes += bytes;
        self.queue.push_back(Queued { id, op, args });
        Ok(None)
    }

    fn too_large(&self, bytes: usize, call: bool) -> ExecError {
        if call {
            return request_limit(format!(
                "an API call's argument of about {bytes} bytes exceeds {MAX_CALL_ARGS} bytes"
            ));
        }
        ExecError::new(
            "output_limit",
            format!(
                "output of {bytes} bytes exceeds {} bytes; return only the data you need",
                self.ex.limits.output_cap
            ),
        )
    }

    /// The worker's last word; a large result is parsed off the event loop.
    async fn done(self, outcome: Outcome, logs: Vec<LogLine>) -> Result<ExecOutput, ExecError> {
        let raw = match outcome {
            Outcome::Ok { result_json } => result_json,
            Outcome::Err {
                code,
                message,
                stack,
            } => return Err(self.failed(&code, message, stack, logs)),
        };
        let result_bytes = raw.get().len();
        let parse = move || parse_tree(raw.get(), RESULT_TREE_BYTES);
        let parsed = if result_bytes <= INLINE_RESULT {
            parse()
        } else {
            tokio::task::spawn_blocking(parse)
                .await
                .map_err(|e| ExecError::new("js_runtime_error", e.to_string()))?
        };
        let result = parsed.map_err(|_| {
            ExecError::new(
                "output_limit",
                format!(
                    "the result ({result_bytes} bytes of JSON) would take more than {} MiB in the server as a tree: return fewer values, or flatter ones",
                    RESULT_TREE_BYTES / (1024 * 1024)
                ),
            )
        })?;
        Ok(ExecOutput {
            result,
            logs,
            api_calls: self.calls.count,
            result_bytes,
        })
    }

    fn failed(
        &self,
        code: &str,
        message: String,
        stack: Option<String>,
        logs: Vec<LogLine>,
    ) -> ExecError {
        // The worker bounds these already; a worker is not trusted to.
        let mut e = ExecError::new(code, cap_text(&message));
        e.stack = stack.as_deref().map(cap_text);
        e.logs = logs;
        if code == "js_runtime_error"
            && let Some((status, excerpt)) = &self.calls.last_error
        {
            e.code = "api_error".into();
            e.status = Some(*status);
            e.excerpt = Some(excerpt.clone());
            e.message = format!(
                "uncaught after a failed API call (HTTP {status}): {}",
                e.message
            );
        }
        e
    }
}

fn request_limit(message: String) -> ExecError {
    ExecError::new("request_limit", message)
}

fn gone(e: FrameError) -> ExecError {
    ExecError::new("worker_gone", e.to_string())
}

/// What the reader could not turn into a frame.
enum Incoming {
    /// Over the frame limit; `call` when it was an API call.
    TooLarge { bytes: usize, call: bool },
    /// The pipe failed or the frame was not a message.
    Failed(FrameError),
}

/// Reads the worker's frames on its own task, one at a time, so that
/// waiting for a frame never races with (and never loses bytes to) the
/// other branches of the loop; the task ends when the run does.
struct FrameReader {
    rx: mpsc::Receiver<Result<ToServer, Incoming>>,
    task: tokio::task::JoinHandle<()>,
}

impl FrameReader {
    fn spawn(mut stdout: ChildStdout, max: usize, budget: usize) -> Self {
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            for _ in 0..budget {
                let frame = match frame::read_async::<ToServer>(&mut stdout, max).await {
                    Ok(f) => Ok(f),
                    Err(FrameError::TooLarge(bytes)) => {
                        // The message's first bytes name its kind.
                        let mut head = [0u8; 8];
                        let call = stdout.read_exact(&mut head).await.is_ok()
                            && head.starts_with(br#"{"call""#);
                        Err(Incoming::TooLarge { bytes, call })
                    }
                    Err(e) => Err(Incoming::Failed(e)),
                };
                let stop = frame.is_err();
                if tx.send(frame).await.is_err() || stop {
                    return;
                }
            }
            let _ = tx
                .send(Err(Incoming::Failed(FrameError::Io(
                    std::io::Error::other("too many frames from the worker"),
                ))))
                .await;
        });
        Self { rx, task }
    }
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Owns the worker's stdin: frames are written in the order queued, and
/// each frame's budget bytes are given back once it is written.
struct FrameWriter {
    tx: mpsc::UnboundedSender<(Vec<u8>, Held)>,
    task: tokio::task::JoinHandle<()>,
}

impl FrameWriter {
    fn spawn(mut stdin: ChildStdin) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Vec<u8>, Held)>();
        let task = tokio::spawn(async move {
            while let Some((bytes, held)) = rx.recv().await {
                if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                    // The worker is gone; the reader reports it.
                    return;
                }
                drop(held);
            }
        });
        Self { tx, task }
    }

    /// Queues one frame; the number of frames is bounded by the call cap.
    fn send(&self, bytes: Vec<u8>, held: Held) {
        let _ = self.tx.send((bytes, held));
    }
}

impl Drop for FrameWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}
