//! Keeping content before an operation destroys it, and journaling the change: what the
//! operations call, inside their critical section, through the handles they resolved.

use super::change::{By, USER};
use super::copy::CopyFail;
use super::journal::Line;
use super::store::new_id;
use super::walk::Unmeasured;
use super::{Change, Kept, RecoveryStore, now_ms};
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::policy::{RecoveryPolicy, Unkept};
use cap_std::fs::{Dir, Metadata, MetadataExt};
use std::path::PathBuf;

/// Who made a change, and where: what the journal says of it besides what was kept. Made
/// by [`Origin::server`] or [`Origin::user`] only, so that whether a change is the user's
/// own is said by which of the two the broker called, never by a name.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// Whether a server or the user made it.
    pub(super) by: By,
    /// The server id.
    pub(super) server: String,
    /// The session: server id, process and serial.
    pub(super) session: String,
    /// The method.
    pub(super) method: &'static str,
    /// The entry, in mount form.
    pub(super) path: String,
    /// The root's directory.
    pub(super) root: PathBuf,
}

impl Origin {
    /// A change the server session `session` (labelled `label`) made by `method` at `path`
    /// (mount form) in the root whose directory is `root`.
    pub(crate) fn server(
        session: &str,
        label: &str,
        method: &'static str,
        path: String,
        root: PathBuf,
    ) -> Origin {
        Origin {
            by: By::Server,
            server: session.to_owned(),
            session: label.to_owned(),
            method,
            path,
            root,
        }
    }

    /// A change the user's restore (or undo) made at `path`: what stood in the way, kept in
    /// turn.
    pub(super) fn user(path: String, root: PathBuf) -> Origin {
        Origin {
            by: By::User,
            server: USER.to_owned(),
            session: USER.to_owned(),
            method: "restore",
            path,
            root,
        }
    }
}

/// What was kept for a change about to be journaled.
#[derive(Debug)]
pub(crate) struct Keep {
    pub(super) id: String,
    pub(super) kept: Option<Kept>,
    not_kept: Option<String>,
    etag_before: Option<String>,
}

impl Keep {
    /// For a change that destroys nothing (a creation, a rename onto a free name).
    pub(crate) fn nothing() -> Keep {
        Keep {
            id: new_id(),
            kept: None,
            not_kept: None,
            etag_before: None,
        }
    }
}

/// An entry's etag for the journal: a file's as the protocol gives it, a directory's its
/// identity alone (its times change with every entry made in it).
pub(crate) fn fingerprint(meta: &Metadata) -> String {
    if meta.is_dir() {
        format!("\"dir:{:x}:{:x}\"", meta.dev(), meta.ino())
    } else {
        crate::atomic::etag(meta)
    }
}

fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "other"
    }
}

/// The refusal of a change whose content cannot be kept.
pub(super) fn unrecoverable(message: &str, limit: u64) -> Error {
    Error::quota(message, limit).with_reason(Reason::NotRecoverable)
}

/// Errors of the store that mean it has no room.
fn no_room(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
        Some(rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT)
    )
}

impl RecoveryStore {
    /// Keeps the entry `name` in `parent`, which an overwrite is about to replace (`meta`
    /// is its metadata, under the operation's lock): a file or link by a hard link, an empty
    /// directory by its mode, content on another filesystem by a copy.
    pub(crate) fn keep_replaced(
        &self,
        parent: &Dir,
        name: &str,
        meta: &Metadata,
        deadline: Deadline,
    ) -> Result<Keep> {
        let policy = self.policy();
        let id = new_id();
        let keep = |how: &str, bytes: u64| Keep {
            id: id.clone(),
            kept: Some(Kept {
                how: how.to_owned(),
                kind: kind_of(meta).to_owned(),
                bytes,
            }),
            not_kept: None,
            etag_before: Some(fingerprint(meta)),
        };
        let kept = if meta.is_dir() {
            self.store
                .empty_dir(&id, meta.mode())
                .map_err(|e| self.failed(&e))?;
            keep("empty", 512)
        } else {
            match self.store.link_in(parent, name, &id) {
                Ok(()) => keep("link", meta.len() + 512),
                Err(e) if cannot_link(&e) => {
                    return self.copy(parent, name, meta, id, &policy, policy.unkept, deadline);
                }
                Err(e) => return Err(self.failed(&e)),
            }
        };
        self.room_or_discard(kept, &policy)
    }

