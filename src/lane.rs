//! The I/O lane: one thread of the broker's own that runs the blocking work of small
//! operations (a stat, a small read) one after another, in place.
//!
//! Handing each request to tokio's blocking pool cost as much as the work itself: a pool
//! thread woken per request, threads contending for the pool's queue, and a wake-up back. A
//! lane thread that finds work queued runs it without sleeping, so a pipelining peer costs
//! no wake-up per request. What a caller waits for stays bounded: the caller waits with the
//! operation's deadline around it and answers `TIMEOUT` when it passes, whatever the lane does
//! meanwhile. And a call stuck in the kernel (a hung network mount) does not hold up the
//! others: once the lane has been on one job for longer than [`STUCK`], what is queued on it
//! (looked at by each waiting caller every [`STUCK`]), and what comes after, goes to the
//! blocking pool until the lane is free again.

use crate::locks::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the lane may be on one job before it counts as stuck. Its jobs take microseconds;
/// one that takes this long is waiting on something (a slow or hung filesystem).
pub(crate) const STUCK: Duration = Duration::from_millis(10);

/// How long dropping the lane waits for its thread to end: enough for the job it is on (its
/// jobs take microseconds), not for one stuck in the kernel, which is left to end by itself.
const END_WAIT: Duration = Duration::from_secs(2);

/// A job for the lane: it sends its own result.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// See the module documentation. Dropping it ends the thread once its queue is empty, and
/// waits (at most [`END_WAIT`]) until it has: a broker's thread does not outlive the broker.
#[derive(Debug, Default)]
pub(crate) struct Lane {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
    /// Told when the thread ends.
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// The thread was started (it is started with the first job).
    started: bool,
    /// The thread waits for work and must be woken.
    idle: bool,
    /// Since when the thread is on its current job.
    busy_since: Option<Instant>,
    closed: bool,
    /// The thread has ended.
    ended: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("queued", &self.queue.len())
            .field("busy_since", &self.busy_since)
            .finish_non_exhaustive()
    }
}

