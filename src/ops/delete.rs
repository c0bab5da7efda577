//! `files/delete`: removes a file, a symlink (never its target) or a directory; a recursive
//! delete walks without recursion and never follows a link (see
//! [`crate::root::Granted::remove`]). A root is never deleted.

use super::create::root_itself;
use super::{Ctx, keeping, params, resolve_granted};
use crate::access::Access;
use crate::error::{Error, Result};
use crate::root::{FollowFinal, Parents};
use crate::session::Session;
use crate::wire::{DeleteParams, DeleteResult};
use serde_json::Value;
use std::sync::Arc;

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<DeleteResult> {
    let p: DeleteParams = params(raw)?;
    let (root, path) = ctx.authorize_entry(session, &p.path, Access::Write)?;
    let (s, inner, shown) = (session.clone(), ctx.inner.clone(), path.to_string());
    let (recursive, lock_wait) = (p.recursive, ctx.lock_wait());
    ctx.run(session, move |deadline| {
        let r = resolve_granted(
            &root,
            &s,
            &path.rel,
            FollowFinal::No,
            Parents::Existing,
            Access::Write,
            deadline,
        )?;
        if r.name().is_none() {
            return Err(root_itself());
        }
        let mut wait = crate::locks::Wait::new(lock_wait, deadline);
        let _lock = inner.locks.lock(r.real(), &mut wait)?;
        // A file another process is writing is not deleted under it, as it is not written.
        let name = r.name().unwrap_or(".");
        let _held = crate::atomic::lock_file_entry(r.parent(), name, &mut wait, None)?;
        // The entry is moved into the store (a whole tree at once) rather than removed, and
        // the delete journaled; with recovery off it is removed.
        let mut keeping = keeping(&inner, &s, "files/delete", &root, &r, deadline);
        keeping.remove(&r, recursive)?;
        // Journaled before the flush, which may fail: the entry is in the store by now, and
        // an unjournaled one is out of `history`'s and `restore`'s reach, and never pruned.
        keeping.done(None, None);
        crate::atomic::sync_dir(r.parent()).map_err(|e| Error::from_io(&e, ""))?;
        Ok(())
    })
    .await
    .map_err(|e| e.with_path(shown.clone()))?;
    Ok(DeleteResult { path: shown })
}
