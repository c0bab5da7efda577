//! Reading the answer to a POST that carried requests, on the task of those requests: a
//! JSON body, or an event stream read until their responses have come and resumed with
//! `Last-Event-ID` when it drops; in the old HTTP+SSE transport, the responses' arrival on
//! the session's stream.

use super::error::{RemoteError, says_unknown_session};
use super::http::{ACCEPT_STREAM, read_body};
use super::session::{Mode, RemoteSession};
use super::sse::{End, Events, backoff, is_event_stream, message};
use reqwest::header::{ACCEPT, HeaderValue};
use reqwest::{Method, Response};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Why [`Shared::pump`] returned.
pub(super) enum Stop {
    /// Every request it waited for has its response.
    Settled,
    /// The stream ended.
    Ended(End),
    /// The caller's signal came.
    Interrupted,
}

impl RemoteSession {
    /// Passes on the answer to a POST whose requests are `ids`: the messages of a JSON body
    /// or an event stream. Fails when a request of `ids` got no response. In the old
    /// HTTP+SSE transport every answer comes on the session's one stream instead, so this
    /// waits for the responses to arrive there.
    pub(super) async fn answer(
        self: &Arc<Self>,
        resp: Response,
        ids: &[Value],
    ) -> Result<(), RemoteError> {
        if matches!(self.mode(), Mode::Legacy(_)) {
            drop(resp);
            self.pending.settled(ids).await;
            return Ok(());
        }
        if is_event_stream(&resp) {
            return self
                .read_stream(Events::new(resp, self.cfg.max_message), ids)
                .await;
        }
        let body = read_body(resp, self.cfg.max_message, self.cfg.request_timeout).await?;
        if !body.iter().all(u8::is_ascii_whitespace) {
            self.deliver(body).await;
        }
        if self.pending.any(ids) {
            return Err(RemoteError::StreamLost);
        }
        Ok(())
    }

    /// Passes on the messages of a POST's event stream until the responses to `ids` have
    /// come. A stream that drops before then is resumed from its last event id with a GET.
    /// A stream that brought no message and was open for less than the connect timeout
    /// counts as idle; after `--retries` idle ones in a row the requests are given up, so a
    /// server whose streams close as soon as they open cannot keep the proxy reconnecting.
    async fn read_stream(
        self: &Arc<Self>,
        mut events: Events,
        ids: &[Value],
    ) -> Result<(), RemoteError> {
        let mut idle = 0u32;
        loop {
            let opened = Instant::now();
            let (stop, delivered) = self.pump(&mut events, ids, std::future::pending()).await;
            let end = match stop {
                Stop::Settled | Stop::Interrupted => return Ok(()),
                Stop::Ended(end) => end,
            };
            if !self.pending.any(ids) {
                return Ok(());
            }
            if delivered > 0 || opened.elapsed() >= self.cfg.connect_timeout {
                idle = 0;
            } else {
                idle += 1;
            }
            match end {
                End::Broken(e) => return Err(e),
                End::Dropped => {
                    if self.is_modern() {
                        // Revision 2026-07-28 has no resumption: what the stream owed is lost.
                        return Err(RemoteError::StreamLost);
                    }
                    let Some(last) = events.last_id.clone() else {
                        return Err(RemoteError::StreamLost);
                    };
                    if idle > self.cfg.retries {
                        tracing::warn!(
                            idle,
                            "a response stream kept closing without bringing anything; gave up on it"
                        );
                        return Err(RemoteError::StreamLost);
                    }
                    tracing::info!("a response stream dropped; resuming it from its last event");
                    events = self.resume(&last, events.retry, idle).await?;
                }
            }
        }
    }

    /// Opens a GET stream that resumes after event `last`, after the delay for reconnection
    /// `attempt` (`advice` is the server's `retry` hint). A connection that cannot be made
    /// is tried again as [`Shared::send`] does.
    async fn resume(
        self: &Arc<Self>,
        last: &str,
        advice: Option<Duration>,
        attempt: u32,
    ) -> Result<Events, RemoteError> {
        tokio::time::sleep(backoff(attempt, advice)).await;
        let Ok(cursor) = HeaderValue::from_str(last) else {
            return Err(RemoteError::StreamLost);
        };
        let make = || {
            self.request(Method::GET, self.cfg.url.clone())
                .0
                .header(ACCEPT, ACCEPT_STREAM)
                .header("last-event-id", cursor.clone())
        };
        let resp = self
            .send(make, self.cfg.connect_timeout, self.cfg.retries)
            .await?;
        let status = resp.status();
        if !(status.is_success() && is_event_stream(&resp)) {
            // The session is gone (a restart, an expiry), or the server cannot resume: what
            // it owed is lost.
            let server = self.error_body(resp).await;
            let forgot = status == reqwest::StatusCode::NOT_FOUND
                || (status == reqwest::StatusCode::BAD_REQUEST
                    && says_unknown_session(server.as_deref()));
            return Err(if forgot {
                RemoteError::Expired { status, server }
            } else {
                RemoteError::Status { status, server }
            });
        }
        let mut events = Events::new(resp, self.cfg.max_message);
        events.last_id = Some(last.to_owned());
        events.retry = advice;
        Ok(events)
    }

    /// Passes on the messages of `events` until none of `until` waits any more (never, when
    /// it is empty), the stream ends, or `stop` completes. Returns why, and how many
    /// messages it passed on.
    pub(super) async fn pump(
        &self,
        events: &mut Events,
        until: &[Value],
        stop: impl Future<Output = ()>,
    ) -> (Stop, usize) {
        tokio::pin!(stop);
        let mut delivered = 0;
        loop {
            if !until.is_empty() && !self.pending.any(until) {
                return (Stop::Settled, delivered);
            }
            let next = tokio::select! {
                biased;
                () = &mut stop => return (Stop::Interrupted, delivered),
                next = events.next() => next,
            };
            match next {
                Ok(event) => {
                    if let Some(m) = message(event) {
                        self.deliver(m).await;
                        delivered += 1;
                    }
                }
                Err(end) => return (Stop::Ended(end), delivered),
            }
        }
    }
}
