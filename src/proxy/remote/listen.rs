//! The GET stream, on which the server sends requests and notifications of its own.

use super::answer::Stop;
use super::http::ACCEPT_STREAM;
use super::session::RemoteSession;
use super::sse::{End, Events, backoff, is_event_stream};
use reqwest::header::{ACCEPT, HeaderValue};
use reqwest::{Method, StatusCode};
use std::sync::Arc;
use tokio::time::Instant;

/// Keeps the GET stream open: resumes it from its last event id when it drops, starts a new
/// session when the server forgot ours, and stops when the server offers none (405, or a
/// 404 again right after a new session). Failed attempts and streams that close without
/// bringing anything within the connect timeout count alike; after `--retries` of them in
/// a row the stream is given up (or the session ends, when the server cannot be reached),
/// so a server cannot keep the proxy reconnecting.
pub(super) async fn listen(shared: Arc<RemoteSession>) {
    let mut cursor: Option<(u64, HeaderValue)> = None;
    let mut advice = None;
    let mut failures = 0u32;
    // The generation of the session this task started after a 404 to its GET.
    let mut renewed_for: Option<u64> = None;
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
        let progressed = match shared.send(make, shared.cfg.connect_timeout, 0).await {
            Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::info!("the remote server offers no stream of its own (HTTP 405)");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::NOT_FOUND && with_session => {
                if renewed_for == Some(generation) {
                    tracing::info!(
                        "the remote server answered the GET stream with 404 again in a new session; taken as no stream of its own (405)"
                    );
                    return;
                }
                // Not at once: a server that always says 404 would have the proxy start
                // sessions as fast as it answers.
                tokio::time::sleep(backoff(failures, advice)).await;
                if let Err(e) = shared.renew(generation).await {
                    shared.fatal(e);
                    return;
                }
                renewed_for = Some(shared.generation());
                continue;
            }
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                renewed_for = None;
                let opened = Instant::now();
                let mut events = Events::new(resp, shared.cfg.max_message);
                events.last_id = last.and_then(|v| v.to_str().ok().map(str::to_owned));
                // The stream belongs to a session the server forgot once a new one starts.
                let stop = async {
                    let _ = sessions.changed().await;
                };
                let (stop, delivered) = shared.pump(&mut events, &[], stop).await;
                if let Stop::Ended(End::Broken(e)) = stop {
                    // Resuming would replay the same event: start afresh without it.
                    tracing::warn!(error = %e, "dropped the remote server's stream");
                    events.last_id = None;
                }
                advice = events.retry;
                cursor = events
                    .last_id
                    .and_then(|id| HeaderValue::from_str(&id).ok())
                    .map(|id| (generation, id));
                delivered > 0 || opened.elapsed() >= shared.cfg.connect_timeout
            }
            Ok(resp) => {
                tracing::warn!(status = %resp.status(), "the remote server refused its GET stream");
                false
            }
            Err(e) => {
                if failures >= shared.cfg.retries && e.ends_session() {
                    shared.fatal(e);
                    return;
                }
                tracing::info!(error = %e, "the remote server's GET stream failed");
                false
            }
        };
        if progressed {
            failures = 0;
        } else {
            failures += 1;
            if failures > shared.cfg.retries {
                tracing::warn!("gave up on the remote server's GET stream");
                return;
            }
        }
        tokio::time::sleep(backoff(failures, advice)).await;
    }
}
