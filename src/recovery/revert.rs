//! Taking changes back: `restore` puts one change's kept content back whatever stands in the
//! way (which is kept in turn, so a restore is itself undoable); `undo` takes a session's
//! changes back newest first, and leaves each change whose place changed since alone,
//! reporting it instead of guessing.
//!
//! Both act as the user, through a root's directory handle opened from the journal's record
//! of where the root was, and never follow a final link; what they put back is renamed (or,
//! across filesystems, copied) out of the store.

use super::journal::Line;
use super::keep::{Origin, fingerprint};
use super::keeping::Keeping;
use super::{Change, Conflict, RecoveryStore, Restored, Undone, now_ms};
use crate::access::Access;
use crate::error::{Error, ErrorKind, Result};
use crate::path::{MountName, MountPath};
use crate::root::{FollowFinal, Gate, Granted, Parents, Root, RootSpec};
use std::path::PathBuf;

/// How long a restore's steps may take: the user waits for them, but a step stuck in the
/// kernel does not hold the store's lock.
const STEP: std::time::Duration = std::time::Duration::from_secs(600);

fn conflict(message: String) -> Error {
    Error::new(ErrorKind::ConcurrencyConflict, message)
}

impl RecoveryStore {
    /// Puts back what change `id` replaced or removed, at its path or at `to` (mount form):
    /// the content the change destroyed, a renamed entry back to its old name, or, for a
    /// creation, the created entry taken away. Whatever stands at the place now is kept
    /// first, as a change of its own (server `user`), so that the restore can be undone.
    ///
    /// Errors: `FILE_NOT_FOUND` for an id the journal does not hold; `CONCURRENCY_CONFLICT`
    /// when the change was restored already, its content was pruned or never kept, or its
    /// parent directory is gone; the I/O errors of the steps.
    pub fn restore(&self, id: &str, to: Option<&str>) -> Result<Restored> {
        // One restore at a time, from reading the journal on (see `reverting`).
        self.reverting(|| {
            let history = self
                .history(None, None)
                .map_err(|e| Error::from_io(&e, ""))?;
            let change = find(&history, id)?;
            self.revert(&history, change, to, false)
        })
    }

    /// Takes back the changes of `server` (a server id or a session), newest first: those
    /// made at or after `since` (milliseconds since the epoch), else those of its latest
    /// session. A change whose place changed since it was made (by anyone) is left alone and
    /// reported, as is every one that fails.
    pub fn undo(&self, server: &str, since: Option<u64>) -> Result<Undone> {
        self.reverting(|| self.undo_locked(server, since))
    }

    fn undo_locked(&self, server: &str, since: Option<u64>) -> Result<Undone> {
        let history = self
            .history(None, None)
            .map_err(|e| Error::from_io(&e, ""))?;
        let mine: Vec<&Change> = history
            .iter()
            .filter(|c| c.server == server || c.session == server)
            .collect();
        let latest = mine.last().map(|c| c.session.clone());
        let mut undone = Undone::default();
        for change in mine.into_iter().rev() {
            let chosen = match since {
                Some(t) => change.at >= t,
                None => Some(&change.session) == latest.as_ref(),
            };
            if !chosen || change.restored_by.is_some() {
                continue;
            }
            match self.revert(&history, change, None, true) {
                Ok(r) => undone.restored.push(r),
                Err(e) => undone.conflicts.push(Conflict {
                    id: change.id.clone(),
                    path: change.path.clone(),
                    why: e.message().to_owned(),
                }),
            }
        }
        Ok(undone)
    }

    /// Takes back one change; with `check`, only when its places are as the change left them.
    fn revert(
        &self,
        history: &[Change],
        change: &Change,
        to: Option<&str>,
        check: bool,
    ) -> Result<Restored> {
        revertible(change)?;
        // What this restore puts back is not pruned to make room for what it displaces.
        let _pin = Pin::new(&self.pinned, &change.id);
        let asked = Asked { history, to, check };
        let place = to.unwrap_or(&change.path).to_owned();
        let made = if let Some(new) = &change.to {
            self.revert_rename(&asked, change, new)?
        } else if change.kept.is_some() {
            self.revert_kept(&asked, change, &place)?
        } else {
            self.revert_creation(&asked, change, &place)?
        };
        let marker = Line::Restored {
            restored: change.id.clone(),
            by: made.clone(),
            at: now_ms(),
        };
        crate::locks::lock(&self.journal)
            .locked(|j| j.append(std::slice::from_ref(&marker)))
            .map_err(|e| Error::from_io(&e, ""))?;
        Ok(Restored {
            id: change.id.clone(),
            path: place,
            kept: made,
        })
    }

