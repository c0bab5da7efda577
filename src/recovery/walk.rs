//! Walking a kept tree at any depth: measuring what it costs the store, and removing it. A
//! server can build a tree thousands of levels deep, and a delete moves it into the store
//! whole; what the store's bound counts, and what pruning removes, must be all of it.
//!
//! Both go through one [`Cursor`], which holds only the directory it is in (two descriptors at
//! a step, whatever the depth; the depth costs heap). Going down, it opens the child
//! `O_NOFOLLOW` from the directory's own handle and records that directory's identity; coming
//! back up, it opens `..` from the child and checks that it is the directory it recorded. A
//! tree moved while it is walked (a process that held a descriptor inside it before the
//! delete) stops the walk with an error, never leads it elsewhere: the tree then counts as
//! not measured, and the delete is refused. Measuring and loosening used to open a
//! descriptor per level and stop at 128 levels, so that what lay deeper cost the store
//! nothing (a file 131 levels down, deleted again and again, grew the store past its bound)
//! and a read-only directory down there could not be pruned.

use super::copy::{ENTRY_COST, open_dir};
use crate::deadline::Deadline;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::ffi::{OsStr, OsString};

/// A directory's device and inode.
type FileId = (u64, u64);

/// Names read from a directory at a time while removing it.
const BATCH: usize = 1024;

/// Where a walk of a tree is: the directory it is in, and the way back up.
pub(super) struct Cursor {
    /// The directory the walk is in.
    here: Dir,
    /// Its identity.
    id: FileId,
    /// For each level below the top: its name in its parent, and the parent's identity.
    above: Vec<(OsString, FileId)>,
}

impl Cursor {
    /// Starts a walk in the directory `name` in `dir`, never following a link.
    pub(super) fn open(dir: &Dir, name: &OsStr) -> std::io::Result<Cursor> {
        let here = dir_of(open_dir(dir, name)?);
        let id = id_of(&here)?;
        Ok(Cursor {
            here,
            id,
            above: Vec::new(),
        })
    }

    /// The directory the walk is in.
    pub(super) fn here(&self) -> &Dir {
        &self.here
    }

    /// Goes into the directory `name` (never a link to one).
    pub(super) fn down(&mut self, name: &OsStr) -> std::io::Result<()> {
        let next = dir_of(open_dir(&self.here, name)?);
        let id = id_of(&next)?;
        self.above.push((name.to_owned(), self.id));
        self.here = next;
        self.id = id;
        Ok(())
    }

    /// Goes back up to the parent, which must be the directory the walk came down from;
    /// answers the name of the directory it left, or `None` at the top (where it stays).
    pub(super) fn up(&mut self) -> std::io::Result<Option<OsString>> {
        let Some((name, parent)) = self.above.pop() else {
            return Ok(None);
        };
        let up = dir_of(open_dir(&self.here, OsStr::new(".."))?);
        if id_of(&up)? != parent {
            return Err(std::io::Error::other(
                "a directory moved while its tree was walked",
            ));
        }
        self.here = up;
        self.id = parent;
        Ok(Some(name))
    }
}

/// Why a tree was not measured.
#[derive(Debug)]
pub(super) enum Unmeasured {
    /// A directory could not be read or stepped out of (it moved).
    Io(std::io::Error),
    /// The deadline passed.
    Late(crate::error::Error),
}

impl From<std::io::Error> for Unmeasured {
    fn from(e: std::io::Error) -> Self {
        Unmeasured::Io(e)
    }
}

impl From<rustix::io::Errno> for Unmeasured {
    fn from(e: rustix::io::Errno) -> Self {
        Unmeasured::Io(e.into())
    }
}

/// What the entry `name` in `dir` costs the store: the sizes of everything in it at any
/// depth (a directory's own size aside, see [`size`]), plus [`ENTRY_COST`] an entry, without following anything. Once past `limit` it
/// stops and answers what it counted so far (more than `limit`): such a tree cannot be kept
/// whatever the rest holds, and the names waiting to be walked stay bounded by `limit`.
pub(super) fn measure(
    dir: &Dir,
    name: &OsStr,
    limit: u64,
    deadline: Option<Deadline>,
) -> Result<u64, Unmeasured> {
    let meta = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let mut total = ENTRY_COST.saturating_add(size(&meta));
    if FileType::from_raw_mode(meta.st_mode) != FileType::Directory {
        return Ok(total);
    }
    let mut walk = Cursor::open(dir, name)?;
    // For each level the walk is in, the subdirectories still to go into.
    let mut todo: Vec<Vec<OsString>> = Vec::new();
    let mut listed = false;
    loop {
        if let Some(d) = deadline {
            d.check().map_err(Unmeasured::Late)?;
        }
        if !listed {
            let mut subdirs = Vec::new();
            for entry in walk.here().entries()? {
                let child = entry?.file_name();
                let meta = rustix::fs::statat(walk.here(), &child, AtFlags::SYMLINK_NOFOLLOW)?;
                total = total.saturating_add(ENTRY_COST).saturating_add(size(&meta));
                if total > limit {
                    return Ok(total);
                }
                if FileType::from_raw_mode(meta.st_mode) == FileType::Directory {
                    subdirs.push(child);
                }
            }
            todo.push(subdirs);
        }
        let next = todo.last_mut().and_then(Vec::pop);
        if let Some(next) = next {
            walk.down(&next)?;
            listed = false;
            continue;
        }
        todo.pop();
        listed = true;
        if walk.up()?.is_none() {
            return Ok(total);
        }
    }
}

