//! The server's cancellation of the requests the proxy answers itself.
//!
//! A `notifications/cancelled` from the server whose `requestId` names a brokered request is
//! the broker's to act on, never the host's: the host never saw that id. It goes to the
//! broker's session loop, which stops the request where it stands (a consent question
//! withdrawn, no grant recorded, no answer sent) or, for a change already under way, answers
//! it. Ids answered or cancelled a short while ago are remembered, so that a cancellation
//! that crossed the answer on the wire does not reach the host either, nor an answer to the
//! host under a brokered id.

use crate::jsonrpc::{id_forms, id_key};
use crate::locks::lock;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

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
    /// In flight.
    running: HashSet<String>,
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

impl Brokered {
    /// Notes a brokered request the server sent, before it goes to the broker's lane. An id
    /// the broker cannot echo (not a string or an integer) is not noted: its request is
    /// answered with a null id, so nothing would ever forget it.
    pub(super) fn start(&self, id: &Value) {
        if crate::jsonrpc::Id::from_value(id).is_none() {
            return;
        }
        lock(&self.inner).running.insert(id_key(id));
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

    /// Forgets a request the broker answered, remembering it as lately answered.
    pub(super) fn answered(&self, id: &Value) {
        let k = id_key(id);
        let mut inner = lock(&self.inner);
        inner.running.remove(&k);
        inner.remember(k);
    }

    /// Whether `id` is (or was lately) a brokered request: the broker answers it, so an
    /// answer from the host with that id is not the server's to get.
    pub(super) fn knows(&self, id: &Value) -> bool {
        let inner = lock(&self.inner);
        id_forms(id)
            .iter()
            .any(|k| inner.running.contains(k) || inner.recent.contains(k))
    }

    /// Takes the server's cancellation of `id`: true when `id` is (or was lately) a brokered
    /// request, whose cancellation goes to the broker (the request is then forgotten here, as
    /// answered: the broker answers no request it withdraws, and a change it still answers
    /// passes all the same); false when the cancellation is for the host.
    pub(super) fn cancel(&self, id: &Value) -> bool {
        let k = id_key(id);
        let mut inner = lock(&self.inner);
        if inner.running.remove(&k) {
            inner.remember(k);
            return true;
        }
        inner.recent.contains(&k)
    }
}
