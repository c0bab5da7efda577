//! [`NotificationRouter`]: one broker's rmcp connections, the session each holds, and the
//! delivery of the broker's notifications to the connection they belong to.

use super::registry::{Connection, Refusal, Registry, Wanted};
use crate::locks::lock;
use crate::method::Method;
use crate::turn::Orderer;
use crate::{Broker, Notifications};
use rmcp::Peer;
use rmcp::service::RoleClient;
use std::sync::{Arc, Mutex, OnceLock};

/// One broker's rmcp connections: it gives each connection its broker session and carries
/// the broker's notifications to the connection they belong to.
///
/// Build one per broker, spawn [`Self::run`] with that broker's outbound stream, and build
/// each connection's [`BrokerClientHandler`] from it.
///
/// **Sessions.** A session name is held by one live connection at a time. A connection takes
/// its server's `serverInfo.name` when no live connection holds it, so that the policy's
/// per-server entries match it; otherwise it takes the first free `NAME#2`, `NAME#3`, ...,
/// which per-server entries do not match. A connection holds its name until
/// [`BrokerClientHandler::end_session`], or until its handler and all clones are dropped;
/// a connection whose transport has closed, with no request in flight, gives up its name
/// (and its session) to the next connection that asks for it. An id the host gives with
/// [`BrokerClientHandler::with_server_id`] is used as it is, and handlers given the same id
/// share one session, which ends with the last of them; a server's connection is refused
/// an id that another live connection took from its server's name.
///
/// **Notifications.** A change notification goes only to the connection that created its
/// watch, so it never reaches another connection, even one that later holds the same
/// session name. A roots change goes to every connection of the session. Each connection has
/// its own sender task, so a server that stops reading delays only its own notifications.
/// Their queue is bounded: change notifications hold their session's notification slots
/// (`limits.watch_queue`) until sent, so the broker owes that server an `overflow` instead
/// of queueing more; the end of a watch comes once per watch; and a roots change waits in the
/// queue at most once, since one tells the server all it needs.
///
/// [`BrokerClientHandler`]: super::BrokerClientHandler
/// [`BrokerClientHandler::end_session`]: super::BrokerClientHandler::end_session
/// [`BrokerClientHandler::with_server_id`]: super::BrokerClientHandler::with_server_id
#[derive(Clone)]
pub struct NotificationRouter {
    shared: Arc<RouterCore>,
}

struct RouterCore {
    broker: Broker,
    registry: Mutex<Registry>,
}

impl std::fmt::Debug for NotificationRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = lock(&self.shared.registry);
        f.debug_struct("NotificationRouter")
            .field("sessions", &registry.claims.keys().collect::<Vec<_>>())
            .field("connections", &registry.connections.len())
            .finish()
    }
}

impl NotificationRouter {
    /// A router for `broker`, with no connections yet.
    pub fn new(broker: Broker) -> Self {
        Self {
            shared: Arc::new(RouterCore {
                broker,
                registry: Mutex::new(Registry::default()),
            }),
        }
    }

    /// The broker whose connections this router serves.
    pub fn broker(&self) -> &Broker {
        &self.shared.broker
    }

    /// The session names held by live connections.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.shared.registry).claims.keys().cloned().collect()
    }

    /// Routes the broker's notifications until the broker and all its clones are dropped.
    /// Give it the outbound stream of the broker this router was built with, and spawn it on
    /// the runtime that runs the rmcp clients.
    pub async fn run(self, mut outbound: Notifications) {
        while let Some(message) = outbound.recv().await {
            lock(&self.shared.registry).route(message);
        }
    }

    /// A new connection's ticket: its id, released when the last handler clone goes.
    pub(super) fn ticket(&self) -> Arc<Ticket> {
        let mut registry = lock(&self.shared.registry);
        registry.next_connection += 1;
        Arc::new(Ticket {
            id: registry.next_connection,
            router: self.clone(),
            session: OnceLock::new(),
            orderer: Orderer::new(),
        })
    }
}

