//! The order of one session's requests, the same for every face (`fsbroker serve`, the proxy,
//! the rmcp adapter): a change ([`Method::is_ordered`](crate::Method::is_ordered): consent and
//! the write side) runs alone, after every request that arrived before it has been answered,
//! and nothing that arrived after it starts before it is answered; other requests run
//! concurrently. So a server may pipeline consent and the reads that depend on it, or the
//! chunks of an upload, and sees its own changes in order.
//!
//! The session's [`Orderer`] (in `turn`, kept by the broker for each session) is the rule:
//! each request takes a turn in the order it arrived and waits until the turn may run.
//! [`Dispatcher`] takes the turns of the lines it reads (serve and the proxy's lane) in the
//! session's own order, so there is one order per session whatever calls the broker, and
//! bounds the number and bytes of queued or running lines.

use crate::broker::Broker;
use crate::jsonrpc::{Message, Response};
use crate::lines::LineSender;
use crate::session::Session;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// How long a shutdown waits for operations in flight before giving up on them.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs one session's lines in its order (see [`crate::turn`]): other requests concurrently, each change
/// alone (see the module documentation), with the number and bytes of queued or running lines
/// bounded. A change is answered before [`Dispatcher::submit`] returns, so no later line is
/// read until then. Used by `serve` and the proxy's lane.
pub(crate) struct Dispatcher<M = ()> {
    broker: Broker,
    server_id: String,
    /// The session, when the face holds it (`serve`); else it is found by `server_id`.
    held: Option<Arc<Session>>,
    tx: LineSender<M>,
    queue: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    answers: Arc<Semaphore>,
    tasks: JoinSet<()>,
}

impl<M: Default + Send + 'static> Dispatcher<M> {
    /// A dispatcher for `server_id` whose response lines go to `tx` (unmarked).
    pub(crate) fn new(broker: Broker, server_id: &str, tx: LineSender<M>) -> Dispatcher<M> {
        let limits = broker.policy().limits;
        let max_line = limits.max_line_bytes.get();
        // Lines queued or running are bounded twice: in number, and in bytes (KiB permits,
        // taken before a line is decoded), so a flood of maximal lines cannot hold more than
        // the budget.
        let budget_kib = (crate::lines::budget(max_line) / 1024).min(Semaphore::MAX_PERMITS);
        Dispatcher {
            broker,
            server_id: server_id.to_owned(),
            held: None,
            tx,
            queue: Arc::new(Semaphore::new(limits.max_in_flight.get().saturating_mul(4))),
            bytes: Arc::new(Semaphore::new(budget_kib)),
            // Answers in the making or waiting for room in the output queue are bounded by
            // the cap on operations in flight: each may be a maximal line (a large read, or a
            // batch's line), and a peer that stops reading must not make them pile up.
            answers: Arc::new(Semaphore::new(limits.max_in_flight.get())),
            tasks: JoinSet::new(),
        }
    }

    /// The dispatcher of a session the face holds: its lines never make a session anew by
    /// name, so a session ended under the face stays ended.
    pub(crate) fn held(broker: Broker, session: Arc<Session>, tx: LineSender<M>) -> Dispatcher<M> {
        let mut d = Dispatcher::new(broker, session.server_id(), tx);
        d.held = Some(session);
        d
    }

    /// Waits for room for a line of `len` bytes; the permit is held until it is answered.
    /// `None` once the dispatcher is closed.
    pub(crate) async fn reserve(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(1 + len / 1024).unwrap_or(u32::MAX);
        self.bytes.clone().acquire_many_owned(kib).await.ok()
    }

    /// Hands over one decoded line. A line holding a change (a batch holding one is one
    /// change) waits for every earlier line to be answered and is answered before this
    /// returns; anything else runs concurrently. Returns false once the dispatcher cannot
    /// take more.
    pub(crate) async fn submit(
        &mut self,
        decoded: std::result::Result<Message, Box<Response>>,
        held: OwnedSemaphorePermit,
    ) -> bool {
        // Reap finished tasks so the set does not grow with the session's length.
        while self.tasks.try_join_next().is_some() {}
        let ordered = decoded.as_ref().is_ok_and(Message::is_ordered);
        let (seat, handed) = match &self.held {
            Some(s) => self.broker.hand_over_held(s, decoded.as_ref().ok()),
            None => self
                .broker
                .hand_over(&self.server_id, decoded.as_ref().ok()),
        };
        let (turn, withdrawal) = (handed.turn, handed.withdrawal);
        if ordered {
            if let Some(t) = &turn {
                t.ready().await;
            }
            let answered = self.broker.answer_decoded(&seat, decoded, withdrawal).await;
            drop(held);
            if let Some(resp) = answered {
                let _ = self.tx.send(resp).await;
            }
            drop(turn);
            return true;
        }
        let Ok(permit) = self.queue.clone().acquire_owned().await else {
            return false;
        };
        let (b, tx) = (self.broker.clone(), self.tx.clone());
        let answers = self.answers.clone();
        self.tasks.spawn(async move {
            // Every earlier change of this face was answered before this line was read; the
            // turn waits only for changes another caller of the session started. It ends
            // only once the answer is in the output queue.
            if let Some(t) = &turn {
                t.ready().await;
            }
            // The slot is held until the answer is in the output queue, whose own budget in
            // bytes then bounds it.
            let Ok(slot) = answers.acquire_owned().await else {
                return;
            };
            if let Some(resp) = b.answer_decoded(&seat, decoded, withdrawal).await {
                let _ = tx.send(resp).await;
            }
            drop((slot, permit, held, turn));
        });
        true
    }

    /// Waits for the messages in flight (at most [`SHUTDOWN_GRACE`] when `stopped`, after
    /// which they are abandoned).
    pub(crate) async fn finish(mut self, stopped: bool) {
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if stopped {
            if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
                tracing::warn!("operations still running at shutdown were abandoned");
            }
        } else {
            drain.await;
        }
    }
}
