//! `files/list`: the entries of a directory, optionally recursive, in pages.
//!
//! Entries come in pre-order with names sorted by byte value, which is the lexicographic order
//! of their component lists. A cursor is the last entry returned (base64url of its components
//! as JSON), so the next page resumes after it by comparing paths, with no server-side state.
//! Recursion opens each directory with `O_NOFOLLOW` and never follows a symlink.

use super::{Ctx, mtime, params, recheck, type_name};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Deadline;
use crate::path::MountPath;
use crate::root::Access;
use crate::session::Session;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    path: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    include_hidden: bool,
    max_depth: Option<usize>,
    limit: Option<usize>,
    cursor: Option<String>,
}

struct Walk {
    base: MountPath,
    include_hidden: bool,
    max_depth: usize,
    limit: usize,
    cursor: Option<Vec<String>>,
    entries: Vec<Value>,
    last: Vec<String>,
    more: bool,
}

pub(super) async fn run(ctx: &Ctx, session: &Arc<Session>, raw: Value) -> Result<Value> {
    let p: Params = params(raw)?;
    let max_page = ctx.limits().max_list_page.get();
    let limit = p.limit.unwrap_or(ctx.limits().list_page.get());
    if limit == 0 || limit > max_page {
        return Err(Error::invalid_params(format!(
            "limit must be 1 to {max_page}"
        )));
    }
    if p.max_depth == Some(0) {
        return Err(Error::invalid_params("maxDepth must be at least 1"));
    }
    let cursor = p.cursor.as_deref().map(decode_cursor).transpose()?;
    let (root, path) = ctx.authorize(session, &p.path, Access::Read)?;
    let s = session.clone();
    let shown = path.to_string();
    let max_depth = if p.recursive {
        p.max_depth.unwrap_or(usize::MAX)
    } else {
        1
    };
    let include_hidden = p.include_hidden;
    let walk = ctx
        .run(session, move |deadline| {
            let r = root.resolve(&path.rel, true)?;
            recheck(&s, &r, Access::Read)?;
            let io = |e: std::io::Error| Error::from_io(&e, &path.to_string());
            let dir = match &r.name {
                None => r.dir,
                Some(n) => {
                    let m = r.dir.symlink_metadata(n).map_err(io)?;
                    if !m.is_dir() {
                        return Err(Error::new(ErrorKind::NotADirectory, "not a directory"));
                    }
                    r.dir.open_dir_nofollow(n).map_err(io)?
                }
            };
            let mut walk = Walk {
                base: path.clone(),
                include_hidden,
                max_depth,
                limit,
                cursor,
                entries: Vec::new(),
                last: Vec::new(),
                more: false,
            };
            walk.visit(&dir, &mut Vec::new(), deadline)?;
            Ok(walk)
        })
        .await
        .map_err(|e| e.with_path(shown))?;
    let mut out = json!({ "entries": walk.entries });
    if walk.more {
        let encoded = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&walk.last).unwrap_or_default());
        out["nextCursor"] = json!(encoded);
    }
    Ok(out)
}

fn decode_cursor(c: &str) -> Result<Vec<String>> {
    URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
        .filter(|v| v.len() <= crate::path::MAX_PATH_BYTES)
        .ok_or_else(|| Error::invalid_params("invalid cursor"))
}

impl Walk {
    /// Visits `dir` (at relative components `at`); returns false once the page is full.
    fn visit(&mut self, dir: &Dir, at: &mut Vec<String>, deadline: Deadline) -> Result<bool> {
        deadline.check()?;
        let mut names: Vec<String> = Vec::new();
        for entry in dir
            .entries()
            .map_err(|e| Error::from_io(&e, &self.shown(at)))?
        {
            let Ok(entry) = entry else { continue };
            // A name that is not UTF-8 cannot be named by any request path; leave it out.
            match entry.file_name().into_string() {
                Ok(n) if self.include_hidden || !n.starts_with('.') => names.push(n),
                Ok(_) => {}
                Err(raw) => tracing::debug!(name = ?raw, "skipping a name that is not utf-8"),
            }
        }
        names.sort_unstable();
        for name in names {
            at.push(name);
            let flow = self.visit_entry(dir, at, deadline);
            at.pop();
            if !flow? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn visit_entry(&mut self, dir: &Dir, at: &mut Vec<String>, deadline: Deadline) -> Result<bool> {
        let name = at.last().cloned().unwrap_or_default();
        // Resume after the cursor: skip entries before it, descend only into its ancestors.
        let (emit, descend_allowed) = match &self.cursor {
            None => (true, true),
            Some(c) if at.as_slice() > c.as_slice() => (true, true),
            Some(c) => (false, c.starts_with(at)),
        };
        let Ok(meta) = dir.symlink_metadata(&name) else {
            return Ok(true);
        };
        if emit {
            if self.entries.len() == self.limit {
                self.more = true;
                return Ok(false);
            }
            let mut rel = self.base.rel.clone();
            for c in at.iter() {
                rel = rel.join(c);
            }
            let path = MountPath {
                mount: self.base.mount.clone(),
                rel,
            };
            self.entries.push(json!({
                "name": name,
                "path": path.to_string(),
                "type": type_name(&meta.file_type()),
                "size": meta.len(),
                "mtime": mtime(&meta),
            }));
            self.last = at.clone();
        }
        if descend_allowed && meta.is_dir() && at.len() < self.max_depth {
            match dir.open_dir_nofollow(&name) {
                Ok(sub) => return self.visit(&sub, at, deadline),
                Err(e) => tracing::debug!(path = %self.shown(at), error = %e, "not descending"),
            }
        }
        Ok(true)
    }

    fn shown(&self, at: &[String]) -> String {
        let mut s = self.base.to_string();
        for c in at {
            s.push('/');
            s.push_str(c);
        }
        s
    }
}
