//! The adapter for hosts written with the official Rust MCP SDK, `rmcp` (cargo feature `rmcp`).
//!
//! [`BrokerClientHandler`] implements rmcp's [`ClientHandler`]: it declares the `roots`
//! capability, and answers the server's `roots/list` and `files/*` requests through a
//! [`Broker`], with the broker's results and JSON-RPC errors (code, message and `data`) passed
//! through unchanged. A [`NotificationRouter`], one per broker, gives each connection a
//! broker session of its own and carries the broker's notifications
//! (`notifications/files/changed`, `notifications/roots/list_changed`) to the connection
//! they belong to.
//!
//! rmcp hands a server request whose method it does not know to
//! [`ClientHandler::on_custom_request`]; that is where the `files/*` methods arrive.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_fsbroker::rmcp_adapter::{BrokerClientHandler, NotificationRouter};
//! use mcp_fsbroker::{Broker, Policy};
//! use rmcp::ServiceExt;
//! use rmcp::transport::TokioChildProcess;
//!
//! let policy = Policy::load(std::path::Path::new("policy/read-only.toml"))?;
//! let (broker, outbound) = Broker::builder(policy).build()?;
//! let router = NotificationRouter::new(broker);
//! tokio::spawn(router.clone().run(outbound));
//! let handler = BrokerClientHandler::new(&router);
//! let command = tokio::process::Command::new("my-mcp-server");
//! let client = handler.clone().serve(TokioChildProcess::new(command)?).await?;
//! let tools = client.list_tools(None).await?;
//! # let _ = tools;
//! client.cancel().await?;
//! handler.end_session();
//! # Ok(()) }
//! ```

mod registry;
mod router;

pub use router::NotificationRouter;

/// Longest session id taken from a server's self-reported name, in characters. A constant of
/// its own rather than a re-export, so that the session's stays private when this adapter is
/// not built.
pub const MAX_SERVER_NAME_CHARS: usize = crate::session::MAX_SERVER_NAME_CHARS;

use crate::Broker;
use crate::method::{Method, is_brokered};
use crate::session::DEFAULT_SERVER_ID;
use crate::session::server_name;
use registry::{Refusal, Wanted};
// rmcp marks roots deprecated (SEP-2577, which moves them out of the 2026-07-28 revision);
// answering them for the revisions that have them is what this adapter is for.
#[expect(
    deprecated,
    reason = "roots are deprecated from the 2026-07-28 revision on, and answered for the revisions before it"
)]
use rmcp::model::ListRootsResult;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomRequest, CustomResult, ErrorCode, Implementation,
    ProtocolVersion, RequestId, RootsCapabilities,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use router::Ticket;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The key under `capabilities.experimental` that tells a server this client brokers files.
///
/// The wire contract puts the flag at `capabilities.roots.filesystemBrokering`, but rmcp's
/// `RootsCapabilities` has no room for fields it does not know, so the adapter declares it as
/// the experimental capability `{"filesystemBrokering": {}}` instead.
pub const BROKERING_CAPABILITY: &str = "filesystemBrokering";

/// An rmcp [`ClientHandler`] that answers a server's `roots/list` and `files/*` requests
/// through a [`Broker`].
///
/// Build one per server connection with [`Self::new`]; a clone shares the connection. The
/// connection's broker session is named at the server's first request: by
/// [`Self::with_server_id`] when given, else by the server's `serverInfo.name` (control characters
/// removed, cut to [`MAX_SERVER_NAME_CHARS`]), else `default`. A name taken from the server is held by this connection
/// alone while it lives: a second live connection whose server reports the same name gets
/// `NAME#2` (and so on), a session of its own that the policy's per-server entries do not
/// match. [`NotificationRouter`] says when a connection lets go of its name.
///
/// A connection's requests run in the order `fsbroker serve` keeps: a change
/// ([`Method::is_ordered`](crate::Method::is_ordered)) runs alone, after the requests before
/// it and before those after it, so a server may send `files/consent` and a read without
/// awaiting the consent's answer. rmcp runs each server request in a task of its own, and a
/// request takes its place in the order when its task first runs: on a current-thread
/// runtime, that is the order the requests arrived in; on a multi-thread runtime, two
/// requests that arrive together may start in either order, so a server that needs one to
/// see the other awaits the first, as servers written with an SDK do.
#[derive(Clone)]
pub struct BrokerClientHandler {
    ticket: Arc<Ticket>,
    server_id: Option<String>,
    client_info: Implementation,
    protocol_version: ProtocolVersion,
}

