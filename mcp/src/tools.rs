//! The two tools, independent of the MCP SDK: definitions, argument
//! checking, dispatch, result rendering and the audit line.
//!
//! [`crate::mcp`] only translates between these types and rmcp's.

use crate::audit::Who;
use crate::budget::{Capped, REPLY_CAP, sent_len};
use crate::executor::{ExecError, ExecOutput, Executor};
use crate::lane::Lane;
use crate::search::SearchIndex;
use crate::spec::Catalogue;
use crate::worker::LogLine;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Largest `code` accepted.
const MAX_CODE_BYTES: usize = 256 * 1024;
/// Results up to this size (as the script wrote them) are rendered on the
/// event loop; larger ones on a blocking thread.
const INLINE_RENDER: usize = 64 * 1024;
/// Searches waiting for the search lane besides the one running; more are
/// answered `busy` at once. A search takes well under a millisecond
/// (docs/benchmarks.md), so a full queue is a burst, not a workload.
pub const SEARCH_QUEUE: usize = 16;
/// Largest `query` accepted by search_docs (a query is "a few words"; the
/// index cost grows with its length, see docs/mcp.md).
pub const MAX_QUERY_BYTES: usize = 1024;

/// A tool as listed by `tools/list`.
#[derive(Clone, Debug)]
pub struct ToolDef {
    /// Name.
    pub name: &'static str,
    /// Display title.
    pub title: &'static str,
    /// Description (the contract the model reads).
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint` (only meaningful when not read-only).
    pub destructive: bool,
    /// `openWorldHint`.
    pub open_world: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
    /// JSON Schema of `structuredContent`, when the tool has one.
    pub output_schema: Option<Value>,
}

/// What a tool call returns.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// Text rendering.
    pub text: String,
    /// Structured content, when the tool has one.
    pub structured: Option<Value>,
    /// `isError`.
    pub is_error: bool,
}

/// The tool set of one server.
pub struct Tools {
    catalogue: Arc<Catalogue>,
    index: Arc<SearchIndex>,
    searches: Lane,
    executor: Option<Executor>,
    timeout: Duration,
    memory_mb: u64,
    egress_note: String,
    /// Per-caller limits ([`crate::callers`]).
    gate: Option<Arc<crate::callers::Gate>>,
    /// The API authority of executes ([`crate::access`]).
    access: crate::access::Access,
}

impl Tools {
    /// Builds the tools; `executor` is `None` when execute is disabled.
    pub fn new(
        catalogue: Arc<Catalogue>,
        executor: Option<Executor>,
        timeout: Duration,
        memory_mb: u64,
        egress_note: String,
    ) -> Self {
        let index = Arc::new(SearchIndex::build(&catalogue));
        Self {
            catalogue,
            index,
            searches: Lane::new("search", SEARCH_QUEUE, None),
            executor,
            timeout,
            memory_mb,
            egress_note,
            gate: None,
            access: crate::access::Access::ServerKey(crate::audit::Credential::None),
        }
    }

    /// Limits each caller ([`crate::callers`]).
    pub fn with_gate(mut self, gate: Arc<crate::callers::Gate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Sets whose authority executes carry ([`crate::access`]).
    pub fn with_access(mut self, access: crate::access::Access) -> Self {
        self.access = access;
        self
    }

    /// The MCP `instructions` text.
    pub fn instructions(&self) -> String {
        format!(
            "Code-mode access to the {} API. Call search_docs first to find the operation and its exact call, \
             then run JavaScript with execute. In execute, `oa.<operation>({{ path, query, body }})` resolves to \
             `{{ data, error }}` and never throws on HTTP errors; `return` the value you need.",
            self.catalogue.title
        )
    }

    /// Tool definitions, in name order.
    pub fn defs(&self) -> Vec<ToolDef> {
        let mut defs = Vec::new();
        if self.executor.is_some() {
            defs.push(self.execute_def());
        }
        defs.push(ToolDef {
            name: "search_docs",
            title: "Search the API documentation",
            description: format!(
                "Search the {} API operations by what you want to do (e.g. \"upcoming events in a city\"). \
                 Returns how to call the client, then the best operations with their exact `oa.` call, \
                 parameters (types, enums with labels, defaults, ranges), response shape and an example.",
                self.catalogue.title
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "maxLength": MAX_QUERY_BYTES,
                              "description": "What you want to do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 30, "default": 8,
                              "description": "How many operations to return."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            read_only: true,
            destructive: false,
            open_world: false,
            idempotent: true,
            output_schema: None,
        });
        defs
    }

    fn execute_def(&self) -> ToolDef {
        let writes = self.catalogue.has_writes();
        let description = format!(
            "Run JavaScript against the {title} API. `code` is the body of an async function (use `return`) \
             or a script whose last expression is the result; `await` works in both. \
             `oa.<operation>({{ path, query, body }})` (see search_docs) resolves to `{{ data, error }}`: \
             it never throws on HTTP errors, so check `error`. `console.log/info/warn/error` are captured. \
             The reply is `{{ result, logs }}`. Nothing else exists: no fetch, no filesystem, no process, \
             no modules, no timers. Limits: {ms} ms, {mb} MiB heap, 1 MiB of result plus logs. \
             {mode} {egress}",
            title = self.catalogue.title,
            ms = self.timeout.as_millis(),
            mb = self.memory_mb,
            mode = if writes {
                "Write operations are enabled: calls can modify data."
            } else {
                "Read-only: write operations are documented by search_docs but refused (the server must be started with --allow-writes)."
            },
            egress = self.egress_note,
        );
        ToolDef {
            name: "execute",
            title: "Run JavaScript against the API",
            description,
            input_schema: json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "JavaScript to run."}},
                "required": ["code"],
                "additionalProperties": false
            }),
            read_only: !writes,
            destructive: writes,
            open_world: true,
            idempotent: false,
            output_schema: Some(execute_output_schema()),
        }
    }

    /// Calls a tool as the local (stdio) caller; `None` when there is no
    /// tool of that name.
    pub async fn call(
        &self,
        name: &str,
        args: &Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Option<ToolOutput> {
        self.call_as(name, args, cancel, &Who::stdio()).await
    }

    /// Calls a tool for `who`: its per-caller limits first, then the tool,
    /// then one audit record ([`crate::audit`]).
    pub async fn call_as(
        &self,
        name: &str,
        args: &Map<String, Value>,
        cancel: &CancellationToken,
        who: &Who,
    ) -> Option<ToolOutput> {
        let start = Instant::now();
        let execute = match name {
            "search_docs" => false,
            "execute" if self.executor.is_some() => true,
            _ => return None,
        };
        let admitted = self.gate.as_ref().map(|g| (g, g.admit(who.key(), execute)));
        let (out, fields) = match admitted {
            Some((gate, Err(over))) => limited(gate, &over),
            _ if execute => self.execute(args, cancel, who).await?,
            _ => self.search_docs(args).await,
        };
        let done = crate::audit::Done {
            tool: name,
            fields,
            duration: start.elapsed(),
            bytes_out: out.text.len(),
            is_error: out.is_error,
        };
        crate::audit::emit(who, &done);
        Some(out)
    }

    async fn search_docs(&self, args: &Map<String, Value>) -> (ToolOutput, Value) {
        if let Some(extra) = args.keys().find(|k| *k != "query" && *k != "limit") {
            return (
                invalid(&format!(
                    "search_docs takes `query` and `limit`, not `{extra}`"
                )),
                json!({"outcome": "invalid_params"}),
            );
        }
        let query = match args.get("query") {
            Some(Value::String(q)) if q.len() > MAX_QUERY_BYTES => {
                return (
                    invalid(&format!(
                        "`query` is longer than {MAX_QUERY_BYTES} bytes; use a few words"
                    )),
                    json!({"outcome": "invalid_params", "queryBytes": q.len()}),
                );
            }
            Some(Value::String(q)) => q.clone(),
            _ => {
                return (
                    invalid("search_docs needs `query` (a string)"),
                    json!({"outcome": "invalid_params"}),
                );
            }
        };
        let limit = match args.get("limit") {
            None | Some(Value::Null) => 8,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=30).contains(&n) => n as usize,
                _ => {
                    return (
                        invalid("`limit` must be an integer from 1 to 30"),
                        json!({"outcome": "invalid_params"}),
                    );
                }
            },
        };
        // On the search lane: off the event loop (deadlines and other
        // requests keep being served) and off the thread workers are spawned
        // from, so a burst of searches never holds up an execute; a burst
        // beyond the lane's queue is answered `busy` at once.
        let (index, catalogue, q) = (self.index.clone(), self.catalogue.clone(), query.clone());
        let queued = self.searches.run(move || {
            let hits = index.search(&q, limit);
            let text = crate::render::render(&catalogue, &hits, &q);
            (text, hits.len())
        });
        let Ok(answer) = queued else {
            return (
                failure(ExecError::new(
                    "busy",
                    format!("search_docs is busy ({SEARCH_QUEUE} searches waiting); retry shortly"),
                )),
                json!({"outcome": "busy"}),
            );
        };
        let Ok((text, hits)) = answer.await else {
            return (
                invalid("search failed"),
                json!({"outcome": "internal_error"}),
            );
        };
        let audit = json!({"outcome": "ok", "query": query, "hits": hits});
        (
            ToolOutput {
                text,
                structured: None,
                is_error: false,
            },
            audit,
        )
    }

    async fn execute(
        &self,
        args: &Map<String, Value>,
        cancel: &CancellationToken,
        who: &Who,
    ) -> Option<(ToolOutput, Value)> {
        let executor = self.executor.as_ref()?;
        if let Some(extra) = args.keys().find(|k| *k != "code") {
            return Some((
                invalid(&format!("execute takes only `code`, not `{extra}`")),
                json!({"outcome": "invalid_params"}),
            ));
        }
        let code = match args.get("code") {
            Some(Value::String(c)) if !c.trim().is_empty() && c.len() <= MAX_CODE_BYTES => {
                c.clone()
            }
            Some(Value::String(c)) if c.len() > MAX_CODE_BYTES => {
                return Some((
                    invalid("`code` is larger than 256 KiB"),
                    json!({"outcome": "invalid_params"}),
                ));
            }
            _ => {
                return Some((
                    invalid("execute needs `code` (a non-empty string)"),
                    json!({"outcome": "invalid_params"}),
                ));
            }
        };
        let mut audit = crate::audit::code_fields(&code);
        let grant = match self.access.grant(who).await {
            Ok(g) => g,
            Err(e) => {
                audit["outcome"] = json!(e.code);
                return Some((failure(e), audit));
            }
        };
        audit["credential"] = grant.credential.json();
        let out = match executor.execute_as(&code, cancel, grant.token).await {
            Ok(ok) => {
                audit["outcome"] = json!("ok");
                audit["apiCalls"] = json!(ok.api_calls);
                if ok.result_bytes <= INLINE_RENDER {
                    success(ok)
                } else {
                    tokio::task::spawn_blocking(move || success(ok))
                        .await
                        .unwrap_or_else(|e| {
                            failure(ExecError::new("js_runtime_error", e.to_string()))
                        })
                }
            }
            Err(e) => {
                audit["outcome"] = json!(e.code);
                audit["apiCalls"] = json!(e.api_calls);
                failure(e)
            }
        };
        Some((out, audit))
    }
}

/// `structuredContent` of execute: `{result, logs}` on success,
/// `{error, logs}` on failure (`isError: true`).
fn execute_output_schema() -> Value {
    let logs = json!({"type": "array", "items": {"type": "object",
        "properties": {"level": {"type": "string"}, "text": {"type": "string"}},
        "required": ["level", "text"]}});
    json!({
        "type": "object",
        "properties": {
            "result": {"description": "The script's value (any JSON)."},
            "logs": logs,
            "error": {"type": "object", "properties": {
                "code": {"type": "string"}, "message": {"type": "string"},
                "retryable": {"type": "boolean"}, "stack": {"type": "string"},
                "status": {"type": "integer"}, "excerpt": {"type": "string"}},
                "required": ["code", "message"]}
        },
        "required": ["logs"]
    })
}

/// A call refused by the caller's own limits: retryable, naming the limit.
fn limited(gate: &crate::callers::Gate, over: &crate::callers::Over) -> (ToolOutput, Value) {
    let code = match over {
        crate::callers::Over::Rate { .. } => "rate_limited",
        crate::callers::Over::Concurrency => "caller_busy",
    };
    let mut e = ExecError::new(code, gate.message(over));
    e.retryable = true;
    (failure(e), json!({"outcome": code}))
}

fn invalid(message: &str) -> ToolOutput {
    failure(ExecError::new("invalid_params", message))
}

/// The reply of a successful execute: `structuredContent` and a text
/// block, together at most [`REPLY_CAP`] bytes as sent. The text is the
/// result pretty-printed when that fits, else compact JSON (pretty-printing
/// a deeply nested result multiplies its size by its depth); when not even
/// that fits, `output_limit`.
fn success(ok: ExecOutput) -> ToolOutput {
    let structured = json!({"result": ok.result, "logs": ok.logs});
    let Some(structured_len) = sent_len(&structured, REPLY_CAP) else {
        return over_cap("structuredContent alone");
    };
    let left = REPLY_CAP - structured_len;
    for pretty in [true, false] {
        if let Some(text) = result_text(&structured["result"], &ok.logs, pretty, left) {
            return ToolOutput {
                text,
                structured: Some(structured),
                is_error: false,
            };
        }
    }
    over_cap("structuredContent and the text rendering together")
}

fn over_cap(what: &str) -> ToolOutput {
    failure(ExecError::new(
        "output_limit",
        format!(
            "the reply would be over {REPLY_CAP} bytes as sent ({what}); return only the data you need"
        ),
    ))
}

/// The text block (`result` then the console lines), when it fits in
/// `cap` bytes as sent.
fn result_text(result: &Value, logs: &[LogLine], pretty: bool, cap: usize) -> Option<String> {
    let mut w = Capped::new(cap);
    let written = if pretty {
        serde_json::to_writer_pretty(&mut w, result)
    } else {
        serde_json::to_writer(&mut w, result)
    };
    written.ok()?;
    let mut text = String::from_utf8(w.buf).ok()?;
    if !logs.is_empty() {
        text = format!("result:\n{text}\n\nlogs:");
        for l in logs {
            text.push_str(&format!("\n[{}] {}", l.level, l.text));
            if text.len() > cap {
                return None;
            }
        }
    }
    sent_len(text.as_str(), cap).map(|_| text)
}

/// The reply of a failed execute, at most [`REPLY_CAP`] bytes as sent: when
/// its console lines would take it over, they are left out (and it says so).
fn failure(mut e: ExecError) -> ToolOutput {
    let out = failure_with_logs(&e);
    let sent = sent_len(&out.structured, REPLY_CAP)
        .and_then(|n| sent_len(out.text.as_str(), REPLY_CAP - n));
    if sent.is_some() {
        return out;
    }
    let dropped = e.logs.len();
    e.logs = vec![LogLine {
        level: "warn".into(),
        text: format!(
            "{dropped} console lines left out: the reply would be over {REPLY_CAP} bytes"
        ),
    }];
    failure_with_logs(&e)
}

fn failure_with_logs(e: &ExecError) -> ToolOutput {
    let mut error = json!({"code": e.code, "message": e.message, "retryable": e.retryable});
    let mut text = format!("{}: {}", e.code, e.message);
    if let Some(stack) = &e.stack {
        error["stack"] = json!(stack);
        text.push_str(&format!("\n{stack}"));
    }
    if let Some(status) = e.status {
        error["status"] = json!(status);
    }
    if let Some(x) = &e.excerpt {
        error["excerpt"] = json!(x);
        text.push_str(&format!("\nresponse: {x}"));
    }
    for l in &e.logs {
        text.push_str(&format!("\n[{}] {}", l.level, l.text));
    }
    ToolOutput {
        text,
        structured: Some(json!({"error": error, "logs": e.logs})),
        is_error: true,
    }
}
