//! `files/rename`: moves an entry within one root, atomically. Without `overwrite`, an existing
//! target is refused by `RENAME_NOREPLACE` (or link-then-unlink), with no window in which it
//! could be replaced. Both ends act on names: neither final component is followed.

use super::create::root_itself;
use super::{Ctx, keeping, params, resolve_granted};
use crate::access::Access;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::RelPath;
use crate::root::{FollowFinal, Granted, Parents, Root};
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
        let (from, to) = ends(&root, &s, &old.rel, &new.rel, deadline)?;
        let mut wait = crate::locks::Wait::new(lock_wait, deadline);
        let _locks = inner.locks.lock_two(from.real(), to.real(), &mut wait)?;
        from.metadata().map_err(io)?;
        if from.real() == to.real() {
            // Renaming an entry onto itself changes nothing, as rename(2) does.
            return Ok(());
        }
        let _held = lock_files(&from, &to, overwrite, &mut wait)?;
        // What the rename replaces is kept first, under the locks, from the locked name.
        let mut keeping = keeping(&inner, &s, "files/rename", &root, &from, deadline);
        if overwrite && let Ok(meta) = to.metadata() {
            keeping.keep_replaced(&to, &meta)?;
        }
        let moved = from.metadata().ok();
        if let Err(e) = from.rename_to(&to, overwrite) {
            // One system call: it failed, so nothing was replaced.
            keeping.cancel();
            return Err(e);
        }
        // Journaled before the flushes, which may fail: the rename is done, and what it
        // replaced is in the store.
        let after = moved.as_ref().map(crate::recovery::fingerprint);
        keeping.done(Some(to.real().to_string()), after);
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

fn io(e: std::io::Error) -> Error {
    Error::from_io(&e, "")
}

/// Resolves both ends of a rename, `old` and `new` in `root`, neither final name followed,
/// and refuses a root itself or a move into the entry itself.
fn ends(
    root: &Root,
    session: &Session,
    old: &RelPath,
    new: &RelPath,
    deadline: Deadline,
) -> Result<(Granted, Granted)> {
    let resolve = |rel: &RelPath| {
        resolve_granted(
            root,
            session,
            rel,
            FollowFinal::No,
            Parents::Existing,
            Access::Write,
            deadline,
        )
    };
    let (from, to) = (resolve(old)?, resolve(new)?);
    if from.name().is_none() || to.name().is_none() {
        return Err(root_itself());
    }
    // Symlinks on the way may make the target lie beneath the source after all.
    if to.real() != from.real() && to.real().starts_with(from.real()) {
        return Err(into_itself());
    }
    Ok((from, to))
}

/// Takes the advisory locks of the file moved and, with `overwrite`, of the one it replaces:
/// neither is taken from under another process that holds its lock, as a write would not be.
/// They are locked in the order of the in-process locks, so that two brokers renaming two
/// files in opposite directions do not each hold one and wait for the other until both give
/// up. Held until the answer is dropped.
fn lock_files(
    from: &Granted,
    to: &Granted,
    overwrite: bool,
    wait: &mut crate::locks::Wait,
) -> Result<Vec<std::fs::File>> {
    let mut ends = vec![from];
    if overwrite {
        ends.push(to);
    }
    ends.sort_by_key(|g| g.real().to_string());
    let mut held: Vec<std::fs::File> = Vec::new();
    for g in ends {
        let name = g.name().unwrap_or(".");
        let file = crate::atomic::lock_file_entry(g.parent(), name, wait, held.first())?;
        held.extend(file);
    }
    Ok(held)
}
