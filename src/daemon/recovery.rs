//! The daemon's recovery store, for the user: the control ops `history`, `restore` and
//! `undo` (their answers are here; `dispatch.rs` calls them), and the calls the console's
//! Changes view makes. Both faces go through the same functions, so that they say the same.
//!
//! - `{"op": "history", "server": ID?, "since": MS?}` → `{"ok": true, "changes": [...]}`,
//!   oldest first, as `fsbroker history --json` lists them;
//! - `{"op": "restore", "id": ID, "to": MOUNTPATH?}` → `{"ok": true, "restored": {"id",
//!   "path", "kept"}}`;
//! - `{"op": "undo", "server": ID, "since": MS?}` → `{"ok": true, "restored": [...],
//!   "conflicts": [...]}`.
//!
//! Refusals are `{"ok": false, "error": MESSAGE}`, with `code` (`FILE_NOT_FOUND`,
//! `CONCURRENCY_CONFLICT`, ...) when the store gave one.
//!
//! Reading the journal, and more so a restore, is filesystem work that may take long (a
//! copy across filesystems, a slow disk): it runs on tokio's blocking threads, so that no
//! connection's task, nor the console's, waits on it.

use super::line::error;
use super::protocol;
use crate::broker::Broker;
use crate::error::{Error, ErrorKind};
use crate::recovery::{Change, RecoveryStore, Restored, Undone};
use serde_json::{Value, json};
use std::path::PathBuf;

/// Why the daemon's store did not do what was asked.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The daemon's policy turned recovery off: there is no store.
    Off,
    /// The store refused, or failed, saying why.
    Store(Error),
}

impl Refused {
    /// What the user is told.
    pub(crate) fn message(&self) -> String {
        match self {
            Refused::Off => "recovery is off in the daemon's policy ([recovery] enabled = \
                             false): nothing servers change is kept"
                .to_owned(),
            Refused::Store(e) => e.message().to_owned(),
        }
    }

    /// The store's error kind, when it gave one.
    pub(crate) fn kind(&self) -> Option<ErrorKind> {
        match self {
            Refused::Off => None,
            Refused::Store(e) => Some(e.kind()),
        }
    }

    /// The control protocol's error line.
    fn line(&self) -> Value {
        let mut v = error(self.message());
        if let (Value::Object(m), Some(code)) =
            (&mut v, self.kind().and_then(|k| k.wire().data_code))
        {
            m.insert("code".into(), json!(code));
        }
        v
    }
}

/// What the store holds, for a listing: the changes (oldest first), where the store is, and
/// what its kept content costs (bytes, changes).
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) changes: Vec<Change>,
    pub(crate) store: PathBuf,
    pub(crate) usage: (u64, usize),
    /// The changes as the `history` op lists them (see [`RecoveryStore::listed`]), when
    /// asked for.
    pub(crate) listed: Vec<Value>,
}

/// The changes of `server` (a server id or a session) made at or after `since` (ms since the
/// epoch), oldest first; every change without either. With `listed`, also as the op lists them.
pub(crate) async fn history(
    broker: &Broker,
    server: Option<String>,
    since: Option<u64>,
    listed: bool,
) -> Result<Listing, Refused> {
    blocking(broker, move |store| {
        let io = |e: std::io::Error| {
            Error::new(
                ErrorKind::Io,
                format!("cannot read the recovery journal: {e}"),
            )
        };
        let changes = store.history(server.as_deref(), since).map_err(io)?;
        let usage = store.usage().map_err(io)?;
        let listed = if listed {
            store.listed(&changes)
        } else {
            Vec::new()
        };
        Ok(Listing {
            changes,
            store: store.path().to_owned(),
            usage,
            listed,
        })
    })
    .await
}

/// Puts back what change `r.id` replaced or removed, at its path or at `r.to` (mount form).
pub(crate) async fn restore(broker: &Broker, r: protocol::Restore) -> Result<Restored, Refused> {
    blocking(broker, move |store| store.restore(&r.id, r.to.as_deref())).await
}

/// Takes back the changes of `r.server` (a server id or a session): those at or after
/// `r.since`, else those of its latest session.
pub(crate) async fn undo(broker: &Broker, r: protocol::Undo) -> Result<Undone, Refused> {
    blocking(broker, move |store| store.undo(&r.server, r.since)).await
}

/// Runs `f` on the daemon's store on a blocking thread.
async fn blocking<T: Send + 'static>(
    broker: &Broker,
    f: impl FnOnce(&RecoveryStore) -> crate::error::Result<T> + Send + 'static,
) -> Result<T, Refused> {
    if broker.recovery().is_none() {
        return Err(Refused::Off);
    }
    let broker = broker.clone();
    let ran = tokio::task::spawn_blocking(move || match broker.recovery() {
        Some(store) => f(store).map_err(Refused::Store),
        None => Err(Refused::Off),
    })
    .await;
    // A task that did not finish: it panicked, or the runtime is going away.
    ran.unwrap_or_else(|e| {
        Err(Refused::Store(Error::new(
            ErrorKind::Internal,
            format!("the recovery store's work did not finish: {e}"),
        )))
    })
}

/// `history`'s answer: the changes as `fsbroker history --json` lists them.
pub(crate) async fn history_answer(broker: &Broker, r: protocol::History) -> Value {
    match history(broker, r.server, r.since, true).await {
        Ok(listing) => json!({"ok": true, "changes": listing.listed}),
        Err(e) => e.line(),
    }
}

/// `restore`'s answer: what was put back, and where.
pub(crate) async fn restore_answer(broker: &Broker, r: protocol::Restore) -> Value {
    match restore(broker, r).await {
        Ok(done) => {
            tracing::info!(change = %done.id, path = %done.path, "restored on request");
            json!({"ok": true, "restored": done})
        }
        Err(e) => e.line(),
    }
}

/// `undo`'s answer: what was put back, and what could not be.
pub(crate) async fn undo_answer(broker: &Broker, r: protocol::Undo) -> Value {
    match undo(broker, r).await {
        Ok(undone) => {
            tracing::info!(
                restored = undone.restored.len(),
                conflicts = undone.conflicts.len(),
                "undone on request"
            );
            json!({"ok": true, "restored": undone.restored, "conflicts": undone.conflicts})
        }
        Err(e) => e.line(),
    }
}
