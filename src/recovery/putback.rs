//! A refused delete's entry put back: the delete moved the entry into the store, the store
//! then refused it (too large, no room, not measurable), and the entry goes back into its
//! directory and the delete is refused. When a process took the name meanwhile (a server's,
//! which an unsandboxed server can do directly on disk), the entry goes back beside it under a
//! free name, and the delete is still refused, the answer saying where the entry is.

use super::RecoveryStore;
use super::keep::{Keep, Origin};
use super::place::Place;
use crate::error::{Error, Result};
use crate::policy::RecoveryPolicy;

impl RecoveryStore {
    /// Settles a delete the store refused (`refusal`) after the entry `at` was moved into it as `keep`'s object, `measured` its cost when it could be measured.
    ///
    /// The entry goes back to `name`, else beside it, and the delete is refused either way:
    /// a taken name used to make the delete stand, kept past the store's bound at any size,
    /// so that a server retaking the name grew the store without bound and its refused
    /// deletes succeeded. Only when the entry cannot be put back at all (no free name beside
    /// it, its directory gone or made read-only) is it kept, the user's only copy, and the
    /// delete stands: then it costs its measured size, or, unmeasured, the whole store, so
    /// that nothing more is kept until it is pruned; it used to cost nothing when unmeasured.
    pub(super) fn refuse_moved(
        &self,
        mut keep: Keep,
        at: Place<'_>,
        refusal: Error,
        measured: Option<u64>,
        origin: &Origin,
        policy: &RecoveryPolicy,
    ) -> Result<Keep> {
        let id = keep.id.clone();
        let taken = match self.store.put_back(&id, at.parent, at.name) {
            Ok(()) => return Err(refusal),
            Err(e) => e,
        };
        let store = self.store.path.display().to_string();
        match self.store.put_back_beside(&id, at.parent, at.name) {
            Ok(beside) => {
                let at = match origin.path.rsplit_once('/') {
                    Some((dir, _)) => format!("{dir}/{beside}"),
                    None => beside,
                };
                tracing::warn!(
                    store, id, path = %origin.path, beside = %at,
                    "a refused delete's entry could not go back to its name ({taken}): it was put back beside it, and the delete refused"
                );
                Err(moved_aside(refusal, &at))
            }
            Err(back) => {
                // A measured entry costs what it measured; an unmeasured one the whole store,
                // which refuses every keep after it until it is pruned.
                let bytes = measured.unwrap_or(policy.max_bytes);
                if let Some(k) = keep.kept.as_mut() {
                    k.bytes = bytes;
                }
                tracing::error!(
                    store, id, path = %origin.path, bytes,
                    "a refused delete's entry could not be put back ({taken}; beside it: {back}): it is kept, past the store's bound, and the delete journaled"
                );
                Ok(keep)
            }
        }
    }
}

/// `refusal`, its message saying that the entry is now at `at` (mount form), not at its name.
fn moved_aside(refusal: Error, at: &str) -> Error {
    let mut e = Error::new(
        refusal.kind(),
        format!(
            "{}; the entry's name was taken meanwhile, so it was put back beside it, at {at}",
            refusal.message()
        ),
    );
    if let Some(r) = refusal.reason() {
        e = e.with_reason(r);
    }
    if let Some(l) = refusal.limit() {
        e = e.with_limit(l);
    }
    if let Some(p) = refusal.path() {
        e = e.with_path(p);
    }
    e
}

#[cfg(test)]
mod tests;