/// One connection's place in its router, shared by the handler and its clones.
pub(super) struct Ticket {
    id: u64,
    router: NotificationRouter,
    /// The session name, fixed at the server's first request.
    pub(super) session: OnceLock<String>,
    /// The order of this connection's requests, as every face keeps it.
    pub(super) orderer: Arc<Orderer>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // The last handler clone is gone, so the connection is too: its name and session go.
        let shared = &self.router.shared;
        lock(&shared.registry).release(self.id, &shared.broker);
    }
}

impl Ticket {
    /// The broker of this connection.
    pub(super) fn broker(&self) -> &Broker {
        &self.router.shared.broker
    }

    /// Starts one request of the server behind `peer`: claims the connection's session name
    /// at the first one, and counts the request in flight until the returned value drops.
    pub(super) fn begin(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
        method: &str,
        wanted: impl FnOnce() -> Wanted,
    ) -> Result<InFlight, Refusal> {
        let shared = &self.router.shared;
        let mut registry = lock(&shared.registry);
        let watch_start = (Method::parse(method) == Some(Method::Watch)).then_some(registry.routed);
        if !registry.connections.contains_key(&self.id) {
            // A connection whose name was given up never takes another: its server would
            // otherwise come back under a name the host no longer expects.
            if self.session.get().is_some() {
                return Err(Refusal::Ended);
            }
            let name = registry.claim(self.id, wanted(), &shared.broker)?;
            registry
                .connections
                .insert(self.id, Connection::new(name.clone(), peer.clone()));
            let _ = self.session.set(name);
        }
        let Some(connection) = registry.connections.get_mut(&self.id) else {
            return Err(Refusal::Ended);
        };
        if connection.ended {
            return Err(Refusal::Ended);
        }
        connection.in_flight += 1;
        connection.watch_starts.extend(watch_start);
        Ok(InFlight {
            ticket: self.clone(),
            session: connection.session.clone(),
            watch_start,
            watched: None,
            unwatched: None,
        })
    }

    /// Ends the connection's session: at once when no request is in flight, else when the
    /// last one finishes. Returns whether the connection held a session.
    pub(super) fn end(&self) -> bool {
        let shared = &self.router.shared;
        let mut registry = lock(&shared.registry);
        let Some(connection) = registry.connections.get_mut(&self.id) else {
            return false;
        };
        connection.ended = true;
        let idle = connection.in_flight == 0;
        let session = connection.session.clone();
        if idle {
            registry.release(self.id, &shared.broker);
        } else if registry
            .claims
            .get(&session)
            .is_some_and(|c| c.holders == [self.id])
        {
            // Grants go now; the release after the last request ends the session again, in
            // case a request in flight made a new one.
            shared.broker.end_session(&session);
        }
        true
    }
}

/// One request in flight; dropping it (also when rmcp cancels the request) finishes it.
pub(super) struct InFlight {
    ticket: Arc<Ticket>,
    session: String,
    watch_start: Option<u64>,
    watched: Option<String>,
    unwatched: Option<String>,
}

impl InFlight {
    /// The session the request goes to.
    pub(super) fn session(&self) -> &str {
        &self.session
    }

    /// Notes the watch a successful `files/watch` created, so its notifications come here.
    pub(super) fn watched(&mut self, watch_id: Option<&str>) {
        self.watched = watch_id.map(str::to_owned);
    }

    /// Notes the watch a successful `files/unwatch` ended.
    pub(super) fn unwatched(&mut self, watch_id: Option<&str>) {
        self.unwatched = watch_id.map(str::to_owned);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let shared = &self.ticket.router.shared;
        let mut registry = lock(&shared.registry);
        let Some(connection) = registry.connections.get_mut(&self.ticket.id) else {
            return;
        };
        connection.in_flight = connection.in_flight.saturating_sub(1);
        if let Some(start) = self.watch_start
            && let Some(i) = connection.watch_starts.iter().position(|s| *s == start)
        {
            connection.watch_starts.swap_remove(i);
        }
        connection.watches.extend(self.watched.take());
        if let Some(id) = &self.unwatched {
            connection.watches.remove(id);
        }
        let done = connection.ended && connection.in_flight == 0;
        if self.watch_start.is_some() {
            registry.settle_pending(&self.session);
        }
        if done {
            registry.release(self.ticket.id, &shared.broker);
        }
    }
}
