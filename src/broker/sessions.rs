//! Sessions: made on first use or opened by a host, ended, revoked, and shown.

use super::snapshot::{Revoked, SessionSnapshot};
use super::{Broker, MAX_SESSIONS, Notifications, ServerSession, standing_grants};
use crate::access::Access;
use crate::error::{Error, ErrorKind, Result};
use crate::locks::lock;
use crate::path::MountPath;
use crate::session::{Notification, Session};
use crate::watch::Sink;
use std::sync::Arc;
use tokio::sync::mpsc;

impl Broker {
    /// The session for `server_id`, created with its standing grants on first use.
    pub(crate) fn session(&self, server_id: &str) -> Result<Arc<Session>> {
        self.make_session(server_id, None, None, false)
    }

    /// The session for `server_id`: the live one, unless `fresh` asks for a new one only;
    /// else a new one with its standing grants, sending its notifications to `outbound`
    /// (the broker's stream when `None`).
    fn make_session(
        &self,
        server_id: &str,
        identity: Option<crate::Identity>,
        outbound: Option<mpsc::UnboundedSender<Notification>>,
        fresh: bool,
    ) -> Result<Arc<Session>> {
        // Every session is made here: a name the interface keeps for itself is refused
        // whoever gives it (the names servers choose are renamed before they come here).
        if let Some(refused) = crate::session::refuse_reserved(server_id) {
            return Err(Error::new(ErrorKind::InvalidRequest, refused));
        }
        let config = self.inner.config();
        let pinned = pinned(&config, server_id, identity.as_ref())?;
        let server_id = pinned.as_str();
        let mut sessions = lock(&self.inner.sessions);
        if let Some(s) = sessions.get(server_id) {
            if fresh {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("a session named {server_id:?} is already open"),
                ));
            }
            return Ok(s.clone());
        }
        if sessions.len() >= MAX_SESSIONS {
            return Err(Error::new(ErrorKind::Internal, "too many sessions"));
        }
        // A digest received from elsewhere is never trusted as it is: sealed here, it is the
        // digest of the fields the session shows.
        let identity = identity.map(crate::Identity::sealed);
        let standing = standing_grants(&config, server_id, identity.as_ref());
        let session = Arc::new(Session::new(
            server_id,
            identity,
            standing,
            config.policy.limits.max_in_flight.get(),
            config.policy.limits.watch_queue.get(),
            outbound,
        ));
        // A suspension of its server's identity holds in every session of it.
        if let Some(s) = session
            .identity()
            .and_then(|i| lock(&self.inner.suspended).get(&i.digest).cloned())
        {
            session.suspend_as(s);
        }
        sessions.insert(server_id.to_owned(), session.clone());
        drop(sessions);
        self.inner.touch();
        Ok(session)
    }

    /// Opens a session for the server `server_id`, with the stream of its own
    /// notifications. The session lives until the handle is dropped: then its consent
    /// grants, watches and staged uploads go at once.
    ///
    /// Errors: `INVALID_REQUEST` when a session of that id is live (opened, or made by a
    /// call by name) or the id is one the interface keeps for itself (`user`), and `INTERNAL_ERROR` when the broker holds
    /// [`MAX_SESSIONS`] sessions.
    pub fn open_session(&self, server_id: &str) -> Result<(ServerSession, Notifications)> {
        self.open(server_id, None)
    }

    /// Opens a session as [`Broker::open_session`] does, for a server whose identity is
    /// `identity` (see [`Identity`](crate::Identity)): a grant remembered for another
    /// identity is not held, and a suspension of this one holds from the start. A host
    /// gives what it knows of the server it runs ([`Identity::of_host`](crate::Identity::of_host)).
    pub fn open_session_as(
        &self,
        server_id: &str,
        identity: crate::Identity,
    ) -> Result<(ServerSession, Notifications)> {
        self.open(server_id, Some(identity))
    }

    fn open(
        &self,
        server_id: &str,
        identity: Option<crate::Identity>,
    ) -> Result<(ServerSession, Notifications)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let session = self.make_session(server_id, identity, Some(tx), true)?;
        Ok((ServerSession::new(self.clone(), session), rx))
    }

    /// Ends the session of `server_id`: its consent grants and staged uploads are dropped at
    /// once (standing grants come back with the next session). Returns whether a session
    /// existed.
    pub fn end_session(&self, server_id: &str) -> bool {
        let removed = lock(&self.inner.sessions).remove(server_id);
        if let Some(s) = &removed {
            self.ended(s);
        }
        removed.is_some()
    }

    /// Ends `session` if it is still the live session of its id (a handle's drop: the id may
    /// have been ended and opened again since).
    pub(crate) fn end_this(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.inner.sessions);
        if sessions
            .get(session.server_id())
            .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            sessions.remove(session.server_id());
            drop(sessions);
            self.ended(session);
        }
    }

    /// What goes when a session ends: staged uploads (with their temporary files, even if
    /// an operation still in flight holds the session a little longer) and watches.
    fn ended(&self, session: &Session) {
        // A face or a task that still holds the session (a request in flight, `serve` with
        // its handle) can no longer act in it: an ended session's grants are gone for good.
        session.end();
        session.uploads().clear();
        for w in self.inner.hub.of_session(session) {
            self.inner.hub.remove(&w.id);
        }
        self.inner.config().rate.prune();
        self.inner.touch();
    }

    /// Revokes the grants of the session `server_id` at or beneath `path`. Operations under
    /// `path` then fail with `PERMISSION_DENIED` `revoked` until consent is given again;
    /// watches no longer covered end (`unwatched`, `revoked`). Returns the grants removed,
    /// then the wider grants `path` was carved out of (with [`Revoked::carved_out`] set:
    /// they stay for the rest).
    ///
    /// Errors: `INVALID_PARAMS` when no session of that id is live.
    pub fn revoke(&self, server_id: &str, path: &MountPath) -> Result<Vec<Revoked>> {
        let session = self.live(server_id)?;
        Ok(self.revoke_in(&[session], Some(path)))
    }

    /// Revokes every grant of the session `server_id`, as [`Broker::revoke`] does for one
    /// path.
    pub fn revoke_session(&self, server_id: &str) -> Result<Vec<Revoked>> {
        let session = self.live(server_id)?;
        Ok(self.revoke_in(&[session], None))
    }

    /// Revokes the grants at or beneath `path` in every live session.
    pub fn revoke_path(&self, path: &MountPath) -> Vec<Revoked> {
        self.revoke_in(&self.inner.sessions(), Some(path))
    }

    /// Revokes every grant of every live session.
    pub fn revoke_all(&self) -> Vec<Revoked> {
        self.revoke_in(&self.inner.sessions(), None)
    }

    /// Grants `path` at `access` (capped by its root's) to the live session `server_id`, as
    /// the user decided outside a consent request (the console's "allow this?" about a
    /// refusal at `seen`), for `lifetime`. Returns the access granted.
    ///
    /// Errors: `INVALID_PARAMS` when no session of that id is live, or the live one began
    /// after `seen` (the session the user saw has ended; a new one of its name gets nothing
    /// meant for it); the errors of a request
    /// path when `path` lies in no root the session sees; `QUOTA_EXCEEDED` when the session
    /// holds as many grants as it may.
    #[cfg(feature = "cli")]
    pub(crate) fn grant(
        &self,
        server_id: &str,
        path: &MountPath,
        access: Access,
        seen: std::time::SystemTime,
        lifetime: crate::consent::Lifetime,
    ) -> Result<Access> {
        let session = self.live_since(server_id, seen)?;
        let request = crate::path::RequestPath::parse(&path.to_string())?;
        let (root, located) = self.inner.config().roots.locate(&request, server_id)?;
        let access = access.min(root.access());
        let grant = crate::consent::Grant::lasting(
            located,
            access,
            crate::consent::GrantOrigin::Consented,
            lifetime,
        );
        if !session.grants().add(grant) {
            return Err(Error::new(
                ErrorKind::QuotaExceeded,
                format!(
                    "the session holds {} grants already",
                    crate::consent::grants::MAX_GRANTS
                ),
            ));
        }
        self.inner.touch();
        Ok(access)
    }

    /// The live session `server_id` when it is the one the user saw at `seen` (it began
    /// then or before): what the user decides about a session is never given to a later
    /// one of the same name.
    ///
    /// Errors: `INVALID_PARAMS` when no session of that id is live, or the live one began
    /// after `seen`.
    #[cfg(feature = "cli")]
    pub(crate) fn live_since(
        &self,
        server_id: &str,
        seen: std::time::SystemTime,
    ) -> Result<Arc<Session>> {
        let session = self.live(server_id)?;
        if session.started > seen || session.is_gone() {
            return Err(Error::new(
                ErrorKind::InvalidParams,
                format!("the session {server_id} that the user saw has ended"),
            ));
        }
        Ok(session)
    }

    fn live(&self, server_id: &str) -> Result<Arc<Session>> {
        lock(&self.inner.sessions)
            .get(server_id)
            .cloned()
            .ok_or_else(|| Error::invalid_params(format!("no live session named {server_id:?}")))
    }

    /// Revokes grants at or beneath `path` (all when `None`) in `sessions`, and ends the
    /// watches no longer covered.
    pub(crate) fn revoke_in(
        &self,
        sessions: &[Arc<Session>],
        path: Option<&MountPath>,
    ) -> Vec<Revoked> {
        let mut removed = Vec::new();
        for s in sessions {
            s.forgive(crate::error::Reason::Revoked);
            {
                let mut grants = s.grants();
                let taken = grants.revoke(path);
                removed.extend(Revoked::of(s.server_id(), taken, path, &grants));
            }
            // A watch whose path is no longer covered ends, and its server is told.
            for w in self.inner.hub.of_session(s) {
                if s.grants().check(&w.path, Access::Read).is_err() {
                    self.inner.end_watch(&w.id, "revoked");
                }
            }
        }
        self.inner.touch();
        removed
    }

    /// Suspends `session` for the violations `s` counts: its watches end (`unwatched`,
    /// `suspended`), and the user is told (the log at `warn`; `status` and the console show
    /// it). Its grants stay, unused until the user resumes it.
    pub(crate) fn suspend(&self, session: &Session, s: &crate::watchdog::Suspension) {
        if let Some(identity) = session.identity() {
            let mut suspended = lock(&self.inner.suspended);
            // Bounded: past the most sessions a broker holds, the oldest suspension goes.
            if suspended.len() >= MAX_SESSIONS {
                let oldest = suspended
                    .iter()
                    .min_by_key(|(_, s)| s.since)
                    .map(|(d, _)| d.clone());
                if let Some(d) = oldest {
                    suspended.remove(&d);
                }
            }
            suspended.insert(identity.digest.clone(), s.clone());
        }
        for w in self.inner.hub.of_session(session) {
            self.inner.end_watch(&w.id, "suspended");
        }
        tracing::warn!(
            server = session.server_id(),
            violations = %s.summary(),
            "suspended a session after {} security violations within a minute; every request \
             is refused until the user does: only the user can {}",
            s.total(),
            self.inner.resumed_by.hint(session.server_id())
        );
        self.inner.touch();
    }

    /// Notes that `session` was refused for a budget it spent; the user is told of each
    /// budget once per session (the log at `warn`), and `status` shows the last.
    pub(crate) fn throttled(&self, session: &Session, spent: crate::limits::Spent) {
        let bit = 1u8 << (spent as u8);
        let mut stats = session.stats();
        stats.counters.throttled += 1;
        stats.throttled = Some((std::time::SystemTime::now(), spent.as_str()));
        let first = stats.told & bit == 0;
        stats.told |= bit;
        drop(stats);
        if first {
            tracing::warn!(
                server = session.server_id(),
                budget = spent.as_str(),
                "a session spent its {} budget; its requests are refused (RATE_LIMITED) until \
                 the budget comes back (the policy's [limits])",
                spent.as_str()
            );
        }
    }

    /// Lifts the suspension of the session `server_id` (see
    /// [`BrokerBuilder::max_violations_per_minute`](crate::BrokerBuilder::max_violations_per_minute)):
    /// its requests are answered again, and its violations before count no more. Returns
    /// whether it was suspended. A session of no known identity that ends takes its
    /// suspension with it: a new session of its name begins without strikes. One of a known
    /// identity ([`Broker::open_session_as`]) does not: the suspension holds in every later
    /// session of the same identity, under any name, until this lifts it.
    ///
    /// Errors: `INVALID_PARAMS` when no session of that id is live.
    pub fn resume(&self, server_id: &str) -> Result<bool> {
        let session = self.live(server_id)?;
        let resumed = session.resume();
        if let Some(identity) = session.identity() {
            lock(&self.inner.suspended).remove(&identity.digest);
        }
        if resumed {
            tracing::warn!(server = server_id, "the user resumed a suspended session");
        }
        self.inner.touch();
        Ok(resumed)
    }

    /// The server ids with a live session.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.inner.sessions).keys().cloned().collect()
    }

    /// What every live session holds and has done, by server id: for a permissions screen.
    /// [`Broker::snapshot_changes`] says when to look again.
    pub fn snapshot(&self) -> Vec<SessionSnapshot> {
        let mut all: Vec<SessionSnapshot> = self
            .inner
            .sessions()
            .iter()
            .map(|s| SessionSnapshot::of(s, &self.inner.hub))
            .collect();
        all.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        all
    }

    /// A receiver that sees a change whenever what [`Broker::snapshot`] shows may have
    /// changed: a session began or ended, a request was answered, grants were revoked, a
    /// watch ended, a policy was put in force. Many changes may show as one.
    pub fn snapshot_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.activity.subscribe()
    }
}

