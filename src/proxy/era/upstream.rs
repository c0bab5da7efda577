//! The proxy's own requests to the server: the retries that carry the broker's roots, and
//! the cancellations that follow the host's.

use super::{EraState, MAX_UPSTREAM, mentions};
use crate::jsonrpc::id_key;
use crate::locks::lock;
use crate::proxy::link::ToServer;
use crate::proxy::names::{CANCELLED, cancelled_id, cancelled_id_in};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

impl EraState {
    /// Whether `id` is one of the proxy's own requests to the server; if so, its answer is
    /// taken.
    pub(crate) fn take_upstream_answer(&self, id: &Value, line: &[u8]) -> bool {
        self.upstream.complete(id, line)
    }

    /// Whether `id` names one of the proxy's own requests to the server.
    pub(crate) fn is_upstream(&self, id: &Value) -> bool {
        id.as_str()
            .is_some_and(|s| s.starts_with(&self.upstream.prefix))
    }

    /// The host's `notifications/cancelled` (`line`) for a request the proxy is retrying:
    /// the same cancellation for the proxy's retry, to send to the server as well. The
    /// retry's waiter is let go, and the host gets no answer.
    pub(crate) fn cancel(&self, line: &[u8]) -> Option<Vec<u8>> {
        if self.facts().retrying.is_empty() {
            return None;
        }
        let v = serde_json::from_slice::<Value>(line).ok()?;
        let host_key = id_key(cancelled_id(&v)?);
        let upstream = {
            let mut facts = self.facts();
            let upstream = facts.retrying.remove(&host_key)?;
            facts.cancelled.insert(host_key);
            upstream
        };
        lock(&self.upstream.pending).remove(&upstream);
        let mut params = v.get("params").cloned().unwrap_or_else(|| json!({}));
        params["requestId"] = Value::String(upstream);
        let cancel = json!({"jsonrpc": "2.0", "method": CANCELLED, "params": params});
        tracing::info!(
            "the host cancelled a request the proxy was retrying; the retry is cancelled too"
        );
        serde_json::to_vec(&cancel).ok()
    }

    /// Takes the server's `notifications/cancelled` (`line`) of one of the proxy's own retries:
    /// the retry's waiter is let go (the host then gets an error), and the cancellation,
    /// which names an id the host never saw, goes no further. False for any other line.
    pub(crate) fn server_cancelled(&self, line: &[u8]) -> bool {
        if !mentions(line, self.upstream.prefix.as_bytes()) {
            return false;
        }
        let Some(id) = cancelled_id_in(line) else {
            return false;
        };
        let Some(k) = id.as_str().filter(|s| s.starts_with(&self.upstream.prefix)) else {
            return false;
        };
        lock(&self.upstream.pending).remove(k);
        tracing::info!("the server cancelled the proxy's retry; the host's request fails");
        true
    }
}

/// carry a random prefix that the host never sees.
#[derive(Debug)]
pub(super) struct Upstream {
    prefix: String,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

impl Upstream {
    pub(super) fn new() -> Upstream {
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        Upstream {
            prefix: format!("fsbroker-retry-{:032x}-", u128::from_le_bytes(random)),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn complete(&self, id: &Value, line: &[u8]) -> bool {
        let Some(k) = id.as_str().filter(|s| s.starts_with(&self.prefix)) else {
            return false;
        };
        if let Some(waiter) = lock(&self.pending).remove(k) {
            let _ = waiter.send(serde_json::from_slice(line).unwrap_or(Value::Null));
        }
        true
    }

    /// Sends `method` with `params` to the server and waits for its answer; `on_sent` learns
    /// the id first, so a cancellation can follow the request.
    pub(super) async fn request(
        &self,
        to_server: &ToServer,
        method: &str,
        params: Value,
        on_sent: impl FnOnce(&str),
    ) -> Option<Value> {
        let id = format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        on_sent(&id);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_UPSTREAM {
                return None;
            }
            pending.insert(id.clone(), tx);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let sent = match serde_json::to_vec(&message) {
            Ok(line) => to_server.send(line).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            lock(&self.pending).remove(&id);
            return None;
        }
        rx.await.ok()
    }
}
