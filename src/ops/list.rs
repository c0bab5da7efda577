//! `files/list`: the entries of a directory, optionally recursive, in pages.
//!
//! Entries come in pre-order with names sorted by byte value, which is the lexicographic order
//! of their component lists. A cursor is the last entry returned (base64url of its components
//! as JSON), so the next page resumes after it by comparing paths, with no server-side state.
//! Recursion opens each directory with `O_NOFOLLOW` and never follows a symlink. Each entry's
//! metadata is read from the directory handle already held, without following the name, and
//! a link's entry has size 0: listings tell nothing about where links lead.

use super::{Ctx, mtime, params, resolve_target, shown_size, type_name};
use crate::access::Access;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Result};
use crate::json::{Items, Json, Object};
use crate::path::MountPath;
use crate::session::Session;
use crate::wire::ListParams;
#[cfg(doc)]
use crate::wire::{ListEntry, ListResult};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use serde_json::Value;
use std::sync::Arc;

struct Walk {
    /// The listed directory as requested (entries' paths are shown under it).
    base: MountPath,
    /// The listed directory's real path (grants are checked under it).
    real: MountPath,
    include_hidden: bool,
    max_depth: usize,
    limit: usize,
    cursor: Option<Vec<String>>,
    /// The page's entries so far, each written out as it is found (see [`ListEntry`]).
    entries: Items,
    last: Vec<String>,
    more: bool,
}

/// Deepest level a listing descends to, below the listed directory. Each level holds one open
/// directory handle, so the cap also bounds file descriptors; deeper entries could not be
/// named by a request path of at most 4096 bytes anyway.
pub const MAX_LIST_DEPTH: usize = 256;

