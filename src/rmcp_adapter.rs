//! The adapter for hosts written with the official Rust MCP SDK, `rmcp` (cargo feature `rmcp`).
//!
//! [`BrokerClientHandler`] implements rmcp's [`ClientHandler`]: it declares the `roots`
//! capability, and answers the server's `roots/list` and `files/*` requests through a
//! [`Broker`], with the broker's results and JSON-RPC errors (code, message and `data`) passed
//! through unchanged. A [`NotificationRouter`] carries the broker's own notifications
//! (`notifications/files/changed`, `notifications/roots/list_changed`) to the server of their
//! session.
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
//! let router = NotificationRouter::new();
//! tokio::spawn(router.clone().run(outbound));
//! let handler = BrokerClientHandler::new(broker).with_router(router);
//! let command = tokio::process::Command::new("my-mcp-server");
//! let client = handler.clone().serve(TokioChildProcess::new(command)?).await?;
//! let tools = client.list_tools(None).await?;
//! # let _ = tools;
//! client.cancel().await?;
//! handler.end_session();
//! # Ok(()) }
//! ```

// rmcp marks roots deprecated (SEP-2577, which moves them out of the 2026-07-28 revision);
// answering them for the revisions that have them is what this adapter is for.
#![allow(deprecated)]

use crate::{Broker, Outbound, OutboundReceiver};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientNotification, CustomNotification, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListRootsResult, ProtocolVersion, RequestId,
    RootsCapabilities,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData, Peer};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;

/// The key under `capabilities.experimental` that tells a server this client brokers files.
///
/// The wire contract puts the flag at `capabilities.roots.filesystemBrokering`, but rmcp's
/// `RootsCapabilities` has no room for fields it does not know, so the adapter declares it as
/// the experimental capability `{"filesystemBrokering": {}}` instead.
pub const BROKERING_CAPABILITY: &str = "filesystemBrokering";

/// Longest session id taken from a server's `serverInfo.name`, in characters (as the proxy).
pub const MAX_SERVER_NAME_CHARS: usize = 128;

/// An rmcp [`ClientHandler`] that answers a server's `roots/list` and `files/*` requests
/// through a [`Broker`].
///
/// Use one handler per server connection (a clone shares the connection's session). The
/// session is named, at the server's first request, by [`Self::with_server_id`] when given,
/// else by the server's `serverInfo.name` (control characters removed, at most
/// [`MAX_SERVER_NAME_CHARS`]), else `default`. Two connections that end up with the same name
/// share one broker session, so give distinct ids to servers that may share a name.
///
/// rmcp runs each server request in a task of its own, so requests of one session reach the
/// broker concurrently, as with any embedding host: a server that sends `files/consent` and
/// a read without awaiting the consent's answer may see the read refused. Servers written
/// with an SDK await each request, which is enough.
#[derive(Clone)]
pub struct BrokerClientHandler {
    broker: Broker,
    server_id: Option<String>,
    session: Arc<OnceLock<String>>,
    client_info: Implementation,
    protocol_version: ProtocolVersion,
    router: Option<NotificationRouter>,
}

impl std::fmt::Debug for BrokerClientHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerClientHandler")
            .field("server_id", &self.server_id)
            .field("session", &self.session.get())
            .field("client_info", &self.client_info)
            .field("protocol_version", &self.protocol_version)
            .finish_non_exhaustive()
    }
}

impl BrokerClientHandler {
    /// A handler answering through `broker`. It negotiates protocol revision 2025-11-25, the
    /// newest in which servers may send requests to the client (2026-07-28 forbids them).
    pub fn new(broker: Broker) -> Self {
        Self {
            broker,
            server_id: None,
            session: Arc::new(OnceLock::new()),
            client_info: Implementation::new("mcp-fsbroker", env!("CARGO_PKG_VERSION")),
            protocol_version: ProtocolVersion::V_2025_11_25,
            router: None,
        }
    }

    /// Names the server session `id` instead of taking the server's `serverInfo.name`.
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

    /// Delivers this connection's broker notifications through `router`: the handler
    /// registers its server with the router at the server's first request.
    pub fn with_router(mut self, router: NotificationRouter) -> Self {
        self.router = Some(router);
        self
    }

    /// The broker this handler answers through.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// The session id, once the server has sent its first request.
    pub fn session_id(&self) -> Option<&str> {
        self.session.get().map(String::as_str)
    }

    /// Ends this connection's broker session (its grants, watches and staged uploads) and
    /// stops routing notifications to it. Returns whether a session existed. Call it when the
    /// connection ends.
    pub fn end_session(&self) -> bool {
        let Some(id) = self.session.get() else {
            return false;
        };
        if let Some(router) = &self.router {
            router.detach(id);
        }
        self.broker.end_session(id)
    }

