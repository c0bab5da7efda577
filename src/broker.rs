//! The [`Broker`]: sessions, dispatch of one message, revocation, and the outbound stream.

use crate::atomic::Sweeper;
use crate::audit::{AuditLog, AuditRecord};
use crate::config::Config;
use crate::consent::{ConsentProvider, ConsentSource, Elicitation, Grant};
use crate::error::{Error, ErrorKind, Result};
use crate::jsonrpc::{self, Item, Message, Request, Response};
use crate::locks::LockTable;
use crate::locks::lock;
use crate::ops::{self, Ctx};
use crate::path::{MountPath, RequestPath};
use crate::policy::{ConsentMode, Policy, PolicyError};
use crate::root::Roots;
use crate::session::Session;
use crate::watch::{Delivery, WatchHub};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use tokio::sync::mpsc;

/// Most server sessions one broker holds at once.
pub const MAX_SESSIONS: usize = 1024;
/// A message the broker sends on its own (a notification) to one server session.
///
/// Change notifications hold one of their session's slots (`limits.watch_queue`) until the
/// host drops the value, so a host that stops reading makes the session owe an `overflow`
/// instead of making the broker buffer without bound.
#[derive(Debug)]
pub struct Outbound {
    /// The session it is for.
    pub server_id: String,
    /// The JSON-RPC notification.
    pub message: Value,
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// The receiving end of the broker's outbound notifications. Its size is bounded by the
/// sessions' notification slots.
pub type OutboundReceiver = mpsc::UnboundedReceiver<Outbound>;

/// Builds a [`Broker`] from a [`Policy`].
pub struct BrokerBuilder {
    policy: Policy,
    consent: ConsentSource,
    audit: Option<AuditLog>,
}

impl BrokerBuilder {
    /// Uses `provider` for consent requests no rule decides, instead of the policy's mode.
    pub fn consent_provider(mut self, provider: Arc<dyn ConsentProvider>) -> Self {
        self.consent.custom = Some(provider);
        self
    }

    /// Lets consent mode `elicit` ask the host: `make` builds its provider around the
    /// fallback the policy names (`consent.fallback`), anew at every reload.
    pub fn elicitation(mut self, make: Elicitation) -> Self {
        self.consent.elicitation = Some(make);
        self
    }

    /// The consent mode when the policy sets none (the proxy's is `elicit`).
    pub fn default_consent_mode(mut self, mode: ConsentMode) -> Self {
        self.consent.default_mode = Some(mode);
        self
    }

    /// Uses `log` instead of the audit log the policy names.
    pub fn audit_log(mut self, log: AuditLog) -> Self {
        self.audit = Some(log);
        self
    }

    /// Opens the roots and builds the broker, with the stream of its outbound notifications.
    pub fn build(self) -> std::result::Result<(Broker, OutboundReceiver), PolicyError> {
        let err = |key: String, message: String| PolicyError {
            file: "<policy>".into(),
            line: None,
            key,
            message,
        };
        let audit = match self.audit {
            Some(a) => a,
            None => AuditLog::open(&self.policy.audit)
                .map_err(|e| err("audit.file".into(), format!("cannot open audit log: {e}")))?,
        };
        let config = Config::open(self.policy, &self.consent, None)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Inner {
            config: RwLock::new(Arc::new(config)),
            consent: self.consent,
            audit,
            sessions: Mutex::new(HashMap::new()),
            locks: LockTable::default(),
            sweeper: Sweeper::default(),
            hub: WatchHub::default(),
            outbound: tx,
        };
        Ok((
            Broker {
                inner: Arc::new(inner),
            },
            rx,
        ))
    }
}

pub(crate) struct Inner {
    config: RwLock<Arc<Config>>,
    pub(crate) consent: ConsentSource,
    audit: AuditLog,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) locks: LockTable,
    pub(crate) sweeper: Sweeper,
    pub(crate) hub: WatchHub,
    outbound: mpsc::UnboundedSender<Outbound>,
}

impl Inner {
    /// Every live session.
    pub(crate) fn sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Puts a new configuration in force.
    pub(crate) fn set_config(&self, config: Arc<Config>) {
        match self.config.write() {
            Ok(mut g) => *g = config,
            Err(p) => *p.into_inner() = config,
        }
    }

