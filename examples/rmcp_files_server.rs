//! A small MCP server written with rmcp's server side, for the `rmcp_host` example and the
//! adapter's tests: its tools ask the *client* for files, so they show what a server sees
//! through a brokering host.
//!
//! Tools:
//! - `roots`: the client's roots (`roots/list`, through rmcp's own API);
//! - `read_file {path}`: `files/consent` for the path, then `files/read`;
//! - `request {method, params?}`: any client request, answered as `{result}` or `{error}`
//!   with the JSON-RPC error's code, message and data;
//! - `notifications`: the notifications received from the client so far;
//! - `client`: the client's `initialize` params (protocol version, capabilities, info).
//!
//! It speaks MCP on stdin/stdout: `cargo run --features rmcp --example rmcp_files_server`.
//! Its `serverInfo.name` is `rmcp-files-server`, or the value of `RMCP_FILES_SERVER_NAME`
//! (the tests use it to run two servers that report the same name).

#![allow(deprecated)] // roots are deprecated in rmcp (SEP-2577); this server uses them.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CustomNotification,
    CustomRequest, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceError, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one request to the client may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The environment variable that overrides the server's name.
const NAME_VAR: &str = "RMCP_FILES_SERVER_NAME";

#[derive(Clone)]
struct FilesServer {
    /// The `serverInfo.name` it reports.
    name: String,
    /// Notifications from the client, as `{method, params}`.
    received: Arc<Mutex<Vec<Value>>>,
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema: JsonObject = schema.as_object().cloned().unwrap_or_default();
    Tool::new(name, description, Arc::new(schema))
}

/// Sends one request to the client and answers `{result}` or `{error: {code, message, data}}`.
async fn ask(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Option<Value>,
) -> Result<Value, ErrorData> {
    let request = ServerRequest::CustomRequest(CustomRequest::new(method, params));
    let sent = tokio::time::timeout(CLIENT_TIMEOUT, context.peer.send_request(request)).await;
    match sent {
        Err(_) => Err(ErrorData::internal_error("the client did not answer", None)),
        Ok(Ok(ClientResult::CustomResult(r))) => Ok(json!({"result": r.0})),
        // A `{}` result comes back as rmcp's empty result; any other shape as it serializes.
        Ok(Ok(other)) => Ok(json!({"result": serde_json::to_value(other).unwrap_or_default()})),
        Ok(Err(ServiceError::McpError(e))) => Ok(json!({"error": {
            "code": e.code.0, "message": e.message, "data": e.data}})),
        Ok(Err(e)) => Err(ErrorData::internal_error(e.to_string(), None)),
    }
}

fn outcome(value: Value) -> CallToolResult {
    if value.get("error").is_some() {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    }
}

fn string_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, ErrorData> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{key}` (a string) is required"), None))
}

impl ServerHandler for FilesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let path = json!({"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"]});
        let request = json!({"type": "object", "properties": {"method": {"type": "string"},
            "params": {"type": "object"}}, "required": ["method"]});
        let none = json!({"type": "object", "properties": {}});
        Ok(ListToolsResult::with_all_items(vec![
            tool("roots", "List the client's roots.", none.clone()),
            tool("read_file", "Ask consent for a path, then read it.", path),
            tool("request", "Send any request to the client.", request),
            tool(
                "notifications",
                "Notifications received from the client.",
                none.clone(),
            ),
            tool("client", "The client's initialize params.", none),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "roots" => {
                let roots = tokio::time::timeout(CLIENT_TIMEOUT, context.peer.list_roots()).await;
                match roots {
                    Ok(Ok(r)) => outcome(json!({"result": r})),
                    Ok(Err(ServiceError::McpError(e))) => outcome(json!({"error": {
                        "code": e.code.0, "message": e.message, "data": e.data}})),
                    Ok(Err(e)) => return Err(ErrorData::internal_error(e.to_string(), None)),
                    Err(_) => return Err(ErrorData::internal_error("no roots in time", None)),
                }
            }
            "read_file" => {
                let path = string_arg(&args, "path")?;
                let consent = ask(
                    &context,
                    "files/consent",
                    Some(json!({"requestedPaths": [path], "access": "read",
                        "message": "rmcp-files-server wants to read this file"})),
                )
                .await?;
                let read = ask(&context, "files/read", Some(json!({"path": path}))).await?;
                let failed = read.get("error").is_some();
                let value = json!({"consent": consent, "read": read});
                if failed {
                    CallToolResult::structured_error(value)
                } else {
                    CallToolResult::structured(value)
                }
            }
            "request" => {
                let method = string_arg(&args, "method")?;
                outcome(ask(&context, method, args.get("params").cloned()).await?)
            }
            "notifications" => {
                let received = self.received.lock().map(|r| r.clone()).unwrap_or_default();
                CallToolResult::structured(json!({"notifications": received}))
            }
            "client" => {
                let info = context.peer.peer_info();
                CallToolResult::structured(serde_json::to_value(info).unwrap_or_default())
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other:?}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Ok(mut r) = self.received.lock() {
            r.push(json!({"method": notification.method, "params": notification.params}));
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if let Ok(mut r) = self.received.lock() {
            r.push(json!({"method": "notifications/roots/list_changed"}));
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = FilesServer {
        name: std::env::var(NAME_VAR).unwrap_or_else(|_| "rmcp-files-server".to_owned()),
        received: Arc::default(),
    };
    let service = server.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
