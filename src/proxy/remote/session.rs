//! The state one remote session shares between its tasks: the session id and protocol
//! version to send, the host's `initialize` (to start a new session with), the requests
//! waiting for an answer, whether the server was ever reached, and the way messages reach
//! the proxy (what is passed on, and how, is `deliver.rs`).

use super::config::RemoteConfig;
use super::error::RemoteError;
use super::params::Params;
use super::pending::Pending;
use crate::lines::LineSender;
use crate::locks::lock;
use crate::proxy::link::Wire;
use reqwest::header::HeaderValue;
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use url::Url;

/// Which transport the server speaks.
#[derive(Debug, Clone)]
pub(super) enum Mode {
    /// Streamable HTTP: every message is POSTed to the MCP endpoint.
    Streamable,
    /// The 2024-11-05 HTTP+SSE transport: messages are POSTed to this endpoint, and
    /// everything the server sends comes on one event stream.
    Legacy(Url),
}

#[derive(Debug)]
struct SessionState {
    /// The transport the last line went by, as the proxy's judge marked it.
    wire: Wire,
    session: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// Counts sessions: a task that saw a session expire renews it only if no other task
    /// already did.
    generation: u64,
    mode: Mode,
    init: Option<(Vec<u8>, Value)>,
    initialized: Option<Vec<u8>>,
    /// Set while an `initialize` is under way: its response carries the protocol version.
    awaiting_init: bool,
    /// The id of a replayed `initialize`, whose response the host must not see twice.
    swallow: Option<Value>,
}

/// Whether the server ever answered, and why it could not be reached if it never did.
#[derive(Debug, Default)]
struct Reach {
    reached: bool,
    last_failure: Option<String>,
}

/// Where the failure that ended a session is kept for the proxy to read.
type Failure = Arc<Mutex<Option<RemoteError>>>;

/// Where the server's public key is kept once an answer came over TLS.
type ServerKey = Arc<watch::Sender<Option<String>>>;

/// What every task of one remote session shares.
pub(super) struct RemoteSession {
    /// The HTTP client (connection pool, TLS, redirect policy).
    pub(crate) client: reqwest::Client,
    /// The endpoint and limits.
    pub(crate) cfg: RemoteConfig,
    state: Mutex<SessionState>,
    /// Held while a new session is started, so only one task starts it.
    pub(super) renewing: tokio::sync::Mutex<()>,
    /// Where the server's messages go: the proxy's reader of the server.
    pub(super) incoming: LineSender,
    /// The host's requests waiting for an answer.
    pub(crate) pending: Pending,
    /// The tools' `x-mcp-header` declarations (a modern session's `Mcp-Param-*` headers).
    pub(super) params: Params,
    failure: Failure,
    /// The public key of the server's certificate, from the first answer over TLS.
    key: ServerKey,
    failed: Notify,
    /// Tells the GET stream that a new session started, so it leaves the old one.
    sessions: watch::Sender<u64>,
    reach: Mutex<Reach>,
    /// Tasks reading the answer to a replayed `initialize`, ended with the session.
    readers: Mutex<Vec<AbortHandle>>,
}

