//! `files/rename`: moves an entry within one root, atomically. Without `overwrite`, an existing
//! target is refused by `RENAME_NOREPLACE` (or link-then-unlink), with no window in which it
//! could be replaced. Both ends act on names: neither final component is followed.

use super::create::root_itself;
use super::{Ctx, origin, params, resolve_granted};
use crate::access::Access;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::root::{FollowFinal, Parents};
use crate::session::Session;
use crate::wire::{RenameParams, RenameResult};
use serde_json::Value;
use std::sync::Arc;

fn into_itself() -> Error {
    Error::new(
        ErrorKind::InvalidPath,
        "cannot move a directory into itself",
    )
    .with_reason(Reason::IntoItself)
}

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<RenameResult> {
    let p: RenameParams = params(raw)?;
    let (root, old) = ctx.authorize(session, &p.old_path, Access::Write)?;
    let (_, new) = ctx.authorize(session, &p.new_path, Access::Write)?;
    let (old_shown, new_shown) = (old.to_string(), new.to_string());
    if old.mount != new.mount {
        return Err(
            Error::new(ErrorKind::InvalidPath, "paths are in different roots")
                .with_reason(Reason::CrossRoot)
                .with_path(new_shown),
        );
    }
    if old.rel.is_root() || new.rel.is_root() {
        return Err(root_itself().with_path(old_shown));
    }
    if new != old && new.rel.starts_with(&old.rel) {
        return Err(into_itself().with_path(new_shown));
    }
    let (s, inner) = (session.clone(), ctx.inner.clone());
    let (overwrite, lock_wait) = (p.overwrite, ctx.lock_wait());
    let shown = old_shown.clone();
    ctx.run(session, move |deadline| {
        let from = resolve_granted(
            &root,
            &s,
            &old.rel,
            FollowFinal::No,
            Parents::Existing,
            Access::Write,
            deadline,
        )?;
        let to = resolve_granted(
            &root,
            &s,
            &new.rel,
            FollowFinal::No,
            Parents::Existing,
            Access::Write,
            deadline,
        )?;
        if from.name().is_none() || to.name().is_none() {
            return Err(root_itself());
        }
        // Symlinks on the way may make the target lie beneath the source after all.
        if to.real() != from.real() && to.real().starts_with(from.real()) {
            return Err(into_itself());
        }
        let mut wait = crate::locks::Wait::new(lock_wait, deadline);
        let _locks = inner.locks.lock_two(from.real(), to.real(), &mut wait)?;
        let io = |e: std::io::Error| Error::from_io(&e, "");
        from.metadata().map_err(io)?;
        if from.real() == to.real() {
            // Renaming an entry onto itself changes nothing, as rename(2) does.
            return Ok(());
        }
        // Neither the file moved nor one it replaces is taken from under another process
        // that holds its lock, as a write would not be. They are locked in the order of the
        // in-process locks, so that two brokers renaming two files in opposite directions
        // do not each hold one and wait for the other until both give up.
        let mut ends = vec![&from];
        if overwrite {
            ends.push(&to);
        }
        ends.sort_by_key(|g| g.real().to_string());
        let mut held: Vec<std::fs::File> = Vec::new();
        for g in ends {
            let name = g.name().unwrap_or(".");
            let file = crate::atomic::lock_file_entry(g.parent(), name, &mut wait, held.first())?;
            held.extend(file);
        }
        // What the rename replaces is kept first, under the locks, from the locked name.
        let replaced = match (&inner.recovery, to.metadata()) {
            (Some(rec), Ok(meta)) if overwrite => {
                let name = to.name().unwrap_or(".");
                Some(rec.keep_replaced(to.parent(), name, &meta, deadline)?)
            }
            _ => None,
        };
        let moved = from.metadata().ok();
        if let Err(e) = from.rename_to(&to, overwrite) {
            if let (Some(rec), Some(keep)) = (&inner.recovery, replaced) {
                rec.discard(keep);
            }
            return Err(e);
        }
        // Journaled before the flushes, which may fail: the rename is done, and what it
        // replaced is in the store.
        if let Some(rec) = &inner.recovery {
            let keep = replaced.unwrap_or_else(crate::recovery::Keep::nothing);
            let after = moved.as_ref().map(crate::recovery::fingerprint);
            let change = origin(&s, "files/rename", &root, from.real());
            rec.record(change, keep, Some(to.real().to_string()), after);
        }
        crate::atomic::sync_dir(to.parent()).map_err(io)?;
        crate::atomic::sync_dir(from.parent()).map_err(io)?;
        Ok(())
    })
    .await
    .map_err(|e| e.with_path(shown))?;
    Ok(RenameResult {
        old_path: old_shown,
        new_path: new_shown,
    })
}
