//! The proxy's side of the host connection: what the host declared in `initialize`, and the
//! requests the proxy itself sends to the host (today only `elicitation/create`).
//!
//! The proxy's request ids share the host-bound id space with the server's. They are strings
//! carrying a random per-process prefix, and the proxy refuses a server request whose id
//! carries that prefix, so a host's response can always be routed to the one who asked.

use crate::lines::LineSender;
use crate::locks::lock;
use crate::proxy::names::CANCELLED;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::oneshot;

/// Requests of the proxy's own that may wait for the host at once; more are refused at once
/// rather than queued (each is a question to the user).
pub(super) const MAX_PENDING: usize = 64;

/// The host connection as the proxy's own code sees it.
#[derive(Debug)]
pub(crate) struct HostChannel {
    /// Taken out by [`HostChannel::close`], so the host's writer sees the end of its queue
    /// even while a consent provider still holds this channel.
    to_host: Mutex<Option<LineSender>>,
    prefix: String,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    can_elicit: AtomicBool,
}

/// Why a request to the host got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostError {
    /// The host's connection is gone.
    #[error("the host is gone")]
    Gone,
    /// Too many requests of ours already wait for the host.
    #[error("too many requests wait for the host")]
    Busy,
    /// The host answered with a JSON-RPC error.
    #[error("the host answered with an error: {0}")]
    Refused(String),
}

impl HostChannel {
    /// A channel whose messages go to `to_host`.
    pub(crate) fn new(to_host: LineSender) -> HostChannel {
        let mut random = [0u8; 8];
        // Without randomness the prefix is still unusual; a collision then needs a server
        // that sends ids of this exact shape, which the reserved-prefix check refuses anyway.
        let _ = getrandom::fill(&mut random);
        HostChannel {
            to_host: Mutex::new(Some(to_host)),
            prefix: format!("fsbroker-{:016x}-", u64::from_le_bytes(random)),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            can_elicit: AtomicBool::new(false),
        }
    }

    /// Whether `id` is in the proxy's own id space (a server must not use it).
    pub(crate) fn is_reserved(&self, id: &Value) -> bool {
        id.as_str().is_some_and(|s| s.starts_with(&self.prefix))
    }

    /// Whether a message the proxy cannot read may name one of its ids: its bytes hold the
    /// prefix, or an escape that could spell it. Such a message is never relayed.
    pub(crate) fn may_be_named_in(&self, message: &[u8]) -> bool {
        crate::proxy::peek::mentions(message, self.prefix.as_bytes())
    }

    /// A fresh id in the proxy's own space, for a request of its own to the daemon (a
    /// server cannot use one: the judge refuses it).
    pub(crate) fn own_id(&self) -> Value {
        Value::String(format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// An id of the proxy's own, for tests.
    #[cfg(test)]
    pub(super) fn reserved_example(&self) -> String {
        format!("{}1", self.prefix)
    }

    /// Takes the host's response to one of the proxy's requests. Returns false when `id` is
    /// not one of ours (the response is for the server).
    pub(crate) fn complete(&self, id: &Value, response: Value) -> bool {
        let Some(key) = id.as_str().filter(|s| s.starts_with(&self.prefix)) else {
            return false;
        };
        if let Some(waiter) = lock(&self.pending).remove(key) {
            let _ = waiter.send(response);
        }
        // A late answer to a request that gave up is still ours: never relay it.
        true
    }

    /// Whether the host declared that it can show a form (`elicitation` without only `url`).
    pub(crate) fn can_elicit(&self) -> bool {
        self.can_elicit.load(Ordering::Relaxed)
    }

    /// Records the capabilities of the host's `initialize` request.
    pub(crate) fn note_capabilities(&self, capabilities: Option<&Value>) {
        let form = match capabilities.and_then(|c| c.get("elicitation")) {
            Some(Value::Object(e)) => e.is_empty() || e.contains_key("form"),
            _ => false,
        };
        self.can_elicit.store(form, Ordering::Relaxed);
    }

    /// Sends a request to the host and waits for its result. Dropping the future withdraws
    /// the request (a late answer is then discarded).
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, HostError> {
        let key = format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING {
                return Err(HostError::Busy);
            }
            pending.insert(key.clone(), tx);
        }
        let mut withdraw = Withdraw {
            channel: self,
            key: &key,
            sent: false,
        };
        let message = json!({"jsonrpc": "2.0", "id": key, "method": method, "params": params});
        let line = serde_json::to_vec(&message).map_err(|_| HostError::Gone)?;
        let to_host = self.sender().ok_or(HostError::Gone)?;
        to_host.send(line).await.map_err(|_| HostError::Gone)?;
        withdraw.sent = true;
        let response = rx.await.map_err(|_| HostError::Gone)?;
        match (response.get("result"), response.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(e)) => Err(HostError::Refused(
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
                    .chars()
                    .take(200)
                    .collect(),
            )),
            (None, None) => Err(HostError::Refused("neither result nor error".into())),
        }
    }