/// One directory on the walk's stack: its handle and the names still to visit, sorted.
struct Frame {
    dir: Dir,
    names: std::vec::IntoIter<String>,
}

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<Json> {
    let p: ListParams = params(raw)?;
    let max_page = ctx.limits().max_list_page.get();
    let limit = p.limit.unwrap_or(ctx.limits().list_page.get());
    if limit == 0 {
        return Err(Error::invalid_params("limit must be at least 1"));
    }
    if limit > max_page {
        return Err(Error::quota(
            "limit exceeds the maximum page",
            max_page as u64,
        ));
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
    let head = ctx.result_head();
    let (result, count) = ctx
        .run(session, move |deadline| {
            let r = resolve_target(&root, &s, &path.rel, Access::Read, deadline)?;
            let io = |e: std::io::Error| Error::from_io(&e, &path.to_string());
            if !r.metadata().map_err(io)?.is_dir() {
                return Err(Error::new(ErrorKind::NotADirectory, "not a directory"));
            }
            let dir = r.open_dir().map_err(io)?;
            let mut walk = Walk {
                base: path.clone(),
                real: r.real().clone(),
                include_hidden,
                max_depth: max_depth.min(MAX_LIST_DEPTH),
                limit,
                cursor,
                // Room for a few entries; the buffer grows as they come. A line queued for a
                // host that reads slowly is counted by its length, so room reserved beyond
                // what a page holds would be memory no bound sees.
                entries: Object::after(head, limit.min(64) * 128).items("entries"),
                last: Vec::new(),
                more: false,
            };
            walk.run(dir, &s, deadline)?;
            Ok(walk.finish())
        })
        .await
        .map_err(|e| e.with_path(shown))?;
    ctx.audit.entries = count as u64;
    Ok(result)
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
    /// The page as the JSON text of a [`ListResult`], and how many entries it holds.
    fn finish(self) -> (Json, usize) {
        let count = self.entries.len();
        let mut o = self.entries.close();
        if self.more {
            let last = serde_json::to_vec(&self.last).unwrap_or_default();
            o.str("nextCursor", &URL_SAFE_NO_PAD.encode(last));
        }
        (o.finish(), count)
    }

    /// Walks in pre-order with an explicit stack, so depth costs heap, never the call stack.
    /// The entry it is at is kept as a [`Here`].
    fn run(&mut self, dir: Dir, session: &Session, deadline: Deadline) -> Result<()> {
        let first = self.sorted_names(&dir, &[])?;
        let mut stack = vec![Frame { dir, names: first }];
        let mut here = Here {
            at: Vec::new(),
            real: self.real.clone(),
            shown: self.base.to_string(),
            shown_lens: Vec::new(),
        };
        let mut visited = 0usize;
        while let Some(top) = stack.last_mut() {
            let Some(name) = top.names.next() else {
                stack.pop();
                here.leave();
                continue;
            };
            visited += 1;
            if visited.is_multiple_of(256) {
                deadline.check()?;
            }
            here.at.push(name);
            let (emit, may_descend) = self.resume(&here.at);
            let meta = match top.dir.symlink_metadata(here.name()) {
                Ok(m) if emit || may_descend => m,
                _ => {
                    here.at.pop();
                    continue;
                }
            };
            here.enter();
            // Entries under a revoked (or never granted) path are neither shown nor entered.
            let granted = session.grants().check(&here.real, Access::Read).is_ok();
            if granted && emit {
                if self.entries.len() == self.limit {
                    self.more = true;
                    return Ok(());
                }
                self.emit(&here, &meta);
            }
            let descend = granted && may_descend && meta.is_dir() && here.at.len() < self.max_depth;
            let opened = if descend {
                open_sub(&top.dir, &here)
            } else {
                None
            };
            match opened {
                Some(sub) => {
                    let names = self.sorted_names(&sub, &here.at)?;
                    stack.push(Frame { dir: sub, names });
                }
                None => here.leave(),
            }
        }
        Ok(())
    }

    /// Whether the entry at `at` is shown, and whether the walk may go into it: resuming
    /// after the cursor, entries before it are skipped, and only its ancestors are entered.
    /// An entry that is neither is passed over before any I/O.
    fn resume(&self, at: &[String]) -> (bool, bool) {
        match &self.cursor {
            None => (true, true),
            Some(c) if at > c.as_slice() => (true, true),
            Some(c) => (false, c.starts_with(at)),
        }
    }

    /// Adds the entry the walk is at, `meta` its metadata, to the page.
    fn emit(&mut self, here: &Here, meta: &cap_std::fs::Metadata) {
        self.entries.push(|entry| {
            entry.str("name", here.name());
            entry.str("path", &here.shown);
            entry.str("type", type_name(&meta.file_type()).wire_name());
            entry.u64("size", shown_size(meta));
            entry.opt_str("mtime", mtime(meta).as_deref());
        });
        self.last.clone_from(&here.at);
    }

    /// The names in `dir`, sorted by byte value, hidden ones only when asked for.
    fn sorted_names(&self, dir: &Dir, at: &[String]) -> Result<std::vec::IntoIter<String>> {
        let mut names: Vec<String> = Vec::new();
        let entries = dir
            .entries()
            .map_err(|e| Error::from_io(&e, &self.under(&self.base, at).to_string()))?;
        for entry in entries {
            let Ok(entry) = entry else { continue };
            // A name that is not UTF-8 cannot be named by any request path; leave it out.
            match entry.file_name().into_string() {
                Ok(n) if self.include_hidden || !n.starts_with('.') => names.push(n),
                Ok(_) => {}
                Err(raw) => tracing::debug!(name = ?raw, "skipping a name that is not utf-8"),
            }
        }
        names.sort_unstable();
        Ok(names.into_iter())
    }

    /// `base` with the components `at` appended.
    fn under(&self, base: &MountPath, at: &[String]) -> MountPath {
        let mut components = base.rel.components().to_vec();
        components.extend_from_slice(at);
        MountPath {
            mount: base.mount.clone(),
            rel: crate::path::RelPath::from_components(components),
        }
    }
}

/// The entry a walk is at, kept three ways, each updated as the walk goes down and up rather
/// than rebuilt per entry: its components below the listed directory (`at`, for the cursor),
/// its real path (for the grant check) and its path as shown.
struct Here {
    at: Vec<String>,
    real: MountPath,
    shown: String,
    /// Lengths of `shown` before each component of `at` was appended.
    shown_lens: Vec<usize>,
}

impl Here {
    /// The entry's name: the last of `at`.
    fn name(&self) -> &str {
        self.at.last().map(String::as_str).unwrap_or_default()
    }

    /// Appends the entry last pushed onto `at` to the real and the shown path.
    fn enter(&mut self) {
        let name = self.at.last().map(String::as_str).unwrap_or_default();
        self.real.rel.push(name);
        self.shown_lens.push(self.shown.len());
        self.shown.push('/');
        self.shown.push_str(name);
    }

    /// Goes back up from the entry entered last.
    fn leave(&mut self) {
        self.at.pop();
        self.real.rel.pop();
        self.shown.truncate(self.shown_lens.pop().unwrap_or(0));
    }
}

/// Opens the directory the walk is at to go into it; one that cannot be opened is not entered.
fn open_sub(dir: &Dir, here: &Here) -> Option<Dir> {
    match dir.open_dir_nofollow(here.name()) {
        Ok(sub) => Some(sub),
        Err(e) => {
            tracing::debug!(path = %here.shown, error = %e, "not descending");
            None
        }
    }
}
