//! The Changes view's API: what the recovery store journaled (`GET /api/changes`), one
//! change put back (`POST /api/restore`), and a session's changes taken back (`POST
//! /api/undo`). The store's work runs through `daemon/recovery.rs`, as the control ops'
//! does, on blocking threads.
//!
//! The changes are not part of the picture `/api/state` and the feed send: reading them
//! reads the journal, which the picture, sent after every change of state, should not wait
//! on. The page asks for them when it shows them.

use super::reply::{Refusal, body};
use super::shared::Console;
use crate::daemon::protocol;
use crate::daemon::recovery::{self, Refused};
use crate::error::ErrorKind;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// Most changes sent to the page, the newest: a month of a busy server's changes is more
/// than a page can show, and `fsbroker history` lists them all.
const MAX_SHOWN: usize = 500;

/// `GET /api/changes`: `{"enabled", "store", "usage": {"bytes", "changes"}, "total",
/// "changes": [...]}`, the newest change first.
pub(super) async fn list(State(console): State<Arc<Console>>) -> Response {
    match recovery::history(&console.broker, None, None, false).await {
        Ok(listing) => {
            let total = listing.changes.len();
            let changes: Vec<Value> = listing
                .changes
                .iter()
                .rev()
                .take(MAX_SHOWN)
                .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                .collect();
            Json(json!({
                "enabled": true,
                "store": listing.store,
                "usage": {"bytes": listing.usage.0, "changes": listing.usage.1},
                "total": total,
                "changes": changes,
            }))
            .into_response()
        }
        // Recovery off is no error of the page's: the view says so.
        Err(Refused::Off) => Json(json!({
            "enabled": false,
            "store": null,
            "usage": {"bytes": 0, "changes": 0},
            "total": 0,
            "changes": [],
        }))
        .into_response(),
        Err(e) => refusal(&e).into_response(),
    }
}

/// `POST /api/restore`: puts back what one change replaced or removed.
pub(super) async fn restore(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    // The socket's `restore` request: the same fields, the same store call.
    let r: protocol::Restore = match body(&bytes) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    match recovery::restore(&console.broker, r).await {
        Ok(done) => {
            tracing::info!(change = %done.id, path = %done.path, "console: restored");
            Json(json!({"ok": true, "restored": done})).into_response()
        }
        Err(e) => refusal(&e).into_response(),
    }
}

/// `POST /api/undo`: takes back a server's (or a session's) changes, newest first; those
/// whose place changed since are left alone and listed as conflicts.
pub(super) async fn undo(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    // The socket's `undo` request: the same fields, the same store call.
    let u: protocol::Undo = match body(&bytes) {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let server = u.server.clone();
    match recovery::undo(&console.broker, u).await {
        Ok(undone) => {
            tracing::info!(
                server = %server,
                restored = undone.restored.len(),
                conflicts = undone.conflicts.len(),
                "console: undone"
            );
            Json(json!({
                "ok": true,
                "restored": undone.restored,
                "conflicts": undone.conflicts,
            }))
            .into_response()
        }
        Err(e) => refusal(&e).into_response(),
    }
}

/// The answer to a refusal of the store: `404` for a change it does not hold, `409` for one
/// it cannot take back (or no store at all), `400` for a bad place, `500` for a failure.
fn refusal(e: &Refused) -> Refusal {
    let status = match e.kind() {
        None | Some(ErrorKind::ConcurrencyConflict | ErrorKind::AlreadyExists) => {
            StatusCode::CONFLICT
        }
        Some(ErrorKind::FileNotFound) => StatusCode::NOT_FOUND,
        Some(ErrorKind::InvalidPath | ErrorKind::InvalidParams) => StatusCode::BAD_REQUEST,
        Some(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Refusal::new(status, e.message())
}
