//! The console's answers that are not the page itself: a refusal with its status, `{"ok":
//! true}`, and the one reader of request bodies. Every route answers through these.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Why a request is refused: its status, and what the page is told.
#[derive(Debug)]
pub(super) struct Refusal(StatusCode, String);

impl Refusal {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal(status, message.into())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.0, self.1)
    }
}

/// An error answer: `{"error": MESSAGE}`.
pub(super) fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"error": message.into()});
    (status, Json(body)).into_response()
}

/// `400` with `message`.
pub(super) fn bad(message: impl Into<String>) -> Refusal {
    Refusal::new(StatusCode::BAD_REQUEST, message)
}

/// `{"ok": true}`.
pub(super) fn ok() -> Response {
    Json(json!({"ok": true})).into_response()
}

/// A body of type `T`, or the `400` that says why not. Bodies are read whole and parsed
/// here, unknown fields refused: a malformed request is `400` and changes nothing.
pub(super) fn body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(bytes).map_err(|e| bad(format!("malformed request: {e}")))
}

/// The number of an item the page names `PREFIX` and a number (`q7`, `o3`).
pub(super) fn number(id: &str, prefix: char) -> Result<u64, Refusal> {
    id.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Refusal::new(StatusCode::NOT_FOUND, format!("no such item {id:?}")))
}
