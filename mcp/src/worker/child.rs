//! The worker side: sandbox, QuickJS, one script, exit.
//!
//! The JS world is a QuickJS context with the standard intrinsics, a
//! `console` whose lines go to a Rust buffer, and `oa`, a tree of functions
//! returning promises whose only way out is one host function that writes a
//! [`ToServer::Call`] frame; answers are read by the drive loop when no JS
//! job can run, and resolve the matching promise. No module loader, no
//! host objects: the host functions take and return strings.

use super::frame::{self, FrameError};
use super::{LogLine, Outcome, ToServer, ToWorker, sandbox};
use crate::McpError;
use rquickjs::context::EvalOptions;
use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime, Value, promise::PromiseState};
use serde_json::value::RawValue;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Native stack QuickJS may use before "Maximum call stack size exceeded".
const JS_STACK_BYTES: usize = 1024 * 1024;
/// Largest frame the worker accepts from the server (code, API results).
const MAX_IN_FRAME: usize = 64 * 1024 * 1024;
/// Largest init frame (the operation list of a large spec).
const MAX_INIT_FRAME: usize = 16 * 1024 * 1024;
/// Error texts are cut to this many characters.
pub const ERROR_TEXT_CAP: usize = 4000;

/// Captured console output with its running size.
#[derive(Default)]
struct Logs {
    lines: Vec<LogLine>,
    bytes: usize,
    overflow: bool,
}

/// Per-run state shared with the host functions and the interrupt handler.
struct Shared {
    deadline: Cell<Option<Instant>>,
    interrupted: Cell<bool>,
    logs: RefCell<Logs>,
    output_cap: Cell<usize>,
    next_call: Cell<u64>,
    max_calls: Cell<u64>,
    outstanding: Cell<usize>,
}

/// What a worker runs in place of the script: the syscall probe of the
/// tests (`src/probe_main.rs`, a binary that is never shipped). It is called
/// once just before the seccomp filter is installed (`false`) and once after
/// `exec` arrives (`true`, with the code sent), and returns JSON text; the
/// run's result is `{"before": …, "after": …}`.
pub type StandIn = fn(after_filter: bool, code: &str) -> String;

/// Entry point of `openagenda-mcp __execute-worker MEMORY_MB TIMEOUT_MS`.
///
/// Everything that does not depend on the code (limits, runtime, context,
/// `console` and `oa`, the seccomp filter) happens before [`ToServer::Ready`],
/// while the worker waits in the pool; after it, only the script runs.
pub fn run(memory_mb: u64, timeout_ms: u64) -> Result<(), McpError> {
    run_with(memory_mb, timeout_ms, None)
}

/// [`run`], with a [`StandIn`] in place of the script when given: the same
/// limits, world and filter, in the same order.
pub fn run_with(
    memory_mb: u64,
    timeout_ms: u64,
    stand_in: Option<StandIn>,
) -> Result<(), McpError> {
    die_with_parent()?;
    let cpu_secs = timeout_ms.div_ceil(1000) + 2;
    sandbox::apply_rlimits(memory_mb, cpu_secs)?;
    let (rt, ctx, shared) = engine(memory_mb)?;
    let Some(init) = read_or_eof(MAX_INIT_FRAME)? else {
        return Ok(());
    };
    let ToWorker::Init {
        ops,
        output_cap,
        max_calls,
    } = init
    else {
        return Err(protocol("expected init"));
    };
    shared.output_cap.set(output_cap);
    shared.max_calls.set(u64::from(max_calls));
    let Some(outcome) = ctx.with(|ctx| prepare_and_run(&ctx, &shared, &ops, stand_in))? else {
        // The server closed the pipe before sending code: it is shutting
        // down and this pooled worker was never used. Not an error.
        return Ok(());
    };
    let outcome = near_memory_limit(outcome, &rt, memory_mb);
    let outcome = enforce_output_cap(outcome, &shared);
    let logs = std::mem::take(&mut shared.logs.borrow_mut().lines);
    let sent = frame::write_sync(
        &mut std::io::stdout().lock(),
        &ToServer::Done { outcome, logs },
    );
    // The process exits right after this; tearing the JS heap down (a full
    // GC and a free of every object) would only burn CPU on the hot path.
    std::mem::forget(ctx);
    std::mem::forget(rt);
    sent.map_err(McpError::WorkerPipe)
}

