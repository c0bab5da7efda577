//! Keep-before-destroy as a guard: the one way an operation keeps what it is about to replace
//! or remove, and journals its change.
//!
//! An operation begins a [`Keeping`] for its change, asks it to keep what the change replaces
//! ([`Keeping::keep_replaced`]) or to remove an entry, keeping it ([`Keeping::remove`]), makes
//! the change, and ends with [`Keeping::done`], which journals it. A guard dropped without
//! `done` (the operation failed after something was kept) settles by the place: when the
//! place still holds what was kept, the change did not happen and the kept content goes;
//! else it happened and is journaled, since what was kept is then all that is left of what
//! stood there. A change known not to have happened is ended by [`Keeping::cancel`].
//!
//! When recovery is off the guard does nothing but remove what [`Keeping::remove`] is asked
//! to: no operation asks whether recovery is on, and nothing about keeping passes through
//! [`crate::atomic`].

use super::RecoveryStore;
use super::keep::{Keep, Origin, change_of};
use super::place::{Place, Terms};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::policy::Unkept;
use crate::root::Granted;
use cap_std::fs::Metadata;

/// The store a guard keeps in, and for whose change.
struct Active<'a> {
    store: &'a RecoveryStore,
    origin: Origin,
    /// What decides content too large to copy: `None` for the policy's choice; a restore
    /// never lets the user's content go unkept.
    unkept: Option<Unkept>,
}

/// What a guard kept, and where it stood.
struct Held<'a> {
    keep: Keep,
    at: Place<'a>,
}

/// Keep-before-destroy for one change (see the module's documentation).
#[must_use = "a change's keeping ends with `done`, or settles when dropped"]
pub(crate) struct Keeping<'a> {
    /// `None` when recovery is off.
    active: Option<Active<'a>>,
    held: Option<Held<'a>>,
    deadline: Deadline,
}

impl<'a> Keeping<'a> {
    /// Begins keeping for the change `origin` describes, in `store` (`None`: recovery is off,
    /// and the guard keeps and journals nothing), within `deadline`.
    pub(crate) fn begin(
        store: Option<&'a RecoveryStore>,
        origin: Origin,
        deadline: Deadline,
    ) -> Keeping<'a> {
        Keeping {
            active: store.map(|store| Active {
                store,
                origin,
                unkept: None,
            }),
            held: None,
            deadline,
        }
    }

    /// Begins keeping for a restore's own change in `store`: what stands in the way of what
    /// is put back is the user's, perhaps their only copy, and is kept or the restore refused.
    pub(super) fn user(
        store: &'a RecoveryStore,
        origin: Origin,
        deadline: Deadline,
    ) -> Keeping<'a> {
        Keeping {
            active: Some(Active {
                store,
                origin,
                unkept: Some(Unkept::Refuse),
            }),
            held: None,
            deadline,
        }
    }

    /// Keeps the entry at `g`, which the change is about to replace (`meta` is its metadata,
    /// read under the operation's locks). On an error nothing is kept and the change must not
    /// happen.
    pub(crate) fn keep_replaced(&mut self, g: &'a Granted, meta: &Metadata) -> Result<()> {
        let Some(a) = &self.active else {
            return Ok(());
        };
        let at = Place::of(g);
        let keep = a.store.keep_replaced(at, meta, &a.terms(self.deadline))?;
        self.held = Some(Held { keep, at });
        Ok(())
    }

    /// Removes the entry at `g` (a directory with its tree when `recursive`), keeping it:
    /// moved into the store, or copied there and removed. With recovery off it is removed.
    pub(crate) fn remove(&mut self, g: &'a Granted, recursive: bool) -> Result<()> {
        let Some(a) = &self.active else {
            return g.remove(recursive, self.deadline);
        };
        let at = Place::of(g);
        let keep = a
            .store
            .remove_kept(at, recursive, &a.origin, &a.terms(self.deadline))?;
        self.held = Some(Held { keep, at });
        Ok(())
    }

    /// The change happened: journals it, with what was kept, `to` (a rename's new path) and
    /// `after` (the entry's etag now). A journal that cannot be written is logged: the change
    /// is done, and its kept content is in the store under its id.
    pub(crate) fn done(self, to: Option<String>, after: Option<String>) {
        let _ = self.journal(to, after);
    }

    /// [`Keeping::done`], answering the journaled change's id (`None` with recovery off), or
    /// the journal's error.
    pub(super) fn journal(
        mut self,
        to: Option<String>,
        after: Option<String>,
    ) -> std::io::Result<Option<String>> {
        let Some(a) = self.active.take() else {
            return Ok(None);
        };
        let keep = self.held.take().map_or_else(Keep::nothing, |h| h.keep);
        a.store
            .append(change_of(a.origin, keep, to, after))
            .map(Some)
    }

    /// The change did not happen: what was kept for it goes, and nothing is journaled.
    pub(crate) fn cancel(mut self) {
        if let (Some(a), Some(h)) = (self.active.take(), self.held.take()) {
            a.store.discard(h.keep);
        }
    }
}

impl Active<'_> {
    /// The terms of a keep starting now.
    fn terms(&self, deadline: Deadline) -> Terms {
        Terms::now(self.store, self.unkept, deadline)
    }
}

impl Drop for Keeping<'_> {
    /// Settles a change that ended without `done` or `cancel`, by its place (see the module's
    /// documentation). Nothing was kept: nothing to settle, and nothing is journaled.
    fn drop(&mut self) {
        if let (Some(a), Some(h)) = (self.active.take(), self.held.take()) {
            a.store.settle(h.keep, h.at, a.origin);
        }
    }
}

#[cfg(test)]
mod tests;
