//! `files/stat`: type, size, times and etag of one path, following symlinks inside the root.

use super::{Ctx, mime_type, mtime, params, resolve_target, shown_size, type_name};
use crate::access::Access;
use crate::atomic::etag;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::wire::{StatParams, StatResult};
use serde_json::Value;
use std::sync::Arc;

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<StatResult> {
    let p: StatParams = params(raw)?;
    let (root, path) = ctx.authorize(session, &p.path, Access::Read)?;
    let s = session.clone();
    let shown = path.to_string();
    let meta = ctx
        .run_small(session, move |deadline| {
            let r = resolve_target(&root, &s, &path.rel, Access::Read, deadline)?;
            // Writable only where a write would be allowed: on the path as requested and on
            // the real path it leads to.
            let can_write = root.access() == Access::Write && {
                let grants = s.grants();
                grants.check(&path, Access::Write).is_ok()
                    && grants.check(r.real(), Access::Write).is_ok()
            };
            r.metadata()
                .map_err(|e| Error::from_io(&e, &path.to_string()))
                .map(|m| (m, path, can_write))
        })
        .await;
    let (meta, path, can_write) = meta.map_err(|e| e.with_path(shown))?;
    Ok(StatResult {
        path: path.to_string(),
        kind: type_name(&meta.file_type()),
        size: shown_size(&meta),
        mtime: mtime(&meta),
        etag: etag(&meta),
        readonly: !can_write || meta.permissions().readonly(),
        mime_type: meta.is_file().then(|| mime_type(&path)),
    })
}
