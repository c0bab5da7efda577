//! In-process locks keyed on the real (mount-form) path, so that writes, renames and deletes
//! of one file by the broker's sessions happen one at a time, in the order they asked. Other
//! processes that cooperate are excluded by an fs4 advisory lock on the file itself (see
//! [`crate::atomic`]). One [`Wait`] per operation bounds its waits for both: a daemon's
//! broker serves many sessions, and a writer that waited without end behind another
//! session's (or a program's) lock would hold its own session's later changes with it.

use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::path::MountPath;
use std::collections::{HashMap, VecDeque};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};
use std::time::{Duration, Instant};

/// Entries kept before dead ones are pruned.
const PRUNE_AT: usize = 1024;

/// How long a writer that gave up waiting for a lock is told to wait before it tries again.
/// Short, because its next request waits in the broker again, up to the whole `lock_wait_ms`:
/// a long pause on the server's side would only leave the lock free for others meanwhile.
pub(crate) const LOCKED_RETRY_MS: u64 = 50;

/// One path's lock and the line of those waiting for it.
#[derive(Debug, Default)]
struct Slot {
    queue: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    held: bool,
    /// The tickets of the waiters, in the order they came: the lock goes to the first, so
    /// writers of one file take turns and none is passed over until its wait runs out.
    waiting: VecDeque<u64>,
    next: u64,
}

impl Slot {
    /// Takes the lock in turn, waiting at most until `until`; false when the wait ran out.
    fn acquire(&self, until: Instant) -> bool {
        let mut q = lock(&self.queue);
        if !q.held && q.waiting.is_empty() {
            q.held = true;
            return true;
        }
        let ticket = q.next;
        q.next = q.next.wrapping_add(1);
        q.waiting.push_back(ticket);
        loop {
            if !q.held && q.waiting.front() == Some(&ticket) {
                q.waiting.pop_front();
                q.held = true;
                return true;
            }
            let now = Instant::now();
            if now >= until {
                q.waiting.retain(|&t| t != ticket);
                drop(q);
                // The waiter behind may now be first in line for a free lock.
                self.changed.notify_all();
                return false;
            }
            q = wait_timeout(&self.changed, q, until - now);
        }
    }
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
        lock(&self.slot.queue).held = false;
        // Every waiter looks: the first in line takes the lock, the others wait on.
        self.slot.changed.notify_all();
    }
}

impl LockTable {
    /// Locks `path` once the requests that asked before have had it, within `wait`: past it,
    /// `locked` (or `TIMEOUT` when the operation's deadline came first). Callers run on the
    /// blocking pool.
    pub(crate) fn lock(&self, path: &MountPath, wait: &mut Wait) -> Result<PathLock> {
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
        let started = Instant::now();
        let got = slot.acquire(wait.until(started));
        wait.spend(started);
        if got {
            Ok(PathLock { slot })
        } else {
            Err(wait.refusal(Holder::Broker))
        }
    }

    /// Locks two paths in a fixed order, so that two renames in opposite directions do not
    /// each hold one lock and wait for the other until both give up.
    pub(crate) fn lock_two(
        &self,
        a: &MountPath,
        b: &MountPath,
        wait: &mut Wait,
    ) -> Result<(PathLock, Option<PathLock>)> {
        if a == b {
            return Ok((self.lock(a, wait)?, None));
        }
        let (first, second) = if a.to_string() <= b.to_string() {
            (a, b)
        } else {
            (b, a)
        };
        let l1 = self.lock(first, wait)?;
        let l2 = self.lock(second, wait)?;
        Ok((l1, Some(l2)))
    }
}

/// Who held a lock that a wait gave up on, as the message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// Another request to this broker, from any session.
    Broker,
    /// Another process, by its advisory lock.
    Process,
}

/// The time one operation may spend waiting for the locks of the files it changes: the
/// policy's `lock_wait_ms` in all, however many locks it takes, and never past the
/// operation's deadline. Only waiting counts: the time the operation works while it holds a
/// lock is the next waiter's wait, not its own.
#[derive(Debug)]
pub(crate) struct Wait {
    limit: Duration,
    spent: Duration,
    deadline: Deadline,
}

impl Wait {
    /// A wait of at most `limit`, ending at `deadline` if that comes first.
    pub(crate) fn new(limit: Duration, deadline: Deadline) -> Wait {
        Wait {
            limit,
            spent: Duration::ZERO,
            deadline,
        }
    }

    /// When a wait that starts at `now` must end.
    fn until(&self, now: Instant) -> Instant {
        let left = self.limit.saturating_sub(self.spent);
        let end = self.deadline.instant();
        now.checked_add(left).map_or(end, |t| t.min(end))
    }

    /// Counts the time since `started` as waited.
    fn spend(&mut self, started: Instant) {
        self.spent = self.spent.saturating_add(started.elapsed());
    }

