//! `files/watch` and `files/unwatch`. The watched path is resolved through the root's handle
//! (a final symlink is followed only inside the root); a recursive watch counts the kernel
//! watches it needs first, so that inotify's per-user limit fails the request with
//! `QUOTA_EXCEEDED` instead of silently missing changes.

use super::{Ctx, params, resolve_granted};
use crate::broker::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Deadline;
use crate::path::MountPath;
use crate::root::{Access, FollowFinal, Parents};
use crate::session::Session;
use crate::watch::{Change, WatchError};
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
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
            let r = resolve_granted(
                &root,
                &s,
                &path.rel,
                FollowFinal::Yes,
                Parents::Existing,
                Access::Read,
                deadline,
            )?;
            let is_dir = r.metadata().map_err(|e| Error::from_io(&e, ""))?.is_dir();
            let max_kernel = limits.max_kernel_watches.get();
            let cost = if recursive && is_dir {
                let dir = r.open_dir().map_err(|e| Error::from_io(&e, ""))?;
                count_dirs(&dir, max_kernel + 1, deadline)?
            } else {
                1
            };
            let window = Duration::from_millis(limits.watch_coalesce_ms.get());
            let weak = Arc::downgrade(&inner);
            let added = inner.hub.add(
                &s,
                root.clone(),
                r.real().clone(),
                is_dir,
                recursive,
                events,
                cost,
                max_kernel,
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

/// Counts the directories of a tree (itself included), never following symlinks, stopping at
/// `stop`: what a recursive kernel watch of it costs.
fn count_dirs(dir: &Dir, stop: usize, deadline: Deadline) -> Result<usize> {
    let mut count = 1;
    let mut stack: Vec<Dir> = vec![dir.try_clone().map_err(|e| Error::from_io(&e, ""))?];
    while let Some(d) = stack.pop() {
        deadline.check()?;
        let Ok(entries) = d.entries() else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                count += 1;
                if count >= stop {
                    return Ok(count);
                }
                if let Ok(sub) = d.open_dir_nofollow(entry.file_name()) {
                    stack.push(sub);
                }
            }
        }
    }
    Ok(count)
}

/// Starts the task that turns raw events into notifications; returns its input.
fn start_dispatcher(inner: Weak<Inner>, window: Duration) -> mpsc::Sender<notify::Event> {
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

async fn dispatch(inner: Weak<Inner>, mut rx: mpsc::Receiver<notify::Event>, window: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let first = tokio::select! {
            ev = rx.recv() => match ev { Some(e) => Some(e), None => return },
            _ = tick.tick() => None,
        };
        let mut batch: Vec<notify::Event> = first.into_iter().collect();
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
            // Overflows owed while slots were taken are paid as soon as slots free up.
            broker.pay_overflows();
        })
        .await;
        if mapped.is_err() {
            tracing::warn!("watch dispatch failed");
        }
    }
}

/// Whether a change at `path` may be shown to the watch's session: a grant covers it, and it
/// was not reached through a symlink (its parent resolves to itself through the root).
fn visible(w: &crate::watch::Watch, path: &MountPath) -> bool {
    let Some(session) = w.session.upgrade() else {
        return false;
    };
    if session.grants().check(path, Access::Read).is_err() {
        return false;
    }
    let comps = path.rel.components();
    let Some((_, parent)) = comps.split_last() else {
        return true;
    };
    let parent = crate::path::RelPath::from_components(parent.to_vec());
    let gate = crate::root::Gate::new(session.grants().clone(), Access::Read);
    match w
        .root
        .resolve(&parent, &gate, FollowFinal::Yes, Parents::Existing, None)
    {
        Ok(r) => r.real().rel == parent,
        // The parent went away (a deleted tree): nothing can be read through it any more.
        Err(_) => true,
    }
}
