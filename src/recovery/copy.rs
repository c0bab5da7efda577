//! Copying a file or a tree between two directory handles, for a change whose content lies on
//! another filesystem than the store (and back, to restore it). Nothing is followed: links are
//! copied as links, every directory is opened `O_NOFOLLOW` from its parent's handle, and every
//! file is created new. The copy is bounded in bytes and in depth, and uses the heap, not the
//! call stack, for the tree's depth.

use crate::deadline::Deadline;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;

/// What each entry costs against the copy's bound besides its bytes, so that a tree of
/// empty files cannot be unbounded.
pub(super) const ENTRY_COST: u64 = 512;

/// The deepest tree copied: each level holds two descriptors. Measuring and removing a kept
/// tree have no such bound (see [`super::walk`]); a copy deeper than this is refused.
const MAX_DEPTH: usize = 128;

/// What a copy made.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Copied {
    /// Bytes of file content.
    pub bytes: u64,
    /// Entries made.
    pub entries: u64,
    /// Entries that are neither file, directory nor link (a FIFO, a device): not copied.
    pub skipped: u64,
}

/// Why a copy stopped; what it made so far is left for the caller to remove.
#[derive(Debug)]
pub(super) enum CopyFail {
    /// Past the bound in bytes and entries.
    TooLarge,
    /// Deeper than [`MAX_DEPTH`]: not kept however small, so never a reason to proceed
    /// unkept (it used to pass for `TooLarge`, so that a tree of a few bytes, or anything
    /// a server first moved 129 levels down, was deleted unkept and journaled as too large).
    TooDeep,
    /// An I/O error.
    Io(std::io::Error),
    /// The deadline passed.
    Late(crate::error::Error),
}

impl From<std::io::Error> for CopyFail {
    fn from(e: std::io::Error) -> Self {
        CopyFail::Io(e)
    }
}

impl From<rustix::io::Errno> for CopyFail {
    fn from(e: rustix::io::Errno) -> Self {
        CopyFail::Io(e.into())
    }
}

/// One directory being copied: its source and copy, the names still to copy, and the mode
/// the copy gets once they are.
struct Level {
    src: Dir,
    dst: OwnedFd,
    names: Vec<OsString>,
    mode: Mode,
}

/// What a copy has spent against its bound, and what it made.
struct Tally {
    /// The bound: bytes plus [`ENTRY_COST`] per entry.
    limit: u64,
    /// Spent so far against `limit`.
    spent: u64,
    /// What the copy made.
    done: Copied,
}

impl Tally {
    /// Spends `cost` more; past the bound, the copy stops.
    fn spend(&mut self, cost: u64) -> Result<(), CopyFail> {
        self.spent = self.spent.saturating_add(cost);
        if self.spent > self.limit {
            return Err(CopyFail::TooLarge);
        }
        Ok(())
    }
}

/// One entry to copy: `name` in `src`, as `to` in `dst`, `meta` its metadata.
struct Entry<'a> {
    src: &'a Dir,
    name: &'a OsStr,
    dst: &'a Dir,
    to: &'a OsStr,
    meta: &'a rustix::fs::Stat,
}

