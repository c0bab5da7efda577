//! One request's way through the broker: it is handed over (its place in the session's
//! order, the signal that withdraws it), run, counted and audited, also when it is withdrawn.

use super::Broker;
use super::running::{Running, Seat};
use crate::audit::AuditRecord;
use crate::error::Error;
use crate::jsonrpc::{self, Item, Message, Request, Response};
use crate::method::Method;
use crate::ops::{self, Ctx};
use crate::session::Session;
use crate::turn::Turn;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// What handing a message over gave it: its turn in the session's order, and for a single
/// request the signal that withdraws it.
#[derive(Default)]
pub(crate) struct Handed {
    pub(crate) turn: Option<Arc<Turn>>,
    pub(crate) withdrawal: Option<Withdrawal>,
}

impl Seat {
    /// Hands `message` over: acts at once on the cancellations it holds, and takes its
    /// turn. Nothing for a message that could not be decoded or a session that cannot be had:
    /// there is nothing to order, and it fails on its own.
    pub(super) fn hand_over(&self, message: Option<&Message>) -> Handed {
        let (Ok(session), Some(message)) = (&self.session, message) else {
            return Handed::default();
        };
        let items = match message {
            Message::Single(item) => std::slice::from_ref(item),
            Message::Batch(items) => items.as_slice(),
        };
        // A cancellation acts when it is handed over, not in its turn: the request it names
        // may be the very change its turn would wait for.
        for item in items {
            if let Item::Notification(n) = item
                && n.method == jsonrpc::CANCELLED
                && let Some(id) = jsonrpc::cancelled_request(&n.params)
            {
                session.cancel(&jsonrpc::id_key(id));
            }
        }
        let withdrawal = match message {
            Message::Single(Item::Request(r)) if r.known.is_some_and(Method::is_cancellable) => {
                Some(Withdrawal::new(session, r.id.as_value()))
            }
            _ => None,
        };
        // Notifications alone have nothing to wait for: what they do is done above.
        let answered = items.iter().any(|i| !matches!(i, Item::Notification(_)));
        Handed {
            turn: answered.then(|| self.keep(session.order.enter(message.is_ordered()))),
            withdrawal,
        }
    }

    /// Takes the turn of a typed call, which no notification can name.
    pub(super) fn hand_over_call(&self, ordered: bool) -> Option<Arc<Turn>> {
        let session = self.session.as_ref().ok()?;
        Some(self.keep(session.order.enter(ordered)))
    }

    /// Keeps `turn` for the operations' blocking work, and hands it back to be held.
    fn keep(&self, turn: Turn) -> Arc<Turn> {
        let turn = Arc::new(turn);
        let _ = self.turn.set(turn.clone());
        turn
    }
}

/// The signal that withdraws one pending request (`notifications/cancelled` naming its id);
/// dropped with the request, which then is no longer pending.
pub(crate) struct Withdrawal {
    session: Arc<Session>,
    key: String,
    signal: Arc<Notify>,
}

impl Withdrawal {
    fn new(session: &Arc<Session>, id: &Value) -> Withdrawal {
        let key = jsonrpc::id_key(id);
        Withdrawal {
            signal: session.pend(key.clone()),
            session: session.clone(),
            key,
        }
    }

    /// Runs `work` unless its request is withdrawn first, which drops the work where it
    /// stands (its audit event says `cancelled`) and gives no answer.
    pub(super) async fn unless<T>(
        withdrawal: Option<Withdrawal>,
        work: impl Future<Output = Option<T>>,
    ) -> Option<T> {
        let Some(w) = withdrawal else {
            return work.await;
        };
        // The work is polled first, so that a request withdrawn before it began still
        // begins (and is audited `cancelled` as it is dropped) rather than vanish unaudited.
        tokio::select! {
            biased;
            answer = work => answer,
            () = w.signal.notified() => None,
        }
    }
}

impl Drop for Withdrawal {
    fn drop(&mut self) {
        self.session.unpend(&self.key, &self.signal);
    }
}

impl Broker {
    /// The session `server_id` names, made on first use.
    pub(crate) fn seat(&self, server_id: &str) -> Seat {
        Seat {
            id: server_id.to_owned(),
            session: self.session(server_id),
            sent: Instant::now(),
            turn: std::sync::OnceLock::new(),
        }
    }

    /// Takes the next turn in `server_id`'s order now, for a message handed over whole:
    /// every way in (a line, a message, a typed call, a face that reads lines and runs them
    /// concurrently) takes its place when it is handed over, so a host's messages keep the
    /// order it handed them over in, whatever order their futures are polled in.
    pub(crate) fn hand_over(&self, server_id: &str, message: Option<&Message>) -> (Seat, Handed) {
        let seat = self.seat(server_id);
        let handed = seat.hand_over(message);
        (seat, handed)
    }

