//! The attached sessions, and where their consent questions go: to the attaching side's
//! asker (a proxy's host), on the session's own stream beside its answers (the wire shape is
//! `crate::attaching::ask`), else to the fallback the policy names.
//!
//! A question the broker stops waiting for (its time limit passed, the server cancelled the
//! request, the session's input ended) is withdrawn from the attaching side at once, in the
//! same step that gives up on it, so that the withdrawal goes out before the answer the
//! broker then sends: a host's form closes no later than the server hears it was refused.

use crate::attaching::ask;
use crate::consent::{
    BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest, Elicitation,
};
use crate::locks::lock;
use crate::serve::Beside;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// Question lines (and withdrawals) waiting for room on one session's stream.
const QUESTION_LINES: usize = 32;

/// The attached sessions, by session id: what `status` shows of each beyond the broker's
/// snapshot, and where its consent questions go.
#[derive(Default)]
pub(crate) struct Attachments {
    sessions: Mutex<HashMap<String, Attached>>,
    /// Numbers attachments and questions, each once.
    numbers: AtomicU64,
}

/// One attached session.
struct Attached {
    /// Tells this attachment from a later one of the same id.
    token: u64,
    facts: Value,
    asks: Option<Asks>,
}

/// The way to one attached session's asker.
#[derive(Clone)]
struct Asks {
    /// Lines to write beside the session's answers.
    lines: mpsc::Sender<Vec<u8>>,
    /// The questions put and not yet answered, by number.
    waiting: Waiting,
}

/// See [`Asks::waiting`].
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Option<ConsentAnswer>>>>>;

impl Attachments {
    /// What `status` adds to session `id`'s snapshot: the attached process, the server's
    /// process, the era and the sandbox; `None` for a session that is not attached.
    pub(crate) fn facts(&self, id: &str) -> Option<Value> {
        lock(&self.sessions).get(id).map(|a| a.facts.clone())
    }

    /// Consent mode `elicit` for the broker: an attached session's asker is asked; when it
    /// cannot be (a sidecar, a host that cannot show a form, a proxy gone), the fallback the
    /// policy names (`consent.fallback`) decides.
    pub(crate) fn around(self: &Arc<Self>) -> Elicitation {
        let me = self.clone();
        Arc::new(move |fallback: Arc<dyn ConsentProvider>| {
            Arc::new(Routed {
                attachments: me.clone(),
                inner: fallback,
            }) as Arc<dyn ConsentProvider>
        })
    }

    /// Notes session `id` attached, with what `status` shows of it; with `asks`, its
    /// questions go to the attaching side through what [`Attachment::beside`] gives the
    /// session's loop. The session is forgotten when the attachment is dropped.
    pub(crate) fn attach(self: &Arc<Self>, id: &str, facts: Value, asks: bool) -> Attachment {
        let token = self.numbers.fetch_add(1, Ordering::Relaxed);
        let (lines, out) = mpsc::channel(QUESTION_LINES);
        let waiting = Waiting::default();
        let asks = asks.then(|| Asks {
            lines,
            waiting: waiting.clone(),
        });
        lock(&self.sessions).insert(id.to_owned(), Attached { token, facts, asks });
        Attachment {
            attachments: self.clone(),
            id: id.to_owned(),
            token,
            waiting,
            out: Some(out),
        }
    }

    fn asks(&self, id: &str) -> Option<Asks> {
        lock(&self.sessions).get(id).and_then(|a| a.asks.clone())
    }
}

/// One session noted attached (see [`Attachments::attach`]).
pub(crate) struct Attachment {
    attachments: Arc<Attachments>,
    id: String,
    token: u64,
    waiting: Waiting,
    out: Option<mpsc::Receiver<Vec<u8>>>,
}

impl Attachment {
    /// What shares the session's stream: the questions going out, and the answers to them
    /// taken from what the attaching side sends (matched by number).
    pub(crate) fn beside(&mut self) -> Beside {
        let waiting = self.waiting.clone();
        let take = Box::new(move |line: &[u8]| {
            if !ask::may_be_answer(line) {
                return false;
            }
            match ask::read_answer(line) {
                Some((n, answer)) => {
                    if let Some(reply) = lock(&waiting).remove(&n) {
                        let _ = reply.send(answer);
                    }
                    true
                }
                None => false,
            }
        });
        Beside {
            out: self.out.take(),
            take,
            input_is_peer: true,
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        // Questions still open get no answer from this connection: their askers hear so
        // (and ask their fallback).
        lock(&self.waiting).clear();
        let mut sessions = lock(&self.attachments.sessions);
        if sessions
            .get(&self.id)
            .is_some_and(|a| a.token == self.token)
        {
            sessions.remove(&self.id);
        }
    }
}

/// See [`Attachments::around`].
struct Routed {
    attachments: Arc<Attachments>,
    inner: Arc<dyn ConsentProvider>,
}

impl ConsentProvider for Routed {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move { self.decide_each(request).await.into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        Box::pin(async move {
            if let Some(asks) = self.attachments.asks(&request.server_id) {
                let n = self.attachments.numbers.fetch_add(1, Ordering::Relaxed);
                let (reply, answer) = oneshot::channel();
                lock(&asks.waiting).insert(n, reply);
                let mut open = Open {
                    n,
                    asks,
                    sent: false,
                };
                if open
                    .asks
                    .lines
                    .send(ask::question(n, request))
                    .await
                    .is_ok()
                {
                    open.sent = true;
                    if let Ok(Some(decided)) = answer.await {
                        return decided;
                    }
                }
            }
            self.inner.decide_each(request).await
        })
    }

    fn withdrawn(&self, request: &ConsentRequest) {
        self.inner.withdrawn(request);
    }
}

/// A question put to an attached session. Dropped unanswered (the broker gave up on it),
/// it is withdrawn there.
struct Open {
    n: u64,
    asks: Asks,
    /// Whether the question went out.
    sent: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        let unanswered = lock(&self.asks.waiting).remove(&self.n).is_some();
        if unanswered && self.sent && self.asks.lines.try_send(ask::withdrawal(self.n)).is_err() {
            tracing::debug!(
                question = self.n,
                "no room to withdraw a question; the attached side's form stays until answered"
            );
        }
    }
}
