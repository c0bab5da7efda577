//! The [`Broker`]: sessions, dispatch of one message, revocation, and the outbound stream.

mod batch;
mod builder;
#[cfg(test)]
mod deadline_tests;
mod handle;
mod request;
mod running;
mod sessions;
mod snapshot;

pub use crate::audit::{AuditEvent, ConsentEvent, Decider};
pub use crate::session::Counters;
pub use crate::session::{Notification, Notifications};
pub use crate::watch::CHANGED;
pub use crate::watchdog::Suspension;
pub use builder::BrokerBuilder;
pub use handle::ServerSession;
pub use snapshot::{Activity, GrantInfo, Revoked, SessionSnapshot, UploadInfo, WatchInfo};

use crate::config::Config;
use crate::consent::Grant;
use crate::error::{Error, ErrorKind, Result};
use crate::jsonrpc::{self, Message, Request};
use crate::path::RequestPath;
use crate::policy::Policy;
use crate::root::Roots;
use crate::session::HeldBack;
use crate::state::BrokerState;
use crate::turn::Turn;
use crate::wire::Call;
use request::Withdrawal;
use running::Seat;
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;

/// How many audit events a subscriber may fall behind by before it misses the oldest
/// (it is told how many with `RecvError::Lagged`).
const AUDIT_EVENTS: usize = 4096;

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
    /// The recovery store, where what servers' changes replaced or removed is kept, with
    /// the journal of every change: list it with [`RecoveryStore::history`], put a change
    /// back with [`RecoveryStore::restore`], take a server's changes back with
    /// [`RecoveryStore::undo`]. `None` when the policy turned recovery off.
    ///
    /// [`RecoveryStore::history`]: crate::recovery::RecoveryStore::history
    /// [`RecoveryStore::restore`]: crate::recovery::RecoveryStore::restore
    /// [`RecoveryStore::undo`]: crate::recovery::RecoveryStore::undo
    pub fn recovery(&self) -> Option<&crate::recovery::RecoveryStore> {
        self.inner.recovery.as_deref()
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

    /// A receiver that sees a change each time a policy is put in force (a reload).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn policy_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// A subscription to the audit events: every message audited from now on, as the audit
    /// log records it (see [`AuditEvent`]). Any number may be held; one that falls more than
    /// 4096 events behind misses the oldest and is told how many
    /// (`RecvError::Lagged`). The audit log itself is written whatever the subscribers do.
    pub fn audit_events(&self) -> tokio::sync::broadcast::Receiver<AuditEvent> {
        self.inner.events.subscribe()
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.inner.config().policy.clone()
    }

    /// Handles one line of bytes (without its newline) for `server_id` (its session made on
    /// first use: see [`Broker::open_session`] for one that ends when dropped); returns the
    /// response line to send, if any. The message takes its place in the session's order
    /// when this is called, not when the future is first polled (see
    /// [`Broker::handle_message`]).
    pub fn handle_line<'a>(
        &'a self,
        server_id: &'a str,
        line: &[u8],
    ) -> impl Future<Output = Option<Vec<u8>>> + Send + 'a {
        self.line_in(self.seat(server_id), line)
    }

    pub(crate) fn line_in(
        &self,
        seat: Seat,
        line: &[u8],
    ) -> impl Future<Output = Option<Vec<u8>>> + Send + '_ {
        let max = self.inner.config().policy.limits.max_line_bytes.get();
        let decoded = jsonrpc::decode(line, max);
        let handed = seat.hand_over(decoded.as_ref().ok());
        async move {
            let _turn = ready(handed.turn).await;
            self.answer_decoded(&seat, decoded, handed.withdrawal).await
        }
    }

    /// Handles one parsed JSON-RPC message (single or batch) for `server_id` (its session
    /// made on first use); returns the response, if the message calls for one.
    ///
    /// The message takes its place in the session's order when this is called, before the
    /// future is returned: a change (consent or the write side, [`Method::is_ordered`](crate::Method::is_ordered); a
    /// batch holding one is one change) runs after every request of the session handed over
    /// before it has been answered, anything else after every earlier change. So a host that
    /// spawns a task per message, or polls their futures in any order, still gets a read
    /// answered after the consent it handed over first.
    ///
    /// A request is withdrawn by dropping its future, or by handing over the server's
    /// `notifications/cancelled` naming its id: its work stops where it stands (a consent
    /// question is withdrawn from the provider), it gets no answer, and its audit event says
    /// `cancelled`.
    pub fn handle_message<'a>(
        &'a self,
        server_id: &'a str,
        message: Value,
    ) -> impl Future<Output = Option<Value>> + Send + 'a {
        self.message_in(self.seat(server_id), message)
    }

    pub(crate) fn message_in(
        &self,
        seat: Seat,
        message: Value,
    ) -> impl Future<Output = Option<Value>> + Send + '_ {
        let message = jsonrpc::decode_value(message);
        let handed = seat.hand_over(Some(&message));
        async move {
            let _turn = ready(handed.turn).await;
            match message {
                Message::Single(item) => {
                    let work = self.handle_item(&seat, item);
                    let response = Withdrawal::unless(handed.withdrawal, work).await?;
                    Some(response.to_json())
                }
                // Items run one after another: a batch takes one session's turn, so it cannot
                // multiply the session's cap on operations in flight. Its answer is the same
                // bounded line a transport gets (see `batch`).
                Message::Batch(items) => {
                    let line = self.answer_batch(&seat, items).await?;
                    serde_json::from_slice(&line).ok()
                }
            }
        }
    }

    /// Calls a method for `server_id` (its session made on first use) with its typed params
    /// ([`wire`](crate::wire)) and returns its typed result or its [`Error`]: the typed twin
    /// of [`Broker::handle_message`], in the same order (taken when this is called), under
    /// the same limits, audited alike.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use mcp_fsbroker::policy::{Policy, RootEntry};
    /// use mcp_fsbroker::wire::ReadParams;
    /// use mcp_fsbroker::{Broker, ErrorKind, Reason};
    /// let dir = tempfile::tempdir().unwrap();
    /// let policy = Policy::new().root(RootEntry::new("demo", dir.path()));
    /// let (broker, _notifications) = Broker::builder(policy).build().unwrap();
    /// let e = broker.call("my-server", ReadParams::new("demo/hello.txt")).await.unwrap_err();
    /// assert_eq!((e.kind(), e.reason()), (ErrorKind::PermissionDenied, Some(Reason::NoConsent)));
    /// # });
    /// ```
    pub fn call<'a, C: Call>(
        &'a self,
        server_id: &'a str,
        params: C,
    ) -> impl Future<Output = Result<C::Result>> + Send + 'a {
        self.call_with(self.seat(server_id), params)
    }

    pub(crate) fn call_with<C: Call>(
        &self,
        seat: Seat,
        params: C,
    ) -> impl Future<Output = Result<C::Result>> + Send + '_ {
        // The params become the JSON a server would send, so that a typed call is checked,
        // limited and audited exactly as one from the wire.
        let params = serde_json::to_value(&params).map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("cannot encode the params: {e}"),
            )
        });
        let turn = seat.hand_over_call(C::METHOD.is_ordered());
        async move {
            let _turn = ready(turn).await;
            let request = Request::new(jsonrpc::Id::number(0), C::METHOD, params?);
            self.handle_request(&seat, request).await.outcome?.decode()
        }
    }
}

/// The policy's standing grants for the session `server_id` of `identity`, and those its
/// name would hold that its identity does not (with why).
pub(crate) fn standing_grants(
    config: &Config,
    server_id: &str,
    identity: Option<&crate::Identity>,
) -> (Vec<Grant>, Vec<HeldBack>) {
    let mut out = Vec::new();
    let mut held_back = Vec::new();
    for g in &config.policy.grants {
        if !crate::access::matches_server(&g.servers, server_id) {
            continue;
        }
        if !g.holds_for(identity) {
            held_back.push(HeldBack {
                path: g.path.clone(),
                why: g.held_back_why(identity, server_id),
            });
            continue;
        }
        let located = RequestPath::parse(&g.path).and_then(|p| config.roots.locate(&p, server_id));
        if let Ok((root, path)) = located {
            out.push(Grant::new(
                path,
                g.access.min(root.access()),
                crate::consent::GrantOrigin::Standing,
            ));
        }
    }
    (out, held_back)
}

/// Waits until `turn` may run, and hands it back to be held until the answer is made.
async fn ready(turn: Option<Arc<Turn>>) -> Option<Arc<Turn>> {
    if let Some(t) = &turn {
        t.ready().await;
    }
    turn
}
