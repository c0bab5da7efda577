//! `files/create`: a new empty file or directory, exclusively (an existing entry of any kind is
//! `ALREADY_EXISTS`), optionally creating missing parents. The final name is never followed.

use super::{Ctx, keeping, params, resolve_granted};
use crate::access::Access;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::root::{FollowFinal, Parents};
use crate::session::Session;
use crate::wire::{CreateKind, CreateParams, CreateResult};
use serde_json::Value;
use std::sync::Arc;

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<CreateResult> {
    let p: CreateParams = params(raw)?;
    let (root, path) = ctx.authorize_entry(session, &p.path, Access::Write)?;
    let (s, inner, shown) = (session.clone(), ctx.inner.clone(), path.to_string());
    let (kind, lock_wait) = (p.kind, ctx.lock_wait());
    let parents = if p.parents {
        Parents::Create
    } else {
        Parents::Existing
    };
    ctx.run(session, move |deadline| {
        let r = resolve_granted(
            &root,
            &s,
            &path.rel,
            FollowFinal::No,
            parents,
            Access::Write,
            deadline,
        )?;
        if r.name().is_none() {
            return Err(root_itself());
        }
        let mut wait = crate::locks::Wait::new(lock_wait, deadline);
        let _lock = inner.locks.lock(r.real(), &mut wait)?;
        let keeping = keeping(&inner, &s, "files/create", &root, &r, deadline);
        let io = |e: std::io::Error| Error::from_io(&e, "");
        match kind {
            CreateKind::Directory => r.create_dir()?,
            CreateKind::File => r.create_file()?.sync_all().map_err(io)?,
        }
        crate::atomic::sync_dir(r.parent()).map_err(io)?;
        let made = r.parent().symlink_metadata(r.name_os()).ok();
        keeping.done(None, made.as_ref().map(crate::recovery::fingerprint));
        Ok(())
    })
    .await
    .map_err(|e| e.with_path(shown.clone()))?;
    Ok(CreateResult {
        path: shown,
        kind: p.kind,
    })
}

pub(super) fn root_itself() -> Error {
    Error::new(ErrorKind::InvalidPath, "a root itself cannot be used here")
        .with_reason(Reason::RootItself)
}
