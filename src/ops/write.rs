//! `files/write`: one-shot atomic writes, and chunked uploads committed atomically.
//!
//! A one-shot write (`offset` 0, `final` true) stages the content in a temporary file beside
//! the target and renames it into place (see [`crate::atomic`]). A chunked upload sends
//! `final: false` chunks at increasing offsets into a staged temporary and commits with the
//! `final: true` chunk. Preconditions (`create`, `overwrite`, `ifMatch`) are checked when the
//! write starts, so it fails fast, and again at commit under the per-file locks, where they
//! decide. The locks are taken for the commit only, after the content is staged: a writer of
//! the same file in another session waits for this one's rename, not for its bytes.

use super::{Ctx, params, resolve_target};
use crate::access::Access;
use crate::atomic::{Committed, Preconditions, TempFile, check_target, etag};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::locks::Wait;
use crate::path::MountPath;
use crate::recovery::Keeping;
use crate::root::Root;
use crate::session::Session;
use crate::upload::Upload;
use crate::wire::{Encoding, WriteParams, WriteResult};
use serde_json::Value;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<WriteResult> {
    let p: WriteParams = params(raw)?;
    let idle = Duration::from_secs(ctx.limits().upload_idle_secs.get());
    let purged = session.uploads().purge_idle(idle);
    if purged > 0 {
        tracing::info!(server = session.server_id(), purged, "dropped idle uploads");
    }
    let raw_path = p.path.clone();
    let result = write(ctx, session, p).await;
    if result.is_err() {
        // A write that fails ends any upload staged for its path, removing its temporary.
        if let Ok((_, path)) = ctx.locate(&raw_path) {
            drop(session.uploads().take(&path));
        }
    }
    result
}

async fn write(ctx: &mut Ctx, session: &Arc<Session>, p: WriteParams) -> Result<WriteResult> {
    let bytes = match p.encoding.unwrap_or(Encoding::Utf8) {
        Encoding::Utf8 => p.content.into_bytes(),
        // SIMD decoding, which accepts exactly what the `base64` crate's standard engine does
        // (canonical padding, no stray trailing bits; see the test below).
        Encoding::Base64 => ctx
            .metered(session, || {
                base64_simd::STANDARD.decode_to_vec(p.content.as_bytes())
            })
            .map_err(|_| Error::invalid_params("content is not valid base64"))?,
    };
    let max = ctx.limits().max_write_bytes.get();
    let end = p
        .offset
        .checked_add(bytes.len() as u64)
        .filter(|&end| end <= max)
        .ok_or_else(|| Error::quota("file would exceed the maximum write size", max))?;
    let (root, path) = ctx.authorize(session, &p.path, Access::Write)?;
    let pre = Preconditions {
        create: p.create,
        overwrite: p.overwrite,
        if_match: p.if_match,
    };
    let shown = path.to_string();
    ctx.note(None, bytes.len() as u64);
    let job = Job {
        root,
        path,
        bytes,
        pre,
        offset: p.offset,
        end,
        last: p.last,
    };
    let result = if job.offset == 0 && job.last {
        // A one-shot write replaces any upload staged for the same path.
        drop(session.uploads().take(&job.path));
        one_shot(ctx, session, job).await
    } else {
        chunk(ctx, session, job).await
    };
    let done = result.map_err(|e| e.with_path(shown.clone()))?;
    Ok(WriteResult {
        path: shown,
        size: done.size,
        etag: done.etag,
        created: done.created,
        committed: done.committed,
    })
}

/// One write request, checked and authorised: what it writes, where, and on what terms.
struct Job {
    root: Arc<Root>,
    path: MountPath,
    bytes: Vec<u8>,
    pre: Preconditions,
    /// Where the bytes go in the file.
    offset: u64,
    /// `offset` plus the bytes: what an upload has staged after this chunk.
    end: u64,
    /// Whether this chunk commits the write.
    last: bool,
}

/// What a write did.
struct Outcome {
    /// The file's size after the commit, or the bytes staged so far.
    size: u64,
    /// The file's new etag, once committed.
    etag: Option<String>,
    /// Whether the commit created the file.
    created: bool,
    /// Whether the write is committed; false while an upload stays open.
    committed: bool,
}