    /// Removes the entry `name` in `parent` for a delete, keeping it: by moving it (a whole
    /// tree at once) into the store, or across filesystems by a copy, then removing it. An
    /// empty directory deleted without `recursive` is removed as `rmdir` does, its mode kept.
    /// A copied tree whose removal stops midway is journaled (as `origin`'s change) before
    /// the error is returned: part of it is gone, and the copy is all that is left of that.
    pub(crate) fn remove_kept(
        &self,
        parent: &Dir,
        name: &str,
        recursive: bool,
        deadline: Deadline,
        origin: &Origin,
    ) -> Result<Keep> {
        let policy = self.policy();
        self.remove_kept_as(
            parent,
            name,
            recursive,
            deadline,
            origin,
            &policy,
            policy.unkept,
        )
    }

    /// [`RecoveryStore::remove_kept`], with `unkept` deciding what becomes of content past
    /// `copy_max_bytes`: a restore never lets it go unkept, whatever the policy says.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn remove_kept_as(
        &self,
        parent: &Dir,
        name: &str,
        recursive: bool,
        deadline: Deadline,
        origin: &Origin,
        policy: &RecoveryPolicy,
        unkept: Unkept,
    ) -> Result<Keep> {
        let io = |e: std::io::Error| Error::from_io(&e, "");
        let meta = parent.symlink_metadata(name).map_err(io)?;
        let id = new_id();
        let kept = |how: &str, bytes: u64| Keep {
            id: id.clone(),
            kept: Some(Kept {
                how: how.to_owned(),
                kind: kind_of(&meta).to_owned(),
                bytes,
            }),
            not_kept: None,
            etag_before: Some(fingerprint(&meta)),
        };
        if meta.is_dir() && !recursive {
            self.store
                .empty_dir(&id, meta.mode())
                .map_err(|e| self.failed(&e))?;
            let keep = self.room_or_discard(kept("empty", 512), policy)?;
            if let Err(e) = parent.remove_dir(name) {
                self.discard(keep);
                return Err(io(e));
            }
            return Ok(keep);
        }
        match self.store.move_in(parent, name, &id) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                let keep = self.copy(parent, name, &meta, id.clone(), policy, unkept, deadline)?;
                let removed = if meta.is_dir() {
                    super::super::root::remove_tree(parent, name)
                } else {
                    parent.remove_file(name).map_err(io)
                };
                if let Err(e) = removed {
                    if meta.is_dir() {
                        // The removal may have stopped midway (a read-only directory or a
                        // mount point in the tree), the entries before it gone: the copy is
                        // kept and the change journaled. It used to be discarded, so that
                        // what was removed was lost for good.
                        let after = parent.symlink_metadata(name).ok().map(|m| fingerprint(&m));
                        self.record(origin.clone(), keep, None, after);
                    } else {
                        self.discard(keep);
                    }
                    return Err(e);
                }
                return Ok(keep);
            }
            Err(e) => return Err(io(e)),
        }
        // What the moved entry costs. A tree that cannot be measured (a directory in it the
        // user cannot read) used to cost nothing: unbounded by `max_bytes`, and, holding no
        // bytes, never pruned, not even for its age.
        // Every level counts, however deep: levels past 128 used to cost nothing, so that a
        // file 131 levels down, deleted again and again, grew the store past its bound.
        let (measured, refused) = match self.store.measure(&id, policy.max_bytes, Some(deadline)) {
            Ok(bytes) => (
                Some(bytes),
                self.room_for(&kept("move", bytes), policy).err(),
            ),
            Err(Unmeasured::Late(e)) => (None, Some(e)),
            Err(Unmeasured::Io(e)) => (
                None,
                Some(Error::new(
                    ErrorKind::Io,
                    format!(
                        "what this would remove cannot be measured for the recovery store ({e}), so nothing was changed"
                    ),
                )),
            ),
        };
        super::store::between_measure_and_put_back();
        match refused {
            None => Ok(kept("move", measured.unwrap_or(0))),
            // Refused: the entry goes back, and the delete is refused.
            Some(e) => {
                self.refuse_moved(kept("move", 0), parent, name, e, measured, origin, policy)
            }
        }
    }

    /// Keeps `name` by a copy within the policy's bound; past it, nothing is kept and the
    /// change proceeds marked not recoverable, or is refused, as the policy says.
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        parent: &Dir,
        name: &str,
        meta: &Metadata,
        id: String,
        policy: &RecoveryPolicy,
        unkept: Unkept,
        deadline: Deadline,
    ) -> Result<Keep> {
        let etag_before = Some(fingerprint(meta));
        match self
            .store
            .copy_in(parent, name, &id, policy.copy_max_bytes, Some(deadline))
        {
            Ok(done) => {
                let keep = Keep {
                    id,
                    kept: Some(Kept {
                        how: "copy".to_owned(),
                        kind: kind_of(meta).to_owned(),
                        bytes: done.bytes + 512 * done.entries.max(1),
                    }),
                    not_kept: None,
                    etag_before,
                };
                self.room_or_discard(keep, policy)
            }
            Err(CopyFail::TooLarge) if unkept == Unkept::Proceed => Ok(Keep {
                id,
                kept: None,
                not_kept: Some(format!(
                    "on another filesystem than the store, and larger than recovery.copy_max_bytes ({} bytes)",
                    policy.copy_max_bytes
                )),
                etag_before,
            }),
            Err(CopyFail::TooLarge) => Err(unrecoverable(
                "the content this would destroy is too large to keep (recovery.copy_max_bytes)",
                policy.copy_max_bytes,
            )),
            Err(CopyFail::TooDeep) => Err(unrecoverable(
                "the content this would destroy is a tree too deep to keep (more than 128 levels) on another filesystem than the recovery store",
                policy.copy_max_bytes,
            )),
            Err(CopyFail::Io(e)) => Err(self.failed(&e)),
            Err(CopyFail::Late(e)) => Err(e),
        }
    }

    /// Removes what was kept for a change that did not happen after all.
    pub(crate) fn discard(&self, keep: Keep) {
        if keep.kept.is_some() {
            self.store.remove(&keep.id);
        }
    }

    /// Settles what was kept for an overwrite that failed: when `name` in `dir` still holds
    /// the kept entry, the change did not happen and the keep is dropped; else it happened
    /// (the failure came after the rename) and is journaled.
    pub(crate) fn settle(&self, keep: Keep, dir: &Dir, name: &str, origin: Origin) {
        let now = dir.symlink_metadata(name).ok().map(|m| fingerprint(&m));
        if now.is_some() && now == keep.etag_before {
            self.discard(keep);
        } else {
            self.record(origin, keep, None, now);
        }
    }

    /// Journals a change that happened: `to` is a rename's new path, `after` the entry's
    /// etag now. A journal that cannot be written is logged: the change is done, and its
    /// kept content is in the store under its id.
    pub(crate) fn record(
        &self,
        origin: Origin,
        keep: Keep,
        to: Option<String>,
        after: Option<String>,
    ) {
        let _ = self.append(change_of(origin, keep, to, after));
    }

    /// Appends one change to the journal.
    pub(super) fn append(&self, change: Change) -> std::io::Result<String> {
        let id = change.id.clone();
        let line = Line::Change(Box::new(change));
        let policy = self.policy();
        // Changes past their age go as the journal grows, whether or not this one kept
        // anything: a journal of creations alone must not grow for ever either.
        let mut taken = Vec::new();
        let done = crate::locks::lock(&self.journal).locked(|j| {
            j.append(std::slice::from_ref(&line))?;
            taken = self.prune(j, &policy, 0)?;
            Ok(())
        });
        self.purge(taken);
        if let Err(e) = &done {
            tracing::error!(store = %self.store.path.display(), id, "cannot journal a change: {e}");
        }
        done.map(|()| id)
    }

    /// A store that failed: full means not recoverable; anything else an I/O error. Either
    /// way the change is refused, nothing changed.
    pub(super) fn failed(&self, e: &std::io::Error) -> Error {
        if no_room(e) {
            return unrecoverable("the recovery store's filesystem is full", 0);
        }
        tracing::error!(store = %self.store.path.display(), "cannot keep content: {e}");
        Error::new(
            ErrorKind::Io,
            "the previous content could not be kept for recovery, so nothing was changed",
        )
    }
}

/// Whether a hard link failed for a reason a copy gets round: another filesystem, a file
/// the kernel will not link (`protected_hardlinks`), too many links.
fn cannot_link(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
        Some(rustix::io::Errno::XDEV | rustix::io::Errno::PERM | rustix::io::Errno::MLINK)
    )
}

/// The journal's entry for a change.
pub(super) fn change_of(
    origin: Origin,
    keep: Keep,
    to: Option<String>,
    after: Option<String>,
) -> Change {
    let at = now_ms();
    Change {
        id: keep.id,
        time: rfc3339(at),
        at,
        server: origin.server,
        session: origin.session,
        by: origin.by,
        method: origin.method.to_owned(),
        path: origin.path,
        to,
        root: origin.root,
        kept: keep.kept,
        not_kept: keep.not_kept,
        etag_before: keep.etag_before,
        etag_after: after,
        restored_by: None,
        pruned: None,
    }
}

/// `at` (milliseconds since the epoch) in RFC 3339, UTC, to the millisecond.
pub(super) fn rfc3339(at: u64) -> String {
    let t = time::OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(at as i64);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
