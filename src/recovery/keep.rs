//! Keeping content before an operation destroys it, and journaling the change: what the
//! operations call, inside their critical section, through the handles they resolved.

use super::change::{By, USER};
use super::copy::CopyFail;
use super::journal::Line;
use super::place::{Place, Terms};
use super::store::new_id;
use super::{Change, Kept, RecoveryStore, now_ms};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::policy::Unkept;
use cap_std::fs::{Metadata, MetadataExt};
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
    /// The digest of the session's identity, when it is known.
    pub(super) identity: Option<String>,
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
            identity: None,
            method,
            path,
            root,
        }
    }

    /// The same, by the session whose identity has the digest `digest`.
    pub(crate) fn of_identity(mut self, digest: Option<&str>) -> Origin {
        self.identity = digest.map(str::to_owned);
        self
    }

    /// A change the user's restore (or undo) made at `path`: what stood in the way, kept in
    /// turn.
    pub(super) fn user(path: String, root: PathBuf) -> Origin {
        Origin {
            by: By::User,
            server: USER.to_owned(),
            session: USER.to_owned(),
            identity: None,
            method: "restore",
            path,
            root,
        }
    }
}

/// What was kept for a change about to be journaled.
#[derive(Debug)]
pub(super) struct Keep {
    pub(super) id: String,
    pub(super) kept: Option<Kept>,
    not_kept: Option<String>,
    etag_before: Option<String>,
}

impl Keep {
    /// For a change that destroys nothing (a creation, a rename onto a free name).
    pub(super) fn nothing() -> Keep {
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
    /// Keeps the entry `at`, which an overwrite is about to replace (`meta` is its metadata,
    /// under the operation's lock): a file or link by a hard link, an empty directory by its
    /// mode, content on another filesystem by a copy.
    pub(super) fn keep_replaced(
        &self,
        at: Place<'_>,
        meta: &Metadata,
        terms: &Terms,
    ) -> Result<Keep> {
        let id = new_id();
        let kept = if meta.is_dir() {
            self.store
                .empty_dir(&id, meta.mode())
                .map_err(|e| self.failed(&e))?;
            kept_as(id, meta, "empty", 512)
        } else {
            match self.store.link_in(at.parent, at.name, &id) {
                Ok(()) => kept_as(id, meta, "link", meta.len() + 512),
                Err(e) if cannot_link(&e) => return self.copy(at, meta, id, terms),
                Err(e) => return Err(self.failed(&e)),
            }
        };
        self.room_or_discard(kept, &terms.policy)
    }

    /// Keeps `at` by a copy within the policy's bound; past it, nothing is kept and the
    /// change proceeds marked not recoverable, or is refused, as `terms` say.
    pub(super) fn copy(
        &self,
        at: Place<'_>,
        meta: &Metadata,
        id: String,
        terms: &Terms,
    ) -> Result<Keep> {
        let policy = &terms.policy;
        let etag_before = Some(fingerprint(meta));
        match self.store.copy_in(
            at.parent,
            at.name,
            &id,
            policy.copy_max_bytes,
            Some(terms.deadline),
        ) {
            Ok(done) => {
                let bytes = done.bytes + 512 * done.entries.max(1);
                self.room_or_discard(kept_as(id, meta, "copy", bytes), policy)
            }
            Err(CopyFail::TooLarge) if terms.unkept == Unkept::Proceed => Ok(Keep {
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
    pub(super) fn discard(&self, keep: Keep) {
        if keep.kept.is_some() {
            self.store.remove(&keep.id);
        }
    }

    /// Settles what was kept for a change that failed: when `at` still holds the kept
    /// entry, the change did not happen and the keep is dropped; else it happened (the
    /// failure came after the rename) and is journaled.
    pub(super) fn settle(&self, keep: Keep, at: Place<'_>, origin: Origin) {
        let now = at
            .parent
            .symlink_metadata(at.name)
            .ok()
            .map(|m| fingerprint(&m));
        if now.is_some() && now == keep.etag_before {
            self.discard(keep);
        } else {
            self.record(origin, keep, None, now);
        }
    }

    /// Journals a change that happened: `to` is a rename's new path, `after` the entry's
    /// etag now. A journal that cannot be written is logged: the change is done, and its
    /// kept content is in the store under its id.
    pub(super) fn record(
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

/// What was kept for a change, as `how`, costing `bytes`, of the entry `meta` describes.
pub(super) fn kept_as(id: String, meta: &Metadata, how: &str, bytes: u64) -> Keep {
    Keep {
        id,
        kept: Some(Kept {
            how: how.to_owned(),
            kind: kind_of(meta).to_owned(),
            bytes,
        }),
        not_kept: None,
        etag_before: Some(fingerprint(meta)),
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
        identity: origin.identity,
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