impl Outcome {
    /// A committed write, from what the commit left at the path.
    fn committed(done: &Committed) -> Outcome {
        Outcome {
            size: done.meta.len(),
            etag: Some(etag(&done.meta)),
            created: done.created,
            committed: true,
        }
    }
}

async fn one_shot(ctx: &mut Ctx, session: &Arc<Session>, job: Job) -> Result<Outcome> {
    let Job {
        root,
        path,
        bytes,
        pre,
        ..
    } = job;
    let (s, inner, lock_wait) = (session.clone(), ctx.inner.clone(), ctx.lock_wait());
    ctx.run(session, move |deadline| {
        let r = resolve_target(&root, &s, &path.rel, Access::Write, deadline)?;
        let Some(name) = r.name() else {
            return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
        };
        inner.sweeper.sweep_once(r.parent());
        let existing = check_target(r.parent(), name, &pre)?;
        let temp = TempFile::create(r.parent()).map_err(|e| Error::from_io(&e, ""))?;
        write_all_at(temp.file(), 0, &bytes, deadline)?;
        let mut wait = Wait::new(lock_wait, deadline);
        let _lock = inner.locks.lock(r.real(), &mut wait)?;
        if existing.is_none() {
            inner.hub.note_created(root.host_path_of(&r.real().rel));
        }
        let keeping = super::keeping(&inner, &s, "files/write", &root, &r, deadline);
        let done = commit(&r, temp, &pre, &mut wait, keeping)?;
        Ok(Outcome::committed(&done))
    })
    .await
}

async fn chunk(ctx: &mut Ctx, session: &Arc<Session>, job: Job) -> Result<Outcome> {
    let Job {
        root,
        path,
        bytes,
        pre,
        offset,
        end,
        last,
    } = job;
    let upload = continued(session, &path, offset, ctx.limits().max_uploads.get())?;
    let (s, inner, key) = (session.clone(), ctx.inner.clone(), path.clone());
    let lock_wait = ctx.lock_wait();
    let rel = path.rel.clone();
    let done = ctx
        .run(session, move |deadline| {
            let mut up = match upload {
                Some(u) => u,
                None => start(&inner, &s, &root, &path, pre, deadline)?,
            };
            write_all_at(up.temp.file(), offset, &bytes, deadline)?;
            up.staged = end;
            up.last = Instant::now();
            if !last {
                let staged = Outcome {
                    size: end,
                    etag: None,
                    created: false,
                    committed: false,
                };
                return Ok((staged, Some(up)));
            }
            let done = finish(&inner, &s, &root, &rel, up, lock_wait, deadline)?;
            Ok((Outcome::committed(&done), None))
        })
        .await?;
    let (outcome, open) = done;
    if let Some(up) = open {
        session.uploads().put(key, up);
    }
    Ok(outcome)
}

/// The upload a chunk at `offset` continues: the one staged for `path`, taken from the
/// session, when the chunk starts where it ends; `None` for a chunk at 0, which starts (or
/// restarts) one, within `max` uploads.
fn continued(
    session: &Session,
    path: &MountPath,
    offset: u64,
    max: usize,
) -> Result<Option<Upload>> {
    let existing = {
        let mut uploads = session.uploads();
        let existing = uploads.take(path);
        if offset == 0 && uploads.len() >= max {
            return Err(Error::quota("too many uploads in progress", max as u64));
        }
        existing
    };
    // An upload starts (or restarts) at offset 0; any other chunk continues the staged one.
    match existing {
        Some(u) if offset != 0 && u.staged == offset => Ok(Some(u)),
        _ if offset != 0 => Err(Error::new(
            ErrorKind::ConcurrencyConflict,
            "chunk offset does not match the bytes staged",
        )
        .with_reason(Reason::UploadOffset)),
        _ => Ok(None),
    }
}