    /// Sleeps for `pause` at most, before another try at a lock that only a try can take;
    /// false, without sleeping, once the wait has run out.
    pub(crate) fn pause(&mut self, pause: Duration) -> bool {
        let now = Instant::now();
        let left = self.until(now).saturating_duration_since(now);
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(pause.min(left));
        self.spend(now);
        true
    }

    /// The answer once the wait has run out: `TIMEOUT` when it was the operation's deadline
    /// that ended it, as the operation's own time limit answers; else `locked`, with the time
    /// waited in the message and in `data.waitedMs`.
    pub(crate) fn refusal(&self, holder: Holder) -> Error {
        if let Err(timeout) = self.deadline.check() {
            return timeout;
        }
        let ms = u64::try_from(self.spent.as_millis()).unwrap_or(u64::MAX);
        let who = match holder {
            Holder::Broker => "file is being changed by another request to this broker",
            Holder::Process => {
                "file is locked by another process (another fsbroker, or a program of the user's)"
            }
        };
        Error::new(
            ErrorKind::ConcurrencyConflict,
            format!("{who}; gave up after waiting {ms} ms for it; retry later"),
        )
        .with_reason(Reason::Locked)
        .with_retry_after_ms(LOCKED_RETRY_MS)
        .with_waited_ms(ms)
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

/// Waits on `cv` with `guard` for `timeout` at most, whether or not a panic poisoned the mutex
/// meanwhile.
fn wait_timeout<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    match cv.wait_timeout(guard, timeout) {
        Ok((g, _)) => g,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// Locks `l` for reading, whether or not a panic poisoned it.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `l` for writing, whether or not a panic poisoned it.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> MountPath {
        "project/a.txt".parse().unwrap()
    }

    /// A wait of `limit` under a deadline a minute away.
    fn wait(limit: Duration) -> Wait {
        Wait::new(
            limit,
            Deadline::at(Instant::now() + Duration::from_secs(60)),
        )
    }

    #[test]
    fn a_lock_held_past_the_wait_is_refused_naming_the_wait() {
        let table = LockTable::default();
        let _held = table.lock(&path(), &mut wait(Duration::ZERO)).unwrap();
        let e = table
            .lock(&path(), &mut wait(Duration::from_millis(30)))
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.reason()),
            (ErrorKind::ConcurrencyConflict, Some(Reason::Locked))
        );
        let waited = e.waited_ms().unwrap();
        assert!(waited >= 30, "waited {waited} ms");
        assert_eq!(e.retry_after_ms(), Some(LOCKED_RETRY_MS));
        assert!(
            e.message().contains(&format!(
                "another request to this broker; gave up after waiting {waited} ms"
            )),
            "{e}"
        );
    }

    #[test]
    fn the_wait_ends_at_the_operations_deadline_with_a_timeout() {
        let table = LockTable::default();
        let _held = table.lock(&path(), &mut wait(Duration::ZERO)).unwrap();
        let deadline = Deadline::at(Instant::now() + Duration::from_millis(30));
        let mut long = Wait::new(Duration::from_secs(3600), deadline);
        let e = table.lock(&path(), &mut long).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    }

    #[test]
    fn a_newcomer_does_not_pass_a_writer_waiting_in_line() {
        let table = Arc::new(LockTable::default());
        let held = table.lock(&path(), &mut wait(Duration::ZERO)).unwrap();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let waiter = {
            let table = table.clone();
            std::thread::spawn(move || {
                let got = table.lock(&path(), &mut wait(Duration::from_secs(60)));
                // Held until the newcomer has asked, so that it asks while the waiter either
                // stands in line or holds the lock.
                let _ = finish.recv();
                got.is_ok()
            })
        };
        // Until the waiter stands in line: a state, not a time.
        while lock(&held.slot.queue).waiting.is_empty() {
            std::thread::yield_now();
        }
        drop(held);
        // The lock is free, or the waiter has it: either way it is the waiter's turn, and a
        // newcomer that will not wait gets nothing.
        let newcomer = table.lock(&path(), &mut wait(Duration::ZERO));
        assert!(newcomer.is_err());
        done.send(()).unwrap();
        assert!(waiter.join().unwrap());
        // Once nobody waits, the lock is taken at once.
        assert!(table.lock(&path(), &mut wait(Duration::ZERO)).is_ok());
    }

    #[test]
    fn the_waits_of_one_operation_add_up_to_its_limit() {
        let table = LockTable::default();
        let other: MountPath = "project/b.txt".parse().unwrap();
        let _a = table.lock(&path(), &mut wait(Duration::ZERO)).unwrap();
        let _b = table.lock(&other, &mut wait(Duration::ZERO)).unwrap();
        let mut shared = wait(Duration::from_millis(40));
        let first = table.lock(&path(), &mut shared).unwrap_err();
        assert!(first.waited_ms().unwrap() >= 40);
        // Nothing is left for the second lock: its wait ends as it starts.
        let now = Instant::now();
        assert_eq!(shared.until(now), now);
        let second = table.lock(&other, &mut shared).unwrap_err();
        assert!(second.waited_ms() >= first.waited_ms());
    }
}
