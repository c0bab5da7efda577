//! `files/delete`: removes a file, a symlink (never its target) or a directory. A recursive
//! delete opens each directory with `O_NOFOLLOW` from its parent's handle, so a directory
//! swapped for a symlink mid-walk is unlinked as a link, never entered. A root is never deleted.

use super::create::root_itself;
use super::{Ctx, params, resolve_granted};
use crate::error::{Error, Result};
use crate::limits::Deadline;
use crate::root::Access;
use crate::session::Session;
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::sync::Arc;

#[derive(Deserialize)]
struct Params {
    path: String,
    #[serde(default)]
    recursive: bool,
}

pub(super) async fn run(ctx: &Ctx, session: &Arc<Session>, raw: Value) -> Result<Value> {
    let p: Params = params(raw)?;
    let (root, path) = ctx.authorize_entry(session, &p.path, Access::Write)?;
    let (s, inner, shown) = (session.clone(), ctx.inner.clone(), path.to_string());
    let recursive = p.recursive;
    ctx.run(session, move |deadline| {
        let r = resolve_granted(&root, &s, &path.rel, false, false, Access::Write, deadline)?;
        let Some(name) = &r.name else {
            return Err(root_itself());
        };
        let _lock = inner.locks.lock(&r.real);
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let meta = r.dir.symlink_metadata(name).map_err(io)?;
        if meta.is_dir() {
            if recursive {
                remove_tree(&r.dir, OsStr::new(name), deadline)?;
            } else {
                r.dir.remove_dir(name).map_err(io)?;
            }
        } else {
            r.dir.remove_file(name).map_err(io)?;
        }
        crate::atomic::sync_dir(&r.dir).map_err(io)?;
        Ok(())
    })
    .await
    .map_err(|e| e.with_path(shown.clone()))?;
    Ok(json!({ "path": shown }))
}

/// Removes `name` in `parent` and everything beneath it, never following a symlink. Names
/// that are not UTF-8 are removed too: they only ever travel as `OsStr`.
fn remove_tree(parent: &Dir, name: &OsStr, deadline: Deadline) -> Result<()> {
    let io = |e: std::io::Error| Error::from_io(&e, "");
    deadline.check()?;
    let dir = match parent.open_dir_nofollow(name) {
        Ok(d) => d,
        // Swapped for something that is not a directory: remove that thing itself.
        Err(_) => return parent.remove_file(name).map_err(io),
    };
    for entry in dir.entries().map_err(io)? {
        let child = entry.map_err(io)?.file_name();
        if dir.symlink_metadata(&child).map_err(io)?.is_dir() {
            remove_tree(&dir, &child, deadline)?;
        } else {
            dir.remove_file(&child).map_err(io)?;
        }
    }
    parent.remove_dir(name).map_err(io)
}
