//! The exchanges of the Streamable HTTP transport up to the answer's headers: sending with
//! bounded reconnection, POST (with a new session when the server has forgotten ours), a
//! message judged on its status alone, and the DELETE at the end.

use super::error::{MAX_SAID, RemoteError, chain, says_unknown_session, server_said};
use super::session::{Mode, RemoteSession};
use super::sse::backoff;
use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use url::Url;

/// What a POST must accept: a single JSON answer or an event stream.
pub(super) const ACCEPT_POST: &str = "application/json, text/event-stream";
/// What a GET must accept.
pub(super) const ACCEPT_STREAM: &str = "text/event-stream";

/// What kind of message a POST carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Post {
    /// The host's `initialize`, first or replayed: its answer's headers carry the session
    /// id, and a 404 to it is not answered with yet another session.
    Init,
    /// The replayed `notifications/initialized`: no session id is taken from its answer, and
    /// a 404 to it starts no session.
    Replay,
    /// Anything else: a 404 to it starts a new session and sends it again.
    Message,
}

impl RemoteSession {
    /// A request to `url` with the extra headers and, in Streamable HTTP, the session id and
    /// protocol version once known. Returns the generation of the session it belongs to and
    /// whether a session id was sent.
    pub(super) fn request(&self, method: Method, url: Url) -> (RequestBuilder, u64, bool) {
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
    /// connection that cannot be made is tried again after a backoff, up to `retries` times
    /// and while the connect timeout, counted from the first attempt, has not passed: a
    /// server that drops packets costs one connect timeout, not one per retry. A request
    /// that may have reached the server is never sent twice, and a TLS failure (a
    /// certificate no root vouches for) is certain, so it is not tried again.
    pub(super) async fn send(
        &self,
        make: impl Fn() -> RequestBuilder,
        limit: Duration,
        retries: u32,
    ) -> Result<Response, RemoteError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let e = match tokio::time::timeout(limit, make().send()).await {
                Err(_) => return Err(RemoteError::Timeout(limit)),
                Ok(Ok(resp)) => {
                    self.note_reached(&resp);
                    return Ok(resp);
                }
                Ok(Err(e)) => e.without_url(),
            };
            if super::fds::out_of_descriptors(&e) {
                // Back-pressure, not an unreachable server: this request gets `busy`, and the
                // session goes on as requests finish and give their sockets back.
                tracing::warn!("out of file descriptors; a request is refused as busy");
                return Err(RemoteError::OutOfDescriptors);
            }
            if !(e.is_connect() || e.is_timeout()) {
                return Err(RemoteError::Transport(chain(&e)));
            }
            self.note_unreached(chain(&e));
            let delay = backoff(attempt, None);
            let spent = started.elapsed() + delay;
            if is_tls_failure(&e) || attempt >= retries || spent >= self.cfg.connect_timeout {
                return Err(RemoteError::unreachable(&self.cfg.url, e));
            }
            tracing::warn!(
                attempt = attempt + 1,
                retries,
                error = %chain(&e),
                "cannot connect to the remote server; trying again"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// POSTs `body` and returns the server's answer once its status says it accepted it (its
    /// body unread). `waits` says whether the body carries requests: then the headers may
    /// take the request timeout, else the connect timeout. When the server has forgotten the
    /// session (404 to a message carrying its id), a new session is started and `body` is
    /// sent again, once.
    pub(super) async fn post(
        self: &Arc<Self>,
        body: &Bytes,
        waits: bool,
        kind: Post,
    ) -> Result<Response, RemoteError> {
        let limit = if waits {
            self.cfg.request_timeout
        } else {
            self.cfg.connect_timeout
        };
        let mut renewed = false;
        loop {
            if kind == Post::Message {
                // A message waits while a new session is being started (at most the request
                // timeout), so that it is sent with the new session's id rather than none.
                drop(self.renewing.lock().await);
            }
            let url = self.post_url();
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
            if status.is_success() {
                if kind == Post::Init {
                    self.set_session(resp.headers().get("mcp-session-id"))?;
                }
                return Ok(resp);
            }
            let server = self.error_body(resp).await;
            // A server that forgot the session says 404; some say 400 and that the session
            // is unknown. Either starts a new session, once.
            let forgot = status == StatusCode::NOT_FOUND
                || (status == StatusCode::BAD_REQUEST && says_unknown_session(server.as_deref()));
            if forgot && with_session && kind == Post::Message {
                if !renewed {
                    tracing::warn!(
                        %status,
                        "the remote server no longer knows the session; starting a new session"
                    );
                    // Boxed: renewing posts an initialize of its own.
                    Box::pin(self.renew(generation)).await?;
                    renewed = true;
                    continue;
                }
                if status == StatusCode::BAD_REQUEST {
                    // A 400 that keeps calling a brand-new session unknown would fail every
                    // later message the same way: the session cannot go on (the callers end
                    // it, as for every error that says so).
                    return Err(RemoteError::SessionRefused { status, server });
                }
                return Err(RemoteError::Expired { status, server });
            }
            return Err(RemoteError::Status { status, server });
        }
    }

    /// What the server said in the body of an HTTP error, read within the connect timeout
    /// and [`MAX_SAID`] bytes (a larger or slower body is not read).
    pub(super) async fn error_body(&self, resp: Response) -> Option<Box<Value>> {
        let limit = MAX_SAID * 4;
        let body = read_body(resp, limit, self.cfg.connect_timeout)
            .await
            .ok()?;
        server_said(&body)
    }

    /// POSTs a notification or a response and judges the answer on its status alone. Its
    /// body, which the transport says is empty, is never read: a server that streams one
    /// forever must not hold up the messages behind it.
    pub(super) async fn notify(
        self: &Arc<Self>,
        body: Bytes,
        kind: Post,
    ) -> Result<(), RemoteError> {
        let resp = self.post(&body, false, kind).await?;
        if resp.content_length() != Some(0) {
            tracing::debug!(status = %resp.status(), "left unread the body of the answer to a notification or response");
        }
        Ok(())
    }

    /// Ends the session on the server (DELETE with its id), if it has one. A server that
    /// does not allow it (405) or cannot be reached is not waited for.
    pub(super) async fn delete(&self) {
        if !matches!(self.mode(), Mode::Streamable) || self.is_modern() {
            return;
        }
        let (b, _, with_session) = self.request(Method::DELETE, self.cfg.url.clone());
        if !with_session {
            return;
        }
        match tokio::time::timeout(self.cfg.connect_timeout, b.send()).await {
            Ok(Ok(resp)) => tracing::info!(status = %resp.status(), "ended the remote session"),
            Ok(Err(e)) => {
                tracing::info!(error = %chain(&e.without_url()), "could not end the remote session")
            }
            Err(_) => tracing::info!("the remote server did not answer the DELETE in time"),
        }
    }
}

/// Whether a connection failed in TLS (a certificate refused, a handshake that failed): the
/// same attempt would fail the same way.
fn is_tls_failure(e: &reqwest::Error) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if err.is::<rustls::Error>() {
            return true;
        }
        // An I/O error hides the error it wraps from `source` (and may wrap another I/O
        // error): look inside it instead.
        next = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
}

/// Reads a JSON body of at most `limit` bytes within `time`. A `Content-Length` over the
/// limit is refused before anything is read.
pub(super) async fn read_body(
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
