//! What an attached session sent and the daemon has not answered yet, so that a lost
//! daemon still gets every request an answer. One lock holds it, and the loss is noted
//! under that lock: a request is either noted before the loss (and answered by it) or
//! refused after it, never neither.

use crate::error::{Error, ErrorKind, Reason};
use crate::jsonrpc::{CANCELLED, id_key, refusal};
use crate::locks::lock;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Requests awaiting the daemon's answer.
#[derive(Default)]
pub(super) struct Pending {
    inner: Mutex<Inner>,
}

/// Most bytes of ids held for requests awaiting their answer: a server that never lets its
/// requests be answered fills this, and its next requests are refused, never the memory.
const MAX_ID_BYTES: usize = 4 << 20;

#[derive(Default)]
struct Inner {
    /// The connection in use; each new one has a number of its own.
    epoch: u64,
    /// Whether that connection was lost.
    lost: bool,
    /// The server's requests, by id key: the id, the batch it came in, and whether the
    /// daemon withdraws it on a cancellation (a change is answered all the same).
    requests: HashMap<String, Pending1>,
    /// The bytes of the keys of `requests`.
    id_bytes: usize,
    /// The attaching side's own requests, by id key.
    calls: HashMap<String, oneshot::Sender<Value>>,
    /// Batches numbered so far.
    batches: u64,
}

/// One message of a line, as far as noting and routing it needs: its id and method, the rest
/// (its `params`, its `result`) skipped through unread.
#[derive(Deserialize)]
pub(super) struct Head {
    #[serde(default)]
    pub(super) id: Option<Value>,
    #[serde(default)]
    pub(super) method: Option<String>,
}

/// One request awaiting its answer.
struct Pending1 {
    id: Value,
    batch: Option<u64>,
    withdrawn_by_cancel: bool,
}

/// What [`Pending::note`] made of a line.
pub(super) enum Noted {
    /// Noted: send it.
    Send,
    /// The connection is lost: answer it with [`Pending::unavailable`].
    Lost,
    /// Too many requests await their answers: answer it with [`Pending::busy`].
    Full,
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
pub(super) fn heads(line: &[u8]) -> (Vec<Head>, bool) {
    let batch = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let items = if batch {
        serde_json::from_slice::<Vec<Head>>(line).unwrap_or_default()
    } else {
        serde_json::from_slice::<Head>(line).map_or_else(|_| Vec::new(), |i| vec![i])
    };
    (items, batch)
}

/// The ids the `notifications/cancelled` of `line` name, a batch's included.
fn cancelled(line: &[u8]) -> Vec<Value> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Vec::new();
    };
    let items = match v {
        Value::Array(items) => items,
        one => vec![one],
    };
    items
        .iter()
        .filter(|i| i.get("method").and_then(Value::as_str) == Some(CANCELLED))
        .filter_map(|i| crate::jsonrpc::cancelled_request(i.get("params")?).cloned())
        .collect()
}