/// Commits the upload `up` with its last chunk. The target is resolved and authorised again:
/// grants may have been revoked, and its directory may have moved (out of the root, or where
/// no grant reaches) while the upload was staged. It commits only into the same directory at
/// the same place.
fn finish(
    inner: &crate::state::BrokerState,
    session: &Session,
    root: &Root,
    rel: &crate::path::RelPath,
    up: Upload,
    lock_wait: Duration,
    deadline: crate::deadline::Deadline,
) -> Result<Committed> {
    let now = resolve_target(root, session, rel, Access::Write, deadline)?;
    if now.name().is_none() {
        return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
    }
    if !now.same_place(&up.target) {
        return Err(Error::new(
            ErrorKind::ConcurrencyConflict,
            "the upload's target moved since its first chunk; start the upload again",
        ));
    }
    let mut wait = Wait::new(lock_wait, deadline);
    let _lock = inner.locks.lock(now.real(), &mut wait)?;
    if !now.exists() {
        inner.hub.note_created(root.host_path_of(&now.real().rel));
    }
    let keeping = super::keeping(inner, session, "files/write", root, &now, deadline);
    commit(&now, up.temp, &up.pre, &mut wait, keeping)
}

/// Commits `temp` at `at` (see [`TempFile::lock`]), the file it replaces kept first by
/// `keeping`, and the write journaled.
fn commit<'a>(
    at: &'a crate::root::Granted,
    temp: TempFile,
    pre: &Preconditions,
    wait: &mut Wait,
    mut keeping: Keeping<'a>,
) -> Result<Committed> {
    let staged = temp.lock(at.parent(), at.name().unwrap_or("."), pre, wait)?;
    // The file about to be replaced is kept while it is locked, so that what is kept is what
    // the rename replaces. Kept, then failed: the guard settles it (see [`Keeping`]).
    if let Some(meta) = staged.replaced() {
        keeping.keep_replaced(at, meta)?;
    }
    let done = staged.commit()?;
    keeping.done(None, Some(etag(&done.meta)));
    Ok(done)
}

/// Opens a new upload: resolves the target, checks grant and preconditions, stages a temp.
fn start(
    inner: &crate::state::BrokerState,
    session: &Session,
    root: &Root,
    path: &MountPath,
    pre: Preconditions,
    deadline: crate::deadline::Deadline,
) -> Result<Upload> {
    let r = resolve_target(root, session, &path.rel, Access::Write, deadline)?;
    let Some(name) = r.name() else {
        return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
    };
    check_target(r.parent(), name, &pre)?;
    inner.sweeper.sweep_once(r.parent());
    let temp = TempFile::create(r.parent()).map_err(|e| Error::from_io(&e, ""))?;
    Ok(Upload {
        target: r,
        temp,
        staged: 0,
        pre,
        last: Instant::now(),
    })
}

/// Bytes written between two deadline checks.
const STEP: usize = 1 << 20;

fn write_all_at(
    file: &std::fs::File,
    offset: u64,
    bytes: &[u8],
    deadline: crate::deadline::Deadline,
) -> Result<()> {
    for (i, piece) in bytes.chunks(STEP).enumerate() {
        deadline.check()?;
        let at = offset + (i * STEP) as u64;
        file.write_all_at(piece, at)
            .map_err(|e| Error::from_io(&e, ""))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    /// The SIMD decoder must accept and refuse the same inputs as the `base64` crate's
    /// standard engine, which the broker used before: every string of up to five characters
    /// over an alphabet with padding, separators and characters whose low bits matter, and
    /// every byte value at every position of a short valid string. (Checked beforehand over
    /// all strings of up to eight such characters and three million random long ones.)
    #[test]
    fn simd_base64_decodes_as_the_base64_crate() {
        let alphabet = b"AQgw/+=-_ \nz0";
        let same = |s: &[u8]| {
            let old = base64::engine::general_purpose::STANDARD.decode(s).ok();
            assert_eq!(base64_simd::STANDARD.decode_to_vec(s).ok(), old, "{s:?}");
        };
        for len in 0..=5u32 {
            for mut k in 0..alphabet.len().pow(len) {
                let mut s = Vec::new();
                for _ in 0..len {
                    s.push(alphabet[k % alphabet.len()]);
                    k /= alphabet.len();
                }
                same(&s);
            }
        }
        let valid = b"QUJDRA==QUJD";
        for pos in 0..valid.len() {
            for b in 0..=255u8 {
                let mut s = valid.to_vec();
                s[pos] = b;
                same(&s);
            }
        }
        let long = base64::engine::general_purpose::STANDARD.encode([7u8; 1000]);
        same(long.as_bytes());
    }
}
