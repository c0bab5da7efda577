//! `files/read`: one chunk of a regular file, as UTF-8 text or base64.
//!
//! Memory is bounded by the chunk: at most `length` bytes (plus up to three to finish a
//! character) are read, in steps that check the deadline. A UTF-8 chunk never ends inside a
//! character: the cut character is left for the next chunk.

use super::{Ctx, Where, mime_type, mtime, params, resolve_target};
use crate::access::Access;
use crate::atomic::etag;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::session::Session;
use crate::wire::{Encoding, ReadParams, ReadResult};
use serde_json::Value;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Bytes read between two deadline checks.
const STEP: usize = 1 << 20;

/// The largest chunk read in place on the I/O lane (see [`crate::lane`]).
const IN_PLACE: usize = 64 << 10;

/// What the lane found: the chunk itself, or a file open for a larger chunk.
enum Step {
    Read(Chunk),
    Large(Open),
}

/// A regular file open for one chunk.
struct Open {
    file: std::fs::File,
    meta: cap_std::fs::Metadata,
    want: usize,
    offset: u64,
    encoding: Option<Encoding>,
}

impl Open {
    /// Reads the chunk, and decides (or, asked for UTF-8, checks) its encoding. Its errors
    /// carry no path: the caller gives them the request's.
    fn fill(self, deadline: Deadline) -> Result<Chunk> {
        let Open {
            file,
            meta,
            want,
            offset,
            encoding,
        } = self;
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let size = meta.len();
        let mut bytes = read_at(&file, offset, want, deadline).map_err(io)?;
        let utf8 = match encoding {
            Some(Encoding::Base64) => false,
            _ => {
                let at_end = offset + bytes.len() as u64 >= size;
                settle_utf8(&file, offset, &mut bytes, at_end, deadline).map_err(io)?
            }
        };
        if encoding == Some(Encoding::Utf8) && !utf8 {
            return Err(Error::new(ErrorKind::Io, "content is not valid utf-8")
                .with_reason(Reason::NotUtf8));
        }
        Ok(Chunk {
            bytes,
            utf8,
            size,
            meta,
        })
    }
}

struct Chunk {
    bytes: Vec<u8>,
    utf8: bool,
    size: u64,
    meta: cap_std::fs::Metadata,
}

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<ReadResult> {
    let p: ReadParams = params(raw)?;
    let max = ctx.limits().max_chunk_bytes.get() as u64;
    let length = p.length.unwrap_or(ctx.limits().chunk_bytes.get() as u64);
    if length > max {
        return Err(Error::quota("length exceeds the maximum chunk", max));
    }
    let (root, path) = ctx.authorize(session, &p.path, Access::Read)?;
    let s = session.clone();
    let shown = path.to_string();
    let (offset, encoding) = (p.offset, p.encoding);
    // The file is found and opened on the I/O lane, and a small chunk read there too; a
    // larger one is read on the pool, so the lane stays free for small work.
    let opened = ctx
        .run_small(session, move |deadline| {
            let r = resolve_target(&root, &s, &path.rel, Access::Read, deadline)?;
            let io = |e: std::io::Error| Error::from_io(&e, &path.to_string());
            if r.name().is_none() {
                return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
            }
            // Refuse special files from their metadata, before any open: opening a device
            // can have effects, and opening a FIFO for reading can block.
            let lmeta = r.metadata().map_err(io)?;
            if lmeta.is_dir() {
                return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
            }
            if !lmeta.is_file() {
                return Err(not_regular());
            }
            // The handle's open guards the window between that check and the open.
            let file = r.open_read().map_err(io)?;
            let meta = file.metadata().map_err(io)?;
            if !meta.is_file() {
                return Err(not_regular());
            }
            let want = usize::try_from(length.min(meta.len().saturating_sub(offset))).unwrap_or(0);
            let open = Open {
                file: file.into_std(),
                meta,
                want,
                offset,
                encoding,
            };
            if want <= IN_PLACE {
                Ok((Step::Read(open.fill(deadline)?), path, deadline))
            } else {
                Ok((Step::Large(open), path, deadline))
            }
        })
        .await;
    let (step, path, deadline) = opened.map_err(|e| e.with_path(shown.clone()))?;
    let chunk = match step {
        Step::Read(chunk) => Ok((chunk, path)),
        Step::Large(open) => {
            let by = deadline.instant();
            ctx.run_on(session, Where::Pool, by, move |deadline| {
                Ok((open.fill(deadline)?, path))
            })
            .await
        }
    };
    let (chunk, path) = chunk.map_err(|e| e.with_path(shown))?;
    let len = chunk.bytes.len() as u64;
    ctx.note(None, len);
    let (content, encoding) = if chunk.utf8 {
        (
            String::from_utf8(chunk.bytes).unwrap_or_default(),
            Encoding::Utf8,
        )
    } else {
        // The same alphabet and padding as everywhere else, with SIMD: encoding was a sixth
        // of the sidecar's time in a large read.
        let encoded = ctx.metered(session, || {
            base64_simd::STANDARD.encode_to_string(&chunk.bytes)
        });
        (encoded, Encoding::Base64)
    };
    Ok(ReadResult {
        content,
        encoding,
        size: chunk.size,
        offset,
        length: len,
        eof: offset + len >= chunk.size,
        mime_type: mime_type(&path),
        etag: etag(&chunk.meta),
        mtime: mtime(&chunk.meta),
    })
}

fn not_regular() -> Error {
    Error::new(ErrorKind::InvalidPath, "not a regular file").with_reason(Reason::NotRegularFile)
}

/// Reads up to `want` bytes at `offset`, in steps, stopping early at end of file.
fn read_at(
    file: &std::fs::File,
    offset: u64,
    want: usize,
    deadline: Deadline,
) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; want];
    let mut filled = 0;
    while filled < want {
        if deadline.check().is_err() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        let end = (filled + STEP).min(want);
        match file.read_at(&mut buf[filled..end], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Decides whether `bytes` go out as UTF-8, cutting a character split at the end of the chunk
/// (or, when the chunk holds nothing but part of one character, reading the rest of it).
fn settle_utf8(
    file: &std::fs::File,
    offset: u64,
    bytes: &mut Vec<u8>,
    at_end: bool,
    deadline: Deadline,
) -> std::io::Result<bool> {
    let err = match std::str::from_utf8(bytes) {
        Ok(_) => return Ok(true),
        Err(e) => e,
    };
    if err.error_len().is_some() || at_end {
        return Ok(false);
    }
    if err.valid_up_to() > 0 {
        bytes.truncate(err.valid_up_to());
        return Ok(true);
    }
    // The chunk is only the start of one character: read just the rest of that character.
    let width: usize = match bytes.first() {
        Some(0xC0..=0xDF) => 2,
        Some(0xE0..=0xEF) => 3,
        Some(0xF0..=0xF7) => 4,
        _ => return Ok(false),
    };
    let have = bytes.len();
    let more = read_at(
        file,
        offset + have as u64,
        width.saturating_sub(have),
        deadline,
    )?;
    bytes.extend_from_slice(&more);
    if std::str::from_utf8(bytes).is_ok() {
        Ok(true)
    } else {
        bytes.truncate(have);
        Ok(false)
    }
}
