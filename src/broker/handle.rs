//! [`ServerSession`]: a session a host opened, whose drop ends it.

use super::Broker;
use super::running::Seat;
use crate::error::Result;
use crate::path::MountPath;
use crate::session::Session;
use crate::wire::Call;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

use super::snapshot::{Revoked, SessionSnapshot};

/// One server's session, opened by [`Broker::open_session`] with the stream of its own
/// notifications. Everything it is handed runs as this session, in the order it is handed
/// over; dropping the handle ends the session (its consent grants, watches and staged
/// uploads go at once; an operation already running finishes).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use mcp_fsbroker::policy::{Policy, RootEntry};
/// use mcp_fsbroker::wire::ReadParams;
/// use mcp_fsbroker::{Broker, ErrorKind, Reason};
/// let dir = tempfile::tempdir().unwrap();
/// let (broker, _) = Broker::builder(Policy::new().root(RootEntry::new("demo", dir.path())))
///     .build()
///     .unwrap();
/// let (session, _notifications) = broker.open_session("my-server").unwrap();
/// let e = session.call(ReadParams::new("demo/hello.txt")).await.unwrap_err();
/// assert_eq!((e.kind(), e.reason()), (ErrorKind::PermissionDenied, Some(Reason::NoConsent)));
/// drop(session);
/// assert!(broker.sessions().is_empty());
/// # });
/// ```
pub struct ServerSession {
    broker: Broker,
    session: Arc<Session>,
}

impl std::fmt::Debug for ServerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("server_id", &self.session.server_id())
            .finish_non_exhaustive()
    }
}

impl ServerSession {
    pub(super) fn new(broker: Broker, session: Arc<Session>) -> ServerSession {
        ServerSession { broker, session }
    }

    /// The server id.
    pub fn server_id(&self) -> &str {
        self.session.server_id()
    }

    /// The broker the session belongs to.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Calls a method with its typed params and returns its typed result or its
    /// [`Error`](crate::Error): see [`Broker::call`].
    pub fn call<C: Call>(&self, params: C) -> impl Future<Output = Result<C::Result>> + Send + '_ {
        self.broker
            .call_with(Seat::of(self.session.clone()), params)
    }

    /// Handles one parsed JSON-RPC message (single or batch) and returns the response, if the
    /// message calls for one: see [`Broker::handle_message`].
    pub fn handle_message(
        &self,
        message: Value,
    ) -> impl Future<Output = Option<Value>> + Send + '_ {
        self.broker
            .message_in(Seat::of(self.session.clone()), message)
    }

    /// Handles one line of bytes (without its newline) and returns the response line, if
    /// any: see [`Broker::handle_line`].
    pub fn handle_line(&self, line: &[u8]) -> impl Future<Output = Option<Vec<u8>>> + Send + '_ {
        self.broker.line_in(Seat::of(self.session.clone()), line)
    }

    /// The session itself, for a face that runs it (`serve`).
    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Revokes this session's grants at or beneath `path`: see [`Broker::revoke`].
    pub fn revoke(&self, path: &MountPath) -> Vec<Revoked> {
        self.broker
            .revoke_in(std::slice::from_ref(&self.session), Some(path))
    }

    /// Revokes every grant of this session.
    pub fn revoke_all(&self) -> Vec<Revoked> {
        self.broker
            .revoke_in(std::slice::from_ref(&self.session), None)
    }

    /// What this session holds and has done: see [`Broker::snapshot`].
    pub fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot::of(&self.session, &self.broker.inner.hub)
    }
}

impl Drop for ServerSession {
    fn drop(&mut self) {
        self.broker.end_this(&self.session);
    }
}
