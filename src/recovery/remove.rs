//! Removing an entry for a delete (or for a restore, out of the way of what it puts back),
//! keeping it: moved into the store, a whole tree at once, or across filesystems copied there
//! and then removed.

use super::RecoveryStore;
use super::keep::{Keep, Origin, fingerprint, kept_as};
use super::place::{Place, Terms};
use super::store::new_id;
use super::walk::Unmeasured;
use crate::error::{Error, ErrorKind, Result};
use cap_std::fs::{Metadata, MetadataExt};

fn io(e: std::io::Error) -> Error {
    Error::from_io(&e, "")
}

impl RecoveryStore {
    /// Removes the entry `at`, keeping it: by moving it (a whole tree at once) into the
    /// store, or across filesystems by a copy, then removing it. An empty directory deleted
    /// without `recursive` is removed as `rmdir` does, its mode kept. A copied tree whose
    /// removal stops midway is journaled (as `origin`'s change) before the error is returned:
    /// part of it is gone, and the copy is all that is left of that.
    pub(super) fn remove_kept(
        &self,
        at: Place<'_>,
        recursive: bool,
        origin: &Origin,
        terms: &Terms,
    ) -> Result<Keep> {
        let meta = at.parent.symlink_metadata(at.name).map_err(io)?;
        let id = new_id();
        if meta.is_dir() && !recursive {
            return self.remove_empty_dir(at, &meta, id, terms);
        }
        match self.store.move_in(at.parent, at.name, &id) {
            Ok(()) => self.measure_moved(at, &meta, id, origin, terms),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                self.remove_copied(at, &meta, id, origin, terms)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Removes the directory `at` as `rmdir` does (it must be empty), keeping its mode.
    fn remove_empty_dir(
        &self,
        at: Place<'_>,
        meta: &Metadata,
        id: String,
        terms: &Terms,
    ) -> Result<Keep> {
        self.store
            .empty_dir(&id, meta.mode())
            .map_err(|e| self.failed(&e))?;
        let keep = self.room_or_discard(kept_as(id, meta, "empty", 512), &terms.policy)?;
        if let Err(e) = at.parent.remove_dir(at.name) {
            self.discard(keep);
            return Err(io(e));
        }
        Ok(keep)
    }

    /// Keeps `at`, on another filesystem than the store, by a copy, then removes it.
    fn remove_copied(
        &self,
        at: Place<'_>,
        meta: &Metadata,
        id: String,
        origin: &Origin,
        terms: &Terms,
    ) -> Result<Keep> {
        let keep = self.copy(at, meta, id, terms)?;
        let removed = if meta.is_dir() {
            super::super::root::remove_tree(at.parent, at.name)
        } else {
            at.parent.remove_file(at.name).map_err(io)
        };
        let Err(e) = removed else {
            return Ok(keep);
        };
        if meta.is_dir() {
            // The removal may have stopped midway (a read-only directory or a mount point in
            // the tree), the entries before it gone: the copy is kept and the change
            // journaled. It used to be discarded, so that what was removed was lost for good.
            let after = at
                .parent
                .symlink_metadata(at.name)
                .ok()
                .map(|m| fingerprint(&m));
            self.record(origin.clone(), keep, None, after);
        } else {
            self.discard(keep);
        }
        Err(e)
    }

    /// Settles an entry moved into the store as `id`: it stays when the store has room for
    /// what it costs, and goes back (the delete refused) when not, or when it cannot be
    /// measured.
    fn measure_moved(
        &self,
        at: Place<'_>,
        meta: &Metadata,
        id: String,
        origin: &Origin,
        terms: &Terms,
    ) -> Result<Keep> {
        let policy = &terms.policy;
        // What the moved entry costs. A tree that cannot be measured (a directory in it the
        // user cannot read) used to cost nothing: unbounded by `max_bytes`, and, holding no
        // bytes, never pruned, not even for its age.
        // Every level counts, however deep: levels past 128 used to cost nothing, so that a
        // file 131 levels down, deleted again and again, grew the store past its bound.
        let (measured, refused) =
            match self
                .store
                .measure(&id, policy.max_bytes, Some(terms.deadline))
            {
                Ok(bytes) => (
                    Some(bytes),
                    self.room_for(&kept_as(id.clone(), meta, "move", bytes), policy)
                        .err(),
                ),
                Err(Unmeasured::Late(e)) => (None, Some(e)),
                Err(Unmeasured::Io(e)) => (None, Some(unmeasurable(&e))),
            };
        super::store::between_measure_and_put_back();
        match refused {
            None => Ok(kept_as(id, meta, "move", measured.unwrap_or(0))),
            // Refused: the entry goes back, and the delete is refused.
            Some(e) => {
                let keep = kept_as(id, meta, "move", 0);
                self.refuse_moved(keep, at, e, measured, origin, policy)
            }
        }
    }
}

/// The refusal of a removal whose entry cannot be measured for the store.
fn unmeasurable(e: &std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!(
            "what this would remove cannot be measured for the recovery store ({e}), so nothing was changed"
        ),
    )
}
