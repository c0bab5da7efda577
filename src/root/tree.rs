//! Recursive removal without recursion: the depth of a tree a server built costs heap, never
//! the call stack, and at most two descriptors.
//!
//! The walk holds only the directory it is emptying. Going down, it records the identity of
//! the directory it leaves; coming back up, it opens `..` from the child and checks that it is
//! that same directory, so a tree moved away mid-removal stops the walk instead of leading it
//! elsewhere. Every directory is opened `O_NOFOLLOW` from its parent's handle: a directory
//! swapped for a symlink is unlinked as a link, never entered.

use super::dirs::{FileIdOf, open_parent};
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Result};
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use std::ffi::OsString;

/// Names read from a directory at a time.
const BATCH: usize = 1024;

/// Removes `name` in `parent` and everything beneath it. Names that are not UTF-8 are removed
/// too: they only ever travel as `OsStr`.
pub(super) fn remove_tree(parent: &Dir, name: &str, deadline: Deadline) -> Result<()> {
    let io = |e: std::io::Error| Error::from_io(&e, "");
    let mut cur = match parent.open_dir_nofollow(name) {
        Ok(d) => d,
        // Swapped for something that is not a directory: remove that thing itself.
        Err(_) => return parent.remove_file(name).map_err(io),
    };
    // For each level below the top: its name in its parent, and the parent's identity.
    let mut stack: Vec<(OsString, (u64, u64))> = Vec::new();
    loop {
        deadline.check()?;
        let (removed, subdir) = clear_batch(&cur, deadline)?;
        if let Some(sub) = subdir {
            match cur.open_dir_nofollow(&sub) {
                Ok(next) => {
                    stack.push((sub, cur.file_id().map_err(io)?));
                    cur = next;
                }
                // No longer a directory: unlink whatever it is now.
                Err(_) => match cur.remove_file(&sub) {
                    Ok(()) => {}
                    Err(e) if removed == 0 => return Err(io(e)),
                    Err(_) => {}
                },
            }
            continue;
        }
        if removed > 0 {
            // A full batch: there may be more.
            continue;
        }
        // `cur` is empty: step up and remove it.
        let Some((child, parent_id)) = stack.pop() else {
            break;
        };
        let up = open_parent(&cur).map_err(io)?;
        if up.file_id().map_err(io)? != parent_id {
            return Err(Error::new(
                ErrorKind::Io,
                "a directory moved while its tree was removed",
            ));
        }
        drop(cur);
        match up.remove_dir(&child) {
            Ok(()) => {}
            // Something appeared meanwhile: the next pass over `up` finds it again.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTEMPTY.raw_os_error()) => {}
            Err(e) => return Err(io(e)),
        }
        cur = up;
    }
    drop(cur);
    parent.remove_dir(name).map_err(io)
}

/// Removes up to [`BATCH`] entries of `dir` that are not directories; returns how many, and
/// the first subdirectory seen, to go into next.
fn clear_batch(dir: &Dir, deadline: Deadline) -> Result<(usize, Option<OsString>)> {
    let io = |e: std::io::Error| Error::from_io(&e, "");
    let mut removed = 0usize;
    let mut seen = 0usize;
    for entry in dir.entries().map_err(io)? {
        let entry = entry.map_err(io)?;
        seen += 1;
        if seen.is_multiple_of(256) {
            deadline.check()?;
        }
        let is_dir = entry.file_type().map_err(io)?.is_dir();
        if is_dir {
            return Ok((removed, Some(entry.file_name())));
        }
        dir.remove_file(entry.file_name()).map_err(io)?;
        removed += 1;
        if removed >= BATCH {
            break;
        }
    }
    Ok((removed, None))
}
