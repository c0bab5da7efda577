//! What the page reads (`GET /api/state`, the picture the feed sends too) and the user's
//! decisions on what waits: consent questions and offers. The edits of roots, remembered
//! grants and revocations are in `edits.rs`.
//!

use super::board::{Answered, STOPPED_WAITING, Shown, TIMED_OUT};
use super::edits::remember;
use super::lifetime::Chosen;
use super::reply::Refusal;
use super::reply::{bad, body, number, ok};
use super::shared::Console;
use crate::access::Access;
use crate::consent::{ConsentAnswer, ConsentRequest, PathChoice, Purpose, narrowed, sanitise};
use crate::daemon::control::program_shown;
use crate::daemon::control::{status, when};
use crate::locks::lock;
use crate::path::{MountPath, RelPath};
use crate::policy::{ConsentMode, Layer};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Longest server message shown, in characters.
const MAX_MESSAGE: usize = 2000;

/// `GET /api/state`.
pub(super) async fn state(State(console): State<Arc<Console>>) -> Json<Value> {
    Json(picture(&console))
}

/// The whole picture the page shows (see `docs/console.md`).
pub(super) fn picture(c: &Console) -> Value {
    let policy = c.broker.policy();
    let timeout = Duration::from_secs(policy.consent.timeout_secs.get());
    let layer = lock(&c.layer).clone();
    let waiting = c.board.waiting();
    json!({
        "daemon": {
            "version": env!("CARGO_PKG_VERSION"),
            "socket": c.socket,
            "policy": policy.source,
            "consentTimeoutSecs": timeout.as_secs(),
            // Where questions go: the page tells the user whether any will come to it.
            "consentMode": policy.consent.mode.as_ref().map_or_else(|| "elicit".to_owned(), ToString::to_string),
            "fallback": mode_shown(policy.consent.fallback.as_ref()),
        },
        "sessions": status(&c.broker, &c.attachments),
        "roots": roots_shown(c, &layer),
        "questions": waiting.questions.iter().map(|q| question_shown(q, timeout)).collect::<Vec<_>>(),
        "offers": super::offers::shown(c, &waiting.offers),
        "remembered": remembered_shown(&layer),
    })
}

/// The fallback as the policy sets it; unset, as the daemon resolves it: its terminal when
/// it has one, else the console.
fn mode_shown(mode: Option<&ConsentMode>) -> String {
    match mode {
        Some(m) => m.to_string(),
        None if crate::consent::TtyConsent::available() => "tty".to_owned(),
        None => "ui".to_owned(),
    }
}

/// The roots in force, each marked when the console added it.
fn roots_shown(c: &Console, layer: &Layer) -> Vec<Value> {
    let added: Vec<String> = layer.added.iter().filter_map(|a| a.mount()).collect();
    c.broker
        .roots()
        .iter()
        .map(|r| {
            let mount = r.mount().to_string();
            json!({
                "mount": mount,
                "path": r.host_path_of(&RelPath::root()),
                "access": r.access().as_str(),
                "servers": r.servers(),
                "fromConsole": added.contains(&mount),
            })
        })
        .collect()
}

/// A consent question as the page shows it, answered within `timeout` of being asked.
fn question_shown(q: &Shown, timeout: Duration) -> Value {
    let (r, asked) = (&q.request, q.asked);
    let missed = timed_out(q, timeout);
    let why = q
        .withdrawn
        .map(|(why, _)| if missed { TIMED_OUT } else { why });
    let paths: Vec<Value> = r
        .paths
        .iter()
        .map(|p| {
            json!({
                "path": p.to_string(),
                "hostPath": r.host_path(p),
                "folder": r.folders.contains(p),
            })
        })
        .collect();
    json!({
        "id": format!("q{}", q.id),
        "server": r.server_id,
        "message": r.message.as_deref().map(|m| sanitise(m, MAX_MESSAGE)),
        "access": r.access.as_str(),
        "purpose": r.purpose.as_str(),
        "asked": when(asked),
        "expires": when(asked + timeout),
        // Why it no longer waits: it is shown so, and takes no answer.
        "withdrawn": why,
        // Nobody answered it in time: the page keeps it in sight until the user dismisses it.
        "missed": missed,
        "paths": paths,
        "program": program_shown(r.identity.as_ref()),
        "askedAgain": r.asked_again,
    })
}

/// Slack for telling a question that waited out its time limit from one its server
/// cancelled: the limit's timer starts a moment before the question is put on the board.
const TIMER_SLACK: Duration = Duration::from_millis(250);

/// Whether `q` was withdrawn because its time limit ran out with nobody answering (not
/// because its server left or cancelled it). What the page shows only; it decides nothing.
fn timed_out(q: &Shown, timeout: Duration) -> bool {
    q.withdrawn.is_some_and(|(why, at)| {
        why == STOPPED_WAITING
            && at
                .duration_since(q.asked)
                .is_ok_and(|waited| waited + TIMER_SLACK >= timeout)
    })
}

