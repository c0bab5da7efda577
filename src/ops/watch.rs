//! `files/watch` and `files/unwatch`. The watched path is resolved through the root's handle
//! (a final symlink is followed only inside the root), and the directory handle the resolver
//! opened is what the kernel watch is placed on (the watched directory, or a watched file's
//! parent). Kernel watches past `max_kernel_watches` or inotify's per-user limit fail the
//! request with `QUOTA_EXCEEDED` instead of silently missing changes.

use super::{Ctx, params, resolve_target};
use crate::access::Access;
use crate::error::{Error, ErrorKind, Result};
use crate::session::Session;
use crate::watch::{Change, NewWatch, WatchError};
use crate::wire::{Empty, UnwatchParams, WatchParams, WatchResult};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn watch(
    ctx: &mut Ctx,
    session: &Arc<Session>,
    raw: Value,
) -> Result<WatchResult> {
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
            let new = NewWatch {
                root: root.clone(),
                path: r.real().clone(),
                is_dir,
                recursive,
                events,
                dir,
            };
            let added = inner.hub.add(&s, new, max_kernel, deadline, || {
                crate::watch::start_fanout(weak, window)
            });
            match added {
                // Placing a recursive watch takes a while: a session ended or a grant revoked
                // meanwhile has already looked for the session's watches and missed this one.
                // Looked at again now that it is in the table, one of the two sees the other.
                Ok(w) if s.is_ended() || s.grants().check(&w.path, Access::Read).is_err() => {
                    inner.hub.remove(&w.id);
                    Err(Error::denied(crate::error::Reason::Revoked))
                }
                Ok(w) => Ok(w.id.clone()),
                Err(WatchError::KernelLimit(limit)) => Err(Error::quota(
                    "watching this tree needs more kernel watches than the limit",
                    limit as u64,
                )),
                Err(WatchError::SystemLimit(msg)) => {
                    tracing::warn!(error = %msg, "inotify watch limit reached");
                    Err(Error::quota(
                        "the system's limit on file watches is reached",
                        limits.max_kernel_watches.get() as u64,
                    ))
                }
                Err(WatchError::Os(msg)) => {
                    tracing::warn!(error = %msg, "cannot add watch");
                    Err(Error::new(ErrorKind::Io, "cannot watch this path"))
                }
            }
        })
        .await
        .map_err(|e| e.with_path(shown))?;
    Ok(WatchResult { watch_id: id })
}

pub(super) fn unwatch(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<Empty> {
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
    Ok(Empty {})
}