/// Binds `console` and `oa`, closes the sandbox, says ready, then waits for
/// the code and runs it.
fn prepare_and_run(
    ctx: &Ctx<'_>,
    shared: &Rc<Shared>,
    ops: &[(String, String)],
    stand_in: Option<StandIn>,
) -> Result<Option<Outcome>, McpError> {
    let settle = install_host(ctx, shared)
        .and_then(|()| ctx.eval::<Function, _>(shim(ops, shared.max_calls.get())))
        .map_err(|source| McpError::WorkerJs {
            step: "quickjs world",
            source,
        })?;
    let before = stand_in.map(|f| f(false, ""));
    sandbox::apply_seccomp()?;
    frame::write_sync(&mut std::io::stdout().lock(), &ToServer::Ready)
        .map_err(McpError::WorkerPipe)?;
    let Some(exec) = read_or_eof(MAX_IN_FRAME)? else {
        return Ok(None);
    };
    let ToWorker::Exec { code, timeout_ms } = exec else {
        return Err(protocol("expected exec"));
    };
    shared
        .deadline
        .set(Some(Instant::now() + Duration::from_millis(timeout_ms)));
    if let (Some(f), Some(before)) = (stand_in, before) {
        let report = format!(r#"{{"before":{before},"after":{}}}"#, f(true, &code));
        return Ok(Some(match RawValue::from_string(report) {
            Ok(result_json) => Outcome::Ok { result_json },
            Err(e) => internal(format!("stand-in report: {e}")),
        }));
    }
    Ok(Some(run_script(ctx, shared, &code, &settle)))
}

/// The next frame from the server, or `None` when the pipe is closed
/// cleanly between frames (the server is exiting).
fn read_or_eof(max: usize) -> Result<Option<ToWorker>, McpError> {
    match frame::read_sync(&mut std::io::stdin().lock(), max) {
        Ok(msg) => Ok(Some(msg)),
        Err(FrameError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(McpError::WorkerPipe(e)),
    }
}

/// SIGKILL when the server goes away, however it goes (a worker must never
/// outlive it: run bare, a SIGTERM'd server used to leave its workers
/// running until their CPU limit). The server spawns workers from
/// blocking-pool threads that never retire (see `main.rs`), because the
/// signal follows the thread that forked, not the process.
fn die_with_parent() -> Result<(), McpError> {
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|source| {
        McpError::WorkerCall {
            step: "pdeathsig",
            source,
        }
    })?;
    // The parent may have died before the prctl: then it is no longer ours.
    if nix::unistd::getppid() != parent {
        std::process::exit(0);
    }
    Ok(())
}

fn protocol(message: &'static str) -> McpError {
    McpError::WorkerProtocol(message)
}

/// The QuickJS runtime (heap and stack limits, deadline interrupt) and a
/// full context, built before the sandbox closes and before any code.
fn engine(memory_mb: u64) -> Result<(Runtime, Context, Rc<Shared>), McpError> {
    let qerr = |source: rquickjs::Error| McpError::WorkerJs {
        step: "quickjs",
        source,
    };
    let rt = Runtime::new().map_err(qerr)?;
    rt.set_memory_limit(usize::try_from(memory_mb * 1024 * 1024).unwrap_or(usize::MAX));
    rt.set_max_stack_size(JS_STACK_BYTES);
    let shared = Rc::new(Shared {
        deadline: Cell::new(None),
        interrupted: Cell::new(false),
        logs: RefCell::new(Logs::default()),
        output_cap: Cell::new(0),
        next_call: Cell::new(1),
        max_calls: Cell::new(0),
        outstanding: Cell::new(0),
    });
    let state = shared.clone();
    rt.set_interrupt_handler(Some(Box::new(move || {
        let late = state.deadline.get().is_some_and(|d| Instant::now() >= d);
        if late {
            state.interrupted.set(true);
        }
        late
    })));
    let ctx = Context::full(&rt).map_err(qerr)?;
    Ok((rt, ctx, shared))
}

/// QuickJS sometimes cannot even allocate the "out of memory" error and
/// throws `null`; a runtime error while the heap is nearly full is reported
/// as what it is.
fn near_memory_limit(outcome: Outcome, rt: &Runtime, memory_mb: u64) -> Outcome {
    let Outcome::Err { code, .. } = &outcome else {
        return outcome;
    };
    let used = u64::try_from(rt.memory_usage().malloc_size).unwrap_or(0);
    if code == "js_runtime_error" && used >= memory_mb * 1024 * 1024 / 10 * 9 {
        return Outcome::Err {
            code: "memory_limit".into(),
            message: "the script ran out of memory (QuickJS heap limit reached)".into(),
            stack: None,
        };
    }
    outcome
}

fn enforce_output_cap(outcome: Outcome, shared: &Shared) -> Outcome {
    let logs = shared.logs.borrow();
    let result_len = match &outcome {
        Outcome::Ok { result_json } => result_json.get().len(),
        Outcome::Err { .. } => 0,
    };
    let cap = shared.output_cap.get();
    if logs.overflow || logs.bytes + result_len > cap {
        return Outcome::Err {
            code: "output_limit".into(),
            message: format!(
                "result and logs exceed {cap} bytes (result {result_len} bytes, logs {} bytes{}); return only the data you need",
                logs.bytes,
                if logs.overflow { ", truncated" } else { "" }
            ),
            stack: None,
        };
    }
    outcome
}

/// The JS side of `oa` and `console`, built from the op list before the
/// worker is ready.
/// It evaluates to the `settle(id, json)` function the drive loop calls when
/// an API answer arrives; nothing of it stays reachable from user code
/// except through `oa` and `console`.
fn shim(ops: &[(String, String)], max_calls: u64) -> String {
    let ops_json = serde_json::to_string(ops).unwrap_or_else(|_| "[]".into());
    format!(
        r#"(() => {{
  const send = globalThis.__oa_send, log = globalThis.__oa_log;
  delete globalThis.__oa_send; delete globalThis.__oa_log;
  const waiting = new Map();
  const fmt = (a) => typeof a === 'string' ? a : a instanceof Error ? `${{a.name}}: ${{a.message}}` : (() => {{ try {{ const s = JSON.stringify(a); return s === undefined ? String(a) : s; }} catch (e) {{ return String(a); }} }})();
  const line = (level) => (...args) => {{ log(level, args.map(fmt).join(' ')); }};
  globalThis.console = Object.freeze({{ log: line('log'), info: line('info'), warn: line('warn'), error: line('error'), debug: line('log') }});
  const oa = {{}};
  for (const [path, id] of {ops_json}) {{
    const parts = path.split('.'); let node = oa;
    for (const p of parts.slice(0, -1)) {{ if (node[p] === undefined) node[p] = {{}}; node = node[p]; }}
    const leaf = parts[parts.length - 1];
    const fn = (args) => new Promise((resolve) => {{
      const callId = send(id, JSON.stringify(args === undefined ? {{}} : args));
      if (callId < 0) resolve({{ data: null, error: {{ status: 0, message: 'API call cap reached ({max_calls} calls per execute)' }} }});
      else waiting.set(callId, resolve);
    }});
    if (node[leaf] !== undefined) Object.assign(fn, node[leaf]);
    node[leaf] = fn;
  }}
  globalThis.oa = oa;
  return (callId, json) => {{ const r = waiting.get(callId); waiting.delete(callId); if (r) r(JSON.parse(json)); }};
}})()"#
    )
}