    /// Sends a notification to a session. With a slot semaphore, the notification needs a
    /// free slot and returns false when there is none; without, it is always sent (for the
    /// rare messages a server must not miss, such as the end of a watch).
    pub(crate) fn notify(
        &self,
        server_id: &str,
        method: &str,
        params: Option<Value>,
        slots: Option<&Arc<tokio::sync::Semaphore>>,
    ) -> bool {
        let slot = match slots {
            Some(s) => match s.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => return false,
            },
            None => None,
        };
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            message["params"] = p;
        }
        self.outbound
            .send(Outbound {
                server_id: server_id.to_owned(),
                message,
                _slot: slot,
            })
            .is_ok()
    }

    /// Delivers one change notification, paying any `overflow` the watch owes first.
    pub(crate) fn deliver(&self, d: &Delivery) {
        let Some(session) = d.watch.session.upgrade() else {
            return;
        };
        let sid = session.server_id();
        let slots = Some(&session.notify_slots);
        if d.watch.take_owed_overflow()
            && !self.notify(sid, CHANGED, Some(d.watch.overflow_params()), slots)
        {
            d.watch.owe_overflow();
            return;
        }
        if !self.notify(sid, CHANGED, Some(d.params.clone()), slots) {
            d.watch.owe_overflow();
        }
    }

    /// Sends every owed `overflow` that a slot can be found for.
    pub(crate) fn pay_overflows(&self) {
        for w in self.hub.all() {
            let Some(session) = w.session.upgrade() else {
                continue;
            };
            if w.take_owed_overflow()
                && !self.notify(
                    session.server_id(),
                    CHANGED,
                    Some(w.overflow_params()),
                    Some(&session.notify_slots),
                )
            {
                w.owe_overflow();
            }
        }
    }

    /// Ends a watch and tells its server why.
    pub(crate) fn end_watch(&self, id: &str, reason: &str) {
        if let Some(w) = self.hub.remove(id)
            && let Some(session) = w.session.upgrade()
        {
            let params = json!({"watchId": w.id, "path": w.path.to_string(), "event": "unwatched",
                "reason": reason, "timestamp": crate::watch::now()});
            self.notify(session.server_id(), CHANGED, Some(params), None);
        }
    }
}

/// The method of change notifications.
pub const CHANGED: &str = "notifications/files/changed";

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
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("config", &self.inner.config())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Starts building a broker for `policy`.
    pub fn builder(policy: Policy) -> BrokerBuilder {
        BrokerBuilder {
            policy,
            consent: ConsentSource::default(),
            audit: None,
        }
    }

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

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.inner.config().policy.clone()
    }

    /// Handles one line of bytes (without its newline) for `server_id`; returns the response
    /// line to send, if any.
    pub async fn handle_line(&self, server_id: &str, line: &[u8]) -> Option<Vec<u8>> {
        let max = self.inner.config().policy.limits.max_line_bytes.get();
        self.handle_decoded(server_id, jsonrpc::decode(line, max))
            .await
    }

    /// Handles the result of [`jsonrpc::decode`] (for transports that look at a message
    /// before handing it over); returns the response line to send, if any.
    pub async fn handle_decoded(
        &self,
        server_id: &str,
        decoded: Result<Message, Response>,
    ) -> Option<Vec<u8>> {
        let response = match decoded {
            Ok(msg) => self.handle_parsed(server_id, msg).await,
            Err(resp) => {
                self.audit_fault(server_id, resp.outcome.as_ref().err());
                Some(resp.into_json())
            }
        }?;
        Some(jsonrpc::encode(&response))
    }

    /// Handles one parsed JSON-RPC message (single or batch) for `server_id`; returns the
    /// response, if the message calls for one.
    pub async fn handle_message(&self, server_id: &str, message: Value) -> Option<Value> {
        self.handle_parsed(server_id, jsonrpc::decode_value(message))
            .await
    }

    async fn handle_parsed(&self, server_id: &str, message: Message) -> Option<Value> {
        match message {
            Message::Single(item) => self.handle_item(server_id, item).await,
            Message::Batch(items) => {
                // Items run one after another: a batch takes one session's turn, so it cannot
                // multiply the session's cap on operations in flight.
                let mut out = Vec::new();
                for item in items {
                    out.extend(self.handle_item(server_id, item).await);
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
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
        let ctx = Ctx::new(self.inner.clone(), server_id);
        let outcome = match self.session(server_id) {
            Ok(session) => match ctx.config.rate.check(server_id) {
                Ok(()) => ops::dispatch(&ctx, &session, &req.method, req.params).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (path, bytes) = ctx.audit_info();
        let err_path = outcome
            .as_ref()
            .err()
            .and_then(|e| e.path().map(str::to_owned));
        let method: String = req.method.chars().take(64).collect();
        self.inner.audit.record(&AuditRecord {
            server_id,
            method: &method,
            path: path.as_deref().or(err_path.as_deref()),
            outcome: match &outcome {
                Ok(_) => "ok",
                Err(e) => e.kind().outcome(),
            },
            bytes,
            duration: start.elapsed(),
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
                if s.grants().check(&w.path, crate::Access::Read).is_err() {
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
        if !crate::policy::matches_server(&g.servers, server_id) {
            continue;
        }
        let located =
            RequestPath::parse(g.path.get_ref()).and_then(|p| config.roots.locate(&p, server_id));
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
