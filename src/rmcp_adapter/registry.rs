//! The bookkeeping behind [`NotificationRouter`](super::NotificationRouter): which connection
//! holds which session name, and which connection each broker notification goes to.

use crate::broker::CHANGED;
use crate::{Broker, Notification};
use rmcp::Peer;
use rmcp::model::{ClientNotification, CustomNotification};
use rmcp::service::RoleClient;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// The name a connection asks for at its server's first request.
pub(super) enum Wanted {
    /// Given by the host: used as it is, and shared with the host's other handlers given it.
    Host(String),
    /// Taken from the server's name: held by this connection alone.
    Server(String),
}

/// Why a connection cannot make a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The connection's session has ended.
    Ended,
    /// The host's id is held by another connection that took it from its server's name.
    Held,
}

const ROOTS_CHANGED: &str = "notifications/roots/list_changed";

/// Every connection of one router and the names they hold, under the router's one lock.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) next_connection: u64,
    /// Messages routed so far: a notification routed after a `files/watch` began may be for
    /// the watch it creates.
    pub(super) routed: u64,
    pub(super) claims: HashMap<String, Claim>,
    pub(super) connections: HashMap<u64, Connection>,
}

/// A session name and the connections holding it.
pub(super) struct Claim {
    /// Taken from a server's name, so held by one connection; else given by the host.
    exclusive: bool,
    pub(super) holders: Vec<u64>,
    /// Change notifications, with their arrival numbers, for watches no holder is known to
    /// own yet, kept while a `files/watch` that may have created them is in flight.
    pending: Vec<(u64, Notification)>,
}

pub(super) struct Connection {
    pub(super) session: String,
    peer: Peer<RoleClient>,
    queue: Option<Queue>,
    /// The watches this connection created and has not ended.
    pub(super) watches: HashSet<String>,
    /// The arrival numbers at which this connection's `files/watch` requests in flight began.
    pub(super) watch_starts: Vec<u64>,
    pub(super) in_flight: usize,
    pub(super) ended: bool,
}

impl Connection {
    pub(super) fn new(session: String, peer: Peer<RoleClient>) -> Self {
        let queue = Queue::start(&peer, &session);
        Self {
            session,
            peer,
            queue,
            watches: HashSet::new(),
            watch_starts: Vec::new(),
            in_flight: 0,
            ended: false,
        }
    }

    /// Whether the connection may still use its session: a request is in flight, or it has
    /// not ended and its server is still connected.
    fn live(&self) -> bool {
        self.in_flight > 0 || (!self.ended && !self.peer.is_transport_closed())
    }

    fn send(&self, note: Note) {
        if let Some(queue) = &self.queue {
            queue.send(note);
        }
    }
}

impl Registry {
    /// The name for connection `id` asking for `wanted`, now held by it.
    pub(super) fn claim(
        &mut self,
        id: u64,
        wanted: Wanted,
        broker: &Broker,
    ) -> Result<String, Refusal> {
        let (name, exclusive) = match wanted {
            Wanted::Host(name) => {
                match self.claims.get(&name) {
                    Some(claim) if !self.is_live(claim) => self.reap(&name, broker),
                    Some(claim) if claim.exclusive => return Err(Refusal::Held),
                    _ => {}
                }
                (name, false)
            }
            Wanted::Server(base) => {
                let name = free_name(&base, |candidate| match self.claims.get(candidate) {
                    None => true,
                    Some(claim) => !self.is_live(claim),
                });
                self.reap(&name, broker);
                (name, true)
            }
        };
        self.claims
            .entry(name.clone())
            .or_insert_with(|| Claim {
                exclusive,
                holders: Vec::new(),
                pending: Vec::new(),
            })
            .holders
            .push(id);
        Ok(name)
    }

    fn is_live(&self, claim: &Claim) -> bool {
        claim
            .holders
            .iter()
            .any(|h| self.connections.get(h).is_some_and(Connection::live))
    }