fn install_host<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let sender = shared.clone();
    let send = Function::new(
        ctx.clone(),
        move |op: String, args: String| -> rquickjs::Result<f64> {
            let id = sender.next_call.get();
            if id > sender.max_calls.get() {
                return Ok(-1.0);
            }
            sender.next_call.set(id + 1);
            let host_error = |e: String| rquickjs::Error::new_from_js_message("host", "oa", e);
            // JSON.stringify's output: checked anyway, the server reads it raw.
            let args = RawValue::from_string(args).map_err(|e| host_error(e.to_string()))?;
            frame::write_sync(
                &mut std::io::stdout().lock(),
                &ToServer::Call { id, op, args },
            )
            .map_err(|e| host_error(e.to_string()))?;
            sender.outstanding.set(sender.outstanding.get() + 1);
            // Ids stay far below 2^53, so they are exact as JS numbers.
            Ok(id as f64)
        },
    )?;
    let state = shared.clone();
    let log = Function::new(ctx.clone(), move |level: String, text: String| {
        let mut logs = state.logs.borrow_mut();
        if logs.overflow {
            return;
        }
        logs.bytes += text.len() + level.len() + 8;
        if logs.bytes > state.output_cap.get() {
            logs.overflow = true;
            return;
        }
        logs.lines.push(LogLine { level, text });
    })?;
    ctx.globals().set("__oa_send", send)?;
    ctx.globals().set("__oa_log", log)?;
    Ok(())
}

