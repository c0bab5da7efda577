//! The session's driver: takes the lines meant for the server in order and sends each the
//! way its kind needs, keeps the GET stream for the server's own messages open, and ends the
//! session (DELETE) when the host is gone.
//!
//! Order: `initialize` is answered before anything else is sent (its answer carries the
//! session id); a notification or response is sent only after everything before it was
//! accepted; a request is started in order but runs on its own, since its answer may wait
//! for the user while other messages must still flow (the host's answers to the server's
//! questions, say).

use super::error::RemoteError;
use super::http::{ACCEPT_STREAM, Post};
use super::session::{Mode, Shared};
use super::sse::{End, Events, backoff, is_event_stream, message};
use crate::lines::LineReceiver;
use crate::proxy::peek::{Kind, peek, peek_value};
use bytes::Bytes;
use reqwest::header::{ACCEPT, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// Runs the session until the host is gone (`end`, or the end of `outgoing`) or the session
/// fails. Returns the exit code: 0, or 1 after a failure.
pub async fn drive(
    shared: Arc<Shared>,
    mut outgoing: LineReceiver,
    mut end: oneshot::Receiver<()>,
) -> u8 {
    let mut requests = JoinSet::new();
    let mut background = JoinSet::new();
    // Set when the host leaves: what it sent may still finish until then.
    let mut deadline = None;
    let failed = loop {
        tokio::select! {
            biased;
            () = shared.failed() => break true,
            _ = &mut end => break false,
            line = outgoing.recv() => {
                let Some(line) = line else { break false };
                // Sending may wait for the server (an initialize, a notification): a
                // failure meanwhile is not kept waiting, and the host leaving starts the
                // grace period.
                let work = handle(&shared, line, &mut requests, &mut background);
                tokio::pin!(work);
                let interrupted = tokio::select! {
                    biased;
                    () = shared.failed() => Some(true),
                    _ = &mut end => Some(false),
                    () = &mut work => None,
                };
                match interrupted {
                    None => {}
                    Some(true) => break true,
                    Some(false) => {
                        let by = tokio::time::Instant::now() + shared.cfg.grace;
                        deadline = Some(by);
                        let _ = tokio::time::timeout_at(by, work).await;
                        break false;
                    }
                }
            }
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            Some(_) = background.join_next(), if !background.is_empty() => {}
        }
    };
    if !failed {
        // The host is gone: what it sent last still goes out, and requests in flight may
        // finish, within the grace period.
        let by = deadline.unwrap_or_else(|| tokio::time::Instant::now() + shared.cfg.grace);
        let ending = async {
            while let Some(line) = outgoing.try_recv() {
                handle(&shared, line, &mut requests, &mut background).await;
            }
            while requests.join_next().await.is_some() {}
        };
        let _ = tokio::time::timeout_at(by, ending).await;
    }
    // A failure while the host's last messages went out still counts.
    let failed = failed || shared.has_failed();
    requests.abort_all();
    background.abort_all();
    while requests.join_next().await.is_some() {}
    while background.join_next().await.is_some() {}
    if failed {
        // Requests in flight and still queued get an error now rather than never.
        outgoing.close();
        while let Some(line) = outgoing.try_recv() {
            for id in request_ids(&line) {
                shared.pass(shared.failure_response(&id)).await;
            }
        }
        shared.fail_all().await;
        return 1;
    }
    shared.delete().await;
    0
}

/// Sends one line the way its kind needs.
async fn handle(
    shared: &Arc<Shared>,
    line: Vec<u8>,
    requests: &mut JoinSet<()>,
    background: &mut JoinSet<()>,
) {
    match peek(&line) {
        Kind::Request { method, id } if method == "initialize" => {
            initialize(shared, line, id, background).await;
        }
        Kind::Notification { method } if method == "notifications/initialized" => {
            let first = shared.note_initialized(&line);
            inline(shared, line).await;
            if first && matches!(shared.mode(), Mode::Streamable) {
                background.spawn(listen(shared.clone()));
            }
        }
        _ => {
            let ids = request_ids(&line);
            if ids.is_empty() {
                inline(shared, line).await;
                return;
            }
            if let Err(e) = shared.track(&ids) {
                for id in &ids {
                    shared.pass(e.response_for(id)).await;
                }
                return;
            }
            let s = shared.clone();
            requests.spawn(async move {
                if let Err(e) = s.post(Bytes::from(line), &ids, Post::Message).await {
                    s.fail(&ids, &e).await;
                    if e.ends_session() {
                        s.fatal(e);
                    }
                }
            });
        }
    }
}

/// Sends a notification or response and waits until the server has accepted it.
async fn inline(shared: &Arc<Shared>, line: Vec<u8>) {
    if let Err(e) = shared.post(Bytes::from(line), &[], Post::Message).await {
        tracing::warn!(error = %e, "a message to the remote server was not delivered");
        if e.ends_session() {
            shared.fatal(e);
        }
    }
}

/// Sends the host's `initialize` and waits for its answer. A server that refuses the POST
/// with 400, 404 or 405 is tried with the 2024-11-05 HTTP+SSE transport. When no session
/// can be had, the host gets an error for its `initialize` and the session ends.
async fn initialize(shared: &Arc<Shared>, line: Vec<u8>, id: Value, background: &mut JoinSet<()>) {
    let first = shared.begin_initialize(&line, &id);
    let ids = [id];
    if let Err(e) = shared.track(&ids) {
        shared.pass(e.response_for(&ids[0])).await;
        return;
    }
    let body = Bytes::from(line);
    let limit = shared.cfg.request_timeout;
    let attempt = tokio::time::timeout(limit, shared.post(body.clone(), &ids, Post::Setup));
    let result = match attempt.await.unwrap_or(Err(RemoteError::Timeout(limit))) {
        Err(RemoteError::Status(s))
            if first
                && matches!(shared.mode(), Mode::Streamable)
                && matches!(s.as_u16(), 400 | 404 | 405) =>
        {
            tracing::info!(
                status = %s,
                "the remote server refused a Streamable HTTP initialize; trying the HTTP+SSE transport of 2024-11-05"
            );
            match super::legacy::open(shared).await {
                Ok((endpoint, reader)) => {
                    shared.set_legacy(endpoint);
                    background.spawn(reader);
                    shared.post(body, &ids, Post::Setup).await
                }
                Err(e) => Err(e),
            }
        }
        other => other,
    };
    if let Err(e) = result {
        shared.fail(&ids, &e).await;
        shared.fatal(e);
    }
}

/// Keeps the GET stream open for the server's own requests and notifications: resumes it
/// from its last event id when it drops, starts a new session when the server forgot ours,
/// and stops when the server offers none (405). Connection failures are retried with
/// backoff; when the retries are used up, the session ends.
async fn listen(shared: Arc<Shared>) {
    let mut cursor: Option<(u64, HeaderValue)> = None;
    let mut advice = None;
    let mut failures = 0u32;
    loop {
        // Subscribed before the session is read, so a new session started meanwhile is seen.
        let mut sessions = shared.new_sessions();
        let generation = shared.generation();
        let last = cursor
            .take()
            .filter(|(g, _)| *g == generation)
            .map(|(_, id)| id);
        let (_, _, with_session) = shared.request(Method::GET, shared.cfg.url.clone());
        let make = || {
            let b = shared
                .request(Method::GET, shared.cfg.url.clone())
                .0
                .header(ACCEPT, ACCEPT_STREAM);
            match &last {
                Some(id) => b.header("last-event-id", id.clone()),
                None => b,
            }
        };
        match shared.send(make, shared.cfg.connect_timeout, 0).await {
            Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::info!("the remote server offers no stream of its own (HTTP 405)");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::NOT_FOUND && with_session => {
                if let Err(e) = shared.renew(generation).await {
                    shared.fatal(e);
                    return;
                }
                continue;
            }
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                failures = 0;
                let mut events = Events::new(resp, shared.cfg.max_message);
                events.last_id = last.and_then(|v| v.to_str().ok().map(str::to_owned));
                let end = loop {
                    tokio::select! {
                        next = events.next() => match next {
                            Ok(event) => {
                                if let Some(m) = message(event) {
                                    shared.deliver(m).await;
                                }
                            }
                            Err(end) => break end,
                        },
                        // The stream belongs to a session the server forgot.
                        _ = sessions.changed() => break End::Dropped,
                    }
                };
                if let End::Broken(e) = end {
                    // Resuming would replay the same event: start afresh without it.
                    tracing::warn!(error = %e, "dropped the remote server's stream");
                    events.last_id = None;
                }
                advice = events.retry;
                cursor = events
                    .last_id
                    .and_then(|id| HeaderValue::from_str(&id).ok())
                    .map(|id| (generation, id));
            }
            Ok(resp) => {
                failures += 1;
                tracing::warn!(status = %resp.status(), "the remote server refused its GET stream");
                if failures > shared.cfg.retries {
                    tracing::warn!("gave up on the remote server's GET stream");
                    return;
                }
            }
            Err(e) => {
                failures += 1;
                if failures > shared.cfg.retries {
                    if e.ends_session() {
                        shared.fatal(e);
                    } else {
                        tracing::warn!(error = %e, "gave up on the remote server's GET stream");
                    }
                    return;
                }
                tracing::info!(error = %e, "the remote server's GET stream failed; trying again");
            }
        }
        tokio::time::sleep(backoff(failures, advice)).await;
    }
}

/// The ids of the requests in a line (one request, or the requests of a batch).
pub fn request_ids(line: &[u8]) -> Vec<Value> {
    match peek(line) {
        Kind::Request { id, .. } => vec![id],
        Kind::Batch => match serde_json::from_slice::<Value>(line) {
            Ok(Value::Array(items)) => items
                .iter()
                .filter_map(|item| match peek_value(item) {
                    Kind::Request { id, .. } => Some(id),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}