    /// Takes back a rename (`new` its new path): the entry goes back to its old name when it
    /// is still where the rename put it and the old name is free, and what the rename
    /// replaced is put back. Answers what was displaced, kept as the user's changes.
    fn revert_rename(&self, asked: &Asked<'_>, change: &Change, new: &str) -> Result<Vec<String>> {
        let (history, to) = (asked.history, asked.to);
        // A rename that replaced nothing only goes back to its old name: it used to take
        // `to` and say the entry was put back there while it went to its old name.
        if to.is_some() && change.kept.is_none() {
            return Err(conflict(
                "a rename that replaced nothing goes back to its old name only".into(),
            ));
        }
        let (at_new, at_old) = (
            self.reach(history, change, new)?,
            self.reach(history, change, &change.path)?,
        );
        let moved = at_new.metadata().ok().map(|m| fingerprint(&m));
        let home = moved.is_some() && moved == change.etag_after && !at_old.exists();
        // A rename that kept nothing and cannot go home does nothing: it used to be
        // marked restored all the same, saying it was put back.
        if (asked.check || change.kept.is_none()) && !home {
            return Err(conflict(format!("{new} or {} changed since", change.path)));
        }
        if home {
            let (Some(a), Some(b)) = (at_new.name(), at_old.name()) else {
                return Err(conflict("a root itself cannot be moved".into()));
            };
            crate::atomic::rename_noreplace(at_new.parent(), a, at_old.parent(), b)
                .map_err(|e| Error::from_io(&e, ""))?;
        }
        let mut made = Vec::new();
        if change.kept.is_some() {
            let place = to.unwrap_or(new);
            let g = self.reach(history, change, place)?;
            made.extend(self.displace(history, change, place, &g)?);
            self.put(change, &g)?;
        }
        Ok(made)
    }

    /// Takes back a change that kept what it replaced or removed: that is put back at
    /// `place`, whatever stands there displaced first.
    fn revert_kept(&self, asked: &Asked<'_>, change: &Change, place: &str) -> Result<Vec<String>> {
        let g = self.reach(asked.history, change, place)?;
        if asked.check {
            let now = g.metadata().ok().map(|m| fingerprint(&m));
            if now != change.etag_after {
                return Err(conflict(format!("{place} changed since")));
            }
        }
        let made = self.displace(asked.history, change, place, &g)?;
        self.put(change, &g)?;
        Ok(made.into_iter().collect())
    }

    /// Takes back a creation: what it made is taken away (and kept).
    fn revert_creation(
        &self,
        asked: &Asked<'_>,
        change: &Change,
        place: &str,
    ) -> Result<Vec<String>> {
        if asked.to.is_some() {
            return Err(conflict("this change kept nothing to put elsewhere".into()));
        }
        let g = self.reach(asked.history, change, place)?;
        let meta = g.metadata().ok();
        let now = meta.as_ref().map(fingerprint);
        if asked.check && now != change.etag_after {
            return Err(conflict(format!("{place} changed since")));
        }
        // A directory's fingerprint is its identity alone: entries made in it since (the
        // server's own are undone before it, newest first) are someone else's, and undo
        // does not take them away with it.
        if asked.check && meta.as_ref().is_some_and(|m| m.is_dir()) && holds_entries(&g) {
            return Err(conflict(format!(
                "{place} holds entries made since it was created"
            )));
        }
        Ok(self
            .displace(asked.history, change, place, &g)?
            .into_iter()
            .collect())
    }

    /// Keeps whatever is at `g` (moving it into the store, journaled as the user's change),
    /// so that content can be put back there.
    fn displace(
        &self,
        history: &[Change],
        change: &Change,
        place: &str,
        g: &Granted,
    ) -> Result<Option<String>> {
        if g.name().is_none() {
            return Err(conflict("a root itself cannot be replaced".into()));
        }
        if !g.exists() {
            return Ok(None);
        }
        let deadline = crate::deadline::Deadline::at(std::time::Instant::now() + STEP);
        let origin = Origin::user(place.to_owned(), self.root_dir(history, change, place)?);
        // What stands in the way is the user's, perhaps their only copy: it is kept, or the
        // restore is refused. Past `copy_max_bytes` it used to be removed unkept when the
        // policy let a server's change proceed so, while the restore said it was kept.
        let mut keeping = Keeping::user(self, origin, deadline);
        keeping.remove(g, true)?;
        keeping
            .journal(None, None)
            .map_err(|e| Error::from_io(&e, ""))
    }

    /// Renames (or copies) change's kept content to `g`, which is free.
    fn put(&self, change: &Change, g: &Granted) -> Result<()> {
        let Some(name) = g.name() else {
            return Err(conflict("a root itself cannot be replaced".into()));
        };
        if !self.store.has(&change.id) {
            return Err(conflict(
                "its kept content is no longer in the store".into(),
            ));
        }
        self.store
            .put_back(&change.id, g.parent(), name)
            .map_err(|e| Error::from_io(&e, ""))
    }