fn run_script<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    code: &str,
    settle: &Function<'js>,
) -> Outcome {
    let promise = match start(ctx, code) {
        Ok(started) => started,
        Err(()) => return classify(ctx, shared, ctx.catch()),
    };
    if let Err(e) = drive(ctx, shared, &promise, settle) {
        return internal(format!("the server stopped answering API calls: {e}"));
    }
    match promise.state() {
        PromiseState::Pending if shared.interrupted.get() => timeout_outcome(),
        PromiseState::Pending => Outcome::Err {
            code: "timeout".into(),
            message: "the script's promise can never settle (nothing left to run: an await on a promise that is never resolved)".into(),
            stack: None,
        },
        PromiseState::Rejected => {
            let _ = promise.result::<Value>();
            classify(ctx, shared, ctx.catch())
        }
        PromiseState::Resolved => match promise.result::<Value>() {
            Some(Ok(v)) => finish(ctx, shared, v),
            _ => classify(ctx, shared, ctx.catch()),
        },
    }
}

/// Starts the code: first as a script (last expression is the result, top-
/// level await allowed); if that does not even parse — typically because of
/// a top-level `return` — as the body of an async function. Either way the
/// promise returned settles with the result itself, a promise or thenable
/// result being awaited (an async function's `return` adopts it already).
fn start<'js>(ctx: &Ctx<'js>, code: &str) -> Result<Promise<'js>, ()> {
    let opts = |promise| {
        let mut o = EvalOptions::default();
        o.promise = promise;
        o.backtrace_barrier = true;
        o
    };
    let script_error = match ctx.eval_with_options::<Promise, _>(code, opts(true)) {
        Ok(p) => return adopt_completion(ctx, p),
        Err(rquickjs::Error::Exception) => {
            let exc = ctx.catch();
            if !is_syntax_error(&exc) {
                let _ = ctx.throw(exc);
                return Err(());
            }
            exc
        }
        Err(e) => {
            let _ = ctx.throw(
                rquickjs::String::from_str(ctx.clone(), &e.to_string())
                    .map_err(|_| ())?
                    .into_value(),
            );
            return Err(());
        }
    };
    let wrapped = format!("(async () => {{{code}\n}})()");
    match ctx.eval_with_options::<Promise, _>(wrapped, opts(false)) {
        Ok(p) => Ok(p),
        Err(_) => {
            // Both readings fail to parse. The function-body error is the
            // right one when the script reading tripped on `return`; else the
            // script error is, since it does not mention our wrapper.
            let body_error = ctx.catch();
            let about_return = script_error
                .as_object()
                .and_then(|o| o.get::<_, Option<String>>("message").ok().flatten())
                .is_some_and(|m| m.contains("return"));
            let _ = ctx.throw(if about_return {
                body_error
            } else {
                script_error
            });
            Err(())
        }
    }
}

/// An async script's promise resolves to `{ value: <completion value> }`;
/// `then` returning that value adopts it when it is a promise or thenable,
/// so `Promise.resolve(5)` as the last expression gives 5 and a rejected one
/// rejects the run.
fn adopt_completion<'js>(ctx: &Ctx<'js>, script: Promise<'js>) -> Result<Promise<'js>, ()> {
    let adopt: Function = ctx.eval("(p) => p.then((r) => r.value)").map_err(|_| ())?;
    adopt.call((script,)).map_err(|_| ())
}

fn is_syntax_error(exc: &Value<'_>) -> bool {
    exc.as_object()
        .and_then(|o| o.get::<_, Option<String>>("name").ok().flatten())
        .is_some_and(|n| n == "SyntaxError")
}

