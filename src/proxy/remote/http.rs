//! The exchanges of the Streamable HTTP transport: POST a message and pass on its answer (a
//! JSON body, an event stream, or nothing), resume a dropped stream with `Last-Event-ID`,
//! start a new session when the server has forgotten ours, and DELETE it at the end.

use super::error::{RemoteError, chain};
use super::session::{Mode, Shared};
use super::sse::{End, Events, backoff, is_event_stream, message};
use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// What a POST must accept: a single JSON answer or an event stream.
const ACCEPT_POST: &str = "application/json, text/event-stream";
/// What a GET must accept.
pub const ACCEPT_STREAM: &str = "text/event-stream";

/// What kind of message a POST carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    /// Part of starting a session (`initialize`, then `notifications/initialized`): the
    /// answer may assign the session id, and a 404 is not answered with yet another session.
    Setup,
    /// Anything else: a 404 to it starts a new session and sends it again.
    Message,
}

impl Shared {
    /// A request to `url` with the extra headers and, in Streamable HTTP, the session id and
    /// protocol version once known. Returns the generation of the session it belongs to and
    /// whether a session id was sent.
    pub fn request(&self, method: Method, url: Url) -> (RequestBuilder, u64, bool) {
        let mut b = self
            .client
            .request(method, url)
            .headers(self.cfg.headers.clone());
        let (session, version, generation) = self.credentials();
        let mut with_session = false;
        if matches!(self.mode(), Mode::Streamable) {
            if let Some(id) = session {
                b = b.header("mcp-session-id", id);
                with_session = true;
            }
            if let Some(v) = version {
                b = b.header("mcp-protocol-version", v);
            }
        }
        (b, generation, with_session)
    }

    /// Sends the request `make` builds, waiting at most `limit` for the answer's headers. A
    /// connection that cannot be made is tried again after a backoff, `retries` times; a
    /// request that may have reached the server is never sent twice.
    pub async fn send(
        &self,
        make: impl Fn() -> RequestBuilder,
        limit: Duration,
        retries: u32,
    ) -> Result<Response, RemoteError> {
        let mut attempt = 0;
        loop {
            match tokio::time::timeout(limit, make().send()).await {
                Err(_) => return Err(RemoteError::Timeout(limit)),
                Ok(Ok(resp)) => return Ok(resp),
                Ok(Err(e)) if e.is_connect() || e.is_timeout() => {
                    if attempt >= retries {
                        return Err(RemoteError::unreachable(&self.cfg.url, e));
                    }
                    tracing::warn!(
                        attempt = attempt + 1,
                        retries,
                        error = %chain(&e.without_url()),
                        "cannot connect to the remote server; trying again"
                    );
                    tokio::time::sleep(backoff(attempt, None)).await;
                    attempt += 1;
                }
                Ok(Err(e)) => return Err(RemoteError::Transport(chain(&e.without_url()))),
            }
        }
    }

