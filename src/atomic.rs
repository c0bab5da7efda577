//! Atomic replacement of a file inside a directory handle.
//!
//! New content goes to a temporary file in the target's own directory (so the final rename
//! never crosses a filesystem), is written and fsynced, takes the old file's permission bits,
//! and is renamed over the target; then the directory is fsynced. A reader sees the old bytes
//! or the new bytes, never a mix, and a crash at any point leaves the old file whole. A crash
//! can leave a temporary file behind: its name carries the writer's pid, and the next write
//! into that directory by any broker removes temporaries whose writer is gone.

use crate::error::{Error, ErrorKind, Reason, Result};
use crate::locks::{Holder, LOCKED_RETRY_MS, Wait};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod sweeper;

pub(crate) use sweeper::Sweeper;

/// The first pause between tries at an advisory lock another process holds, doubled after
/// each try up to [`LONGEST_PAUSE`]: a writer holds the lock only while it replaces the file,
/// so the first tries come soon, and a program that keeps it longer is not polled hard.
const FIRST_PAUSE: Duration = Duration::from_millis(1);
/// The longest pause between tries at an advisory lock.
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// The prefix of every temporary file the broker creates.
pub(crate) const TEMP_PREFIX: &str = ".fsbroker-";
/// The suffix of every temporary file the broker creates.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// What a write requires of the target at commit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Preconditions {
    /// The target may be created.
    pub create: bool,
    /// An existing target may be replaced.
    pub overwrite: bool,
    /// The target must exist with this etag.
    pub if_match: Option<String>,
}

/// A committed write.
#[derive(Debug)]
pub(crate) struct Committed {
    /// The target's metadata after the commit.
    pub meta: Metadata,
    /// Whether the target did not exist before.
    pub created: bool,
}

/// A temporary file in a directory, removed on drop unless committed.
#[derive(Debug)]
pub(crate) struct TempFile {
    dir: Dir,
    name: String,
    file: std::fs::File,
    committed: bool,
}

impl TempFile {
    /// Creates a new, empty temporary file in `dir` with mode 0644 less the umask: the mode a
    /// new target gets. The commit gives a replaced target's mode instead.
    pub(crate) fn create(dir: &Dir) -> std::io::Result<TempFile> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(std::io::Error::other)?;
        let name = format!(
            "{TEMP_PREFIX}{}-{}-{:016x}{TEMP_SUFFIX}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            u64::from_le_bytes(random)
        );
        let mut opts = OpenOptions::new();
        opts.read(true)
            .write(true)
            .create_new(true)
            .follow(FollowSymlinks::No)
            .mode(0o644);
        let file = dir.open_with(&name, &opts)?.into_std();
        Ok(TempFile {
            dir: dir.try_clone()?,
            name,
            file,
            committed: false,
        })
    }

    /// The open file, for writing content.
    pub(crate) fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Checks `pre` against the current target `name` in `dir` and locks it: the first half of
    /// the commit, which [`Staged::commit`] completes. The caller holds the in-process lock for
    /// the target; the advisory lock is waited for within what is left of `wait`.
    ///
    /// Checking, locking and renaming are one critical section against other processes: the
    /// existing target is locked first, the lock is shown to be on the file the name holds
    /// now, `pre` (the etag above all) is compared on that locked file, and the lock is held
    /// until the new file has replaced it. A writer in another process that compared the same
    /// etag either waits out its wait (`locked`) or, once it gets the lock on the old file,
    /// finds the name holding the new one and fails with `etag_mismatch`.
    pub(crate) fn lock<'a>(
        self,
        dir: &'a Dir,
        name: &'a str,
        pre: &Preconditions,
        wait: &mut Wait,
    ) -> Result<Staged<'a>> {
        let target = lock_target(dir, name, pre, wait)?;
        Ok(Staged {
            temp: self,
            dir,
            name,
            overwrite: pre.overwrite,
            target,
        })
    }
}

/// A temporary file ready to replace its target, which is locked (when it exists) until the
/// commit: between the two, the caller keeps what the commit will replace, so that what is
/// kept is what the rename replaces.
#[derive(Debug)]
pub(crate) struct Staged<'a> {
    temp: TempFile,
    dir: &'a Dir,
    name: &'a str,
    overwrite: bool,
    /// Held to the end of the commit: released only after the rename (and its flush).
    target: Option<LockedTarget>,
}