/// Runs queued jobs until the promise settles, nothing is left, or time is
/// up. When only API answers can make progress, blocks for the next one.
fn drive<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    promise: &Promise<'js>,
    settle: &Function<'js>,
) -> Result<(), FrameError> {
    while promise.state() == PromiseState::Pending && !shared.interrupted.get() {
        if ctx.execute_pending_job() {
            continue;
        }
        if shared.outstanding.get() == 0 {
            break;
        }
        match frame::read_sync(&mut std::io::stdin().lock(), MAX_IN_FRAME)? {
            ToWorker::ApiResult { id, json } => {
                shared.outstanding.set(shared.outstanding.get() - 1);
                // A throw here is the script's own (e.g. out of memory while
                // parsing); it surfaces through the promise or the next job.
                let _ = settle.call::<_, ()>((id as f64, json.get()));
            }
            ToWorker::Exec { .. } | ToWorker::Init { .. } => {
                return Err(FrameError::Io(std::io::Error::other("unexpected frame")));
            }
        }
    }
    Ok(())
}

fn finish<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>, value: Value<'js>) -> Outcome {
    let raw = |text: String| match RawValue::from_string(text) {
        Ok(result_json) => Outcome::Ok { result_json },
        Err(e) => internal(format!("result: {e}")),
    };
    match ctx.json_stringify(value) {
        Ok(Some(s)) => match s.to_string() {
            Ok(text) => raw(text),
            Err(e) => internal(format!("result string: {e}")),
        },
        Ok(None) => raw("null".into()),
        Err(_) => {
            let exc = ctx.catch();
            match classify(ctx, shared, exc) {
                Outcome::Err {
                    code,
                    message,
                    stack,
                } if code == "js_runtime_error" => Outcome::Err {
                    code,
                    message: format!("the result is not JSON-serialisable: {message}"),
                    stack,
                },
                other => other,
            }
        }
    }
}

fn timeout_outcome() -> Outcome {
    Outcome::Err {
        code: "timeout".into(),
        message: "execution exceeded the deadline (possible infinite loop or too-heavy processing)"
            .into(),
        stack: None,
    }
}

fn internal(message: String) -> Outcome {
    Outcome::Err {
        code: "js_runtime_error".into(),
        message: cap_text(&message),
        stack: None,
    }
}

/// Maps a thrown JS value to an outcome code and message.
fn classify<'js>(ctx: &Ctx<'js>, shared: &Shared, exc: Value<'js>) -> Outcome {
    if shared.interrupted.get() {
        return timeout_outcome();
    }
    let (message, stack) = describe(ctx, &exc);
    // QuickJS throws `null` when it cannot allocate the error object for a
    // failure, which only happens when the heap is exhausted (typically an
    // async recursion, whose promise chain is freed before the heap check
    // in `near_memory_limit` runs). A script's own `throw null` reads the
    // same; docs/mcp.md says so.
    if message.contains("out of memory") || exc.is_null() {
        return Outcome::Err {
            code: "memory_limit".into(),
            message: "the script ran out of memory (QuickJS heap limit reached)".into(),
            stack: None,
        };
    }
    Outcome::Err {
        code: "js_runtime_error".into(),
        message: cap_text(&message),
        stack: stack.map(|s| cap_text(&s)),
    }
}

fn describe<'js>(ctx: &Ctx<'js>, exc: &Value<'js>) -> (String, Option<String>) {
    if let Some(s) = exc.as_string().and_then(|s| s.to_string().ok()) {
        return (s, None);
    }
    let Some(obj) = exc.as_object() else {
        let text = ctx
            .json_stringify(exc.clone())
            .ok()
            .flatten()
            .and_then(|s| s.to_string().ok());
        return (
            format!("uncaught {}", text.unwrap_or_else(|| "value".into())),
            None,
        );
    };
    let get = |o: &Object<'js>, k: &str| o.get::<_, Option<String>>(k).ok().flatten();
    match (get(obj, "name"), get(obj, "message")) {
        (Some(name), Some(message)) if obj.is_error() => {
            (format!("{name}: {message}"), get(obj, "stack"))
        }
        _ => {
            let text = ctx
                .json_stringify(exc.clone())
                .ok()
                .flatten()
                .and_then(|s| s.to_string().ok());
            (
                format!("uncaught {}", text.unwrap_or_else(|| "object".into())),
                get(obj, "stack"),
            )
        }
    }
}

/// Cuts a text to [`ERROR_TEXT_CAP`] characters.
pub fn cap_text(text: &str) -> String {
    if text.chars().count() <= ERROR_TEXT_CAP {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(ERROR_TEXT_CAP).collect();
    out.push_str("… (truncated)");
    out
}
