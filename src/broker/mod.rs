//! The [`Broker`]: sessions, dispatch of one message, revocation, and the outbound stream.

mod batch;
mod builder;

pub use crate::state::{Notification, Notifications};
pub use crate::watch::CHANGED;
pub use builder::BrokerBuilder;

use crate::audit::{AuditRecord, Violation};
use crate::config::Config;
use crate::consent::Grant;
use crate::error::{Error, ErrorKind, Result};
use crate::jsonrpc::{self, Item, Message, Request, Response};
use crate::locks::lock;
use crate::method::Method;
use crate::ops::{self, Ctx};
use crate::path::{MountPath, RequestPath};
use crate::policy::Policy;
use crate::root::Roots;
use crate::session::Session;
use crate::state::BrokerState;
use crate::turn::Turn;
use crate::watch::Sink;
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// Most server sessions one broker holds at once.
pub const MAX_SESSIONS: usize = 1024;

/// The filesystem broker: answers one server session's messages at a time.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use mcp_fsbroker::{Broker, Policy};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("hello.txt"), "hi").unwrap();
/// let toml = format!(
///     "[[roots]]\npath = {:?}\nmount = \"demo\"\n[consent]\nmode = \"auto\"\n[audit]\nenabled = false\n",
///     dir.path()
/// );
/// let policy = Policy::parse(&toml, "example").unwrap();
/// let (broker, _notifications) = Broker::builder(policy).build().unwrap();
/// let consent = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "files/consent",
///     "params": {"requestedPaths": ["demo"]}});
/// broker.handle_message("my-server", consent).await;
/// let read = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "files/read",
///     "params": {"path": "demo/hello.txt"}});
/// let response = broker.handle_message("my-server", read).await.unwrap();
/// assert_eq!(response["result"]["content"], "hi");
/// # });
/// ```
#[derive(Clone)]
pub struct Broker {
    pub(crate) inner: Arc<BrokerState>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("config", &self.inner.config())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// The client capabilities to merge into the host's `initialize` request.
    ///
    /// The flag is where the wire contract puts it, `roots.filesystemBrokering`, and again as
    /// the experimental capability `filesystemBrokering`: the official TypeScript and Python
    /// SDKs drop unknown keys under `roots` when they parse a client's capabilities, so a
    /// server written with them can only see the experimental one.
    pub fn capabilities(&self) -> Value {
        json!({
            "roots": {"listChanged": true, "filesystemBrokering": true},
            "experimental": {"filesystemBrokering": {}},
        })
    }

    /// The roots in force.
    pub fn roots(&self) -> Roots {
        self.inner.config().roots.clone()
    }