impl Staged<'_> {
    /// The metadata of the locked file the commit will replace; `None` when it creates one.
    pub(crate) fn replaced(&self) -> Option<&Metadata> {
        self.target.as_ref().map(|t| &t.meta)
    }

    /// Moves the temporary into place, over the locked target, and flushes the directory.
    pub(crate) fn commit(mut self) -> Result<Committed> {
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let (dir, name) = (self.dir, self.name);
        if let Some(t) = &self.target {
            self.temp
                .file
                .set_permissions(std::fs::Permissions::from_mode(replacing_mode(
                    &t.meta,
                    &self.temp.file,
                )))
                .map_err(io)?;
        }
        self.temp.file.sync_all().map_err(io)?;
        if self.overwrite {
            rustix::fs::renameat(&self.temp.dir, &self.temp.name, dir, name)
                .map_err(|e| io(e.into()))?;
        } else {
            rename_noreplace(&self.temp.dir, &self.temp.name, dir, name).map_err(io)?;
        }
        self.temp.committed = true;
        sync_dir(dir).map_err(io)?;
        // The result describes the file we wrote, read from our own descriptor: the name may
        // already have been replaced by someone else, and must not be followed or trusted.
        let meta = Metadata::from_file(&self.temp.file).map_err(io)?;
        Ok(Committed {
            meta,
            created: self.target.is_none(),
        })
    }
}

/// The mode the new file takes from the one it replaces. The new file is the user's: a
/// set-user-ID bit is kept only when the old file was the user's too, a set-group-ID bit
/// only when it had the new file's group. They used to be kept always, so that a server
/// writing over another user's set-user-ID program made a set-user-ID program of the
/// user's, with the server's content, which that other user could run.
fn replacing_mode(old: &Metadata, new: &std::fs::File) -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    let mut mode = old.mode() & 0o7777;
    if old.uid() != rustix::process::geteuid().as_raw() {
        mode &= !0o4000;
    }
    if new.metadata().map_or(true, |m| m.gid() != old.gid()) {
        mode &= !0o2000;
    }
    mode
}

/// The existing target, locked, with the metadata of the locked file.
#[derive(Debug)]
struct LockedTarget {
    /// Holds the advisory lock until dropped.
    _file: std::fs::File,
    meta: Metadata,
}

/// Times the name may be found holding another file than the one just locked before the
/// write gives up with a conflict. Each retry means another writer committed in between.
const LOCK_ATTEMPTS: usize = 8;

/// Checks `pre` and, when the target exists, locks it: the critical section's entry. Answers
/// `None` when there is no target (and `pre` allows creating one); then nothing is locked,
/// and the rename itself decides (`rename_noreplace` refuses a target that appeared).
fn lock_target(
    dir: &Dir,
    name: &str,
    pre: &Preconditions,
    wait: &mut Wait,
) -> Result<Option<LockedTarget>> {
    for _ in 0..LOCK_ATTEMPTS {
        if check_target(dir, name, pre)?.is_none() {
            return Ok(None);
        }
        let file = match open_for_lock(dir, name) {
            Ok(f) => f,
            // The name changed between the look and the open (removed, or replaced by a link
            // or a directory): look again.
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(Error::from_io(&e, "")),
        };
        lock_file(&file, wait)?;
        let held = Metadata::from_file(&file).map_err(|e| Error::from_io(&e, ""))?;
        let named = match dir.symlink_metadata(name) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::from_io(&e, "")),
        };
        if (held.dev(), held.ino()) != (named.dev(), named.ino()) {
            // Another writer replaced the file after we looked: our lock is on a file that
            // is no longer the target. Look again; an `ifMatch` now fails on the new file.
            continue;
        }
        // The locked file is the target, and stays so against every writer that locks
        // before replacing; `pre` is decided on it, not on what the name showed earlier.
        check_meta(Some(&held), pre)?;
        return Ok(Some(LockedTarget {
            _file: file,
            meta: held,
        }));
    }
    Err(Error::new(
        ErrorKind::ConcurrencyConflict,
        "the file keeps being replaced by another process; retry later",
    )
    .with_reason(Reason::Locked)
    .with_retry_after_ms(LOCKED_RETRY_MS))
}

/// Whether an open failed because the name no longer holds the regular file we saw.
fn gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
        || matches!(
            e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
            Some(rustix::io::Errno::LOOP | rustix::io::Errno::ISDIR)
        )
}

/// Checks `pre` against the current target: its metadata when it exists as a regular file.
/// This looks at the name only; [`TempFile::lock`] decides again on the locked file.
pub(crate) fn check_target(dir: &Dir, name: &str, pre: &Preconditions) -> Result<Option<Metadata>> {
    let existing = match dir.symlink_metadata(name) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::from_io(&e, "")),
    };
    check_meta(existing.as_ref(), pre)?;
    Ok(existing)
}