/// The grants the console remembers.
fn remembered_shown(layer: &Layer) -> Vec<Value> {
    layer
        .remembered
        .iter()
        .map(|r| {
            let since = std::time::UNIX_EPOCH + Duration::from_secs(r.since);
            // A grant remembered before programs were told apart is held by none: shown so.
            let program = r.identity.as_ref().map(
                |i| json!({"what": i.what, "digest": i.digest.get(..12).unwrap_or(&i.digest)}),
            );
            json!({"server": r.server, "path": r.path, "access": r.access.as_str(),
                   "since": when(since), "program": program})
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    answers: Vec<PathAnswer>,
    #[serde(default)]
    remember: bool,
    #[serde(default)]
    lifetime: Option<Chosen>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathAnswer {
    path: String,
    approve: bool,
    #[serde(default)]
    narrow: Option<String>,
    #[serde(default)]
    access: Option<Access>,
}

/// `POST /api/questions/{id}`: the user's answer to a consent question.
pub(super) async fn answer(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Response {
    match answer_with(&console, &id, &bytes) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Why a question no longer takes an answer: it was withdrawn, for `why`.
fn withdrawn(why: &str) -> Refusal {
    Refusal::new(
        StatusCode::GONE,
        format!("this question was withdrawn ({why}): nothing was granted or remembered"),
    )
}

/// A question that no longer waits.
fn gone() -> Refusal {
    Refusal::new(StatusCode::NOT_FOUND, "this question no longer waits")
}

fn answer_with(c: &Console, id: &str, bytes: &[u8]) -> Result<Response, Refusal> {
    let n = number(id, 'q')?;
    let a: Answer = body(bytes)?;
    let question = c.board.question(n).ok_or_else(gone)?;
    if let Some((why, _)) = question.withdrawn {
        return Err(withdrawn(why));
    }
    let request = question.request;
    let chosen = Chosen::of(a.lifetime, a.remember)?;
    if chosen != Chosen::Session && request.purpose != Purpose::Access {
        return Err(bad(
            "a question about seeing roots is answered for the session: it is asked once a \
             session, and neither remembered nor timed",
        ));
    }
    let choices: Vec<PathChoice> = choices(&request, &a.answers)?
        .into_iter()
        .map(|c| c.lasting(chosen.lifetime()))
        .collect();
    match c.board.answer(n, ConsentAnswer::new(choices.clone())) {
        Answered::Taken => {}
        Answered::Withdrawn(why) => return Err(withdrawn(why)),
        Answered::Unknown => return Err(gone()),
    }
    tracing::info!(
        server = %request.server_id,
        approved = choices.len(),
        asked = request.paths.len(),
        "console: consent question answered"
    );
    if chosen == Chosen::Forever && !choices.is_empty() {
        // Remembered only for the very session that asked, still live: a grant to the name
        // of one that has ended would go to whichever process claims that name next.
        let session = c
            .broker
            .live_since(&request.server_id, question.asked)
            .map_err(|e| {
                Refusal::new(
                    StatusCode::GONE,
                    format!("answered for this session only, not remembered: {e}"),
                )
            })?;
        let kept: Vec<(MountPath, Access)> =
            choices.into_iter().map(|c| (c.granted, c.access)).collect();
        remember(c, &session, &kept).inspect_err(|_| {
            tracing::warn!("console: the answer was given but could not be remembered");
        })?;
    }
    Ok(ok())
}

/// What the user approved of `request`, path by path: each path one that was asked for,
/// narrowed only beneath itself, its access lowered and never raised.
fn choices(request: &ConsentRequest, answers: &[PathAnswer]) -> Result<Vec<PathChoice>, Refusal> {
    let mut choices = Vec::new();
    for p in answers {
        let asked: MountPath = p
            .path
            .parse()
            .ok()
            .filter(|m| request.paths.contains(m))
            .ok_or_else(|| bad(format!("{:?} was not asked for", p.path)))?;
        if !p.approve {
            continue;
        }
        if request.purpose == Purpose::SeeRoots && (p.narrow.is_some() || p.access.is_some()) {
            return Err(bad(
                "a question about seeing roots is answered allow or deny: nothing to narrow \
                 or lower",
            ));
        }
        let granted = match p.narrow.as_deref().map(str::trim) {
            None | Some("") => asked.clone(),
            Some(typed) => narrowed(&asked, typed).ok_or_else(|| {
                bad(format!(
                    "{typed:?} is not a place beneath {asked}: give a path relative to it"
                ))
            })?,
        };
        let access = p.access.unwrap_or(request.access);
        if access > request.access {
            return Err(bad(format!(
                "{asked} was asked for {}: the answer may lower it, never raise it",
                request.access.as_str()
            )));
        }
        choices.push(PathChoice::new(asked, granted, access));
    }
    Ok(choices)
}