    /// POSTs `body`, whose requests are `ids`, and passes on what the server answers. When
    /// the server has forgotten the session (404 to a message carrying its id), a new
    /// session is started and `body` is sent again, once.
    pub async fn post(
        self: &Arc<Self>,
        body: Bytes,
        ids: &[Value],
        kind: Post,
    ) -> Result<(), RemoteError> {
        let mut renewed = false;
        loop {
            if kind == Post::Message {
                // A message waits while a new session is being started, so that it is sent
                // with the new session's id rather than none.
                drop(self.renewing.lock().await);
            }
            let url = self.post_url();
            let limit = if ids.is_empty() {
                self.cfg.connect_timeout
            } else {
                self.cfg.request_timeout
            };
            let (_, generation, with_session) = self.request(Method::POST, url.clone());
            let make = || {
                self.request(Method::POST, url.clone())
                    .0
                    .header(ACCEPT, ACCEPT_POST)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone())
            };
            let resp = self.send(make, limit, self.cfg.retries).await?;
            let status = resp.status();
            if status == StatusCode::NOT_FOUND && with_session && !renewed && kind == Post::Message
            {
                tracing::warn!(
                    "the remote server no longer knows the session (HTTP 404); starting a new session"
                );
                self.renew(generation).await?;
                renewed = true;
                continue;
            }
            if !status.is_success() {
                return Err(RemoteError::Status(status));
            }
            if kind == Post::Setup {
                self.set_session(resp.headers().get("mcp-session-id"))?;
            }
            return self.answer(resp, ids).await;
        }
    }

    /// Passes on the answer to a POST: the messages of a JSON body or an event stream.
    /// Fails when a request of `ids` got no response. In the old HTTP+SSE transport every
    /// answer comes on the session's one stream instead.
    async fn answer(self: &Arc<Self>, resp: Response, ids: &[Value]) -> Result<(), RemoteError> {
        if matches!(self.mode(), Mode::Legacy(_)) {
            // The old transport answers a POST with 202 and nothing of interest.
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
        if self.any_pending(ids) {
            return Err(RemoteError::StreamLost);
        }
        Ok(())
    }

    /// Passes on the messages of a POST's event stream until the responses to `ids` have
    /// come. A stream that drops before then is resumed from its last event id with a GET,
    /// as often as the retries allow.
    async fn read_stream(
        self: &Arc<Self>,
        mut events: Events,
        ids: &[Value],
    ) -> Result<(), RemoteError> {
        loop {
            let end = loop {
                match events.next().await {
                    Ok(event) => {
                        if let Some(m) = message(event) {
                            self.deliver(m).await;
                            if !ids.is_empty() && !self.any_pending(ids) {
                                return Ok(());
                            }
                        }
                    }
                    Err(end) => break end,
                }
            };
            if !self.any_pending(ids) {
                return Ok(());
            }
            match end {
                End::Broken(e) => return Err(e),
                End::Dropped => {
                    let Some(last) = events.last_id.clone() else {
                        return Err(RemoteError::StreamLost);
                    };
                    tracing::info!("a response stream dropped; resuming it from its last event");
                    events = self.resume(&last, events.retry).await?;
                }
            }
        }
    }

    /// Opens a GET stream that resumes after event `last`, trying as often as the retries
    /// allow; `advice` is the server's `retry` hint.
    pub async fn resume(
        self: &Arc<Self>,
        last: &str,
        advice: Option<Duration>,
    ) -> Result<Events, RemoteError> {
        let mut failure = RemoteError::StreamLost;
        for attempt in 0..=self.cfg.retries {
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
            match self.send(make, self.cfg.connect_timeout, 0).await {
                Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                    let mut events = Events::new(resp, self.cfg.max_message);
                    events.last_id = Some(last.to_owned());
                    events.retry = advice;
                    return Ok(events);
                }
                // The session is gone, or the server cannot resume: what it owed is lost.
                Ok(resp) => return Err(RemoteError::Status(resp.status())),
                Err(e) => failure = e,
            }
        }
        Err(failure)
    }

    /// Starts a new session after the one of generation `seen` expired: replays the host's
    /// `initialize` (its response is kept from the host, which has one already) and
    /// `notifications/initialized`. Does nothing when another task already did it.
    pub async fn renew(self: &Arc<Self>, seen: u64) -> Result<(), RemoteError> {
        let _only_one = self.renewing.lock().await;
        if self.generation() != seen {
            return Ok(());
        }
        let renew = async {
            let (init, initialized) = self.restart()?;
            let id = super::driver::request_ids(&init);
            self.track(&id)?;
            Box::pin(self.post(Bytes::from(init), &id, Post::Setup)).await?;
            if let Some(line) = initialized {
                Box::pin(self.post(Bytes::from(line), &[], Post::Setup)).await?;
            }
            Ok::<(), RemoteError>(())
        };
        match renew.await {
            Ok(()) => {
                self.renewed();
                tracing::info!("a new remote session started");
                Ok(())
            }
            Err(e) => Err(RemoteError::RenewFailed(Box::new(e))),
        }
    }

    /// Ends the session on the server (DELETE with its id), if it has one. A server that
    /// does not allow it (405) or cannot be reached is not waited for.
    pub async fn delete(&self) {
        if !matches!(self.mode(), Mode::Streamable) {
            return;
        }
        let (b, _, with_session) = self.request(Method::DELETE, self.cfg.url.clone());
        if !with_session {
            return;
        }
        let Some(req) = b.try_clone() else { return };
        match tokio::time::timeout(self.cfg.connect_timeout, req.send()).await {
            Ok(Ok(resp)) => tracing::info!(status = %resp.status(), "ended the remote session"),
            Ok(Err(e)) => {
                tracing::info!(error = %chain(&e.without_url()), "could not end the remote session")
            }
            Err(_) => tracing::info!("the remote server did not answer the DELETE in time"),
        }
    }
}

/// Reads a JSON body of at most `limit` bytes within `time`.
pub async fn read_body(
    mut resp: Response,
    limit: usize,
    time: Duration,
) -> Result<Vec<u8>, RemoteError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(RemoteError::TooLarge(limit));
    }
    let read = async {
        let mut out = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| RemoteError::Transport(chain(&e.without_url())))?
        {
            if out.len() + chunk.len() > limit {
                return Err(RemoteError::TooLarge(limit));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    };
    tokio::time::timeout(time, read)
        .await
        .map_err(|_| RemoteError::Timeout(time))?
}
