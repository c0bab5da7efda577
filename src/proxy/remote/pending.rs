//! The host's requests waiting for the remote server's answer, bounded in number.

use super::error::RemoteError;
use crate::jsonrpc::id_key;
use crate::locks::lock;
use crate::proxy::peek::{Kind, batch_kinds, peek};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Mutex;
use tokio::sync::watch;

/// Requests that may wait for the remote server at once, at most (fewer under a low
/// descriptor limit); beyond that a request is answered with an error at once (queueing it
/// could stall the responses the server waits for).
pub(crate) const MAX_PENDING: usize = 1024;

/// The ids of the requests that wait, and a signal whenever one stops waiting.
pub(super) struct Pending {
    ids: Mutex<HashSet<String>>,
    /// The `subscriptions/listen` requests among them: their streams stay open for the
    /// session, so they are never owed an answer at its end.
    listens: Mutex<HashSet<String>>,
    settled: watch::Sender<u64>,
    cap: usize,
}

impl Pending {
    /// No request waits; at most [`MAX_PENDING`] may.
    #[cfg(test)]
    pub(super) fn new() -> Pending {
        Pending::with_cap(MAX_PENDING)
    }

    /// No request waits; at most `cap` may.
    pub(super) fn with_cap(cap: usize) -> Pending {
        Pending {
            ids: Mutex::new(HashSet::new()),
            listens: Mutex::new(HashSet::new()),
            settled: watch::Sender::new(0),
            cap,
        }
    }

    /// Registers the ids of requests about to be sent. Refused when too many already wait.
    pub(super) fn track(&self, ids: &[Value]) -> Result<(), RemoteError> {
        let mut p = lock(&self.ids);
        if p.len() + ids.len() > self.cap {
            return Err(RemoteError::Busy);
        }
        p.extend(ids.iter().map(id_key));
        Ok(())
    }

    /// Marks request `id` as a `subscriptions/listen`, whose stream lasts the session.
    pub(super) fn note_listen(&self, id: &Value) {
        lock(&self.listens).insert(id_key(id));
    }

    /// Whether every request that waits is a `subscriptions/listen`.
    pub(super) fn only_listening(&self) -> bool {
        let listens = lock(&self.listens);
        lock(&self.ids).iter().all(|k| listens.contains(k))
    }

    /// Stops waiting for the `subscriptions/listen` requests: the session ends, and so do
    /// their streams, which owe no answer.
    pub(super) fn end_listens(&self) {
        let listens: Vec<String> = lock(&self.listens).drain().collect();
        let mut ids = lock(&self.ids);
        for k in listens {
            ids.remove(&k);
        }
    }

    /// Whether any of `ids` still waits for its response.
    pub(super) fn any(&self, ids: &[Value]) -> bool {
        let p = lock(&self.ids);
        ids.iter().any(|id| p.contains(&id_key(id)))
    }

    /// Stops waiting for those of `ids` that wait, and returns them.
    pub(super) fn take(&self, ids: &[Value]) -> Vec<Value> {
        let taken: Vec<Value> = {
            let mut p = lock(&self.ids);
            ids.iter()
                .filter(|id| p.remove(&id_key(id)))
                .cloned()
                .collect()
        };
        if !taken.is_empty() {
            let mut listens = lock(&self.listens);
            if !listens.is_empty() {
                for id in &taken {
                    listens.remove(&id_key(id));
                }
            }
            drop(listens);
            self.settled.send_modify(|n| *n = n.wrapping_add(1));
        }
        taken
    }

    /// Stops waiting for every request, and returns them.
    pub(super) fn drain(&self) -> Vec<Value> {
        let all: Vec<Value> = lock(&self.ids)
            .drain()
            .filter_map(|k| serde_json::from_str(&k).ok())
            .collect();
        self.settled.send_modify(|n| *n = n.wrapping_add(1));
        all
    }

    /// Completes once none of `ids` waits any more.
    pub(super) async fn settled(&self, ids: &[Value]) {
        // Subscribed before looking, so a request settled in between is not missed.
        let mut changes = self.settled.subscribe();
        while self.any(ids) {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The ids of the requests in a line (one request, or the requests of a batch).
pub(super) fn request_ids(line: &[u8]) -> Vec<Value> {
    match peek(line) {
        Kind::Request { id, .. } => vec![id],
        Kind::Batch => batch_kinds(line)
            .into_iter()
            .filter_map(|item| match item {
                Kind::Request { id, .. } => Some(id),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn requests_wait_until_taken_and_no_more_than_the_limit() {
        let p = Pending::new();
        let many: Vec<Value> = (0..MAX_PENDING).map(|i| json!(i)).collect();
        assert!(p.track(&many).is_ok());
        assert!(matches!(
            p.track(&[json!("one more")]),
            Err(RemoteError::Busy)
        ));
        // A string id is not the number with the same digits.
        assert!(p.any(&[json!(5)]) && !p.any(&[json!("5")]));
        assert_eq!(p.take(&[json!(5), json!("5")]), vec![json!(5)]);
        assert!(p.track(&[json!("one more")]).is_ok());
        p.settled(&[json!(5)]).await;
        assert_eq!(p.drain().len(), MAX_PENDING);
    }
}
