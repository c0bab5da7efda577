//! Room in the store: what a keep needs is made by pruning what the policy lets go (changes
//! past their age, then the oldest past `min_keep_hours`), under the journal's lock, and
//! refused when nothing may go.

use super::journal::{Journal, Line};
use super::keep::{Keep, unrecoverable};
use super::{RecoveryStore, now_ms};
use crate::error::Result;
use crate::policy::RecoveryPolicy;

impl RecoveryStore {
    /// As [`RecoveryStore::room_for`]; when there is no room, the kept content (a link or a
    /// copy, never the user's only one) is removed.
    pub(super) fn room_or_discard(&self, keep: Keep, policy: &RecoveryPolicy) -> Result<Keep> {
        match self.room_for(&keep, policy) {
            Ok(()) => Ok(keep),
            Err(e) => {
                self.discard(keep);
                Err(e)
            }
        }
    }

    /// Makes room for `keep` in the store, pruning what the policy lets go; when there is
    /// none, the change is refused. What was kept is the caller's to settle: a moved entry is
    /// the user's only copy, and goes back, never away.
    pub(super) fn room_for(&self, keep: &Keep, policy: &RecoveryPolicy) -> Result<()> {
        let need = keep.kept.as_ref().map_or(0, |k| k.bytes);
        if need > policy.max_bytes {
            // No pruning can make room for it: refused before anything is pruned. It used to
            // prune every change past `min_keep_hours` first, so that a server could empty
            // the store of the user's older changes by asking to delete a large tree.
            return Err(unrecoverable(
                "the content this would destroy is larger than the whole recovery store (recovery.max_bytes)",
                policy.max_bytes,
            ));
        }
        let mut taken = Vec::new();
        let made = crate::locks::lock(&self.journal).locked(|j| {
            taken = self.prune(j, policy, need)?;
            let used = j.used.saturating_sub(self.leaving(j));
            Ok(used.saturating_add(need) <= policy.max_bytes)
        });
        self.purge(taken);
        match made {
            Ok(true) => Ok(()),
            Ok(false) => Err(unrecoverable(
                "the recovery store is full of changes younger than recovery.min_keep_hours",
                policy.max_bytes,
            )),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// Prunes changes past the policy's age, then, while `need` more bytes would not fit,
    /// the oldest changes older than `min_keep_hours` (under the journal's lock).
    ///
    /// What is pruned is only taken out of the way here (one rename each, under the lock);
    /// the names it has then are returned, for [`RecoveryStore::purge`] once the lock is let
    /// go: removing a large tree used to hold every process's journal for as long as it
    /// took. A change being restored is never pruned.
    pub(super) fn prune(
        &self,
        j: &mut Journal,
        policy: &RecoveryPolicy,
        need: u64,
    ) -> std::io::Result<Vec<String>> {
        let now = now_ms();
        let pinned = crate::locks::lock(&self.pinned).clone();
        let mut taken = Vec::new();
        let day = 24 * 3600 * 1000u64;
        let old = now.saturating_sub(u64::from(policy.keep_days) * day);
        let young = now.saturating_sub(u64::from(policy.min_keep_hours) * 3600 * 1000);
        let mut lines = Vec::new();
        let mut early = 0usize;
        // What a restore is putting back leaves the store with it: what the restore displaces
        // takes its room, rather than an older change's.
        let mut used = j.used.saturating_sub(self.leaving(j));
        for h in j.held.iter() {
            let short = used.saturating_add(need) > policy.max_bytes;
            if pinned.contains(&h.id) {
                // Being put back by a restore: it used to be pruned to make room for what
                // the restore displaces, so that the restore lost what it was asked for.
                continue;
            }
            let why = if h.at < old {
                "age"
            } else if short && h.at < young && h.bytes > 0 {
                early += 1;
                "space"
            } else if short && h.at < young {
                // A change that holds nothing (a creation, a restored one) frees nothing, and
                // must not end the search: it used to, so one such change ahead of the others
                // kept every older change from being pruned for room.
                continue;
            } else {
                break;
            };
            used = used.saturating_sub(h.bytes);
            taken.extend(self.store.take(&h.id));
            lines.push(Line::Pruned {
                pruned: h.id.clone(),
                why: why.to_owned(),
                at: now,
            });
        }
        // A rewrite keeps the lines of changes being restored, however old: a restore that
        // failed after its change's line was dropped would leave its content unjournaled.
        let kept_from = j
            .held
            .iter()
            .filter(|h| pinned.contains(&h.id))
            .map(|h| h.at)
            .fold(old, u64::min);
        if lines.is_empty() {
            j.compact_if_worth_it(kept_from)?;
            return Ok(taken);
        }
        if early > 0 {
            tracing::warn!(
                store = %self.store.path.display(),
                pruned = early,
                "the recovery store was full: the oldest changes were pruned early to make room"
            );
        }
        j.append(&lines)?;
        j.compact_if_worth_it(kept_from)?;
        Ok(taken)
    }

    /// What the changes being put back by this process's restores cost the store.
    pub(super) fn leaving(&self, j: &Journal) -> u64 {
        let pinned = crate::locks::lock(&self.pinned);
        if pinned.is_empty() {
            return 0;
        }
        j.held
            .iter()
            .filter(|h| pinned.contains(&h.id))
            .map(|h| h.bytes)
            .sum()
    }

    /// Has what [`RecoveryStore::prune`] took out of the way removed, by the store's own
    /// thread, off the request's path.
    pub(super) fn purge(&self, taken: Vec<String>) {
        if !taken.is_empty() {
            self.store.sweep();
        }
    }
}
