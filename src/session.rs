//! One server session: its grants, its cap on operations in flight and the order of its
//! requests.

use crate::consent::{Grant, Grants};
use crate::locks::lock;
use crate::turn::Orderer;
use crate::upload::Uploads;
use crate::watchdog::{Suspension, Watchdog};
use crate::wire::NotificationKind;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;
use tokio::sync::{Notify, Semaphore, mpsc};

/// Longest session id taken from a server's self-reported name, in characters.
pub(crate) const MAX_SERVER_NAME_CHARS: usize = 128;

/// The session id used when neither the host nor the server's `serverInfo.name` gave one
/// (the proxy before the server's first brokered request, the rmcp adapter).
pub(crate) const DEFAULT_SERVER_ID: &str = "default";

mod names;
pub(crate) use names::{base_name, refuse_reserved, server_name};

/// A message the broker sends on its own (a notification) to one server session.
///
/// Change notifications hold one of their session's slots (`limits.watch_queue`) until the
/// host drops the value, so a host that stops reading makes the session owe an `overflow`
/// instead of making the broker buffer without bound.
#[derive(Debug)]
pub struct Notification {
    /// The session it is for.
    pub server_id: String,
    /// The JSON-RPC notification, to relay as it is.
    pub message: Value,
    // Boxed: the message is what most hosts relay, and it keeps the value small to move.
    pub(crate) kind: Box<NotificationKind>,
    pub(crate) _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Notification {
    /// What the notification says, typed.
    pub fn kind(&self) -> &NotificationKind {
        &self.kind
    }
}

/// The stream of the broker's notifications to servers. Its size is bounded by the
/// sessions' notification slots.
pub type Notifications = mpsc::UnboundedReceiver<Notification>;

/// The state the broker keeps for one server id.
#[derive(Debug)]
pub(crate) struct Session {
    server_id: String,
    /// What its budgets are kept under: its id and a number no other session of the process
    /// had, so that a session never inherits the debt of an earlier one of the same name (a
    /// server that names itself as another could otherwise spend that one's budgets).
    budget_key: String,
    /// See [`Session::label`].
    label: String,
    grants: Mutex<Grants>,
    uploads: Mutex<Uploads>,
    pub(crate) in_flight: Arc<Semaphore>,
    max_in_flight: usize,
    /// Change notifications in flight; a permit travels with each one until the host drops it.
    pub(crate) notify_slots: Arc<Semaphore>,
    /// The order of the session's requests, whichever face or host task sends them.
    pub(crate) order: Arc<Orderer>,
    /// Where the session's notifications go when it has a stream of its own (a session a
    /// host opened); else they go to the broker's stream.
    pub(crate) outbound: Option<mpsc::UnboundedSender<Notification>>,
    /// When the session began.
    pub(crate) started: SystemTime,
    /// Whether the session was ended: whoever still holds it can no longer act in it.
    ended: std::sync::atomic::AtomicBool,
    /// Set once when it ends, or when its input ended (no request can follow): its consent
    /// questions are withdrawn then (see `consent/ended.rs`).
    ends: tokio::sync::watch::Sender<bool>,
    /// What the session has done so far.
    stats: Mutex<Stats>,
    /// The requests handed over and not yet answered, by JSON-RPC id, each with the signal
    /// that withdraws it (`notifications/cancelled`).
    pending: Mutex<HashMap<String, Arc<Notify>>>,
    /// Under `consent.roots = "ask"`: the mounts this session was asked about, and those
    /// it may see.
    roots_seen: Mutex<RootsSeen>,
    /// The CPU time its operations spent, in nanoseconds: shared with their blocking work.
    pub(crate) cpu: Arc<std::sync::atomic::AtomicU64>,
    /// Its violations over the last minute, and its suspension.
    watchdog: Mutex<Watchdog>,
    /// Who its server is, as the face that opened it worked out; `None` when it could not
    /// be told (a library host that gave none).
    identity: Option<Arc<crate::Identity>>,
    /// The standing grants its name would hold that its identity does not (see
    /// [`HeldBack`]): a question about one of their paths says why it is asked again.
    held_back: Mutex<Vec<HeldBack>>,
}

/// A standing grant a session's name would hold and its identity does not: a remembered
/// grant given to another program, or one edited since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldBack {
    /// The grant's path, in mount form.
    pub path: String,
    /// Why the session does not hold it, for the user.
    pub why: String,
}

