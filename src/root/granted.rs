//! Grants in the types: the [`Gate`] an operation resolves through, and the [`Granted`]
//! handle the resolver gives back.
//!
//! An operation reaches a file only through a [`Granted`], and the only way to get one is
//! [`super::Root::resolve`] with a [`Gate`], which checks the session's grants on the *real* path
//! before the handle exists (and on every place the walk looks at, before it looks). The
//! handle's directory is private: the opens, creations and removals an operation needs are
//! methods here, with the flags that keep them safe (no following a final link, no blocking
//! on a FIFO, no controlling terminal) set once, in this file.

use crate::access::Access;
use crate::consent::Grants;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::MountPath;
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions, OpenOptionsExt};
use std::ffi::OsStr;

/// What one operation may see and change: the session's grants as they stood when it began,
/// and the access it needs at its path.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    sight: Sight,
    need: Access,
}

#[derive(Debug, Clone)]
enum Sight {
    /// A session's grants.
    Grants(Grants),
    /// The whole root: see [`Gate::whole`].
    Whole,
    /// What a consent request may look at: see [`Gate::asking`].
    Asking {
        /// The session's grants.
        grants: Grants,
        /// The path the request asks about.
        asked: MountPath,
        /// What the policy says of a place without asking anyone.
        said: Said,
    },
}

/// What a consent policy says of a place without asking anyone: `Some(true)` when it is
/// granted to this server on request (an allow rule, or mode `auto`), `Some(false)` when it
/// never is (a deny rule), `None` when someone would be asked.
#[derive(Clone)]
pub(crate) struct Said(std::sync::Arc<SaidFn>);

/// The function behind [`Said`].
type SaidFn = dyn Fn(&MountPath) -> Option<bool> + Send + Sync;

impl Said {
    /// Wraps the policy's answer.
    pub(crate) fn new(f: impl Fn(&MountPath) -> Option<bool> + Send + Sync + 'static) -> Self {
        Said(std::sync::Arc::new(f))
    }
}

impl std::fmt::Debug for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Said(..)")
    }
}

impl Gate {
    /// A gate for an operation that needs `need` at its path, under `grants`.
    pub(crate) fn new(grants: Grants, need: Access) -> Self {
        Gate {
            sight: Sight::Grants(grants),
            need,
        }
    }

    /// Whether the walk may look at `path` (stat it, open it, read it as a link): a grant
    /// covers it, or it lies on the way to a grant. Anything else is refused before the
    /// look, so that what exists there cannot change the answer.
    pub(super) fn may_look(&self, path: &MountPath) -> Result<()> {
        match &self.sight {
            Sight::Whole => Ok(()),
            Sight::Asking {
                grants,
                asked,
                said,
            } => {
                if asked.starts_with(path) || path.starts_with(asked) {
                    return Ok(());
                }
                match (said.0)(path) {
                    Some(true) => return Ok(()),
                    Some(false) => {
                        return Err(Error::denied(Reason::NoConsent).with_path(path.to_string()));
                    }
                    None => {}
                }
                granted_sight(grants, path)
            }
            Sight::Grants(g) => granted_sight(g, path),
        }
    }

    /// Whether the walk may create the directory `path`: a write grant covers it.
    pub(super) fn may_create(&self, path: &MountPath) -> Result<()> {
        match &self.sight {
            Sight::Whole | Sight::Asking { .. } => {
                Err(Error::denied(Reason::NoConsent).with_path(path.to_string()))
            }
            Sight::Grants(g) => g.check(path, Access::Write),
        }
    }

    /// Checks the real path the walk arrived at, and only then makes the handle.
    pub(super) fn grant(
        &self,
        dir: Dir,
        name: Option<String>,
        meta: Option<Metadata>,
        real: MountPath,
    ) -> Result<Granted> {
        self.check_final(&real)?;
        Ok(Granted {
            dir,
            name,
            meta,
            real,
        })
    }

    /// Checks `path` for the access this gate's operation needs.
    pub(super) fn check_final(&self, path: &MountPath) -> Result<()> {
        match &self.sight {
            // What a consent request may be granted is decided by its rules and provider.
            Sight::Whole | Sight::Asking { .. } => Ok(()),
            Sight::Grants(g) => g.check(path, self.need),
        }
    }

    /// A gate that sees the whole root and creates nothing: for the broker's own question
    /// where a watched directory is (the watcher checking that it is still at its place, for
    /// every session that watches it), never for a request, whose gate is always built from
    /// its session's grants.
    /// A gate for finding the real path a consent request for `asked` is about: it may look
    /// along the way to `asked` and beneath it, where the policy grants this server a place on
    /// request anyway (`said`), and wherever the session's grants already reach; nowhere
    /// else, and never where a deny rule closes a place. So the answer to a consent request
    /// never depends on what exists where the server could not be granted without asking. It
    /// creates nothing.
    pub(crate) fn asking(grants: Grants, asked: MountPath, said: Said) -> Self {
        Gate {
            sight: Sight::Asking {
                grants,
                asked,
                said,
            },
            need: Access::Read,
        }
    }

    pub(crate) fn whole() -> Self {
        Gate {
            sight: Sight::Whole,
            need: Access::Read,
        }
    }
}

