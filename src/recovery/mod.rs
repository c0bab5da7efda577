//! Recovery: what a server's change replaces or removes is kept first, and every change is
//! journaled, so that the user can take it back.
//!
//! Before an overwrite (a one-shot write, an upload's commit, a rename over an entry) the old
//! file is hard-linked into the store; a delete moves the entry, a whole tree too, into it.
//! Both are constant time and copy nothing. Where the root is on another filesystem than the
//! store, the content is copied, up to the policy's `copy_max_bytes`. Every step goes through
//! the same directory handles as the operation, and never follows a link. The store is the
//! user's: outside every root (a policy with a root that holds it, or lies within it, is
//! refused), 0700, never named by any path a server can send. See
//! [`RecoveryStore::history`], [`RecoveryStore::restore`] and [`RecoveryStore::undo`].

mod change;
mod copy;
mod journal;
mod keep;
mod keeping;
mod place;
mod prune;
mod putback;
mod remove;
mod revert;
mod store;
mod walk;

pub(crate) use change::reserved_name;
pub use change::{By, Change, Conflict, Kept, Restored, Undone};
pub(crate) use keep::{Origin, fingerprint};
pub(crate) use keeping::Keeping;

use crate::policy::RecoveryPolicy;
use journal::Journal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use store::Store;

/// The recovery store and its journal, shared by every process of the user that opens it.
pub struct RecoveryStore {
    store: Store,
    journal: Mutex<Journal>,
    policy: Mutex<RecoveryPolicy>,
    /// Held (the mutex, then an advisory lock on the file) across a whole restore or undo.
    /// A restore reads the journal, then moves entries in several steps: two restores of one
    /// change at once (a double submit, the console and the command line) both found it not
    /// restored, and the second moved the first's restored content out again before failing,
    /// leaving nothing at the path. The file's lock keeps other processes of the user out,
    /// the mutex other threads of this one (a lock on one open file is not exclusive
    /// between them).
    reverting: Mutex<std::fs::File>,
    /// The changes being put back by a restore of this process, which pruning leaves alone.
    pinned: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for RecoveryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoveryStore")
            .field("path", &self.store.path)
            .finish_non_exhaustive()
    }
}

/// Why a store has no place, and what to do.
pub(crate) const NO_PLACE: &str = "no place for the recovery store: XDG_STATE_HOME and HOME \
    are unset and the user has no home in /etc/passwd; set recovery.dir, or turn recovery off";

impl RecoveryStore {
    /// Opens the store at `policy`'s place (see [`RecoveryPolicy::store_dir`]), making it
    /// (0700) when it is not there yet.
    ///
    /// Errors: no place can be told (no `dir`, no `XDG_STATE_HOME`, no `HOME`), or the
    /// directory cannot be made, is a link, or belongs to another user.
    pub fn open(policy: &RecoveryPolicy) -> std::io::Result<RecoveryStore> {
        let dir = policy
            .store_dir()
            .ok_or_else(|| std::io::Error::other(NO_PLACE))?;
        Self::open_at(&dir, policy.clone())
    }

    /// Opens (making it, 0700) the store at `dir`, under `policy`'s bounds.
    pub(crate) fn open_at(dir: &Path, policy: RecoveryPolicy) -> std::io::Result<RecoveryStore> {
        let store = Store::open(dir)?;
        let journal = Journal::open(&store.path)?;
        let reverting = crate::atomic::open_private(&store.path.join("revert.lock"))?;
        Ok(RecoveryStore {
            store,
            journal: Mutex::new(journal),
            policy: Mutex::new(policy),
            reverting: Mutex::new(reverting),
            pinned: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// Where the store is.
    pub fn path(&self) -> &Path {
        &self.store.path
    }

    /// Takes the bounds of a reloaded policy (the store stays where it is).
    pub(crate) fn set_policy(&self, policy: RecoveryPolicy) {
        *crate::locks::lock(&self.policy) = policy;
    }

    fn policy(&self) -> RecoveryPolicy {
        crate::locks::lock(&self.policy).clone()
    }

    /// The changes the store knows, oldest first, with what became of each: those of server
    /// `server` only when given, and only those made at or after `since` (milliseconds since
    /// the epoch) when given.
    pub fn history(
        &self,
        server: Option<&str>,
        since: Option<u64>,
    ) -> std::io::Result<Vec<Change>> {
        let lines = crate::locks::lock(&self.journal).locked(|j| j.read_all())?;
        Ok(change::fold(lines)
            .into_iter()
            .filter(|c| server.is_none_or(|s| c.server == s || c.session == s))
            .filter(|c| since.is_none_or(|t| c.at >= t))
            .collect())
    }

    /// The store's place for a change's kept content, for the user.
    pub fn place(&self, change: &Change) -> Option<PathBuf> {
        change.kept.as_ref().map(|_| self.store.place(&change.id))
    }

    /// `changes` as `fsbroker history --json` lists them: each as the journal tells it, with
    /// `place`, where its kept content is, when it has some.
    pub fn listed(&self, changes: &[Change]) -> Vec<serde_json::Value> {
        changes
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
                if let (serde_json::Value::Object(m), Some(p)) = (&mut v, self.place(c)) {
                    m.insert("place".into(), serde_json::json!(p));
                }
                v
            })
            .collect()
    }

    /// What the kept content costs the store now, in bytes, and how many changes it holds.
    pub fn usage(&self) -> std::io::Result<(u64, usize)> {
        crate::locks::lock(&self.journal).locked(|j| Ok((j.used, j.held.len())))
    }

    /// Runs `f` holding the lock of restores (see the field `reverting`).
    fn reverting<T>(&self, f: impl FnOnce() -> crate::error::Result<T>) -> crate::error::Result<T> {
        let file = crate::locks::lock(&self.reverting);
        fs4::FileExt::lock(&*file).map_err(|e| crate::error::Error::from_io(&e, ""))?;
        let result = f();
        let _ = fs4::FileExt::unlock(&*file);
        result
    }
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
