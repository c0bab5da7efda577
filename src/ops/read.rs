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
use crate::json::{Json, Object};
use crate::path::MountPath;
use crate::session::Session;
#[cfg(doc)]
use crate::wire::ReadResult;
use crate::wire::{Encoding, ReadParams};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Bytes read between two deadline checks.
const STEP: usize = 1 << 20;

/// The largest chunk read in place on the I/O lane (see [`crate::lane`]).
const IN_PLACE: usize = 64 << 10;

/// What the lane did: the whole read, or the open of a file for a larger chunk.
enum Step {
    Done((Json, u64)),
    /// The open file, the path and the deadline, for the pool.
    Large(Box<(Open, MountPath, Deadline)>),
}

/// A regular file open for one chunk.
struct Open {
    file: std::fs::File,
    meta: cap_std::fs::Metadata,
    want: usize,
    offset: u64,
    encoding: Option<Encoding>,
    /// The head of the answer's line, which the result is written behind.
    head: Vec<u8>,
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
            head,
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
            head,
        })
    }
}

struct Chunk {
    bytes: Vec<u8>,
    utf8: bool,
    size: u64,
    meta: cap_std::fs::Metadata,
    head: Vec<u8>,
}

pub(super) async fn run(ctx: &mut Ctx, session: &Arc<Session>, raw: Value) -> Result<Json> {
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
    let head = ctx.result_head();
    // The file is found and opened on the I/O lane, and a small chunk read there too; a
    // larger one is read on the pool, so the lane stays free for small work.
    let step = ctx
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
                head,
            };
            if want <= IN_PLACE {
                let done = open.fill(deadline)?.encode(offset, &path);
                Ok(Step::Done(done))
            } else {
                Ok(Step::Large(Box::new((open, path, deadline))))
            }
        })
        .await
        .map_err(|e| e.with_path(shown.clone()))?;
    let (result, len) = match step {
        Step::Done(done) => done,
        Step::Large(large) => {
            let (open, path, deadline) = *large;
            let by = deadline.instant();
            ctx.run_on(session, Where::Pool, by, move |deadline| {
                Ok(open.fill(deadline)?.encode(offset, &path))
            })
            .await
            .map_err(|e| e.with_path(shown))?
        }
    };
    ctx.note(None, len);
    Ok(result)
}

impl Chunk {
    /// The result, written straight into the JSON text that is sent, behind the line's
    /// head (see [`ReadResult`] for its fields, in their order): the content is encoded
    /// (base64) or escaped (text) once, into the buffer the line goes out in, on the thread
    /// that read it. Returns the bytes it holds too.
    fn encode(self, offset: u64, path: &MountPath) -> (Json, u64) {
        let len = self.bytes.len() as u64;
        let text = if self.utf8 {
            std::str::from_utf8(&self.bytes).ok()
        } else {
            None
        };
        let room = self.bytes.len().div_ceil(3) * 4 + 256;
        let mut o = Object::after(self.head, room);
        match text {
            Some(text) => {
                o.str("content", text);
                o.str("encoding", "utf-8");
            }
            None => {
                o.base64("content", &self.bytes);
                o.str("encoding", "base64");
            }
        }
        o.u64("size", self.size);
        o.u64("offset", offset);
        o.u64("length", len);
        o.bool("eof", offset.saturating_add(len) >= self.size);
        o.str("mimeType", &mime_type(path));
        o.str("etag", &etag(&self.meta));
        o.opt_str("mtime", mtime(&self.meta).as_deref());
        (o.finish(), len)
    }
}

fn not_regular() -> Error {
    Error::new(ErrorKind::InvalidPath, "not a regular file").with_reason(Reason::NotRegularFile)
}

/// Reads up to `want` bytes at `offset`, in steps, stopping early at end of file.
///
/// A large chunk goes into the buffer's spare room as the kernel writes it, never zeroed
/// first (zeroing cost a twentieth of a large read), which needs the file's position moved
/// first: the file is this request's own open, so that disturbs no one. A small one is read
/// in place at its offset: zeroing a few KiB costs less than that extra system call.
fn read_at(
    file: &std::fs::File,
    offset: u64,
    want: usize,
    deadline: Deadline,
) -> std::io::Result<Vec<u8>> {
    let timed_out = || deadline.check().is_err();
    if want <= IN_PLACE {
        let mut buf = vec![0u8; want];
        let mut filled = 0;
        while filled < want {
            if timed_out() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        return Ok(buf);
    }
    let mut buf = Vec::with_capacity(want);
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    while buf.len() < want {
        if timed_out() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        let step = (want - buf.len()).min(STEP) as u64;
        if (&mut file).take(step).read_to_end(&mut buf)? == 0 {
            break;
        }
    }
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
