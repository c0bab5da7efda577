//! Atomic replacement of a file inside a directory handle.
//!
//! New content goes to a temporary file in the target's own directory (so the final rename
//! never crosses a filesystem), is written and fsynced, takes the old file's permission bits,
//! and is renamed over the target; then the directory is fsynced. A reader sees the old bytes
//! or the new bytes, never a mix, and a crash at any point leaves the old file whole. A crash
//! can leave a temporary file behind: its name carries the writer's pid, and the next write
//! into that directory by any broker removes temporaries whose writer is gone.

use crate::error::{Error, ErrorKind, Reason, Result};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The prefix of every temporary file the broker creates.
pub const TEMP_PREFIX: &str = ".fsbroker-";
/// The suffix of every temporary file the broker creates.
pub const TEMP_SUFFIX: &str = ".tmp";
/// Directories remembered as already swept before the set is cleared.
const SWEPT_MAX: usize = 4096;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// What a write requires of the target at commit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preconditions {
    /// The target may be created.
    pub create: bool,
    /// An existing target may be replaced.
    pub overwrite: bool,
    /// The target must exist with this etag.
    pub if_match: Option<String>,
}

/// A committed write.
#[derive(Debug)]
pub struct Committed {
    /// The target's metadata after the commit.
    pub meta: Metadata,
    /// Whether the target did not exist before.
    pub created: bool,
}

/// Remembers which directories have had stale temporaries swept, so a directory is read for
/// that once per process rather than on every write.
#[derive(Debug, Default)]
pub struct Sweeper {
    swept: Mutex<HashSet<(u64, u64)>>,
}

impl Sweeper {
    /// Removes temporaries in `dir` left by broker processes that no longer run. Best effort:
    /// failures are logged, never reported to the peer.
    pub fn sweep_once(&self, dir: &Dir) {
        let Ok(meta) = dir.dir_metadata() else { return };
        {
            let mut swept = match self.swept.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if swept.len() >= SWEPT_MAX {
                swept.clear();
            }
            if !swept.insert((meta.dev(), meta.ino())) {
                return;
            }
        }
        let Ok(entries) = dir.entries() else { return };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(pid) = writer_pid(&name)
                && pid != std::process::id()
                && !alive(pid)
            {
                match dir.remove_file(&name) {
                    Ok(()) => tracing::info!(file = %name, "removed a stale temporary file"),
                    Err(e) => {
                        tracing::debug!(file = %name, error = %e, "cannot remove stale temporary")
                    }
                }
            }
        }
    }
}

/// The pid in a temporary file's name, if the name is one of ours.
fn writer_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(TEMP_SUFFIX)?;
    rest.split('-').next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// A temporary file in a directory, removed on drop unless committed.
#[derive(Debug)]
pub struct TempFile {
    dir: Dir,
    name: String,
    file: std::fs::File,
    committed: bool,
}

impl TempFile {
    /// Creates a new, empty temporary file in `dir` with mode 0644 less the umask: the mode a
    /// new target gets. The commit gives a replaced target's mode instead.
    pub fn create(dir: &Dir) -> std::io::Result<TempFile> {
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
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Checks `pre` against the current target `name` in `dir`, then moves the temporary into
    /// place. The caller holds the in-process lock for the target.
    pub fn commit(mut self, dir: &Dir, name: &str, pre: &Preconditions) -> Result<Committed> {
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let existing = check_target(dir, name, pre)?;
        // Another process that takes an advisory lock on the file is kept out while we
        // replace it; the lock is held until the rename is done.
        let _advisory = match &existing {
            Some(_) => Some(advisory_lock(dir, name)?),
            None => None,
        };
        if let Some(m) = &existing {
            self.file
                .set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))
                .map_err(io)?;
        }
        self.file.sync_all().map_err(io)?;
        if pre.overwrite {
            rustix::fs::renameat(&self.dir, &self.name, dir, name).map_err(|e| io(e.into()))?;
        } else {
            rename_noreplace(&self.dir, &self.name, dir, name).map_err(io)?;
        }
        self.committed = true;
        sync_dir(dir).map_err(io)?;
        // The result describes the file we wrote, read from our own descriptor: the name may
        // already have been replaced by someone else, and must not be followed or trusted.
        let meta = Metadata::from_file(&self.file).map_err(io)?;
        Ok(Committed {
            meta,
            created: existing.is_none(),
        })
    }
}

/// Checks `pre` against the current target: its metadata when it exists as a regular file.
pub fn check_target(dir: &Dir, name: &str, pre: &Preconditions) -> Result<Option<Metadata>> {
    let io = |e: std::io::Error| Error::from_io(&e, "");
    let existing = match dir.symlink_metadata(name) {
        Ok(m) if m.is_dir() => {
            return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
        }
        Ok(m) if !m.is_file() => {
            return Err(Error::new(ErrorKind::InvalidPath, "not a regular file")
                .with_reason(Reason::NotRegularFile));
        }
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    match (&existing, pre) {
        (
            Some(_),
            Preconditions {
                overwrite: false, ..
            },
        ) => {
            return Err(Error::new(ErrorKind::AlreadyExists, "already exists"));
        }
        (None, Preconditions { create: false, .. }) => {
            return Err(Error::new(ErrorKind::FileNotFound, "no such file"));
        }
        _ => {}
    }
    if let Some(expected) = &pre.if_match {
        let current = existing.as_ref().map(crate::ops::etag);
        if current.as_deref() != Some(expected.as_str()) {
            return Err(
                Error::new(ErrorKind::ConcurrencyConflict, "etag does not match")
                    .with_reason(Reason::EtagMismatch),
            );
        }
    }
    Ok(existing)
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

/// Takes an exclusive advisory lock on the existing target, refusing with `locked` when another
/// process holds one.
fn advisory_lock(dir: &Dir, name: &str) -> Result<std::fs::File> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .follow(FollowSymlinks::No)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    let file = dir
        .open_with(name, &opts)
        .map_err(|e| Error::from_io(&e, ""))?
        .into_std();
    // Named through fs4: std's inherent `File::try_lock` would otherwise shadow it.
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(file),
        Err(fs4::TryLockError::WouldBlock) => Err(Error::new(
            ErrorKind::ConcurrencyConflict,
            "file is locked by another process",
        )
        .with_reason(Reason::Locked)),
        Err(fs4::TryLockError::Error(e)) => Err(Error::from_io(&e, "")),
    }
}

/// Renames without replacing: `RENAME_NOREPLACE` where the filesystem supports it, else a
/// hard link (which fails if the target exists) and an unlink. Neither leaves a window in which
/// an existing target is replaced.
pub fn rename_noreplace(from_dir: &Dir, from: &str, to_dir: &Dir, to: &str) -> std::io::Result<()> {
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
pub fn sync_dir(dir: &Dir) -> std::io::Result<()> {
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