/// The roots a session was asked about under `consent.roots = "ask"`, each by mount name
/// and directory: an answer about one directory never shows another that a reload or the
/// console later mounts under the name.
#[derive(Debug, Default)]
pub(crate) struct RootsSeen {
    /// Asked about, whatever the answer: never asked again in this session.
    pub asked: Vec<(String, std::path::PathBuf)>,
    /// Approved: shown.
    pub shown: Vec<(String, std::path::PathBuf)>,
}

/// What a session has done so far: counters and its last request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    /// The counters.
    pub counters: Counters,
    /// The last request: when it ended, its method, its path and its outcome.
    pub last: Option<(SystemTime, String, Option<String>, String)>,
    /// The last refusal for a budget: when, and which budget (`requests`, `bytes`, `cpu`).
    pub throttled: Option<(SystemTime, &'static str)>,
    /// The budgets the user was told of (a bit per [`crate::limits::Spent`]): once each.
    pub told: u8,
    /// When a refusal for its suspension was last audited.
    pub suspended_audited: Option<std::time::Instant>,
}

/// What a session has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Requests answered or withdrawn.
    pub requests: u64,
    /// Of those, how many failed (refusals included).
    pub failed: u64,
    /// Of those, how many were refused as violations: outside a root, no grant, revoked,
    /// read-only.
    pub refused: u64,
    /// Of those, how many were withdrawn before their answer.
    pub cancelled: u64,
    /// File bytes read.
    pub bytes_read: u64,
    /// File bytes written.
    pub bytes_written: u64,
    /// Entries listings gave.
    pub entries_listed: u64,
    /// CPU time its operations spent (their blocking work, measured per thread).
    pub cpu: std::time::Duration,
    /// Requests refused because the session had spent a budget (requests, bytes, CPU).
    pub throttled: u64,
}

impl Session {
    /// A new session holding the given standing grants.
    pub(crate) fn new(
        server_id: &str,
        identity: Option<crate::Identity>,
        (standing, held_back): (Vec<Grant>, Vec<HeldBack>),
        max_in_flight: usize,
        watch_queue: usize,
        outbound: Option<mpsc::UnboundedSender<Notification>>,
    ) -> Self {
        let started = SystemTime::now();
        let mut grants = Grants::default();
        // A standing grant is held from the session's start.
        for g in standing {
            grants.add(Grant {
                since: started,
                ..g
            });
        }
        static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Session {
            server_id: server_id.to_owned(),
            budget_key: format!("{server_id}\u{0}{serial}"),
            label: format!("{server_id}@{}#{serial}", std::process::id()),
            grants: Mutex::new(grants),
            uploads: Mutex::new(Uploads::default()),
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
            max_in_flight,
            notify_slots: Arc::new(Semaphore::new(watch_queue)),
            order: Orderer::new(),
            outbound,
            started,
            ended: std::sync::atomic::AtomicBool::new(false),
            ends: tokio::sync::watch::Sender::new(false),
            stats: Mutex::new(Stats::default()),
            pending: Mutex::new(HashMap::new()),
            roots_seen: Mutex::new(RootsSeen::default()),
            cpu: Arc::default(),
            watchdog: Mutex::new(Watchdog::new(std::time::Instant::now())),
            identity: identity.map(Arc::new),
            held_back: Mutex::new(held_back),
        }
    }

    /// Who its server is, when that could be told.
    pub(crate) fn identity(&self) -> Option<&crate::Identity> {
        self.identity.as_deref()
    }