/// The id a session named `server_id` of `identity` opens under: its own, unless the
/// policy pins its name (`[[servers]]`) to another program; then it is refused, or opened
/// as `unpinned-NAME`, which nothing the policy gives the name reaches.
///
/// Errors: `PERMISSION_DENIED` when the pin says to refuse.
fn pinned(
    config: &crate::config::Config,
    server_id: &str,
    identity: Option<&crate::Identity>,
) -> Result<String> {
    let name = crate::session::base_name(server_id);
    let Some(pin) = config.policy.servers.iter().find(|p| p.name == name) else {
        return Ok(server_id.to_owned());
    };
    if pin.admits(identity) {
        return Ok(server_id.to_owned());
    }
    // What a package says of itself is the server's text: shown escaped, as on a terminal.
    let who = identity.map_or_else(
        || "a program that could not be told".to_owned(),
        |i| {
            format!(
                "{} (digest {})",
                crate::visible::shown(&i.what()),
                i.short()
            )
        },
    );
    match pin.otherwise {
        crate::policy::Otherwise::Unknown => {
            tracing::warn!(server = name, program = %who, "a session claimed a pinned name with another program: opened as an unknown server");
            Ok(format!("{}{server_id}", crate::policy::UNPINNED))
        }
        _ => Err(Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "the policy pins the server name {name:?} to another program than {who}; \
                 the session is refused"
            ),
        )),
    }
}