    /// The directory of the root `place` (mount form) is in: the change's own root for its
    /// mount, else the latest root the journal knows by that mount.
    fn root_dir(&self, history: &[Change], change: &Change, place: &str) -> Result<PathBuf> {
        let mount = |p: &str| p.split('/').next().unwrap_or("").to_owned();
        let m = mount(place);
        if mount(&change.path) == m {
            return Ok(change.root.clone());
        }
        history
            .iter()
            .rev()
            .find(|c| mount(&c.path) == m)
            .map(|c| c.root.clone())
            .ok_or_else(|| {
                conflict(format!(
                    "no change the store holds was made in a root named `{m}`"
                ))
            })
    }

    /// Resolves `place` (mount form) through its root's handle, as the user, never following
    /// its final component. Its parent directory must exist.
    fn reach(&self, history: &[Change], change: &Change, place: &str) -> Result<Granted> {
        let path: MountPath = place.parse()?;
        let dir = self.root_dir(history, change, place)?;
        let spec = RootSpec {
            path: dir,
            mount: MountName::new(path.mount.as_str()).map_err(Error::malformed)?,
            name: path.mount.as_str().to_owned(),
            access: Access::Write,
            servers: vec!["*".into()],
        };
        let io = |e: std::io::Error| Error::from_io(&e, "");
        // The journal records a root by its real path, so no link lies on the way to it; one
        // there now was made since, perhaps by a server that can write a root holding this one
        // (nested roots, in this policy or another broker's), and is never followed. The
        // root's own zone used to be the only one checked, so that such a link led `restore`
        // and `undo` outside every root. Every link on the way now counts as beneath one.
        let slash = rustix::fs::stat("/").map_err(|e| io(e.into()))?;
        let everywhere = crate::root::Zone {
            id: (slash.st_dev, slash.st_ino),
            mount: spec.mount.clone(),
            path: spec.path.clone(),
        };
        let root = Root::open(spec, &[everywhere]).map_err(|e| {
            conflict(format!(
                "the root {place} was in is no longer where the journal says, without a link on the way: {e}"
            ))
        })?;
        root.resolve(
            &path.rel,
            &Gate::whole(),
            FollowFinal::No,
            Parents::Existing,
            None,
        )
        .map_err(|e| match e.kind() {
            ErrorKind::FileNotFound | ErrorKind::NotADirectory => conflict(format!(
                "the directory that held {place} is gone; restore it first"
            )),
            _ => e,
        })
    }
}

/// What a restore or an undo asks of one change: the journal it was read from, the place to
/// put it back at instead of its own (`to`), and whether its places must be as it left them.
struct Asked<'a> {
    history: &'a [Change],
    to: Option<&'a str>,
    check: bool,
}

/// Refuses a change that cannot be taken back: restored already, its content pruned or never
/// kept.
fn revertible(change: &Change) -> Result<()> {
    if let Some(by) = &change.restored_by {
        // A restore that displaced nothing kept nothing to name.
        return Err(conflict(if by.is_empty() {
            "already restored".to_owned()
        } else {
            format!("already restored (by {})", by.join(", "))
        }));
    }
    if change.pruned.is_some() {
        return Err(conflict("its kept content was pruned to make room".into()));
    }
    if let Some(why) = &change.not_kept {
        return Err(conflict(format!("its content was not kept: {why}")));
    }
    Ok(())
}

/// Whether the directory at `g` holds any entry (an error counts as holding some).
fn holds_entries(g: &Granted) -> bool {
    match g.open_dir() {
        Ok(d) => d.entries().map_or(true, |mut e| e.next().is_some()),
        Err(_) => true,
    }
}

/// Keeps a change out of pruning while it is put back.
struct Pin<'a> {
    set: &'a std::sync::Mutex<std::collections::HashSet<String>>,
    id: String,
}

impl<'a> Pin<'a> {
    fn new(set: &'a std::sync::Mutex<std::collections::HashSet<String>>, id: &str) -> Pin<'a> {
        crate::locks::lock(set).insert(id.to_owned());
        Pin {
            set,
            id: id.to_owned(),
        }
    }
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        crate::locks::lock(self.set).remove(&self.id);
    }
}

/// The change `id`.
fn find<'a>(history: &'a [Change], id: &str) -> Result<&'a Change> {
    history.iter().find(|c| c.id == id).ok_or_else(|| {
        Error::new(
            ErrorKind::FileNotFound,
            format!("no change {id} in the recovery journal"),
        )
    })
}

#[cfg(test)]
mod tests;