    /// A sender of lines to the host, until [`HostChannel::close`].
    pub(crate) fn sender(&self) -> Option<LineSender> {
        lock(&self.to_host).clone()
    }

    /// Forgets every waiting request (their callers see [`HostError::Gone`]) and lets go of
    /// the host's queue.
    pub(crate) fn close(&self) {
        lock(&self.pending).clear();
        lock(&self.to_host).take();
    }
}

/// Withdraws a request when its caller stops waiting. A request the host has but has not
/// answered (its caller gave up: the consent time limit passed, or the server cancelled the
/// request that asked) is cancelled with
/// `notifications/cancelled`, so that the host closes its dialog rather than leave the user
/// a question whose answer nobody reads.
struct Withdraw<'a> {
    channel: &'a HostChannel,
    key: &'a str,
    /// Whether the request reached the host's queue.
    sent: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let unanswered = lock(&self.channel.pending).remove(self.key).is_some();
        if !(unanswered && self.sent) {
            return;
        }
        let cancel = json!({"jsonrpc": "2.0", "method": CANCELLED,
            "params": {"requestId": self.key, "reason": "the consent question was withdrawn"}});
        // Best effort: a full or closed queue means the host is stalled or gone, and the
        // late answer is discarded either way.
        if let (Ok(line), Some(to_host)) = (serde_json::to_vec(&cancel), self.channel.sender()) {
            let _ = to_host.try_send(line);
        }
    }
}

/// Adds the broker's client capabilities to an `initialize` request's params, keeping what
/// the host declared under `roots`. Returns the rewritten message.
pub(super) fn add_capabilities(mut message: Value, ours: &Value) -> Value {
    let Some(obj) = message.as_object_mut() else {
        return message;
    };
    let params = obj
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    if !params.is_object() {
        *params = Value::Object(Map::new());
    }
    let Some(params) = params.as_object_mut() else {
        return message;
    };
    let caps = params
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()));
    if !caps.is_object() {
        *caps = Value::Object(Map::new());
    }
    let (Some(caps), Some(ours)) = (caps.as_object_mut(), ours.as_object()) else {
        return message;
    };
    for (name, value) in ours {
        let slot = caps
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        match (slot.as_object_mut(), value.as_object()) {
            (Some(slot), Some(value)) => {
                for (k, v) in value {
                    slot.insert(k.clone(), v.clone());
                }
            }
            _ => *slot = value.clone(),
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_merged_not_replaced() {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18",
            "capabilities":{"roots":{"other":1},"sampling":{}},
            "clientInfo":{"name":"h","version":"1"}}});
        let out = add_capabilities(
            init,
            &json!({"roots":{"listChanged":true,"filesystemBrokering":true}}),
        );
        let caps = &out["params"]["capabilities"];
        assert_eq!(caps["roots"]["other"], 1);
        assert_eq!(caps["roots"]["listChanged"], true);
        assert_eq!(caps["roots"]["filesystemBrokering"], true);
        assert_eq!(caps["sampling"], json!({}));
        assert_eq!(out["params"]["clientInfo"]["name"], "h");
    }

    #[test]
    fn capabilities_are_added_when_absent() {
        let out = add_capabilities(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize"}),
            &json!({"roots":{"listChanged":true}}),
        );
        assert_eq!(out["params"]["capabilities"]["roots"]["listChanged"], true);
    }

    #[test]
    fn elicitation_capability_forms() {
        let (tx, _rx) = crate::lines::line_channel(1, 1 << 20);
        let h = HostChannel::new(tx);
        h.note_capabilities(Some(&json!({"elicitation":{}})));
        assert!(h.can_elicit());
        h.note_capabilities(Some(&json!({"elicitation":{"url":{}}})));
        assert!(!h.can_elicit());
        h.note_capabilities(Some(&json!({"elicitation":{"form":{},"url":{}}})));
        assert!(h.can_elicit());
        h.note_capabilities(Some(&json!({"roots":{}})));
        assert!(!h.can_elicit());
    }

    #[tokio::test]
    async fn responses_are_routed_by_id_and_withdrawn_on_drop() {
        let (tx, mut rx) = crate::lines::line_channel(4, 1 << 20);
        let h = std::sync::Arc::new(HostChannel::new(tx));
        let h2 = h.clone();
        let task = tokio::spawn(async move { h2.request("elicitation/create", json!({})).await });
        let line = rx.recv().await.unwrap_or_default();
        let sent: Value = serde_json::from_slice(&line).unwrap_or_default();
        let id = sent["id"].clone();
        assert!(h.is_reserved(&id));
        assert!(!h.is_reserved(&json!(1)));
        assert!(!h.complete(&json!("someone-else"), json!({})));
        assert!(h.complete(
            &id,
            json!({"jsonrpc":"2.0","id":id,"result":{"action":"decline"}})
        ));
        let got = task.await.ok().and_then(Result::ok);
        assert_eq!(got, Some(json!({"action":"decline"})));
        // A late duplicate is still swallowed, never relayed to the server.
        assert!(h.complete(&id, json!({})));
    }
}
