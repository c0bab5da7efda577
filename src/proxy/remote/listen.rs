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
    let mut l = Listener {
        shared,
        cursor: None,
        advice: None,
        failures: 0,
        renewed_for: None,
    };
    loop {
        let progressed = match l.attempt().await {
            Attempt::Stop => return,
            Attempt::Renewed => continue,
            Attempt::Done(progressed) => progressed,
        };
        if progressed {
            l.failures = 0;
        } else {
            l.failures += 1;
            if l.failures > l.shared.cfg.retries {
                tracing::warn!("gave up on the remote server's GET stream");
                return;
            }
        }
        tokio::time::sleep(backoff(l.failures, l.advice)).await;
    }
}

/// The GET stream's state from one attempt to the next.
struct Listener {
    shared: Arc<RemoteSession>,
    /// The last event id seen, with the generation of the session it was seen in.
    cursor: Option<(u64, HeaderValue)>,
    /// The server's `retry` advice.
    advice: Option<std::time::Duration>,
    /// Attempts in a row that brought nothing.
    failures: u32,
    /// The generation of the session this task started after a 404 to its GET.
    renewed_for: Option<u64>,
}

/// How one attempt at the GET stream ended.
enum Attempt {
    /// The stream is given up (no stream offered, or the session failed).
    Stop,
    /// A new session was started: try again at once.
    Renewed,
    /// The stream was tried; whether it brought anything.
    Done(bool),
}

impl Listener {
    /// Opens the GET stream once (resuming from the cursor when it is of this session), and
    /// reads it until it ends.
    async fn attempt(&mut self) -> Attempt {
        let shared = self.shared.clone();
        // Subscribed before the session is read, so a new session started meanwhile is seen.
        let mut sessions = shared.new_sessions();
        let generation = shared.generation();
        let last = self
            .cursor
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
        let resp = match shared.send(make, shared.cfg.connect_timeout, 0).await {
            Ok(resp) => resp,
            Err(e) => {
                if self.failures >= shared.cfg.retries && e.ends_session() {
                    shared.fatal(e);
                    return Attempt::Stop;
                }
                tracing::info!(error = %e, "the remote server's GET stream failed");
                return Attempt::Done(false);
            }
        };
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            tracing::info!("the remote server offers no stream of its own (HTTP 405)");
            return Attempt::Stop;
        }
        if resp.status() == StatusCode::NOT_FOUND && with_session {
            return self.renew(generation).await;
        }
        if !(resp.status().is_success() && is_event_stream(&resp)) {
            tracing::warn!(status = %resp.status(), "the remote server refused its GET stream");
            return Attempt::Done(false);
        }
        self.renewed_for = None;
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
        self.advice = events.retry;
        self.cursor = events
            .last_id
            .and_then(|id| HeaderValue::from_str(&id).ok())
            .map(|id| (generation, id));
        Attempt::Done(delivered > 0 || opened.elapsed() >= shared.cfg.connect_timeout)
    }

    /// The server forgot the session of `generation` (a 404 to the GET): starts a new one,
    /// unless this task started the current one already after a 404.
    async fn renew(&mut self, generation: u64) -> Attempt {
        if self.renewed_for == Some(generation) {
            tracing::info!(
                "the remote server answered the GET stream with 404 again in a new session; taken as no stream of its own (405)"
            );
            return Attempt::Stop;
        }
        // Not at once: a server that always says 404 would have the proxy start
        // sessions as fast as it answers.
        tokio::time::sleep(backoff(self.failures, self.advice)).await;
        if let Err(e) = self.shared.renew(generation).await {
            self.shared.fatal(e);
            return Attempt::Stop;
        }
        self.renewed_for = Some(self.shared.generation());
        Attempt::Renewed
    }
}
