//! What waits for the user on the console: consent questions (the `ui` provider puts each
//! one here while its server waits) and offers ("allow this?", made when a server is refused
//! a path it never asked consent for). The page reads them and answers through the API;
//! nothing here grants anything by itself.

use crate::access::Access;
use crate::audit::AuditEvent;
use crate::broker::Broker;
use crate::consent::{BoxFuture, ConsentAnswer, ConsentDecision, ConsentProvider, ConsentRequest};
use crate::error::Reason;
use crate::locks::lock;
use crate::path::MountPath;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::SystemTime;
use tokio::sync::{broadcast, oneshot, watch};

/// Most offers waiting; past it, the oldest goes.
pub(crate) const MAX_OFFERS: usize = 50;

/// Most questions waiting at once; one more is denied at once, saying why.
const MAX_QUESTIONS: usize = 256;

/// The questions and offers waiting for the user.
#[derive(Debug)]
pub(crate) struct Board {
    inner: Mutex<Inner>,
    changes: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    questions: Vec<Question>,
    offers: VecDeque<Offer>,
}

/// A consent question while its server waits.
#[derive(Debug)]
pub(crate) struct Question {
    /// Its number on the page (`q7`).
    pub id: u64,
    /// What the server asks.
    pub request: ConsentRequest,
    /// When it was asked.
    pub asked: SystemTime,
    reply: Option<oneshot::Sender<ConsentAnswer>>,
}

/// A refusal the user may turn into a grant.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    /// Its number on the page (`o3`).
    pub id: u64,
    /// The session refused.
    pub server: String,
    /// The path it was refused.
    pub path: MountPath,
    /// The access the refused operation needed.
    pub access: Access,
    /// The refused method.
    pub method: String,
    /// When it was refused.
    pub at: SystemTime,
}

/// A copy of what waits, for the page.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Questions, oldest first: id, request, when asked.
    pub questions: Vec<(u64, ConsentRequest, SystemTime)>,
    /// Offers, oldest first.
    pub offers: Vec<Offer>,
}

impl Board {
    /// An empty board.
    pub(crate) fn new() -> Arc<Board> {
        Arc::new(Board {
            inner: Mutex::new(Inner::default()),
            changes: watch::Sender::new(0),
        })
    }

    /// Ticks whenever a question or an offer comes or goes.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// What waits now.
    pub(crate) fn waiting(&self) -> Waiting {
        let inner = lock(&self.inner);
        Waiting {
            questions: inner
                .questions
                .iter()
                .map(|q| (q.id, q.request.clone(), q.asked))
                .collect(),
            offers: inner.offers.iter().cloned().collect(),
        }
    }

    /// The request of question `id`, while it waits.
    pub(crate) fn question(&self, id: u64) -> Option<ConsentRequest> {
        let inner = lock(&self.inner);
        inner
            .questions
            .iter()
            .find(|q| q.id == id)
            .map(|q| q.request.clone())
    }

    /// Answers question `id`; false when it no longer waits.
    pub(crate) fn answer(&self, id: u64, answer: ConsentAnswer) -> bool {
        let reply = {
            let mut inner = lock(&self.inner);
            let Some(i) = inner.questions.iter().position(|q| q.id == id) else {
                return false;
            };
            inner.questions.remove(i).reply
        };
        self.changed();
        // Its server may have stopped waiting in between: then nothing is granted.
        reply.is_some_and(|r| r.send(answer).is_ok())
    }

    /// Takes offer `id` off the board.
    pub(crate) fn take_offer(&self, id: u64) -> Option<Offer> {
        let offer = {
            let mut inner = lock(&self.inner);
            let i = inner.offers.iter().position(|o| o.id == id)?;
            inner.offers.remove(i)
        };
        self.changed();
        offer
    }

    /// Puts an offer on the board for `event` when it is a refusal for want of consent on a
    /// path the server never asked for; one offer per server and path, the newest kept.
    pub(crate) fn consider(&self, event: &AuditEvent) {
        if event.reason != Some(Reason::NoConsent) || event.method == "files/consent" {
            return;
        }
        let Some(path) = event
            .path
            .as_deref()
            .and_then(|p| p.parse::<MountPath>().ok())
        else {
            return;
        };
        use crate::method::Method;
        let writes = matches!(
            Method::parse(&event.method),
            Some(Method::Write | Method::Create | Method::Delete | Method::Rename)
        );
        let access = if writes { Access::Write } else { Access::Read };
        {
            let mut inner = lock(&self.inner);
            inner
                .offers
                .retain(|o| !(o.server == event.server_id && o.path == path));
            if inner.offers.len() >= MAX_OFFERS {
                inner.offers.pop_front();
            }
            inner.next += 1;
            let id = inner.next;
            inner.offers.push_back(Offer {
                id,
                server: event.server_id.clone(),
                path,
                access,
                method: event.method.clone(),
                at: event.time,
            });
        }
        self.changed();
    }