/// Copies `name` in `src` to `to` in `dst` (which must not exist), within `limit` (bytes plus
/// a cost per entry), keeping modes and times.
pub(super) fn copy_tree(
    src: &Dir,
    name: &OsStr,
    dst: &Dir,
    to: &OsStr,
    limit: u64,
    deadline: Option<Deadline>,
) -> Result<Copied, CopyFail> {
    let mut tally = Tally {
        limit,
        spent: 0,
        done: Copied::default(),
    };
    let meta = rustix::fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let first = Entry {
        src,
        name,
        dst,
        to,
        meta: &meta,
    };
    let Some(level) = copy_entry(&first, &mut tally)? else {
        return Ok(tally.done);
    };
    let mut stack = vec![level];
    while let Some(top) = stack.last_mut() {
        if let Some(d) = deadline {
            d.check().map_err(CopyFail::Late)?;
        }
        let Some(next) = top.names.pop() else {
            // Its entries are in: the copy gets the directory's own mode now. It had the
            // owner's rwx added to take them, which used to stay, so that a read-only
            // directory came back writable from a restore.
            if let Some(done) = stack.pop() {
                rustix::fs::fchmod(&done.dst, done.mode)?;
            }
            continue;
        };
        let meta = match rustix::fs::statat(&top.src, &next, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(m) => m,
            // Gone since the listing: nothing to copy.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let dst = dir_of(&top.dst)?;
        let entry = Entry {
            src: &top.src,
            name: &next,
            dst: &dst,
            to: &next,
            meta: &meta,
        };
        if let Some(level) = copy_entry(&entry, &mut tally)? {
            if stack.len() >= MAX_DEPTH {
                return Err(CopyFail::TooDeep);
            }
            stack.push(level);
        }
    }
    Ok(tally.done)
}

/// Copies one entry; a directory is made (and its mode set) and handed back with its names
/// to copy.
fn copy_entry(e: &Entry<'_>, tally: &mut Tally) -> Result<Option<Level>, CopyFail> {
    let kind = rustix::fs::FileType::from_raw_mode(e.meta.st_mode);
    let size = if kind == rustix::fs::FileType::RegularFile {
        e.meta.st_size.max(0) as u64
    } else {
        0
    };
    tally.spend(ENTRY_COST.saturating_add(size))?;
    match kind {
        rustix::fs::FileType::RegularFile => copy_file(e, size, tally).map(|()| None),
        rustix::fs::FileType::Symlink => {
            let target = rustix::fs::readlinkat(e.src, e.name, Vec::new())?;
            rustix::fs::symlinkat(target.as_c_str(), e.dst, e.to)?;
            tally.done.entries += 1;
            Ok(None)
        }
        rustix::fs::FileType::Directory => copy_dir(e, tally).map(Some),
        _ => {
            tally.done.skipped += 1;
            Ok(None)
        }
    }
}

/// Copies a regular file of `size` bytes (as its metadata said, and already spent).
fn copy_file(e: &Entry<'_>, size: u64, tally: &mut Tally) -> Result<(), CopyFail> {
    let from = rustix::fs::openat(
        e.src,
        e.name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let opened = rustix::fs::fstat(&from)?;
    if rustix::fs::FileType::from_raw_mode(opened.st_mode) != rustix::fs::FileType::RegularFile {
        // Swapped since the look: copy nothing rather than something else.
        tally.done.skipped += 1;
        return Ok(());
    }
    let into = rustix::fs::openat(
        e.dst,
        e.to,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let (mut from, mut into) = (std::fs::File::from(from), std::fs::File::from(into));
    // What the file may hold: what is left of the bound once its stated size is given back.
    let left = tally.limit.saturating_sub(tally.spent - size);
    let copied = std::io::copy(&mut std::io::Read::take(&mut from, left + 1), &mut into)?;
    if copied > left {
        return Err(CopyFail::TooLarge);
    }
    tally.spent = tally.spent.saturating_sub(size).saturating_add(copied);
    rustix::fs::fchmod(&into, Mode::from_raw_mode(copied_mode(e.meta)))?;
    rustix::fs::futimens(&into, &times(e.meta))?;
    tally.done.bytes += copied;
    tally.done.entries += 1;
    Ok(())
}

/// Makes the directory's copy and lists the names to copy into it.
fn copy_dir(e: &Entry<'_>, tally: &mut Tally) -> Result<Level, CopyFail> {
    let mode = Mode::from_raw_mode(copied_mode(e.meta));
    rustix::fs::mkdirat(e.dst, e.to, Mode::from_raw_mode(0o700))?;
    let made = open_dir(e.dst, e.to)?;
    let from = open_dir(e.src, e.name)?;
    let src = dir_of(&from)?;
    let mut names = Vec::new();
    for entry in src.entries()? {
        names.push(entry?.file_name());
        tally.spend(ENTRY_COST)?;
    }
    // The mode is set now that the directory is open: a read-only one still takes its
    // entries, as the owner of the copy.
    rustix::fs::fchmod(&made, mode | Mode::RWXU)?;
    tally.done.entries += 1;
    Ok(Level {
        src,
        dst: made,
        names,
        mode,
    })
}

/// The mode a copy of `meta` gets. The copy is the user's, whoever owned the original: a
/// set-user-ID bit is kept only on a copy of the user's own file, a set-group-ID bit only
/// on one of the user's group, as `cp -p` does when it cannot keep the owner. They used to
/// be kept always, so that another user's set-user-ID program, kept by a copy and put back
/// by `restore` or `undo`, became a set-user-ID program of the user's running the other
/// user's code.
fn copied_mode(meta: &rustix::fs::Stat) -> u32 {
    let mut mode = meta.st_mode & 0o7777;
    if meta.st_uid != rustix::process::geteuid().as_raw() {
        mode &= !0o4000;
    }
    if meta.st_gid != rustix::process::getegid().as_raw() {
        mode &= !0o2000;
    }
    mode
}

/// Opens `name` in `dir` as a directory for reading, never following a link.
pub(super) fn open_dir(dir: &Dir, name: &OsStr) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// A directory handle on an open directory.
fn dir_of(fd: &OwnedFd) -> std::io::Result<Dir> {
    Ok(Dir::from_std_file(std::fs::File::from(fd.try_clone()?)))
}

/// The access and modification times of `meta`, to set on a copy.
fn times(meta: &rustix::fs::Stat) -> rustix::fs::Timestamps {
    let ts = |sec: i64, nsec: u64| rustix::fs::Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    rustix::fs::Timestamps {
        last_access: ts(meta.st_atime, meta.st_atime_nsec),
        last_modification: ts(meta.st_mtime, meta.st_mtime_nsec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Another user's set-user-ID program, copied: the copy is the user's, without the bit.
    #[test]
    fn a_copy_of_another_users_setuid_program_is_not_setuid() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root to make another user's file");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("tool"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::chown(a.join("tool"), Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(a.join("tool"), std::fs::Permissions::from_mode(0o6755)).unwrap();
        std::fs::write(a.join("mine"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(a.join("mine"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        let src = Dir::open_ambient_dir(&a, cap_std::ambient_authority()).unwrap();
        let dst = Dir::open_ambient_dir(&b, cap_std::ambient_authority()).unwrap();
        for name in ["tool", "mine"] {
            copy_tree(
                &src,
                OsStr::new(name),
                &dst,
                OsStr::new(name),
                u64::MAX,
                None,
            )
            .unwrap();
        }
        let mode = |n: &str| std::fs::metadata(b.join(n)).unwrap().mode() & 0o7777;
        assert_eq!(
            mode("tool"),
            0o755,
            "another user's set-user-ID bit was kept"
        );
        assert_eq!(mode("mine"), 0o4755, "the user's own was not");
    }

    /// A tree deeper than the copy goes is `TooDeep`, never `TooLarge`: it is not a reason to
    /// proceed unkept.
    #[test]
    fn a_deep_tree_is_too_deep_not_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let mut deep = dir.path().join("a/t");
        for _ in 0..(MAX_DEPTH + 2) {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        let src =
            Dir::open_ambient_dir(dir.path().join("a"), cap_std::ambient_authority()).unwrap();
        let dst =
            Dir::open_ambient_dir(dir.path().join("b"), cap_std::ambient_authority()).unwrap();
        let r = copy_tree(&src, OsStr::new("t"), &dst, OsStr::new("t"), u64::MAX, None);
        assert!(matches!(r, Err(CopyFail::TooDeep)), "{r:?}");
    }
}