/// What an entry's own size costs: a directory's is its entries', which cost
/// [`ENTRY_COST`] each (as on a copy), whatever size the filesystem gives the directory.
fn size(meta: &rustix::fs::Stat) -> u64 {
    if FileType::from_raw_mode(meta.st_mode) == FileType::Directory {
        0
    } else {
        meta.st_size.max(0) as u64
    }
}

/// Removes the entry `name` in `dir` and everything beneath it, at any depth, a read-only
/// tree too: every directory of the user's is given the owner's read, write and search
/// permission as the walk enters it (see [`unlock`] for one the user cannot open). A kept
/// tree with a read-only directory in it (a module cache) could not be pruned, and stayed in
/// the store for good while the journal no longer counted it.
pub(super) fn remove(dir: &Dir, name: &OsStr) -> std::io::Result<()> {
    let opened = match Cursor::open(dir, name) {
        Err(e) if is_denied(&e) => unlock(dir, name).and_then(|()| Cursor::open(dir, name)),
        other => other,
    };
    let mut walk = match opened {
        Ok(w) => w,
        // Not a directory (or swapped for something else): remove that thing itself.
        Err(e) if is_no_dir(&e) => {
            return Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?);
        }
        Err(e) => return Err(e),
    };
    loosen(walk.here())?;
    loop {
        let (removed, subdir) = clear_batch(walk.here())?;
        if let Some(sub) = subdir {
            let mut entered = walk.down(&sub);
            if matches!(&entered, Err(e) if is_denied(e)) {
                entered = unlock(walk.here(), &sub).and_then(|()| walk.down(&sub));
            }
            match entered {
                Ok(()) => loosen(walk.here())?,
                Err(e) if is_no_dir(&e) => {
                    rustix::fs::unlinkat(walk.here(), &sub, AtFlags::empty())?;
                }
                Err(e) => return Err(e),
            }
            continue;
        }
        if removed > 0 {
            // A full batch: there may be more.
            continue;
        }
        // Empty: step up and remove it.
        let Some(child) = walk.up()? else {
            break;
        };
        match rustix::fs::unlinkat(walk.here(), &child, AtFlags::REMOVEDIR) {
            // Something appeared meanwhile: the next pass over this directory finds it.
            Ok(()) | Err(rustix::io::Errno::NOTEMPTY) => {}
            Err(e) => return Err(e.into()),
        }
    }
    drop(walk);
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// Removes up to [`BATCH`] entries of `dir` that are not directories; answers how many, and
/// the first subdirectory seen, to go into next.
fn clear_batch(dir: &Dir) -> std::io::Result<(usize, Option<OsString>)> {
    let mut removed = 0usize;
    for entry in dir.entries()? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            return Ok((removed, Some(entry.file_name())));
        }
        match rustix::fs::unlinkat(dir, entry.file_name(), AtFlags::empty()) {
            // Made a directory since the listing: the next pass goes into it.
            Ok(()) | Err(rustix::io::Errno::ISDIR) => {}
            Err(e) => return Err(e.into()),
        }
        removed += 1;
        if removed >= BATCH {
            break;
        }
    }
    Ok((removed, None))
}

/// Gives the user write and search permission on `dir` when it is theirs and lacks them.
fn loosen(dir: &Dir) -> std::io::Result<()> {
    let st = rustix::fs::fstat(dir)?;
    if st.st_uid == rustix::process::geteuid().as_raw() && st.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(dir, Mode::from_raw_mode((st.st_mode & 0o7777) | 0o700))?;
    }
    Ok(())
}

/// Gives the user's directory `name` in `dir`, which the user cannot even read (a process
/// that held a descriptor inside a kept tree can make it so after it was measured), the
/// owner's permissions, through a path handle on it that follows no link: `fchmod` takes no
/// path handle, so the mode is set through the handle's `/proc/self/fd` entry, which names
/// that directory and no other.
fn unlock(dir: &Dir, name: &OsStr) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(rustix::io::Errno::ACCESS.into());
    }
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(
        link.as_str(),
        Mode::from_raw_mode((st.st_mode & 0o7777) | 0o700),
    )?;
    Ok(())
}

/// Whether an open failed for want of permission.
fn is_denied(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::ACCESS.raw_os_error())
}

/// Whether opening a directory failed because the name is no directory (a file, a link).
fn is_no_dir(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
        Some(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP)
    )
}

fn dir_of(fd: std::os::fd::OwnedFd) -> Dir {
    Dir::from_std_file(std::fs::File::from(fd))
}

fn id_of(dir: &Dir) -> std::io::Result<FileId> {
    let st = rustix::fs::fstat(dir)?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests;