/// Whether the daemon answers a request of id `id`: one whose id it can echo (a string or
/// an integer). Another is answered with a null id, or not at all, so it is not waited for.
fn answerable(id: &Value) -> bool {
    crate::jsonrpc::Id::from_value(id).is_some()
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

impl Inner {
    fn forget(&mut self, key: &str) {
        if self.requests.remove(key).is_some() {
            self.id_bytes -= key.len();
        }
    }
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
    /// forgets the request it names when the daemon withdraws it (and so never answers it).
    pub(super) fn note(&self, epoch: u64, line: &[u8]) -> Noted {
        let (items, batch) = heads(line);
        let cancels = if items
            .iter()
            .any(|i| i.id.is_none() && i.method.as_deref() == Some(CANCELLED))
        {
            cancelled(line)
        } else {
            Vec::new()
        };
        let mut inner = lock(&self.inner);
        if inner.lost || inner.epoch != epoch {
            return Noted::Lost;
        }
        let adding: usize = items
            .iter()
            .filter_map(|i| i.id.as_ref().filter(|_| i.method.is_some()))
            .map(|id| id_key(id).len())
            .sum();
        if inner.id_bytes + adding > MAX_ID_BYTES {
            return Noted::Full;
        }
        let group = batch.then(|| {
            inner.batches += 1;
            inner.batches
        });
        for item in items {
            if let (Some(id), Some(method)) = (item.id, item.method)
                && answerable(&id)
            {
                let key = id_key(&id);
                let withdrawn_by_cancel = !batch
                    && crate::method::Method::parse(&method)
                        .is_some_and(crate::method::Method::is_cancellable);
                let one = Pending1 {
                    id,
                    batch: group,
                    withdrawn_by_cancel,
                };
                inner.id_bytes += key.len();
                if let Some(old) = inner.requests.insert(key, one) {
                    inner.id_bytes -= id_key(&old.id).len();
                }
            }
        }
        for id in cancels {
            let key = id_key(&id);
            if inner
                .requests
                .get(&key)
                .is_some_and(|p| p.withdrawn_by_cancel)
            {
                inner.forget(&key);
            }
        }
        Noted::Send
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
        inner.forget(&key);
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
        inner.id_bytes = 0;
        let mut singles = Vec::new();
        let mut batches: HashMap<u64, Vec<Value>> = HashMap::new();
        for (_, p) in inner.requests.drain() {
            match p.batch {
                Some(g) => batches
                    .entry(g)
                    .or_default()
                    .push(unreachable_answer(&p.id)),
                None => singles.push(unreachable_answer(&p.id)),
            }
        }
        singles.extend(batches.into_values().map(Value::Array));
        singles
    }

    /// The answers to `line`'s requests when it could not be sent (a batch's as one array),
    /// forgetting any of them that were noted.
    pub(super) fn unavailable(&self, line: &[u8]) -> Vec<Value> {
        self.refuse(line, unreachable_answer)
    }

    /// The answers to `line`'s requests when too many requests await their answers.
    pub(super) fn busy(&self, line: &[u8]) -> Vec<Value> {
        self.refuse(line, |id| {
            refusal(
                Some(id),
                Error::new(
                    ErrorKind::RateLimited,
                    "too many requests await the daemon's answers",
                )
                .with_retry_after_ms(100),
            )
        })
    }

    fn refuse(&self, line: &[u8], answer: impl Fn(&Value) -> Value) -> Vec<Value> {
        let (items, batch) = heads(line);
        let ids: Vec<Value> = items
            .into_iter()
            .filter(|i| i.method.is_some())
            .filter_map(|i| i.id)
            .collect();
        {
            let mut inner = lock(&self.inner);
            for id in &ids {
                inner.forget(&id_key(id));
            }
        }
        let answers: Vec<Value> = ids.iter().map(answer).collect();
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

    fn sent(n: Noted) -> bool {
        matches!(n, Noted::Send)
    }

    #[test]
    fn a_loss_answers_what_was_noted_once_and_refuses_what_comes_after() {
        let p = Pending::default();
        let e = p.begin();
        let read = br#"{"jsonrpc":"2.0","id":1,"method":"files/read","params":{}}"#;
        assert!(sent(p.note(e, read)));
        let batch = br#"[{"jsonrpc":"2.0","id":2,"method":"roots/list"},{"jsonrpc":"2.0","id":3,"method":"roots/list"}]"#;
        assert!(sent(p.note(e, batch)));
        assert!(sent(
            p.note(e, br#"{"jsonrpc":"2.0","id":4,"method":"files/read"}"#)
        ));
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
        let late = br#"{"jsonrpc":"2.0","id":5,"method":"files/read"}"#;
        assert!(matches!(p.note(e, late), Noted::Lost));
        assert_eq!(p.unavailable(late)[0]["id"], 5);
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#;
        assert!(p.unavailable(cancel).is_empty());
    }

    #[test]
    fn a_cancellation_forgets_what_the_daemon_withdraws_and_keeps_a_change() {
        let p = Pending::default();
        let e = p.begin();
        let cancel = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":"{id}"}}}}"#
            )
        };
        p.note(e, br#"{"jsonrpc":"2.0","id":"a","method":"files/consent"}"#);
        p.note(e, br#"{"jsonrpc":"2.0","id":"w","method":"files/write"}"#);
        p.note(e, cancel("a").as_bytes());
        p.note(e, format!("[{}]", cancel("w")).as_bytes());
        let owed = p.lose(e);
        assert_eq!(owed.len(), 1, "{owed:?}");
        assert_eq!(owed[0]["id"], "w");
    }

    #[test]
    fn ids_the_daemon_cannot_echo_are_not_waited_for_and_held_ids_are_bounded() {
        let p = Pending::default();
        let e = p.begin();
        for id in [r#"{"x":1}"#, "1.5", "null", "[1]"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"files/read"}}"#);
            assert!(sent(p.note(e, line.as_bytes())));
        }
        assert!(lock(&p.inner).requests.is_empty());
        let big = "x".repeat(1 << 20);
        let mut refused = 0;
        for n in 0..8 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":"{big}{n}","method":"files/read"}}"#);
            if let Noted::Full = p.note(e, line.as_bytes()) {
                refused += 1;
                assert_eq!(p.busy(line.as_bytes())[0]["error"]["code"], -31012);
            }
        }
        assert!(refused >= 4, "{refused}");
        assert!(lock(&p.inner).id_bytes <= MAX_ID_BYTES);
    }
}