    /// A receiver that sees a change each time a policy is put in force (a reload).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn policy_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.inner.config().policy.clone()
    }

    /// Handles one line of bytes (without its newline) for `server_id`; returns the response
    /// line to send, if any. The message takes its place in the session's order when this is
    /// called, not when the future is first polled (see [`Broker::handle_message`]).
    pub fn handle_line<'a>(
        &'a self,
        server_id: &'a str,
        line: &[u8],
    ) -> impl Future<Output = Option<Vec<u8>>> + Send + 'a {
        let max = self.inner.config().policy.limits.max_line_bytes.get();
        let decoded = jsonrpc::decode(line, max);
        let ordered = decoded.as_ref().is_ok_and(Message::is_ordered);
        let turn = decoded
            .is_ok()
            .then(|| self.enter_turn(server_id, ordered))
            .flatten();
        async move {
            let _turn = ready(turn).await;
            self.answer_decoded(server_id, decoded).await
        }
    }

    /// Takes the next turn in `server_id`'s order now, for a change when `ordered`, without
    /// waiting for it: every way in (a line, a message, a typed call, a face that reads lines
    /// and runs them concurrently) takes its place when it is handed over, so a host's
    /// messages keep the order it handed them over in, whatever order their futures are
    /// polled in. `None` (no order to keep) when the session cannot be had: the request then
    /// fails on its own.
    pub(crate) fn enter_turn(&self, server_id: &str, ordered: bool) -> Option<Turn> {
        Some(self.session(server_id).ok()?.order.enter(ordered))
    }

    /// Answers a decoded line in a turn the caller holds (see [`Broker::enter_turn`]);
    /// returns the response line to send, if any.
    pub(crate) async fn answer_decoded(
        &self,
        server_id: &str,
        decoded: Result<Message, Box<Response>>,
    ) -> Option<Vec<u8>> {
        let response = match decoded {
            // A batch's answer is built as a line, within the line limit.
            Ok(Message::Batch(items)) => return self.answer_batch(server_id, items).await,
            Ok(Message::Single(item)) => self.handle_item(server_id, item).await,
            Err(resp) => {
                self.audit_fault(server_id, resp.outcome.as_ref().err());
                Some(resp.into_json())
            }
        }?;
        Some(jsonrpc::encode(&response))
    }

    /// Handles one parsed JSON-RPC message (single or batch) for `server_id`; returns the
    /// response, if the message calls for one.
    ///
    /// The message takes its place in the session's order when this is called, before the
    /// future is returned: a change (consent or the write side, [`Method::is_ordered`]; a
    /// batch holding one is one change) runs after every request of the session handed over
    /// before it has been answered, anything else after every earlier change. So a host that
    /// spawns a task per message, or polls their futures in any order, still gets a read
    /// answered after the consent it handed over first.
    pub fn handle_message<'a>(
        &'a self,
        server_id: &'a str,
        message: Value,
    ) -> impl Future<Output = Option<Value>> + Send + 'a {
        let message = jsonrpc::decode_value(message);
        let turn = self.enter_turn(server_id, message.is_ordered());
        async move {
            let _turn = ready(turn).await;
            match message {
                Message::Single(item) => self.handle_item(server_id, item).await,
                // Items run one after another: a batch takes one session's turn, so it cannot
                // multiply the session's cap on operations in flight. Its answer is the same
                // bounded line a transport gets (see `batch`).
                Message::Batch(items) => {
                    let line = self.answer_batch(server_id, items).await?;
                    serde_json::from_slice(&line).ok()
                }
            }
        }
    }

    /// Calls `method` with `params` (a JSON object, or `Null` for none) for `server_id` and
    /// returns its result or its [`Error`]: the typed twin of [`Broker::handle_message`], in
    /// the same order (taken when this is called), under the same limits, audited alike.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use mcp_fsbroker::policy::{Policy, RootEntry};
    /// use mcp_fsbroker::{Broker, ErrorKind, Method, Reason};
    /// let dir = tempfile::tempdir().unwrap();
    /// let policy = Policy::new().root(RootEntry::new("demo", dir.path()));
    /// let (broker, _notifications) = Broker::builder(policy).build().unwrap();
    /// let params = serde_json::json!({"path": "demo/hello.txt"});
    /// let e = broker.call("my-server", Method::Read, params).await.unwrap_err();
    /// assert_eq!((e.kind(), e.reason()), (ErrorKind::PermissionDenied, Some(Reason::NoConsent)));
    /// # });
    /// ```
    pub fn call<'a>(
        &'a self,
        server_id: &'a str,
        method: Method,
        params: Value,
    ) -> impl Future<Output = Result<Value>> + Send + 'a {
        let turn = self.enter_turn(server_id, method.is_ordered());
        let request = Request::new(jsonrpc::Id::number(0), method, params);
        async move {
            let _turn = ready(turn).await;
            self.handle_request(server_id, request).await.outcome
        }
    }

    async fn handle_item(&self, server_id: &str, item: Item) -> Option<Value> {
        match item {
            Item::Request(req) => Some(self.handle_request(server_id, req).await.into_json()),
            Item::Notification(n) => {
                tracing::debug!(server = server_id, method = %n.method, "notification ignored");
                None
            }
            Item::Response(_) => None,
            Item::Invalid(id, e) => {
                self.audit_fault(server_id, Some(&e));
                Some(
                    Response {
                        id,
                        outcome: Err(e),
                    }
                    .into_json(),
                )
            }
        }
    }

    async fn handle_request(&self, server_id: &str, req: Request) -> Response {
        let start = Instant::now();
        let mut ctx = Ctx::new(self.inner.clone(), server_id);
        let outcome = match self.session(server_id) {
            Ok(session) => match ctx.config.rate.check(server_id).and_then(|()| {
                // Only requests that move payload wait for a session's byte debt to be repaid.
                if req.known.is_some_and(crate::method::Method::moves_payload) {
                    ctx.config.rate.check_bytes(server_id)
                } else {
                    Ok(())
                }
            }) {
                Ok(()) => {
                    ops::dispatch(&mut ctx, &session, req.known, &req.method, req.params).await
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let ops::Noted {
            path,
            bytes,
            requested,
            consent,
        } = ctx.take_noted();
        // The bytes moved are known only now: they are charged after the fact (see `limits`).
        ctx.config.rate.charge_bytes(server_id, bytes);
        let err_path = outcome
            .as_ref()
            .err()
            .and_then(|e| e.path().map(str::to_owned));
        let method: String = req.method.chars().take(64).collect();
        self.inner.audit.record(&AuditRecord {
            server_id,
            method: &method,
            path: path.as_deref().or(err_path.as_deref()),
            outcome: match (&outcome, &consent) {
                (Ok(_), Some(note)) => note.outcome(),
                (Ok(_), None) => "ok",
                (Err(e), _) => e.kind().outcome(),
            },
            bytes,
            duration: start.elapsed(),
            consent: outcome.as_ref().ok().and(consent.as_ref()),
            violation: outcome
                .as_ref()
                .err()
                .and_then(|e| Violation::of(e, requested.as_deref())),
        });
        if let Err(e) = &outcome {
            tracing::debug!(server = server_id, method = %req.method, error = %e, "request failed");
        }
        Response {
            id: Some(req.id),
            outcome,
        }
    }

    fn audit_fault(&self, server_id: &str, e: Option<&Error>) {
        self.inner.audit.record(&AuditRecord {
            server_id,
            method: "",
            path: None,
            outcome: e.map_or("INVALID_REQUEST", |e| e.kind().outcome()),
            bytes: 0,
            duration: std::time::Duration::ZERO,
            consent: None,
            violation: None,
        });
    }

    /// The session for `server_id`, created with its standing grants on first use.
    fn session(&self, server_id: &str) -> Result<Arc<Session>> {
        let mut sessions = lock(&self.inner.sessions);
        if let Some(s) = sessions.get(server_id) {
            return Ok(s.clone());
        }
        if sessions.len() >= MAX_SESSIONS {
            return Err(Error::new(ErrorKind::Internal, "too many sessions"));
        }
        let config = self.inner.config();
        let session = Arc::new(Session::new(
            server_id,
            standing_grants(&config, server_id),
            config.policy.limits.max_in_flight.get(),
            config.policy.limits.watch_queue.get(),
        ));
        sessions.insert(server_id.to_owned(), session.clone());
        Ok(session)
    }

    /// Ends the session of `server_id`: its consent grants and staged uploads are dropped at
    /// once (standing grants come back with the next session). Returns whether a session existed.
    pub fn end_session(&self, server_id: &str) -> bool {
        let removed = lock(&self.inner.sessions).remove(server_id);
        // Staged uploads go now, with their temporary files, even if an operation still in
        // flight holds the session a little longer.
        if let Some(s) = &removed {
            s.uploads().clear();
            for w in self.inner.hub.of_session(s) {
                self.inner.hub.remove(&w.id);
            }
        }
        let removed = removed.is_some();
        self.inner.config().rate.prune();
        removed
    }

    /// Revokes grants: of one session or all (`server_id` `None`), at or beneath one path or
    /// everywhere (`path` `None`). Operations under a revoked path then fail with
    /// `PERMISSION_DENIED` `revoked` until consent is given again. Returns the number of
    /// grants removed.
    pub fn revoke(&self, server_id: Option<&str>, path: Option<&str>) -> Result<usize> {
        let sessions: Vec<Arc<Session>> = lock(&self.inner.sessions)
            .values()
            .filter(|s| server_id.is_none_or(|id| s.server_id() == id))
            .cloned()
            .collect();
        let parsed = path.map(RequestPath::parse).transpose()?;
        let config = self.inner.config();
        let mut removed = 0;
        for s in sessions {
            let target: Option<MountPath> = match &parsed {
                None => None,
                // A session that cannot see the path's root holds no grant under it.
                Some(p) => match config.roots.locate(p, s.server_id()) {
                    Ok((_, mount_path)) => Some(mount_path),
                    Err(_) => continue,
                },
            };
            removed += s.grants().revoke(target.as_ref());
            // A watch whose path is no longer covered ends, and its server is told.
            for w in self.inner.hub.of_session(&s) {
                if s.grants()
                    .check(&w.path, crate::access::Access::Read)
                    .is_err()
                {
                    self.inner.end_watch(&w.id, "revoked");
                }
            }
        }
        Ok(removed)
    }

    /// The server ids with a live session.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.inner.sessions).keys().cloned().collect()
    }
}

/// The policy's standing grants for `server_id`.
pub(crate) fn standing_grants(config: &Config, server_id: &str) -> Vec<Grant> {
    let mut out = Vec::new();
    for g in &config.policy.grants {
        if !crate::access::matches_server(&g.servers, server_id) {
            continue;
        }
        let located = RequestPath::parse(&g.path).and_then(|p| config.roots.locate(&p, server_id));
        if let Ok((root, path)) = located {
            out.push(Grant {
                path,
                access: g.access.min(root.access()),
                standing: true,
            });
        }
    }
    out
}

/// Waits until `turn` may run, and hands it back to be held until the answer is made.
async fn ready(turn: Option<Turn>) -> Option<Turn> {
    if let Some(t) = &turn {
        t.ready().await;
    }
    turn
}
