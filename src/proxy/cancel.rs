//! The server's cancellation of the requests the proxy answers itself.
//!
//! A `notifications/cancelled` from the server whose `requestId` names a brokered request is
//! the proxy's to act on, never the host's: the host never saw that id. The request is
//! stopped where it stands (a consent question withdrawn from the host, which cancels the
//! host's dialog; no grant recorded; no answer sent). Ids answered a short while ago are
//! remembered too, so that a cancellation that crossed the answer on the wire does not reach
//! the host either.

use crate::jsonrpc::{id_forms, id_key};
use crate::locks::lock;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// How many answered brokered ids are remembered, for cancellations that come late.
const RECENT: usize = 1024;

/// Most bytes of answered ids remembered: a server's ids may be as long as a line.
const RECENT_BYTES: usize = 1 << 20;

/// Brokered requests in flight and lately answered, by id.
#[derive(Default)]
pub(super) struct Brokered {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// In flight: the flag their cancellation raises.
    running: HashMap<String, Arc<Flag>>,
    /// Answered lately, oldest first.
    recent: VecDeque<String>,
    /// The bytes of `recent`.
    recent_bytes: usize,
}

impl Inner {
    /// Remembers `key` as lately answered, forgetting the oldest past the bounds.
    fn remember(&mut self, key: String) {
        self.recent_bytes += key.len();
        self.recent.push_back(key);
        while self.recent.len() > RECENT || self.recent_bytes > RECENT_BYTES {
            match self.recent.pop_front() {
                Some(old) => self.recent_bytes -= old.len(),
                None => break,
            }
        }
    }
}

/// Raised once, when the server cancels the request.
#[derive(Default)]
pub(super) struct Flag {
    raised: AtomicBool,
    notify: Notify,
}

impl Flag {
    fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether the request was cancelled.
    pub(super) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// Completes once the request is cancelled.
    async fn raised(&self) {
        loop {
            let woken = self.notify.notified();
            tokio::pin!(woken);
            // Registered before looking, so a raise in between still wakes us.
            woken.as_mut().enable();
            if self.is_raised() {
                return;
            }
            woken.await;
        }
    }
}

impl Brokered {
    /// Notes a brokered request the server sent, before it goes to the broker's lane. An id
    /// the broker cannot echo (not a string or an integer) is not noted: its request is
    /// answered with a null id, so nothing would ever forget it.
    pub(super) fn start(&self, id: &Value) {
        if crate::jsonrpc::Id::from_value(id).is_none() {
            return;
        }
        lock(&self.inner)
            .running
            .insert(id_key(id), Arc::new(Flag::default()));
    }

    /// Forgets a request that never reached the broker (refused, or the session ended).
    pub(super) fn forget(&self, id: &Value) {
        lock(&self.inner).running.remove(&id_key(id));
    }

    /// Notes the requests of a batch: the broker answers a batch as a whole, so its items are
    /// not stopped one by one, but a cancellation of one of them is still not the host's.
    pub(super) fn note_batch(&self, ids: &[Value]) {
        let mut inner = lock(&self.inner);
        for id in ids {
            inner.remember(id_key(id));
        }
    }

    /// The cancellation flag of a request in flight, and a guard that forgets it (remembering
    /// the id as lately answered) when dropped.
    pub(super) fn watch(self: &Arc<Self>, id: &Value) -> Option<(Arc<Flag>, Done)> {
        let k = id_key(id);
        let flag = lock(&self.inner).running.get(&k).cloned()?;
        Some((
            flag.clone(),
            Done {
                brokered: self.clone(),
                key: k,
                flag,
            },
        ))
    }

    /// Whether `id` is (or was lately) a brokered request: the broker answers it, so an
    /// answer from the host with that id is not the server's to get.
    pub(super) fn knows(&self, id: &Value) -> bool {
        let inner = lock(&self.inner);
        id_forms(id)
            .iter()
            .any(|k| inner.running.contains_key(k) || inner.recent.contains(k))
    }

    /// Takes the server's cancellation of `id`: true when `id` is (or was lately) a brokered
    /// request, which then stops; false when the cancellation is for the host.
    pub(super) fn cancel(&self, id: &Value) -> bool {
        let k = id_key(id);
        let inner = lock(&self.inner);
        if let Some(flag) = inner.running.get(&k) {
            flag.raise();
            return true;
        }
        inner.recent.contains(&k)
    }
}

/// Forgets a request once it has been answered (or given up).
pub(super) struct Done {
    brokered: Arc<Brokered>,
    key: String,
    flag: Arc<Flag>,
}

impl Done {
    /// A future that completes when the request is cancelled, holding this guard until it
    /// is dropped.
    pub(super) fn into_cancelled(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let flag = self.flag.clone();
            flag.raised().await;
            drop(self);
        })
    }
}

impl Done {
    /// A future that never completes, holding this guard until it is dropped (with the
    /// answer): for a request that cannot be withdrawn, which is still forgotten once done.
    pub(super) fn into_held(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let _done = self;
            std::future::pending::<()>().await;
        })
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        let mut inner = lock(&self.brokered.inner);
        // A later request that reused the id has its own flag: leave it.
        if inner
            .running
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.flag))
        {
            inner.running.remove(&self.key);
        }
        inner.remember(std::mem::take(&mut self.key));
    }
}
