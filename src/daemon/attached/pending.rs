//! What an attached session sent and the daemon has not answered yet, so that a lost
//! daemon still gets every request an answer. One lock holds it, and the loss is noted
//! under that lock: a request is either noted before the loss (and answered by it) or
//! refused after it, never neither.

use crate::error::{Error, ErrorKind, Reason};
use crate::jsonrpc::{CANCELLED, id_key, refusal};
use crate::locks::lock;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Requests awaiting the daemon's answer.
#[derive(Default)]
pub(super) struct Pending {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The connection in use; each new one has a number of its own.
    epoch: u64,
    /// Whether that connection was lost.
    lost: bool,
    /// The server's requests, by id key: the id, and the batch it came in.
    requests: HashMap<String, (Value, Option<u64>)>,
    /// The attaching side's own requests, by id key.
    calls: HashMap<String, oneshot::Sender<Value>>,
    /// Batches numbered so far.
    batches: u64,
}

/// One message of a line, as far as this needs to read it.
#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    params: Option<IgnoredAny>,
}

/// Where a line from the daemon goes.
pub(super) enum Route {
    /// To the server.
    Server,
    /// To the attaching side's own request.
    Call(oneshot::Sender<Value>),
}

/// The messages of `line`: one, or a batch's; the ids read loosely where the line is no
/// JSON-RPC at all (the daemon then answers it as it answers any bad line).
fn items(line: &[u8]) -> (Vec<Item>, bool) {
    let batch = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let items = if batch {
        serde_json::from_slice::<Vec<Item>>(line).unwrap_or_default()
    } else {
        serde_json::from_slice::<Item>(line).map_or_else(|_| Vec::new(), |i| vec![i])
    };
    (items, batch)
}

/// The id a `notifications/cancelled` line names.
fn cancelled(line: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(line).ok()?;
    crate::jsonrpc::cancelled_request(v.get("params")?).cloned()
}

/// The answer to a request the daemon will never answer.
fn unreachable_answer(id: &Value) -> Value {
    refusal(
        Some(id),
        Error::new(
            ErrorKind::Internal,
            "the fsbroker daemon cannot be reached; the request was not done, or its answer was lost",
        )
        .with_reason(Reason::BrokerUnavailable),
    )
}

impl Pending {
    /// A new connection begins: its number.
    pub(super) fn begin(&self) -> u64 {
        let mut inner = lock(&self.inner);
        inner.epoch += 1;
        inner.lost = false;
        inner.epoch
    }

    /// Whether connection `epoch` is gone (lost, or another one begun since).
    pub(super) fn is_lost(&self, epoch: u64) -> bool {
        let inner = lock(&self.inner);
        inner.lost || inner.epoch != epoch
    }

    /// Notes the requests of `line` before it goes on connection `epoch`; a cancellation
    /// forgets the request it names (the daemon may never answer it). False when the
    /// connection is lost: the line must then be answered by [`Pending::unavailable`].
    pub(super) fn note(&self, epoch: u64, line: &[u8]) -> bool {
        let (items, batch) = items(line);
        let mut inner = lock(&self.inner);
        if inner.lost || inner.epoch != epoch {
            return false;
        }
        let group = batch.then(|| {
            inner.batches += 1;
            inner.batches
        });
        for item in items {
            match (item.id, item.method) {
                (Some(id), Some(_)) => {
                    inner.requests.insert(id_key(&id), (id, group));
                }
                (None, Some(m)) if m == CANCELLED && !batch => {
                    if let Some(id) = cancelled(line) {
                        inner.requests.remove(&id_key(&id));
                    }
                }
                _ => {}
            }
        }
        true
    }

    /// Notes one of the attaching side's own requests; false when the connection is lost
    /// (the answer's sender is then dropped, which tells the caller).
    pub(super) fn note_call(&self, epoch: u64, id: &Value, answer: oneshot::Sender<Value>) -> bool {
        let mut inner = lock(&self.inner);
        if inner.lost || inner.epoch != epoch {
            return false;
        }
        inner.calls.insert(id_key(id), answer);
        true
    }