    /// Makes offers of `broker`'s refusals, as long as the broker lives. Must run on a tokio
    /// runtime.
    pub(crate) fn watch_refusals(self: &Arc<Self>, broker: &Broker) {
        let mut events = broker.audit_events();
        let board = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(e) => match board.upgrade() {
                        Some(b) => b.consider(&e),
                        None => return,
                    },
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Forgets question `id` (its server stopped waiting).
    fn withdraw(&self, id: u64) {
        let gone = {
            let mut inner = lock(&self.inner);
            let before = inner.questions.len();
            inner.questions.retain(|q| q.id != id);
            inner.questions.len() != before
        };
        if gone {
            self.changed();
        }
    }
}

/// The consent provider of mode `ui`: each question waits on the board until the user
/// answers it on the page, or its server stops waiting (the time limit, a cancellation),
/// which takes it off.
#[derive(Debug, Clone)]
pub(crate) struct UiConsent(pub(crate) Arc<Board>);

impl ConsentProvider for UiConsent {
    fn decide<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentDecision> {
        Box::pin(async move { self.decide_each(request).await.into() })
    }

    fn decide_each<'a>(&'a self, request: &'a ConsentRequest) -> BoxFuture<'a, ConsentAnswer> {
        let board = self.0.clone();
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let id = {
                let mut inner = lock(&board.inner);
                if inner.questions.len() >= MAX_QUESTIONS {
                    tracing::warn!(
                        server = %request.server_id,
                        "consent denied: {MAX_QUESTIONS} questions already wait on the console"
                    );
                    return ConsentAnswer::deny();
                }
                inner.next += 1;
                let id = inner.next;
                inner.questions.push(Question {
                    id,
                    request: request.clone(),
                    asked: SystemTime::now(),
                    reply: Some(reply),
                });
                id
            };
            board.changed();
            tracing::info!(server = %request.server_id, question = id, "a consent question waits on the console");
            // Taken off the board however the wait ends, answered or dropped.
            let _off = Off { board: &board, id };
            answer.await.unwrap_or_default()
        })
    }
}

/// Takes a question off the board when dropped.
struct Off<'a> {
    board: &'a Board,
    id: u64,
}

impl Drop for Off<'_> {
    fn drop(&mut self) {
        self.board.withdraw(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ConsentRequest {
        ConsentRequest::new("s", ["demo/a".parse().unwrap()], Access::Read)
    }

    #[tokio::test]
    async fn a_question_waits_until_answered_and_goes_when_dropped() {
        let board = Board::new();
        let ui = UiConsent(board.clone());
        let r = request();
        let asking = ui.decide_each(&r);
        tokio::pin!(asking);
        assert!(futures_poll(&mut asking).await.is_none());
        let w = board.waiting();
        assert_eq!(w.questions.len(), 1);
        let id = w.questions[0].0;
        let yes = ConsentAnswer::new([crate::consent::PathChoice::whole(
            "demo/a".parse().unwrap(),
            Access::Read,
        )]);
        assert!(board.answer(id, yes.clone()));
        assert_eq!(asking.await, yes);
        assert!(board.waiting().questions.is_empty());
        assert!(!board.answer(id, ConsentAnswer::deny()));

        let dropped = ui.decide_each(&r);
        let mut dropped = Box::pin(dropped);
        assert!(futures_poll(&mut dropped).await.is_none());
        assert_eq!(board.waiting().questions.len(), 1);
        drop(dropped);
        assert!(board.waiting().questions.is_empty());
    }

    async fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        tokio::time::timeout(std::time::Duration::from_millis(20), f)
            .await
            .ok()
    }

    #[test]
    fn refusals_for_want_of_consent_become_offers_one_per_path() {
        let board = Board::new();
        let mut e = AuditEvent {
            time: SystemTime::now(),
            server_id: "s".into(),
            method: "files/read".into(),
            path: Some("demo/a".into()),
            outcome: "PERMISSION_DENIED".into(),
            reason: Some(Reason::NoConsent),
            bytes: 0,
            cpu: std::time::Duration::ZERO,
            duration: std::time::Duration::ZERO,
            consent: None,
        };
        board.consider(&e);
        board.consider(&e);
        e.method = "files/write".into();
        e.path = Some("demo/b".into());
        board.consider(&e);
        e.reason = Some(Reason::OutsideRoot);
        e.path = Some("demo/c".into());
        board.consider(&e);
        let offers = board.waiting().offers;
        let seen: Vec<_> = offers
            .iter()
            .map(|o| (o.path.to_string(), o.access))
            .collect();
        assert_eq!(
            seen,
            [
                ("demo/a".into(), Access::Read),
                ("demo/b".into(), Access::Write)
            ]
        );
        for i in 0..MAX_OFFERS + 5 {
            e.reason = Some(Reason::NoConsent);
            e.path = Some(format!("demo/n{i}"));
            board.consider(&e);
        }
        assert_eq!(board.waiting().offers.len(), MAX_OFFERS);
    }
}
