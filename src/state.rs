//! The state one broker shares with its operations and background tasks, and the stream of
//! notifications it sends on its own. It sits below the operations and the broker, so that
//! both take it as a value handed down and neither reaches up into the other.

use crate::atomic::Sweeper;
use crate::audit::{AuditEvent, AuditLog, AuditRecord};
use crate::config::Config;
use crate::consent::ConsentSource;
use crate::locks::{LockTable, lock, read, write};
use crate::session::{Notification, Session};
use crate::watch::{Sink, WatchHub};
use crate::wire::{ChangeEvent, NotificationKind};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;

/// What every operation and background task of one broker works with.
pub(crate) struct BrokerState {
    pub(crate) config: RwLock<Arc<Config>>,
    pub(crate) consent: ConsentSource,
    pub(crate) audit: AuditLog,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) locks: LockTable,
    pub(crate) sweeper: Sweeper,
    pub(crate) hub: WatchHub,
    pub(crate) outbound: mpsc::UnboundedSender<Notification>,
    /// Ticks each time a configuration is put in force, for what must follow the roots
    /// outside the broker (the proxy's sandbox).
    pub(crate) changes: tokio::sync::watch::Sender<u64>,
    /// The audit events, for any number of subscribers.
    pub(crate) events: tokio::sync::broadcast::Sender<AuditEvent>,
    /// Ticks whenever what a snapshot of the sessions shows may have changed.
    pub(crate) activity: tokio::sync::watch::Sender<u64>,
    /// Mounts whose directory was last found away from its configured path.
    pub(crate) unavailable: Mutex<HashSet<String>>,
    /// Held from reading the configuration in force to putting the next one in force, so
    /// that two reloads (the file's and a console edit's) never each build on the same old
    /// one and lose the other's change.
    pub(crate) reloading: Mutex<()>,
    /// The recovery store, unless the policy turned recovery off when the broker was built.
    pub(crate) recovery: Option<Arc<crate::recovery::RecoveryStore>>,
    /// The thread that runs small operations' blocking work (see [`crate::lane`]).
    pub(crate) lane: crate::lane::Lane,
    /// What lifts a suspension in this broker's face, as its refusals and warning say.
    pub(crate) resumed_by: crate::watchdog::ResumedBy,
    /// The suspensions of servers' identities, by digest: a suspended server that ends its
    /// session and starts again is still suspended, until the user resumes it.
    pub(crate) suspended: Mutex<HashMap<String, crate::watchdog::Suspension>>,
}

impl BrokerState {
    /// Every live session.
    pub(crate) fn sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> Arc<Config> {
        read(&self.config).clone()
    }

    /// Puts a new configuration in force.
    pub(crate) fn set_config(&self, config: Arc<Config>) {
        if let Some(r) = &self.recovery {
            r.set_policy(config.policy.recovery.clone());
        }
        *write(&self.config) = config;
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        self.touch();
    }

    /// Audits one message: the log, and every subscriber of the events.
    pub(crate) fn record(&self, r: &AuditRecord<'_>) {
        self.audit.record(r);
        // An event is made only for someone to get it.
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(AuditEvent::of(r));
        }
    }

    /// Tells whoever follows the sessions' state that it may have changed.
    pub(crate) fn touch(&self) {
        self.activity.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl BrokerState {
    /// Finds which roots of `config` are no longer at their configured path (one `stat` each),
    /// and, when that changed since the last look, logs it, tells every session that sees a
    /// changed root with `notifications/roots/list_changed`, and ends the watches on a root
    /// that went away. Called as each request starts (and by the sidecar's periodic check),
    /// so a root that moves is never served after the move is seen.
    pub(crate) fn check_roots(&self, config: &Config) -> HashSet<String> {
        let now: HashSet<String> = config
            .roots
            .iter()
            .filter(|r| !r.in_place())
            .map(|r| r.mount().to_string())
            .collect();
        let changed: Vec<String> = {
            let mut last = lock(&self.unavailable);
            if *last == now {
                return now;
            }
            let changed = last.symmetric_difference(&now).cloned().collect();
            last.clone_from(&now);
            changed
        };
        for mount in &changed {
            if now.contains(mount) {
                tracing::warn!(%mount, "root directory is no longer at its configured path; not served until it is");
            } else {
                tracing::warn!(%mount, "root directory is back at its configured path; served again");
            }
        }
        for session in self.sessions() {
            let sid = session.server_id().to_owned();
            let sees = |m: &String| {
                config
                    .roots
                    .iter()
                    .any(|r| r.mount().as_str() == m && r.visible_to(&sid))
            };
            if changed.iter().any(sees) {
                self.notify(&sid, "notifications/roots/list_changed", None, None);
            }
            for w in self.hub.of_session(&session) {
                if now.contains(w.root.mount().as_str()) {
                    self.end_watch(&w.id, "root_removed");
                }
            }
        }
        now
    }
}

impl Sink for BrokerState {
    fn hub(&self) -> &WatchHub {
        &self.hub
    }

    /// Sends a notification to a session. With a slot semaphore, the notification needs a
    /// free slot and returns false when there is none; without, it is always sent (for the
    /// rare messages a server must not miss, such as the end of a watch).
    fn notify(
        &self,
        server_id: &str,
        method: &str,
        params: Option<Value>,
        slots: Option<&Arc<tokio::sync::Semaphore>>,
    ) -> bool {
        // Every notification the broker sends is one a host can read typed; anything else
        // would be a bug here, and is not sent.
        let Some(kind) = NotificationKind::read(method, params.as_ref()) else {
            tracing::error!(method, "not a notification of the broker's; not sent");
            return false;
        };
        // A watch's end and new roots change what a snapshot shows; a change event does not.
        if !matches!(&kind, NotificationKind::FileChanged(c) if c.event != ChangeEvent::Unwatched) {
            self.touch();
        }
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
        // A session a host opened has a stream of its own; the others share the broker's.
        let own = lock(&self.sessions)
            .get(server_id)
            .and_then(|s| s.outbound.clone());
        own.as_ref()
            .unwrap_or(&self.outbound)
            .send(Notification {
                server_id: server_id.to_owned(),
                message,
                kind: Box::new(kind),
                _slot: slot,
            })
            .is_ok()
    }
}