/// Checks `pre` against a target's metadata (`None`: no target).
fn check_meta(existing: Option<&Metadata>, pre: &Preconditions) -> Result<()> {
    match existing {
        Some(m) if m.is_dir() => {
            return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
        }
        Some(m) if !m.is_file() => {
            return Err(Error::new(ErrorKind::InvalidPath, "not a regular file")
                .with_reason(Reason::NotRegularFile));
        }
        Some(_) if !pre.overwrite => {
            return Err(Error::new(ErrorKind::AlreadyExists, "already exists"));
        }
        None if !pre.create => {
            return Err(Error::new(ErrorKind::FileNotFound, "no such file"));
        }
        _ => {}
    }
    if let Some(expected) = &pre.if_match {
        let current = existing.map(etag);
        if current.as_deref() != Some(expected.as_str()) {
            return Err(
                Error::new(ErrorKind::ConcurrencyConflict, "etag does not match")
                    .with_reason(Reason::EtagMismatch),
            );
        }
    }
    Ok(())
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed
            && let Err(e) = self.dir.remove_file(&self.name)
        {
            tracing::warn!(file = %self.name, error = %e, "cannot remove temporary file");
        }
    }
}

/// Opens the existing target for its advisory lock: never following a link, never blocking
/// (a FIFO put in its place must not hang the write).
fn open_for_lock(dir: &Dir, name: &str) -> std::io::Result<std::fs::File> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .follow(FollowSymlinks::No)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    Ok(dir.open_with(name, &opts)?.into_std())
}

/// Takes the advisory lock a write takes on the regular file `name` in `dir`, for an
/// operation that removes or replaces it (delete, rename): waited for within `wait` while
/// another process holds it, as a write waits, and held until the returned file is dropped.
/// `None` when `name` is no regular file (a directory, a link, nothing), which carries no such
/// lock, or when it is the file `besides` (which the caller has locked already) by another
/// name: locking it again would wait for the caller itself.
pub(crate) fn lock_file_entry(
    dir: &Dir,
    name: &str,
    wait: &mut Wait,
    besides: Option<&std::fs::File>,
) -> Result<Option<std::fs::File>> {
    let Ok(file) = open_for_lock(dir, name) else {
        return Ok(None);
    };
    let Ok(meta) = file.metadata() else {
        return Ok(None);
    };
    let id = |m: &std::fs::Metadata| {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    };
    let locked = besides.and_then(|f| f.metadata().ok());
    if !meta.is_file() || locked.is_some_and(|m| id(&m) == id(&meta)) {
        return Ok(None);
    }
    lock_file(&file, wait)?;
    Ok(Some(file))
}

/// Takes an exclusive advisory lock on `file`. While another process holds one, tries again
/// after a pause, within `wait`; past it, `locked`.
fn lock_file(file: &std::fs::File, wait: &mut Wait) -> Result<()> {
    let mut pause = FIRST_PAUSE;
    loop {
        // Named through fs4: std's inherent `File::try_lock` would otherwise shadow it.
        match fs4::FileExt::try_lock(file) {
            Ok(()) => return Ok(()),
            Err(fs4::TryLockError::WouldBlock) => {}
            Err(fs4::TryLockError::Error(e)) => return Err(Error::from_io(&e, "")),
        }
        if !wait.pause(pause) {
            return Err(wait.refusal(Holder::Process));
        }
        pause = pause.saturating_mul(2).min(LONGEST_PAUSE);
    }
}

/// Renames without replacing: `RENAME_NOREPLACE` where the filesystem supports it, else a
/// hard link (which fails if the target exists) and an unlink. Neither leaves a window in which
/// an existing target is replaced.
pub(crate) fn rename_noreplace(
    from_dir: &Dir,
    from: &str,
    to_dir: &Dir,
    to: &str,
) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, RenameFlags};
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
            rustix::fs::unlinkat(from_dir, from, AtFlags::empty())?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Flushes a directory's entries to disk. cap-std holds directories as `O_PATH` handles, which
/// cannot be fsynced, so `.` is opened beneath the handle for reading first.
pub(crate) fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    rustix::fs::fsync(&fd)?;
    Ok(())
}

/// An etag that changes when the file is replaced or its size or modification time changes.
pub(crate) fn etag(m: &cap_std::fs::Metadata) -> String {
    use cap_std::fs::MetadataExt;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.dev().hash(&mut h);
    m.ino().hash(&mut h);
    m.len().hash(&mut h);
    if let Ok(t) = m.modified() {
        t.into_std().hash(&mut h);
    }
    format!("\"{:016x}\"", h.finish())
}

/// Opens `path` for reading and writing, creating it 0600, never through a link: a file of
/// the user's own (a lock file, the recovery journal) that others must not read.
pub(crate) fn open_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}
