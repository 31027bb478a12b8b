//! The only module that knows the MCP SDK (rmcp, pinned `=3.9.0`).
//!
//! rmcp provides the stdio framing and both protocol eras: the 2025-11-25
//! `initialize` handshake and the stateless 2026-07-28 revision
//! (`server/discover`, per-request `_meta` validation, `resultType`, cache
//! hints). This module maps rmcp requests onto [`crate::tools::Tools`] and
//! overrides rmcp's defaults that would answer methods we do not declare
//! (prompts, resources, completion) so that only `tools` is served.
//!
//! Over Streamable HTTP ([`HttpEndpoint`]) rmcp's tower service serves
//! `/mcp` behind [`crate::http`], which has verified the caller: rmcp
//! hands each request's HTTP parts to the handler, and the [`Caller`]
//! the front put in them becomes the call's [`Who`].
//!
//! Cancellation: rmcp cancels the request's token on
//! `notifications/cancelled`; the executor then kills the worker. rmcp still
//! writes a response for the cancelled request, which the spec asks clients
//! to tolerate.

use crate::audit::Who;
use crate::oauth::Caller;
use crate::tools::{ToolDef, ToolOutput, Tools};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestMethod,
    CompleteRequestParams, CompleteResult, ContentBlock, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesRequestMethod, ListResourceTemplatesResult,
    ListResourcesRequestMethod, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;

/// The MCP face of the tool set.
#[derive(Clone)]
pub struct Server {
    tools: Arc<Tools>,
    listed: Arc<Vec<Tool>>,
}

impl Server {
    /// Wraps the tools.
    pub fn new(tools: Arc<Tools>) -> Self {
        let listed = Arc::new(tools.defs().into_iter().map(to_rmcp_tool).collect());
        Self { tools, listed }
    }

    /// Serves MCP on stdin/stdout until stdin closes.
    ///
    /// When both are pipes (how MCP clients start servers) they are reopened
    /// through `/proc/self/fd` as non-blocking descriptors driven by the
    /// event loop; tokio's own stdin/stdout would hand every read and write
    /// to a blocking-pool thread and back, three thread wake-ups per request.
    /// Anything else (a terminal, a file, no `/proc`) falls back to those.
    pub async fn serve_stdio(self) -> Result<(), String> {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let out = Arc::new(tokio::sync::Mutex::new(stdout));
        let (to_rmcp, rmcp_in) = tokio::io::duplex(256 * 1024);
        let (rmcp_out, from_rmcp) = tokio::io::duplex(256 * 1024);
        let input = tokio::spawn(crate::stdio::pump_input(
            stdin,
            to_rmcp,
            out.clone(),
            crate::stdio::termination(),
        ));
        let output = tokio::spawn(crate::stdio::pump_output(from_rmcp, out));
        let result = self.serve_on(rmcp_in, rmcp_out).await;
        input.abort();
        // rmcp has written its last reply into the pipe: let it reach stdout.
        let _ = output.await;
        result
    }

    async fn serve_on(
        self,
        rmcp_in: tokio::io::DuplexStream,
        rmcp_out: tokio::io::DuplexStream,
    ) -> Result<(), String> {
        let running = match self.serve((rmcp_in, rmcp_out)).await {
            Ok(r) => r,
            // stdin closed before any request: nothing to serve, not an error.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(format!("mcp start: {e}")),
        };
        running.waiting().await.map_err(|e| format!("mcp: {e}"))?;
        Ok(())
    }
}

/// What [`Server::http_endpoint`] needs from the HTTP configuration.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// `Host` values accepted (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Idle time after which a legacy session is closed.
    pub session_idle: std::time::Duration,
    /// Cancelled when the server stops.
    pub cancel: tokio_util::sync::CancellationToken,
}

/// The MCP endpoint over Streamable HTTP: rmcp's service and its
/// sessions (legacy era; 2026-07-28 requests are served without one).
pub struct HttpEndpoint {
    service: StreamableHttpService<Server, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
}

impl Server {
    /// The HTTP endpoint serving these tools.
    pub fn http_endpoint(self, opts: HttpOptions) -> HttpEndpoint {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(opts.session_idle);
        let sessions = Arc::new(manager);
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(opts.allowed_hosts)
            .with_json_response(true)
            .with_cancellation_token(opts.cancel)
            .with_max_request_body_bytes(crate::stdio::MAX_MESSAGE_BYTES);
        let service =
            StreamableHttpService::new(move || Ok(self.clone()), sessions.clone(), config);
        HttpEndpoint { service, sessions }
    }
}

impl HttpEndpoint {
    /// Serves one request on `/mcp`.
    pub async fn handle(
        &self,
        req: http::Request<http_body_util::Full<bytes::Bytes>>,
    ) -> http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>
    {
        self.service.handle(req).await
    }

    /// The open sessions' ids.
    pub async fn session_ids(&self) -> Vec<String> {
        let map = self.sessions.sessions.read().await;
        map.keys().map(|k| k.to_string()).collect()
    }
}

/// The caller of a request: the HTTP parts rmcp attached, with the
/// [`Caller`] the front verified; none on stdio.
fn who_of(context: &RequestContext<RoleServer>) -> Who {
    let Some(parts) = context.extensions.get::<http::request::Parts>() else {
        return Who::stdio();
    };
    Who {
        transport: "http",
        caller: parts.extensions.get::<Caller>().cloned(),
        session: (parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    }
}

fn to_rmcp_tool(def: ToolDef) -> Tool {
    let schema = match def.input_schema {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let annotations = ToolAnnotations::from_raw(
        Some(def.title.to_owned()),
        Some(def.read_only),
        Some(def.destructive),
        Some(def.idempotent),
        Some(def.open_world),
    );
    let tool = Tool::new(def.name, def.description, Arc::new(schema))
        .with_title(def.title)
        .with_annotations(annotations);
    match def.output_schema {
        Some(serde_json::Value::Object(map)) => tool.with_raw_output_schema(Arc::new(map)),
        _ => tool,
    }
}

fn to_rmcp_result(out: ToolOutput) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(out.text)]);
    result.structured_content = out.structured;
    result.is_error = Some(out.is_error);
    result
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "openagenda-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(self.tools.instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(
            ListToolsResult::with_all_items(self.listed.as_ref().clone())
                .with_ttl_ms(0)
                .with_cache_scope(CacheScope::Private),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let who = who_of(&context);
        match self
            .tools
            .call_as(&request.name, &args, &context.ct, &who)
            .await
        {
            Some(out) => Ok(CallToolResponse::Complete(to_rmcp_result(out))),
            None => Err(ErrorData::invalid_params("tool not found", None)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListResourcesRequestMethod>())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            ListResourceTemplatesRequestMethod,
        >())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }
}