impl RemoteSession {
    /// Shared state for a session whose messages go to `incoming`; the first fatal failure
    /// is kept in `failure`; at most `max_pending` requests may wait.
    pub(super) fn new(
        client: reqwest::Client,
        cfg: RemoteConfig,
        incoming: LineSender,
        (failure, key): (Failure, ServerKey),
        max_pending: usize,
    ) -> Arc<RemoteSession> {
        Arc::new(RemoteSession {
            client,
            cfg,
            state: Mutex::new(SessionState {
                wire: Wire::Legacy,
                session: None,
                version: None,
                generation: 0,
                mode: Mode::Streamable,
                init: None,
                initialized: None,
                awaiting_init: false,
                swallow: None,
            }),
            renewing: tokio::sync::Mutex::new(()),
            incoming,
            pending: Pending::with_cap(max_pending),
            params: Params::default(),
            failure,
            key,
            failed: Notify::new(),
            sessions: watch::Sender::new(0),
            reach: Mutex::new(Reach::default()),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// The session generation (see [`Shared::renewed`]).
    pub(super) fn generation(&self) -> u64 {
        lock(&self.state).generation
    }

    /// Whether the session speaks the 2026-07-28 transport.
    pub(super) fn is_modern(&self) -> bool {
        lock(&self.state).wire == Wire::Modern
    }

    /// Follows the proxy's judge: a line marked with its transport (see [`Wire`]) moves the
    /// session to it; a line the proxy made itself goes as the last one did. Returns the
    /// transport the line goes by. Nothing here decides the era again.
    pub(super) fn follow(&self, judged: Option<Wire>) -> Wire {
        let mut s = lock(&self.state);
        if let Some(wire) = judged
            && wire != s.wire
        {
            if wire == Wire::Modern {
                tracing::info!(
                    "the remote session speaks the 2026-07-28 Streamable HTTP transport: no session, a POST per message"
                );
            }
            s.wire = wire;
        }
        s.wire
    }

    /// The transport in use.
    pub(super) fn mode(&self) -> Mode {
        lock(&self.state).mode.clone()
    }

    /// Switches to the old HTTP+SSE transport, posting to `endpoint`.
    pub(super) fn set_legacy(&self, endpoint: Url) {
        lock(&self.state).mode = Mode::Legacy(endpoint);
    }

    /// Where messages are POSTed.
    pub(super) fn post_url(&self) -> Url {
        match &lock(&self.state).mode {
            Mode::Streamable => self.cfg.url.clone(),
            Mode::Legacy(u) => u.clone(),
        }
    }

    /// The session id and protocol version to send, if known, and the generation they
    /// belong to.
    pub(super) fn credentials(&self) -> (Option<HeaderValue>, Option<HeaderValue>, u64) {
        let s = lock(&self.state);
        (s.session.clone(), s.version.clone(), s.generation)
    }

    /// Keeps the session id the server assigned. Only visible ASCII is allowed (the
    /// transport's rule), so it can be sent back as it came.
    pub(super) fn set_session(&self, value: Option<&HeaderValue>) -> Result<(), RemoteError> {
        let Some(value) = value else { return Ok(()) };
        if value.is_empty() || !value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(RemoteError::BadSessionId);
        }
        lock(&self.state).session = Some(value.clone());
        Ok(())
    }

    /// Notes the host's `initialize` (line and id), to replay it for a new session.
    /// Returns whether it is the first.
    pub(super) fn begin_initialize(&self, line: &[u8], id: &Value) -> bool {
        let mut s = lock(&self.state);
        let first = s.init.is_none();
        if first {
            s.init = Some((line.to_vec(), id.clone()));
        }
        s.awaiting_init = true;
        first
    }

    /// Notes the host's `notifications/initialized`, to replay it for a new session.
    /// Returns whether it is the first.
    pub(super) fn note_initialized(&self, line: &[u8]) -> bool {
        let mut s = lock(&self.state);
        let first = s.initialized.is_none();
        if first {
            s.initialized = Some(line.to_vec());
        }
        first
    }

    /// Forgets the expired session and prepares the replay of the host's initialization:
    /// returns the `initialize` line (and the `initialized` line, if the host sent it).
    pub(super) fn restart(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), RemoteError> {
        let mut s = lock(&self.state);
        let (line, id) = s.init.clone().ok_or(RemoteError::CannotRenew)?;
        s.session = None;
        s.version = None;
        s.awaiting_init = true;
        s.swallow = Some(id);
        Ok((line, s.initialized.clone()))
    }

    /// Lets the host see a response to its `initialize` again: the replayed one's answer
    /// was given up on, so none is to be kept back.
    pub(super) fn unswallow(&self) {
        lock(&self.state).swallow = None;
    }

    /// Stops waiting for the response to a replayed `initialize`: it was the proxy's own
    /// request, which the host must not be answered for.
    pub(super) fn drop_replayed(&self) {
        let replayed = lock(&self.state).swallow.take();
        if let Some(id) = replayed {
            self.pending.take(&[id]);
        }
    }

    /// Marks the new session as started. The replayed `initialize`'s response may still be
    /// on its way; it is kept from the host when it comes.
    pub(super) fn renewed(&self) {
        let generation = {
            let mut s = lock(&self.state);
            s.generation += 1;
            s.generation
        };
        self.sessions.send_replace(generation);
    }

    /// Changes when a new session starts.
    pub(super) fn new_sessions(&self) -> watch::Receiver<u64> {
        self.sessions.subscribe()
    }

    /// Answers each of `ids` that still waits with the error `e`.
    pub(super) async fn fail(&self, ids: &[Value], e: &RemoteError) {
        for id in self.pending.take(ids) {
            tracing::warn!(error = %e, "a request to the remote server failed");
            let _ = self.incoming.send(e.response_for(&id)).await;
        }
    }

    /// Answers every waiting request with the failure that ended the session.
    pub(super) async fn fail_all(&self) {
        for id in self.pending.drain() {
            let _ = self.incoming.send(self.failure_response(&id)).await;
        }
    }

    /// The error response for request `id` after the session failed.
    pub(super) fn failure_response(&self, id: &Value) -> Vec<u8> {
        match lock(&self.failure).as_ref() {
            Some(e) => e.response_for(id),
            None => RemoteError::StreamLost.response_for(id),
        }
    }

    /// Settles the request `id` answers; notes the protocol version from the response to
    /// `initialize`. Returns whether the host should see the response.
    pub(super) fn settle(&self, id: &Value, line: &[u8]) -> bool {
        self.pending.take(std::slice::from_ref(id));
        let mut s = lock(&self.state);
        let is_init = s.init.as_ref().is_some_and(|(_, i)| i == id);
        if is_init && s.awaiting_init {
            s.awaiting_init = false;
            let version = serde_json::from_slice::<Value>(line).ok().and_then(|v| {
                v.pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .and_then(|v| HeaderValue::from_str(v).ok())
            });
            if version.is_some() {
                s.version = version;
            }
        }
        if s.swallow.as_ref() == Some(id) {
            s.swallow = None;
            return false;
        }
        true
    }

    /// Ends the session with `e`, unless an earlier failure already did.
    pub(super) fn fatal(&self, e: RemoteError) {
        {
            let mut f = lock(&self.failure);
            if f.is_none() {
                tracing::error!(error = %e, "the remote session ends");
                *f = Some(e);
            }
        }
        self.failed.notify_one();
    }

    /// Records why a session that did not fail still ends badly (requests left unanswered),
    /// for the proxy to report.
    pub(super) fn conclude(&self, e: RemoteError) {
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(e);
        }
    }

    /// Whether the session has failed.
    pub(super) fn has_failed(&self) -> bool {
        lock(&self.failure).is_some()
    }

    /// Completes once the session has failed.
    pub(super) async fn failed(&self) {
        self.failed.notified().await;
    }

    /// Notes that the server answered (any HTTP response).
    pub(super) fn note_reached(&self, resp: &reqwest::Response) {
        lock(&self.reach).reached = true;
        if self.key.borrow().is_none()
            && let Some(k) = super::pin::key_of(resp)
        {
            self.key.send_replace(Some(k));
        }
    }

    /// Notes why a connection could not be made.
    pub(super) fn note_unreached(&self, why: String) {
        lock(&self.reach).last_failure = Some(why);
    }

    /// Why the server could not be reached, if it was tried and never answered.
    pub(super) fn never_reached(&self) -> Option<String> {
        let r = lock(&self.reach);
        if r.reached {
            None
        } else {
            r.last_failure.clone()
        }
    }

    /// Runs `work` on a task of its own that ends with the session at the latest.
    pub(super) fn spawn_reader(&self, work: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(work).abort_handle();
        let mut readers = lock(&self.readers);
        readers.retain(|h| !h.is_finished());
        readers.push(handle);
    }

    /// Ends the tasks of [`RemoteSession::spawn_reader`].
    pub(super) fn abort_readers(&self) {
        for h in lock(&self.readers).drain(..) {
            h.abort();
        }
    }
}

/// Whether a response is the `-32022` error of a server that speaks only 2026-07-28.
pub(super) fn refuses_as_modern_only(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line)
        .ok()
        .is_some_and(|v| crate::proxy::era::only_modern(&v).is_some())
}