    /// The standing grants its identity does not hold (see [`HeldBack`]), locked.
    pub(crate) fn held_back(&self) -> MutexGuard<'_, Vec<HeldBack>> {
        lock(&self.held_back)
    }

    /// Suspends it as `s` says, as a suspension of its identity carried over from an earlier
    /// session does.
    pub(crate) fn suspend_as(&self, s: Suspension) {
        lock(&self.watchdog).suspend_as(s);
    }

    /// Its suspension, while it is suspended.
    pub(crate) fn suspension(&self) -> Option<Suspension> {
        lock(&self.watchdog).suspended().cloned()
    }

    /// Counts a violation of a request sent at `sent`; returns the suspension it brought,
    /// if it brought one.
    pub(crate) fn strike(
        &self,
        reason: crate::error::Reason,
        sent: std::time::Instant,
        limit: u32,
    ) -> Option<Suspension> {
        lock(&self.watchdog).strike(std::time::Instant::now(), sent, reason, limit)
    }

    /// The user refused `reason` to what the session already sent (see
    /// [`Watchdog::forgive`]).
    pub(crate) fn forgive(&self, reason: crate::error::Reason) {
        lock(&self.watchdog).forgive(reason);
    }

    /// Whether a refusal for its suspension is to be audited now: one a second at most.
    pub(crate) fn audit_suspended_now(&self) -> bool {
        let mut stats = self.stats();
        let now = std::time::Instant::now();
        let due = stats
            .suspended_audited
            .is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1));
        if due {
            stats.suspended_audited = Some(now);
        }
        due
    }

    /// Lifts its suspension; says whether it was suspended.
    pub(crate) fn resume(&self) -> bool {
        lock(&self.watchdog).resume()
    }

    /// The roots this session was asked about and may see (`consent.roots = "ask"`).
    pub(crate) fn roots_seen(&self) -> MutexGuard<'_, RootsSeen> {
        lock(&self.roots_seen)
    }

    /// The server id.
    pub(crate) fn server_id(&self) -> &str {
        &self.server_id
    }

    /// What the recovery journal calls it: server id, process and serial, unique among the
    /// user's sessions.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The key of its budgets (see the field).
    pub(crate) fn budget_key(&self) -> &str {
        &self.budget_key
    }

    /// The grants, locked. A poisoned lock still holds consistent data (every change is a
    /// single push or retain), so it is used as is.
    pub(crate) fn grants(&self) -> MutexGuard<'_, Grants> {
        lock(&self.grants)
    }

    /// The staged uploads, locked.
    pub(crate) fn uploads(&self) -> MutexGuard<'_, Uploads> {
        lock(&self.uploads)
    }

    /// Marks the session ended.
    pub(crate) fn end(&self) {
        self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
        self.ends.send_replace(true);
    }

    /// Notes that no request can follow (the peer's connection ended): its consent questions
    /// are withdrawn, though the requests in flight run to their end.
    pub(crate) fn input_ended(&self) {
        self.ends.send_replace(true);
    }

    /// Whether it ended, or its input did: what the user decides about it now is for nobody.
    pub(crate) fn is_gone(&self) -> bool {
        *self.ends.borrow()
    }

    /// Its end, for a consent question it asks.
    pub(crate) fn end_signal(&self) -> crate::consent::SessionEnd {
        crate::consent::SessionEnd::of(&self.ends)
    }

    /// Whether the session was ended.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many of its operations are running now.
    pub(crate) fn running(&self) -> usize {
        self.max_in_flight
            .saturating_sub(self.in_flight.available_permits())
    }

    /// What the session has done so far, locked.
    pub(crate) fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    /// Notes that the request `id` was handed over; returns the signal that withdraws it.
    /// A second request with an id still pending replaces the first one's entry: only the
    /// newer can then be withdrawn, as JSON-RPC gives a reused id no other meaning.
    pub(crate) fn pend(&self, id: String) -> Arc<Notify> {
        let signal = Arc::new(Notify::new());
        lock(&self.pending).insert(id, signal.clone());
        signal
    }

    /// Notes that the request `id` was answered (or withdrawn), if `signal` is still its entry.
    pub(crate) fn unpend(&self, id: &str, signal: &Arc<Notify>) {
        let mut pending = lock(&self.pending);
        if pending.get(id).is_some_and(|s| Arc::ptr_eq(s, signal)) {
            pending.remove(id);
        }
    }

    /// Withdraws the pending request `id`, if there is one: its answer is not sent.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        match lock(&self.pending).remove(id) {
            Some(signal) => {
                // `notify_one` keeps the wake-up for a request not yet waiting on it.
                signal.notify_one();
                true
            }
            None => false,
        }
    }
}