    /// Takes `name` from connections that are gone, and ends its session, so that the next
    /// holder starts with no grants of theirs.
    fn reap(&mut self, name: &str, broker: &Broker) {
        if let Some(claim) = self.claims.remove(name) {
            for holder in claim.holders {
                self.connections.remove(&holder);
            }
            broker.end_session(name);
        }
    }

    /// Lets go of connection `id`: its session ends with the last connection holding it.
    pub(super) fn release(&mut self, id: u64, broker: &Broker) {
        let Some(connection) = self.connections.remove(&id) else {
            return;
        };
        let name = connection.session;
        let Some(claim) = self.claims.get_mut(&name) else {
            return;
        };
        claim.holders.retain(|h| *h != id);
        if claim.holders.is_empty() {
            self.claims.remove(&name);
            broker.end_session(&name);
        }
    }

    /// Hands one broker notification to the connection it belongs to, or drops it.
    pub(super) fn route(&mut self, message: Notification) {
        self.routed += 1;
        let arrival = self.routed;
        let Some(claim) = self.claims.get_mut(&message.server_id) else {
            tracing::debug!(server = %message.server_id, "no connection holds this session; notification dropped");
            return;
        };
        let method = message.message.get("method").and_then(Value::as_str);
        match method {
            Some(CHANGED) => {
                // A change for a watch no holder created belongs to a connection that held the
                // name before, unless a watch being created turns out to be its own.
                if let Err(message) = deliver_change(&mut self.connections, &claim.holders, message)
                    && awaits_watch(&self.connections, &claim.holders, arrival)
                {
                    claim.pending.push((arrival, message));
                }
            }
            Some(ROOTS_CHANGED) => {
                for h in &claim.holders {
                    if let Some(connection) = self.connections.get(h) {
                        connection.send(Note::RootsChanged);
                    }
                }
            }
            _ => {
                for h in &claim.holders {
                    if let Some(connection) = self.connections.get(h) {
                        connection.send(Note::Other(message.message.clone()));
                    }
                }
            }
        }
    }

    /// After a `files/watch` of session `name` finished: delivers the notifications kept for
    /// the watch it created, and drops those no watch still in flight may claim.
    pub(super) fn settle_pending(&mut self, name: &str) {
        let Some(claim) = self.claims.get_mut(name) else {
            return;
        };
        for (arrival, message) in std::mem::take(&mut claim.pending) {
            if let Err(message) = deliver_change(&mut self.connections, &claim.holders, message)
                && awaits_watch(&self.connections, &claim.holders, arrival)
            {
                claim.pending.push((arrival, message));
            }
        }
    }
}

