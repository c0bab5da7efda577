//! "Allow this?": the offers the page shows (grouped by the page per server, each with its
//! host path), the user's answer to one, and the dismissal of a server's offers or all.

use super::board::Offer;
use super::edits::remember;
use super::lifetime::Chosen;
use super::reply::{Refusal, body, number, ok};
use super::shared::Console;
use crate::daemon::control::program_shown;
use crate::daemon::control::when;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The offers to sessions still live (one to a session that has ended can no longer be
/// taken up), each with the place on the host it names: the page groups them by server.
pub(super) fn shown(c: &Console, offers: &[Offer]) -> Vec<Value> {
    let live = c.broker.sessions();
    // What was asked of an ended session is forgotten with it.
    c.board.keep_asked_of(&live);
    let roots = c.broker.roots();
    offers
        .iter()
        .filter(|o| live.contains(&o.server))
        .map(|o| {
            let host = roots
                .iter()
                .find(|r| *r.mount() == o.path.mount)
                .map(|r| r.host_path_of(&o.path.rel));
            json!({
                "id": format!("o{}", o.id),
                "server": o.server,
                "path": o.path.to_string(),
                "hostPath": host,
                // Allowing it allows everything the root holds: the page says so.
                "wholeRoot": o.path.rel.is_root(),
                "access": o.access.as_str(),
                "method": o.method,
                "at": when(o.at),
                "program": program_shown(
                    c.broker
                        .live_since(&o.server, o.at)
                        .ok()
                        .as_deref()
                        .and_then(crate::session::Session::identity),
                ),
            })
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Dismiss {
    #[serde(default)]
    server: Option<String>,
}

/// `POST /api/offers/dismiss`: the offers to one session (`server`), or all of them,
/// dismissed; nothing is granted.
pub(super) async fn dismiss(State(console): State<Arc<Console>>, bytes: Bytes) -> Response {
    match body::<Dismiss>(&bytes) {
        Ok(d) => {
            let dismissed = console.board.dismiss(d.server.as_deref());
            tracing::info!(server = ?d.server, dismissed, "console: offers dismissed");
            Json(json!({"ok": true, "dismissed": dismissed})).into_response()
        }
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OfferAnswer {
    allow: bool,
    #[serde(default)]
    remember: bool,
    #[serde(default)]
    lifetime: Option<Chosen>,
}

/// `POST /api/offers/{id}`: "allow this?" answered.
pub(super) async fn offer(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Response {
    match offer_with(&console, &id, &bytes) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn offer_with(c: &Console, id: &str, bytes: &[u8]) -> Result<Response, Refusal> {
    let n = number(id, 'o')?;
    let a: OfferAnswer = body(bytes)?;
    let chosen = Chosen::of(a.lifetime, a.remember)?;
    let offer = c
        .board
        .take_offer(n)
        .ok_or_else(|| Refusal::new(StatusCode::NOT_FOUND, "this offer no longer waits"))?;
    if !a.allow {
        return Ok(ok());
    }
    let access = c
        .broker
        .grant(
            &offer.server,
            &offer.path,
            offer.access,
            offer.at,
            chosen.lifetime(),
        )
        .map_err(|e| Refusal::new(StatusCode::CONFLICT, format!("not granted: {e}")))?;
    tracing::info!(server = %offer.server, path = %offer.path, access = access.as_str(), "console: allowed after a refusal");
    if chosen == Chosen::Forever {
        let session = c
            .broker
            .live_since(&offer.server, offer.at)
            .map_err(|e| Refusal::new(StatusCode::GONE, format!("allowed, not remembered: {e}")))?;
        remember(c, &session, &[(offer.path, access)])?;
    }
    Ok(ok())
}