/// Whether `grants` let a walk look at `path`: a grant covers it, or it lies on the way to
/// one (and no revocation mark covers it).
fn granted_sight(grants: &Grants, path: &MountPath) -> Result<()> {
    match grants.check(path, Access::Read) {
        Ok(()) => Ok(()),
        Err(e) if e.reason() == Some(Reason::Revoked) => Err(e),
        Err(_) if grants.leads_to_grant(path) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A place the session's grants cover, reached through its root's handle: the directory that
/// holds the final entry (or the directory itself, when the path ends at one), the entry's
/// name, and the real path after symlinks. Only [`super::Root::resolve`] makes one.
#[derive(Debug)]
pub(crate) struct Granted {
    dir: Dir,
    name: Option<String>,
    meta: Option<Metadata>,
    real: MountPath,
}

impl Granted {
    /// The real path after symlinks, in mount form.
    pub(crate) fn real(&self) -> &MountPath {
        &self.real
    }

    /// The final component, which need not exist; `None` when the path is a directory reached
    /// as the handle itself (such as the root).
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The final name as an `OsStr`, or `.` for the handle itself.
    pub(crate) fn name_os(&self) -> &OsStr {
        OsStr::new(self.name.as_deref().unwrap_or("."))
    }

    /// The entry's own metadata, never following it (of the directory, for the handle
    /// itself); the walk's when it looked already.
    pub(crate) fn metadata(&self) -> std::io::Result<Metadata> {
        match (&self.name, &self.meta) {
            (None, _) => self.dir.dir_metadata(),
            (Some(_), Some(m)) => Ok(m.clone()),
            (Some(n), None) => self.dir.symlink_metadata(n),
        }
    }

    /// Whether the entry exists (of any kind, a dangling link included).
    pub(crate) fn exists(&self) -> bool {
        self.metadata().is_ok()
    }

    /// Opens the entry, a regular file, for reading: a final link is not followed, and a FIFO
    /// or device swapped in after the caller's check neither blocks nor becomes a terminal.
    pub(crate) fn open_read(&self) -> std::io::Result<File> {
        let mut opts = OpenOptions::new();
        opts.read(true).follow(FollowSymlinks::No).custom_flags(
            (rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32,
        );
        self.dir.open_with(self.name_os(), &opts)
    }

    /// Opens the entry as a directory, never following a link.
    pub(crate) fn open_dir(&self) -> std::io::Result<Dir> {
        match &self.name {
            None => self.dir.try_clone(),
            Some(n) => self.dir.open_dir_nofollow(n),
        }
    }

    /// The directory a watch of the entry is placed on, never following a link: the entry
    /// itself when it is a directory (`is_dir`, from its metadata), else the directory that
    /// holds it, so that replacing a watched file keeps being seen.
    pub(crate) fn watch_dir(&self, is_dir: bool) -> std::io::Result<Dir> {
        if is_dir {
            self.open_dir()
        } else {
            self.dir.try_clone()
        }
    }

    /// Creates the entry as a new, empty directory.
    pub(crate) fn create_dir(&self) -> Result<()> {
        let name = self.entry_name()?;
        self.dir
            .create_dir(name)
            .map_err(|e| Error::from_io(&e, ""))
    }

    /// Creates the entry as a new, empty file (never through a link, never over anything).
    pub(crate) fn create_file(&self) -> Result<File> {
        let name = self.entry_name()?;
        let mut opts = OpenOptions::new();
        opts.write(true)
            .create_new(true)
            .follow(FollowSymlinks::No)
            .mode(0o644);
        self.dir
            .open_with(name, &opts)
            .map_err(|e| Error::from_io(&e, ""))
    }

    /// Removes the entry: a file or link itself, an empty directory, or with `recursive` a
    /// directory and everything beneath it (see [`super::tree::remove_tree`]).
    pub(crate) fn remove(&self, recursive: bool, deadline: Deadline) -> Result<()> {
        let name = self.entry_name()?;
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let meta = self.dir.symlink_metadata(name).map_err(io)?;
        if !meta.is_dir() {
            return self.dir.remove_file(name).map_err(io);
        }
        if recursive {
            super::tree::remove_tree(&self.dir, name, deadline)
        } else {
            self.dir.remove_dir(name).map_err(io)
        }
    }

    /// Renames the entry to `to`'s name: over an existing entry when `overwrite`, else
    /// failing if one exists. Neither name is followed.
    pub(crate) fn rename_to(&self, to: &Granted, overwrite: bool) -> Result<()> {
        let (from_name, to_name) = (self.entry_name()?, to.entry_name()?);
        let io = |e: std::io::Error| Error::from_io(&e, "");
        if overwrite {
            rustix::fs::renameat(&self.dir, from_name, &to.dir, to_name).map_err(|e| io(e.into()))
        } else {
            crate::atomic::rename_noreplace(&self.dir, from_name, &to.dir, to_name).map_err(io)
        }
    }

    /// Whether `other` names the same entry in the same directory (the same inode of the
    /// directory, not only the same path): an upload commits only where it started.
    pub(crate) fn same_place(&self, other: &Granted) -> bool {
        let id = |d: &Dir| rustix::fs::fstat(d).ok().map(|s| (s.st_dev, s.st_ino));
        self.real == other.real
            && self.name == other.name
            && matches!((id(&self.dir), id(&other.dir)), (Some(a), Some(b)) if a == b)
    }

    /// The directory that holds the entry, for staging and committing a file beside it.
    pub(crate) fn parent(&self) -> &Dir {
        &self.dir
    }

    fn entry_name(&self) -> Result<&str> {
        self.name.as_deref().ok_or_else(|| {
            Error::new(ErrorKind::InvalidPath, "a root itself cannot be used here")
                .with_reason(Reason::RootItself)
        })
    }
}