impl std::fmt::Debug for BrokerClientHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerClientHandler")
            .field("server_id", &self.server_id)
            .field("session", &self.session_id())
            .field("client_info", &self.client_info)
            .field("protocol_version", &self.protocol_version)
            .finish_non_exhaustive()
    }
}

impl BrokerClientHandler {
    /// A handler for one new connection, answering through the router's broker and receiving
    /// its notifications through `router`. It negotiates protocol revision 2025-11-25, the
    /// newest in which servers may send requests to the client (2026-07-28 forbids them).
    pub fn new(router: &NotificationRouter) -> Self {
        Self {
            ticket: router.ticket(),
            server_id: None,
            client_info: Implementation::new("mcp-fsbroker", env!("CARGO_PKG_VERSION")),
            protocol_version: ProtocolVersion::V_2025_11_25,
        }
    }

    /// Names the server session `id` instead of taking the server's `serverInfo.name`.
    ///
    /// The host chose `id`, so it is used as it is: handlers given the same id share one
    /// session (grants, watches, uploads), which ends with the last of them. Give each
    /// connection its own id unless sharing is meant. A connection given an id that another
    /// live connection took from its server's name is refused every request, rather than
    /// share that server's grants.
    pub fn with_server_id(mut self, id: impl Into<String>) -> Self {
        self.server_id = Some(id.into());
        self
    }

    /// The `clientInfo` sent in `initialize` (default: this crate's name and version).
    pub fn with_client_info(mut self, info: Implementation) -> Self {
        self.client_info = info;
        self
    }

    /// The protocol revision asked for in `initialize`. Revisions 2024-11-05 through
    /// 2025-11-25 let servers send `roots/list` and `files/*`; later ones do not.
    pub fn with_protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.protocol_version = version;
        self
    }

    /// The broker this handler answers through.
    pub fn broker(&self) -> &Broker {
        self.ticket.broker()
    }

    /// The session id, once the server has sent its first request.
    pub fn session_id(&self) -> Option<&str> {
        self.ticket.session.get().map(String::as_str)
    }

    /// Ends this connection's broker session (its grants, watches and staged uploads, unless
    /// other handlers given the same [`Self::with_server_id`] still share it), stops routing
    /// notifications to it, and lets go of its name. Requests still in flight finish first;
    /// later ones are refused. Returns whether the connection held a session. Call it when
    /// the connection ends.
    pub fn end_session(&self) -> bool {
        self.ticket.end()
    }

    /// The session name this connection asks for at its server's first request.
    fn wanted(&self, context: &RequestContext<RoleClient>) -> Wanted {
        if let Some(id) = &self.server_id {
            return Wanted::Host(id.clone());
        }
        let name = context
            .peer
            .peer_info()
            .and_then(|info| info.server_info.as_ref().and_then(|s| server_name(&s.name)));
        Wanted::Server(name.unwrap_or_else(|| DEFAULT_SERVER_ID.to_owned()))
    }

    /// Hands one request to the broker and returns its result, or its error as rmcp's.
    async fn answer(
        &self,
        context: &RequestContext<RoleClient>,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorData> {
        let known = Method::parse(method);
        // The turn is taken when the request's task first runs, before anything is awaited,
        // and ends when the answer is made.
        let turn = self
            .ticket
            .orderer
            .enter(known.is_some_and(Method::is_ordered));
        let mut request = self
            .ticket
            .begin(&context.peer, method, || self.wanted(context))
            .map_err(|refusal| refused(refusal, self.server_id.as_deref()))?;
        turn.ready().await;
        let unwatch = (known == Some(Method::Unwatch))
            .then(|| params.as_ref().and_then(|p| p.get("watchId")).cloned())
            .flatten();
        let response = self
            .ticket
            .broker()
            .handle_message(request.session(), request_json(&context.id, method, params))
            .await;
        let outcome = match response {
            Some(response) => from_response(response),
            None => Err(ErrorData::internal_error(
                "the broker gave no response",
                None,
            )),
        };
        if let Ok(result) = &outcome {
            match known {
                Some(Method::Watch) => {
                    request.watched(result.get("watchId").and_then(Value::as_str));
                }
                Some(Method::Unwatch) => {
                    request.unwatched(unwatch.as_ref().and_then(Value::as_str));
                }
                _ => {}
            }
        }
        drop(turn);
        outcome
    }
}

