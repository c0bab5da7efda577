//! The MCP vocabulary the proxy acts on, named once: the methods it looks for, the `_meta`
//! keys and result fields of revision 2026-07-28, and the one look-up of a cancellation's
//! `requestId`. A rule that matches a message by one of these names uses the constant, so a
//! misspelling is a compile error rather than a rule that never fires.

use serde_json::Value;

/// The legacy handshake.
pub(crate) const INITIALIZE: &str = "initialize";
/// The host's notice that ends the legacy handshake.
pub(crate) const INITIALIZED: &str = "notifications/initialized";
/// The 2026-07-28 probe.
pub(crate) const DISCOVER: &str = "server/discover";
/// The server's question for its roots (answered by the broker, never by the host).
pub(crate) const ROOTS_LIST: &str = "roots/list";
/// A cancellation, from either side.
pub(crate) use crate::jsonrpc::CANCELLED;
/// The host's notice that its roots changed, which the proxy drops: the server's roots are
/// the broker's.
pub(crate) const ROOTS_CHANGED: &str = "notifications/roots/list_changed";

/// The `_meta` key of a 2026-07-28 request's protocol version.
pub(crate) const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a 2026-07-28 request's client capabilities.
pub(crate) const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// Where a 2026-07-28 server names itself in a result's `_meta`.
pub(crate) const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// The extension under which the proxy declares filesystem brokering in a modern session.
pub(crate) const BROKERING_EXTENSION: &str = "io.github.fsbroker/filesystemBrokering";

/// A 2026-07-28 result's questions for the client, by key.
pub(crate) const INPUT_REQUESTS: &str = "inputRequests";
/// A 2026-07-28 retry's answers to those questions, by key.
pub(crate) const INPUT_RESPONSES: &str = "inputResponses";
/// The state a server hands back in a 2026-07-28 retry.
pub(crate) const REQUEST_STATE: &str = "requestState";
/// The value of `result.resultType` that asks for input.
pub(crate) const INPUT_REQUIRED: &str = "input_required";

/// The revision without a handshake.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// The revisions with the `initialize` handshake, newest first: the only ones where consent
/// and `files/*` are brokered.
pub(crate) const LEGACY_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The first revision without JSON-RPC batches (revisions are dates, so later ones sort
/// after it).
pub(crate) const FIRST_WITHOUT_BATCHES: &str = "2025-06-18";

/// The methods whose result may be `input_required` (2026-07-28, the tasks extension
/// included): their params are kept, so the proxy can retry them.
pub(crate) const INTERACTIVE: [&str; 4] =
    ["tools/call", "prompts/get", "resources/read", "tasks/get"];

/// The request a `notifications/cancelled` names, when it names one the way JSON-RPC ids
/// are written (a string or an integer).
pub(crate) fn cancelled_id(message: &Value) -> Option<&Value> {
    crate::jsonrpc::cancelled_request(message.get("params")?)
}

/// [`cancelled_id`] of a line, when it reads as JSON.
pub(crate) fn cancelled_id_in(line: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(line).ok()?;
    cancelled_id(&v).cloned()
}