    /// [`Broker::hand_over`] for a session the caller holds (a [`ServerSession`]'s), which
    /// is never made anew by name.
    ///
    /// [`ServerSession`]: super::ServerSession
    pub(crate) fn hand_over_held(
        &self,
        session: &Arc<Session>,
        message: Option<&Message>,
    ) -> (Seat, Handed) {
        let seat = Seat::of(session.clone());
        let handed = seat.hand_over(message);
        (seat, handed)
    }

    /// Answers a decoded line in the turn its caller holds (see [`Broker::hand_over`]);
    /// returns the response line to send, if any.
    pub(crate) async fn answer_decoded(
        &self,
        seat: &Seat,
        decoded: std::result::Result<Message, Box<Response>>,
        withdrawal: Option<Withdrawal>,
    ) -> Option<Vec<u8>> {
        let response = match decoded {
            // A batch's answer is built as a line, within the line limit.
            Ok(Message::Batch(items)) => return self.answer_batch(seat, items).await,
            Ok(Message::Single(item)) => {
                Withdrawal::unless(withdrawal, self.handle_item(seat, item)).await
            }
            Err(resp) => {
                self.audit_fault(&seat.id, resp.outcome.as_ref().err());
                Some(*resp)
            }
        }?;
        Some(response.encode())
    }

    pub(super) async fn handle_item(&self, seat: &Seat, item: Item) -> Option<Response> {
        match item {
            Item::Request(req) => Some(self.handle_request(seat, req).await),
            Item::Notification(n) => {
                tracing::debug!(server = seat.id, method = %n.method, "notification taken");
                None
            }
            Item::Response(_) => None,
            Item::Invalid(id, e) => {
                self.audit_fault(&seat.id, Some(&e));
                Some(Response {
                    id,
                    outcome: Err(e),
                })
            }
        }
    }

    pub(super) async fn handle_request(&self, seat: &Seat, req: Request) -> Response {
        let mut run = Running {
            broker: self,
            seat,
            method: req.method.chars().take(64).collect(),
            known: req.known,
            start: Instant::now(),
            ctx: Ctx::new(self.inner.clone(), &seat.id)
                .holding(seat.turn.get().cloned())
                .answering(&req.id),
            done: false,
        };
        let outcome = match &seat.session {
            Ok(session) if session.is_ended() => Err(Error::new(
                crate::error::ErrorKind::InvalidRequest,
                "the session has ended",
            )),
            Ok(session) => match session.suspension() {
                // A suspended session is refused before anything else: it neither spends its
                // budgets nor learns anything about its paths.
                Some(s) => Err(suspended(&seat.id, &s, self.inner.resumed_by)),
                None => {
                    // Only requests that move payload wait for a session's byte debt.
                    let moves = req.known.is_some_and(Method::moves_payload);
                    match run.ctx.config.rate.admit(session.budget_key(), moves) {
                        Ok(()) => {
                            // A grant for one request ends once the first request begun
                            // after it was given completes, used or not.
                            let uses = req.known.is_some_and(Method::uses_grants);
                            let _ends = uses.then(|| Finished::begin(session));
                            ops::dispatch(&mut run.ctx, session, req.known, &req.method, req.params)
                                .await
                        }
                        Err(refused) => {
                            let (spent, e) = *refused;
                            self.throttled(session, spent);
                            Err(e)
                        }
                    }
                }
            },
            Err(e) => Err(e.clone()),
        };
        run.finish(&outcome);
        if let Err(e) = &outcome {
            tracing::debug!(server = seat.id, method = %req.method, error = %e, "request failed");
        }
        Response {
            id: Some(req.id),
            outcome,
        }
    }

    fn audit_fault(&self, server_id: &str, e: Option<&Error>) {
        self.inner.record(&AuditRecord {
            server_id,
            identity: None,
            method: "",
            path: None,
            outcome: e.map_or("INVALID_REQUEST", |e| e.kind().outcome()),
            bytes: 0,
            cpu: std::time::Duration::ZERO,
            duration: std::time::Duration::ZERO,
            consent: None,
            violation: None,
        });
    }
}

/// A request that may use a grant, numbered as it begins: when it ends (answered, or its
/// future dropped), the grants for one request given before it began end too.
struct Finished<'a>(&'a Session, u64);

impl<'a> Finished<'a> {
    fn begin(session: &'a Session) -> Self {
        Finished(session, session.grants().begin())
    }
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.grants().finish(self.1);
    }
}

/// The refusal of every request of a suspended session.
fn suspended(
    server_id: &str,
    s: &crate::watchdog::Suspension,
    by: crate::watchdog::ResumedBy,
) -> Error {
    Error::new(
        crate::error::ErrorKind::PermissionDenied,
        format!(
            "the session is suspended after {} security violations within a minute; only \
             the user can {}",
            s.total(),
            by.hint(server_id)
        ),
    )
    .with_reason(crate::error::Reason::Suspended)
}