/// Sends a change notification to the holder that created its watch; gives it back when no
/// holder did.
fn deliver_change(
    connections: &mut HashMap<u64, Connection>,
    holders: &[u64],
    message: Notification,
) -> Result<(), Notification> {
    let params = message.message.get("params");
    let watch_id = params
        .and_then(|p| p.get("watchId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let ended = params.and_then(|p| p.get("event")).and_then(Value::as_str) == Some("unwatched");
    let owner = watch_id.as_deref().and_then(|w| {
        holders
            .iter()
            .find(|h| connections.get(h).is_some_and(|c| c.watches.contains(w)))
    });
    let (Some(owner), Some(watch_id)) = (owner.and_then(|h| connections.get_mut(h)), watch_id)
    else {
        return Err(message);
    };
    if ended {
        owner.watches.remove(&watch_id);
    }
    owner.send(Note::Change(message));
    Ok(())
}

/// Whether a holder has a `files/watch` in flight that began before notification `arrival`,
/// and so may turn out to own it.
fn awaits_watch(connections: &HashMap<u64, Connection>, holders: &[u64], arrival: u64) -> bool {
    holders
        .iter()
        .filter_map(|h| connections.get(h))
        .any(|c| c.watch_starts.iter().any(|s| *s < arrival))
}

/// `base` when `free` says so, else the first free `base#N` from N = 2.
fn free_name(base: &str, free: impl Fn(&str) -> bool) -> String {
    if free(base) {
        return base.to_owned();
    }
    // Each taken candidate is held by a live connection, so this ends within as many steps.
    let mut n: u64 = 2;
    loop {
        let candidate = format!("{base}#{n}");
        if free(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// One notification on its way to a connection's server.
enum Note {
    /// A change notification, holding its session's notification slot until sent.
    Change(Notification),
    /// The session's roots changed.
    RootsChanged,
    /// Another broker notification.
    Other(Value),
}

/// The sending end of one connection's notifications.
struct Queue {
    sender: mpsc::UnboundedSender<Note>,
    /// Whether a roots change is already queued: a second would tell the server nothing more.
    roots_queued: Arc<AtomicBool>,
}

impl Queue {
    /// Starts the sender task for `peer`; `None` outside a Tokio runtime, where no
    /// notification can be sent.
    fn start(peer: &Peer<RoleClient>, session: &str) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, mut receiver) = mpsc::unbounded_channel::<Note>();
        let roots_queued = Arc::new(AtomicBool::new(false));
        let (peer, queued, session) = (peer.clone(), roots_queued.clone(), session.to_owned());
        runtime.spawn(async move {
            while let Some(note) = receiver.recv().await {
                let sent = match &note {
                    Note::Change(message) => send(&peer, &message.message).await,
                    Note::Other(message) => send(&peer, message).await,
                    Note::RootsChanged => {
                        // Cleared before sending, so a change after this one is not lost.
                        queued.store(false, Ordering::SeqCst);
                        peer.notify_roots_list_changed().await
                    }
                };
                if let Err(e) = sent {
                    tracing::debug!(server = %session, error = %e, "cannot notify server; routing stopped");
                    break;
                }
                // The note, and with it its notification slot, goes only once sent.
                drop(note);
            }
        });
        Some(Self {
            sender,
            roots_queued,
        })
    }

    fn send(&self, note: Note) {
        if matches!(note, Note::RootsChanged) && self.roots_queued.swap(true, Ordering::SeqCst) {
            return;
        }
        // A closed queue means the server is gone; the note, and its slot, are dropped.
        let _ = self.sender.send(note);
    }
}

/// Sends one broker notification as a custom rmcp notification with its method and params.
async fn send(peer: &Peer<RoleClient>, message: &Value) -> Result<(), rmcp::ServiceError> {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let notification = CustomNotification::new(method, message.get("params").cloned());
    peer.send_notification(ClientNotification::CustomNotification(notification))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_gets_the_first_free_suffix() {
        let taken = ["twin", "twin#2", "other"];
        let free = |n: &str| !taken.contains(&n);
        assert_eq!(free_name("solo", free), "solo");
        assert_eq!(free_name("twin", free), "twin#3");
        assert_eq!(free_name("other", free), "other#2");
    }

    #[tokio::test]
    async fn roots_changes_wait_in_a_queue_at_most_once() {
        // A queue whose task never runs: what it holds is what a stalled server would.
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let queue = Queue {
            sender,
            roots_queued: Arc::new(AtomicBool::new(false)),
        };
        for _ in 0..1000 {
            queue.send(Note::RootsChanged);
        }
        queue.send(Note::Other(serde_json::json!({"method": "x"})));
        assert!(matches!(receiver.try_recv(), Ok(Note::RootsChanged)));
        assert!(matches!(receiver.try_recv(), Ok(Note::Other(_))));
        assert!(receiver.try_recv().is_err());
        // Once the sender task has taken it, the next change is queued again.
        queue.roots_queued.store(false, Ordering::SeqCst);
        queue.send(Note::RootsChanged);
        assert!(matches!(receiver.try_recv(), Ok(Note::RootsChanged)));
    }
}