    /// The session id for the server behind `peer`, fixed at the first call so that a
    /// session never splits in two.
    fn session_for(&self, peer: &Peer<RoleClient>) -> &str {
        self.session.get_or_init(|| {
            if let Some(id) = &self.server_id {
                return id.clone();
            }
            let name = peer
                .peer_info()
                .and_then(|info| info.server_info.as_ref().map(|s| s.name.clone()))
                .map(|n| {
                    n.chars()
                        .filter(|c| !c.is_control())
                        .take(MAX_SERVER_NAME_CHARS)
                        .collect::<String>()
                })
                .unwrap_or_default();
            if name.is_empty() {
                "default".to_owned()
            } else {
                name
            }
        })
    }

    /// Hands one request to the broker and returns its result, or its error as rmcp's.
    async fn answer(
        &self,
        context: &RequestContext<RoleClient>,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorData> {
        let session = self.session_for(&context.peer);
        if let Some(router) = &self.router {
            router.attach(session, &context.peer);
        }
        let response = self
            .broker
            .handle_message(session, request_json(&context.id, method, params))
            .await;
        match response {
            Some(response) => from_response(response),
            None => Err(ErrorData::internal_error(
                "the broker gave no response",
                None,
            )),
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

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let result = self.answer(&context, "roots/list", None).await?;
        serde_json::from_value(result)
            .map_err(|e| ErrorData::internal_error(format!("cannot convert the roots: {e}"), None))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        if !request.method.starts_with("files/") {
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

/// Carries the broker's outbound notifications to the rmcp peer of each session.
///
/// One router serves one broker and any number of connections: [`Self::run`] reads the
/// broker's stream, and each [`BrokerClientHandler`] built [`with_router`] registers its
/// server at the server's first request. Each server gets its own sender task, so a server
/// that stops reading delays only its own notifications; those hold their session's
/// notification slots until sent, so the broker owes that server an `overflow` instead of
/// buffering without bound. Notifications for a session with no registered server are
/// dropped.
///
/// [`with_router`]: BrokerClientHandler::with_router
#[derive(Clone, Default)]
pub struct NotificationRouter {
    peers: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Outbound>>>>,
}

impl std::fmt::Debug for NotificationRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationRouter")
            .field("sessions", &lock(&self.peers).keys().collect::<Vec<_>>())
            .finish()
    }
}

impl NotificationRouter {
    /// A router with no servers registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes the broker's notifications until the broker and all its clones are dropped.
    /// Spawn it on the runtime that runs the rmcp clients.
    pub async fn run(self, mut outbound: OutboundReceiver) {
        while let Some(message) = outbound.recv().await {
            let sender = lock(&self.peers).get(&message.server_id).cloned();
            match sender {
                Some(sender) => {
                    if let Err(mpsc::error::SendError(message)) = sender.send(message) {
                        tracing::debug!(server = %message.server_id, "server gone; notification dropped");
                        self.detach_closed(&message.server_id);
                    }
                }
                None => {
                    tracing::debug!(server = %message.server_id, "no rmcp peer for session; notification dropped");
                }
            }
        }
    }

    /// Sends the notifications of session `server_id` to `peer` from now on, unless a live
    /// peer is already registered for it.
    pub fn attach(&self, server_id: &str, peer: &Peer<RoleClient>) {
        let mut peers = lock(&self.peers);
        if peers.get(server_id).is_some_and(|s| !s.is_closed()) {
            return;
        }
        let (sender, mut receiver) = mpsc::unbounded_channel::<Outbound>();
        let peer = peer.clone();
        let id = server_id.to_owned();
        tokio::spawn(async move {
            while let Some(message) = receiver.recv().await {
                if let Err(e) = send(&peer, &message.message).await {
                    tracing::debug!(server = %id, error = %e, "cannot notify server; routing stopped");
                    break;
                }
                // The message, and with it its notification slot, goes only once sent.
                drop(message);
            }
        });
        peers.insert(server_id.to_owned(), sender);
    }

    /// Stops routing to session `server_id`. Returns whether a server was registered.
    pub fn detach(&self, server_id: &str) -> bool {
        lock(&self.peers).remove(server_id).is_some()
    }

    fn detach_closed(&self, server_id: &str) {
        let mut peers = lock(&self.peers);
        if peers.get(server_id).is_some_and(|s| s.is_closed()) {
            peers.remove(server_id);
        }
    }
}

/// Sends one broker notification through rmcp: the roots change as rmcp's own notification,
/// anything else as a custom one with the broker's method and params.
async fn send(peer: &Peer<RoleClient>, message: &Value) -> Result<(), rmcp::ServiceError> {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if method == "notifications/roots/list_changed" {
        return peer.notify_roots_list_changed().await;
    }
    let notification = CustomNotification::new(method, message.get("params").cloned());
    peer.send_notification(ClientNotification::CustomNotification(notification))
        .await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
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
