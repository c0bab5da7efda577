//! In-process locks keyed on the real (mount-form) path, so that writes, renames and deletes
//! of one file by our own sessions happen one at a time. Other processes that cooperate are
//! excluded by an fs4 advisory lock on the file itself (see [`crate::atomic`]).

use crate::path::MountPath;
use std::collections::HashMap;
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};

/// Entries kept before dead ones are pruned.
const PRUNE_AT: usize = 1024;

#[derive(Debug, Default)]
struct Slot {
    held: Mutex<bool>,
    freed: Condvar,
}

/// The table of per-path locks.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    map: Mutex<HashMap<MountPath, Weak<Slot>>>,
}

/// A held lock on one path; released on drop.
#[derive(Debug)]
pub(crate) struct PathLock {
    slot: Arc<Slot>,
}

impl Drop for PathLock {
    fn drop(&mut self) {
        *lock(&self.slot.held) = false;
        self.slot.freed.notify_one();
    }
}

impl LockTable {
    /// Locks `path`, waiting for another holder to finish. Callers run on the blocking pool.
    pub(crate) fn lock(&self, path: &MountPath) -> PathLock {
        let slot = {
            let mut map = lock(&self.map);
            if map.len() >= PRUNE_AT {
                map.retain(|_, w| w.strong_count() > 0);
            }
            match map.get(path).and_then(Weak::upgrade) {
                Some(s) => s,
                None => {
                    let s = Arc::new(Slot::default());
                    map.insert(path.clone(), Arc::downgrade(&s));
                    s
                }
            }
        };
        let mut held = lock(&slot.held);
        while *held {
            held = wait(&slot.freed, held);
        }
        *held = true;
        drop(held);
        PathLock { slot }
    }

    /// Locks two paths in a fixed order, so that two renames in opposite directions cannot
    /// deadlock.
    pub(crate) fn lock_two(&self, a: &MountPath, b: &MountPath) -> (PathLock, Option<PathLock>) {
        if a == b {
            return (self.lock(a), None);
        }
        let (first, second) = if a.to_string() <= b.to_string() {
            (a, b)
        } else {
            (b, a)
        };
        let l1 = self.lock(first);
        let l2 = self.lock(second);
        (l1, Some(l2))
    }
}

// The helpers below are how the crate takes a std lock. Each takes the data even if a thread
// panicked while holding it: every structure guarded this way stays consistent between
// statements, and a broker that stopped serving because one request panicked would hand a
// peer a way to stop it.

/// Locks `m`, whether or not a panic poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` with `guard`, whether or not a panic poisoned the mutex meanwhile.
pub(crate) fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Locks `l` for reading, whether or not a panic poisoned it.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `l` for writing, whether or not a panic poisoned it.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