impl Lane {
    /// Runs `job` on the lane, or on tokio's blocking pool when the lane is stuck or its
    /// thread cannot be started. Call it within the runtime.
    pub(crate) fn submit(&self, job: Job) {
        let mut state = lock(&self.shared.state);
        let stuck = state.busy_since.is_some_and(|t| t.elapsed() >= STUCK);
        if !state.started && !state.closed {
            state.started = self.start();
        }
        state.queue.push_back(job);
        if stuck || !state.started || state.closed {
            to_pool(state);
            return;
        }
        let wake = state.idle;
        drop(state);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Moves what is queued to tokio's blocking pool if the lane is stuck (on one job for
    /// [`STUCK`] or longer). A caller whose job waits in the queue calls it every [`STUCK`]:
    /// [`Lane::submit`] looks only when work comes, and a job queued just before the lane got
    /// stuck must not wait for the next request to be moved. Call it within the runtime.
    pub(crate) fn unstick(&self) {
        let state = lock(&self.shared.state);
        if state.busy_since.is_some_and(|t| t.elapsed() >= STUCK) {
            to_pool(state);
        }
    }

    /// Starts the thread; false when the system refuses one.
    fn start(&self) -> bool {
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("fsbroker-io".into())
            .spawn(move || shared.serve());
        match spawned {
            Ok(handle) => {
                *lock(&self.thread) = Some(handle);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the I/O lane; using the pool");
                false
            }
        }
    }
}

/// Hands everything queued to tokio's blocking pool, in order, outside the lock.
fn to_pool(mut state: std::sync::MutexGuard<'_, State>) {
    let queued: Vec<Job> = state.queue.drain(..).collect();
    drop(state);
    if !queued.is_empty() {
        tracing::debug!(
            moved = queued.len(),
            "the I/O lane is not free; using the pool"
        );
    }
    for job in queued {
        drop(tokio::task::spawn_blocking(job));
    }
}

impl Shared {
    /// The thread's loop: runs what is queued, in order, and waits when there is nothing.
    fn serve(&self) {
        let mut state = lock(&self.state);
        loop {
            if let Some(job) = state.queue.pop_front() {
                state.busy_since = Some(Instant::now());
                drop(state);
                // A job that panicked dropped its result's sender, so its caller is answered
                // with an internal error; the lane goes on.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                state = lock(&self.state);
                state.busy_since = None;
                continue;
            }
            if state.closed {
                state.ended = true;
                drop(state);
                self.done.notify_all();
                return;
            }
            state.idle = true;
            state = self
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.idle = false;
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.closed = true;
        self.shared.work.notify_one();
        let Some(handle) = lock(&self.thread).take() else {
            return;
        };
        // The last holder of the broker may be a job on the lane itself: it cannot wait for
        // its own end.
        if handle.thread().id() == std::thread::current().id() {
            return;
        }
        let (state, _) = self
            .shared
            .done
            .wait_timeout_while(state, END_WAIT, |s| !s.ended)
            .unwrap_or_else(PoisonError::into_inner);
        let ended = state.ended;
        drop(state);
        if ended {
            let _ = handle.join();
        } else {
            tracing::warn!(
                "the I/O lane's thread is still on a job (a call stuck in the kernel); it ends \
                 by itself when the call returns"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn on_lane(lane: &Lane) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        lane.submit(Box::new(move || {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            let _ = tx.send(name);
        }));
        rx
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_dropped_lane_has_ended_its_thread_even_when_a_job_holds_the_last_handle() {
        let lane = Lane::default();
        assert_eq!(on_lane(&lane).recv().ok().as_deref(), Some("fsbroker-io"));
        let shared = lane.shared.clone();
        drop(lane);
        assert!(lock(&shared.state).ended, "the thread outlived its lane");

        // A lane whose last handle a job of its own drops: the job does not wait for itself.
        let lane = Arc::new(Lane::default());
        let shared = lane.shared.clone();
        let (tx, rx) = mpsc::channel();
        let held = lane.clone();
        lane.submit(Box::new(move || {
            let _ = rx.recv_timeout(Duration::from_secs(60));
            drop(held);
        }));
        drop(lane);
        let _ = tx.send(());
        let deadline = Instant::now() + Duration::from_secs(60);
        while !lock(&shared.state).ended {
            assert!(
                Instant::now() < deadline,
                "the lane's own job hung on its end"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn jobs_run_in_order_on_the_lane_and_a_stuck_lane_hands_work_to_the_pool() {
        let lane = Lane::default();
        let (order_tx, order_rx) = mpsc::channel();
        for i in 0..100 {
            let tx = order_tx.clone();
            lane.submit(Box::new(move || {
                let _ = tx.send(i);
            }));
        }
        let got: Vec<i32> = (0..100).filter_map(|_| order_rx.recv().ok()).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(on_lane(&lane).recv().ok().as_deref(), Some("fsbroker-io"));

        // A job that blocks (as a call stuck in the kernel would) holds the lane: once it has
        // for longer than STUCK, a job queued behind it and a new one both run elsewhere.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel();
        lane.submit(Box::new(move || {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(120));
        }));
        assert!(started_rx.recv().is_ok());
        let queued = on_lane(&lane);
        // Time is not paused here (the lane measures real time): the wait is for the lane
        // to count as stuck, and the assertions below hold whatever the machine's speed.
        std::thread::sleep(STUCK * 2);
        let after = on_lane(&lane);
        // Bounded waits, so that a lane that wrongly holds them fails the test, not hang it.
        for rx in [queued, after] {
            let name = rx.recv_timeout(Duration::from_secs(60)).ok();
            assert!(
                name.is_some() && name.as_deref() != Some("fsbroker-io"),
                "{name:?}"
            );
        }
        drop(release_tx);
        // Free again, the lane takes new work.
        let mut back = false;
        for _ in 0..1000 {
            if on_lane(&lane).recv().ok().as_deref() == Some("fsbroker-io") {
                back = true;
                break;
            }
        }
        assert!(back, "the lane never took work again");
    }
}