    /// Forgets one of the attaching side's own requests (it could not be sent).
    pub(super) fn drop_call(&self, id: &Value) {
        lock(&self.inner).calls.remove(&id_key(id));
    }

    /// Where the daemon's answer to `id` goes, forgetting the request.
    pub(super) fn answered(&self, id: &Value) -> Route {
        let key = id_key(id);
        let mut inner = lock(&self.inner);
        if let Some(answer) = inner.calls.remove(&key) {
            return Route::Call(answer);
        }
        inner.requests.remove(&key);
        Route::Server
    }

    /// Connection `epoch` is lost: the answers owed to the server's requests (one line
    /// each, a batch's as one array), which are forgotten; the attaching side's own requests
    /// are dropped, which tells their callers. Nothing when `epoch` was already given up.
    pub(super) fn lose(&self, epoch: u64) -> Vec<Value> {
        let mut inner = lock(&self.inner);
        if inner.lost || inner.epoch != epoch {
            return Vec::new();
        }
        inner.lost = true;
        inner.calls.clear();
        let mut singles = Vec::new();
        let mut batches: HashMap<u64, Vec<Value>> = HashMap::new();
        for (_, (id, group)) in inner.requests.drain() {
            match group {
                Some(g) => batches.entry(g).or_default().push(unreachable_answer(&id)),
                None => singles.push(unreachable_answer(&id)),
            }
        }
        singles.extend(batches.into_values().map(Value::Array));
        singles
    }

    /// The answers to `line`'s requests when it could not be sent (a batch's as one array),
    /// forgetting any of them that were noted.
    pub(super) fn unavailable(&self, line: &[u8]) -> Vec<Value> {
        let (items, batch) = items(line);
        let ids: Vec<Value> = items
            .into_iter()
            .filter(|i| i.method.is_some())
            .filter_map(|i| i.id)
            .collect();
        {
            let mut inner = lock(&self.inner);
            for id in &ids {
                inner.requests.remove(&id_key(id));
            }
        }
        let answers: Vec<Value> = ids.iter().map(unreachable_answer).collect();
        if batch && !answers.is_empty() {
            vec![Value::Array(answers)]
        } else {
            answers
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_answers_what_was_noted_once_and_refuses_what_comes_after() {
        let p = Pending::default();
        let e = p.begin();
        assert!(p.note(
            e,
            br#"{"jsonrpc":"2.0","id":1,"method":"files/read","params":{}}"#
        ));
        assert!(p.note(e, br#"[{"jsonrpc":"2.0","id":2,"method":"roots/list"},{"jsonrpc":"2.0","id":3,"method":"roots/list"}]"#));
        assert!(p.note(e, br#"{"jsonrpc":"2.0","id":4,"method":"files/read"}"#));
        assert!(matches!(p.answered(&Value::from(4)), Route::Server));
        let owed = p.lose(e);
        assert_eq!(owed.len(), 2, "{owed:?}");
        let single = owed.iter().find(|v| v.is_object()).unwrap();
        assert_eq!(single["id"], 1);
        assert_eq!(single["error"]["code"], -32603);
        assert_eq!(single["error"]["data"]["reason"], "broker_unavailable");
        let batch = owed.iter().find_map(Value::as_array).unwrap();
        assert_eq!(batch.len(), 2);
        assert!(p.lose(e).is_empty(), "answered once");
        assert!(!p.note(e, br#"{"jsonrpc":"2.0","id":5,"method":"files/read"}"#));
        let refused = p.unavailable(br#"{"jsonrpc":"2.0","id":5,"method":"files/read"}"#);
        assert_eq!(refused[0]["id"], 5);
        assert!(
            p.unavailable(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#)
                .is_empty()
        );
    }

    #[test]
    fn a_cancellation_forgets_its_request() {
        let p = Pending::default();
        let e = p.begin();
        assert!(p.note(e, br#"{"jsonrpc":"2.0","id":"a","method":"files/consent"}"#));
        assert!(p.note(
            e,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#
        ));
        assert!(p.lose(e).is_empty());
    }
}
