//! `files/watch` and `files/unwatch`. The watched path is resolved through the root's handle
//! (a final symlink is followed only inside the root), and the directory handle the resolver
//! opened is what the kernel watch is placed on (the watched directory, or a watched file's
//! parent). Kernel watches past `max_kernel_watches` or inotify's per-user limit fail the
//! request with `QUOTA_EXCEEDED` instead of silently missing changes.

use super::{Ctx, params, resolve_target};
use crate::broker::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::path::MountPath;
use crate::root::Access;
use crate::session::Session;
use crate::watch::{Change, RawEvent, WatchError};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Deserialize)]
struct WatchParams {
    path: String,
    #[serde(default)]
    recursive: bool,
    events: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UnwatchParams {
    watch_id: String,
}

pub(super) async fn watch(ctx: &Ctx, session: &Arc<Session>, raw: Value) -> Result<Value> {
    let p: WatchParams = params(raw)?;
    let events: HashSet<Change> = match &p.events {
        None => [Change::Modified, Change::Created, Change::Deleted].into(),
        Some(list) if list.is_empty() => {
            return Err(Error::invalid_params("events must name at least one kind"));
        }
        Some(list) => list
            .iter()
            .map(|e| {
                Change::parse(e).ok_or_else(|| {
                    Error::invalid_params("events must be modified, created or deleted")
                })
            })
            .collect::<Result<_>>()?,
    };
    let (root, path) = ctx.authorize(session, &p.path, Access::Read)?;
    let limits = ctx.limits().clone();
    let max = limits.max_watches.get();
    if ctx.inner.hub.of_session(session).len() >= max {
        return Err(Error::quota("too many watches in this session", max as u64));
    }
    let (s, inner, shown) = (session.clone(), ctx.inner.clone(), path.to_string());
    let recursive = p.recursive;
    let id = ctx
        .run(session, move |deadline| {
            let r = resolve_target(&root, &s, &path.rel, Access::Read, deadline)?;
            let is_dir = r.metadata().map_err(|e| Error::from_io(&e, ""))?.is_dir();
            let max_kernel = limits.max_kernel_watches.get();
            // The handle the watch is placed on, from the authorised one: never following a
            // link.
            let dir = r.watch_dir(is_dir).map_err(|e| Error::from_io(&e, ""))?;
            let window = Duration::from_millis(limits.watch_coalesce_ms.get());
            let weak = Arc::downgrade(&inner);
            let added = inner.hub.add(
                &s,
                root.clone(),
                r.real().clone(),
                is_dir,
                recursive,
                events,
                dir,
                max_kernel,
                deadline,
                || start_dispatcher(weak, window),
            );
            match added {
                Ok(w) => Ok(w.id.clone()),
                Err(WatchError::KernelLimit(limit)) => Err(Error::quota(
                    "watching this tree needs more kernel watches than the limit",
                    limit as u64,
                )),
                Err(WatchError::Os(msg, true)) => {
                    tracing::warn!(error = %msg, "inotify watch limit reached");
                    Err(Error::quota(
                        "the system's limit on file watches is reached",
                        limits.max_kernel_watches.get() as u64,
                    ))
                }
                Err(WatchError::Os(msg, false)) => {
                    tracing::warn!(error = %msg, "cannot add watch");
                    Err(Error::new(ErrorKind::Io, "cannot watch this path"))
                }
            }
        })
        .await
        .map_err(|e| e.with_path(shown))?;
    Ok(json!({ "watchId": id }))
}

pub(super) fn unwatch(ctx: &Ctx, session: &Arc<Session>, raw: Value) -> Result<Value> {
    let p: UnwatchParams = params(raw)?;
    let mine = ctx
        .inner
        .hub
        .of_session(session)
        .into_iter()
        .any(|w| w.id == p.watch_id);
    if !mine {
        return Err(Error::invalid_params("no such watch in this session"));
    }
    ctx.inner.hub.remove(&p.watch_id);
    Ok(json!({}))
}

/// Starts the task that turns raw events into notifications; returns its input.
fn start_dispatcher(inner: Weak<Inner>, window: Duration) -> mpsc::Sender<RawEvent> {
    let (tx, rx) = mpsc::channel(crate::watch::RAW_CAPACITY);
    // The watch is added from the blocking pool; the task belongs to the broker's runtime.
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn(dispatch(inner, rx, window));
        }
        Err(_) => tracing::error!("no runtime for the watch dispatcher"),
    }
    tx
}

async fn dispatch(inner: Weak<Inner>, mut rx: mpsc::Receiver<RawEvent>, window: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let first = tokio::select! {
            ev = rx.recv() => match ev { Some(e) => Some(e), None => return },
            _ = tick.tick() => None,
        };
        let mut batch: Vec<RawEvent> = first.into_iter().collect();
        if !batch.is_empty() {
            let until = tokio::time::Instant::now() + window;
            while let Ok(Some(ev)) = tokio::time::timeout_at(until, rx.recv()).await {
                if batch.len() < crate::watch::RAW_CAPACITY {
                    batch.push(ev);
                } else if let Some(b) = inner.upgrade() {
                    // Dropped here means lost: the watches owe their servers a rescan.
                    b.hub.mark_lost();
                }
            }
        }
        let Some(broker) = inner.upgrade() else {
            return;
        };
        let mapped = tokio::task::spawn_blocking(move || {
            let lost = broker.hub.take_lost();
            let deliveries = broker.hub.map(&batch, lost, visible);
            for d in &deliveries {
                broker.deliver(d);
            }
            // Watches whose directory left its place end, and their servers are told.
            for id in broker.hub.take_moved_out() {
                broker.end_watch(&id, "moved_out");
            }
            // Overflows owed while slots were taken are paid as soon as slots free up.
            broker.pay_overflows();
        })
        .await;
        if mapped.is_err() {
            tracing::warn!("watch dispatch failed");
        }
    }
}

/// Whether a change at `path` may be shown to the watch's session: the session is alive and a
/// grant covers the path. That the change's directory is still the one watched, at its place,
/// was checked by the hub before.
fn visible(w: &crate::watch::Watch, path: &MountPath) -> bool {
    let Some(session) = w.session.upgrade() else {
        return false;
    };
    session.grants().check(path, Access::Read).is_ok()
}