/// The error a server gets for a request its connection may not make.
fn refused(refusal: Refusal, server_id: Option<&str>) -> ErrorData {
    match refusal {
        Refusal::Ended => ErrorData::internal_error("this connection's session has ended", None),
        Refusal::Held => {
            tracing::warn!(
                server = server_id.unwrap_or_default(),
                "the server id given for this connection is held by another server's \
                 connection; its requests are refused"
            );
            ErrorData::internal_error("this connection's session is not available", None)
        }
    }
}

impl ClientHandler for BrokerClientHandler {
    fn get_info(&self) -> ClientConfig {
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(true);
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(roots);
        capabilities.experimental = Some(
            [(BROKERING_CAPABILITY.to_owned(), Map::new())]
                .into_iter()
                .collect(),
        );
        ClientConfig::new(capabilities, self.client_info.clone())
            .with_protocol_version(self.protocol_version.clone())
    }

    #[expect(
        deprecated,
        reason = "roots are deprecated from the 2026-07-28 revision on, and answered for the revisions before it"
    )]
    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let result = self
            .answer(&context, Method::RootsList.name(), None)
            .await?;
        serde_json::from_value(result).map_err(|e| {
            // The text of a conversion error may quote a root's URI; it stays in the host's log.
            tracing::warn!(error = %e, "cannot convert the broker's roots for rmcp");
            ErrorData::internal_error("cannot convert the roots", None)
        })
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        if !is_brokered(&request.method) {
            // What rmcp answers for any method its client does not know.
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let result = self
            .answer(&context, &request.method, request.params)
            .await?;
        Ok(CustomResult(result))
    }
}

/// The JSON-RPC request the broker takes for one rmcp request. The id is the server's own,
/// so that audit and logs line up with what the server sent.
fn request_json(id: &RequestId, method: &str, params: Option<Value>) -> Value {
    let id = serde_json::to_value(id).unwrap_or(Value::Null);
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// The broker's response as an rmcp outcome: its `result`, or its `error` with code, message
/// and `data` unchanged.
fn from_response(mut response: Value) -> Result<Value, ErrorData> {
    if let Some(error) = response.get_mut("error").map(Value::take) {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(ErrorCode::INTERNAL_ERROR.0);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("internal error")
            .to_owned();
        return Err(ErrorData::new(
            ErrorCode(code),
            message,
            error.get("data").cloned(),
        ));
    }
    match response.get_mut("result").map(Value::take) {
        Some(result) => Ok(result),
        None => Err(ErrorData::internal_error(
            "the broker's response has neither result nor error",
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_code_message_and_data() {
        let response = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -31002,
            "message": "permission denied", "data": {"code": "PERMISSION_DENIED",
            "reason": "outside_root"}}});
        let e = from_response(response).unwrap_err();
        assert_eq!(e.code, ErrorCode(-31002));
        assert_eq!(e.message, "permission denied");
        assert_eq!(
            e.data,
            Some(json!({"code": "PERMISSION_DENIED", "reason": "outside_root"}))
        );
    }

    #[test]
    fn results_pass_through() {
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": "hi"}});
        assert_eq!(from_response(response).unwrap(), json!({"content": "hi"}));
        assert!(from_response(json!({"jsonrpc": "2.0", "id": 1})).is_err());
    }

    #[test]
    fn requests_keep_the_server_id_and_params() {
        let id = RequestId::Number(7);
        let r = request_json(&id, "files/read", Some(json!({"path": "a"})));
        assert_eq!(
            r,
            json!({"jsonrpc": "2.0", "id": 7, "method": "files/read", "params": {"path": "a"}})
        );
        let r = request_json(&id, "roots/list", None);
        assert!(r.get("params").is_none());
    }
}
