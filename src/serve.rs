//! `fsbroker serve`: one server session over newline-delimited JSON-RPC.
//!
//! The reader takes one line at a time and hands it to a task; a semaphore bounds how many
//! lines are queued or running, so a peer that floods requests is slowed by backpressure on
//! its own pipe rather than by our memory. At most `limits.max_in_flight` answers are in the
//! making or waiting for the output queue at once, and that queue is bounded in bytes, so a
//! peer that stops reading holds up its answers without making them pile up. Reads run
//! concurrently and may be answered out of order; changes are barriers (see [`run`]). One
//! writer task owns the output: responses and the session's notifications are written whole,
//! one per line, and nothing else goes to it.

use crate::broker::{Broker, OutboundReceiver};
use crate::framing::{Frame, next_frame};
use crate::jsonrpc::{self, Message, Response};
use crate::lines::{LineSender, line_channel};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// How long a shutdown waits for operations in flight before giving up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves `server_id`'s session on `input`/`output` until end of input or `shutdown`
/// completes; then ends the session.
///
/// A message holding an ordered method ([`crate::Method::is_ordered`]: consent and the write side) is a barrier: it
/// is handled after every earlier request has been answered, and no later line is read until
/// it is answered. So a server may pipeline consent and the reads that depend on it, or the
/// chunks of an upload, and sees its own changes in order.
pub async fn run<R, W, S>(
    broker: Broker,
    server_id: &str,
    input: R,
    output: W,
    mut outbound: OutboundReceiver,
    shutdown: S,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ()>,
{
    let max_line = broker.policy().limits.max_line_bytes.get();
    // Responses wait here for a host that reads slowly; bounded in bytes, since one read's
    // answer can be 4/3 of the largest chunk.
    let (tx, mut rx) = line_channel(256, crate::lines::budget(max_line));
    let me = server_id.to_owned();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, output);
        let mut notifications_open = true;
        loop {
            let line = tokio::select! {
                biased;
                r = rx.recv() => match r { Some(l) => l, None => break },
                n = outbound.recv(), if notifications_open => match n {
                    Some(n) if n.server_id == me => match serde_json::to_vec(&n.message) {
                        Ok(v) => v,
                        Err(_) => continue,
                    },
                    Some(_) => continue,
                    None => { notifications_open = false; continue }
                },
            };
            out.write_all(&line).await?;
            out.write_all(b"\n").await?;
            // Responses that are already queued join this one in the same write: a pipelining
            // peer then costs one system call per burst rather than one per response, and a
            // lone response is still sent at once.
            while let Some(more) = rx.try_recv() {
                out.write_all(&more).await?;
                out.write_all(b"\n").await?;
            }
            out.flush().await?;
        }
        out.flush().await
    });

    let mut lane = Dispatcher::new(broker.clone(), server_id, tx.clone());
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    tokio::pin!(shutdown);
    let mut stopped = false;
    loop {
        let frame = tokio::select! {
            biased;
            () = &mut shutdown => { stopped = true; break }
            f = next_frame(&mut reader, max_line) => f,
        };
        match frame {
            Ok(Frame::Eof) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read input; ending session");
                break;
            }
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(bytes = n, limit = max_line, "skipped an over-long message");
                let resp = jsonrpc::too_long(max_line).to_json();
                if let Ok(v) = serde_json::to_vec(&resp) {
                    let _ = tx.send(v).await;
                }
            }
            Ok(Frame::Line(line)) => {
                let Some(held) = lane.reserve(line.len()).await else {
                    break;
                };
                let decoded = jsonrpc::decode(&line, max_line);
                drop(line);
                let submitted = tokio::select! {
                    biased;
                    () = &mut shutdown => { stopped = true; break }
                    r = lane.submit(decoded, held) => r,
                };
                if !submitted {
                    break;
                }
            }
        }
    }
    lane.finish(stopped).await;
    broker.end_session(server_id);
    drop(tx);
    match writer.await {
        Ok(r) => r,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// Runs one session's broker-bound messages: reads concurrently, each change as a barrier
/// (see [`run`]), with the number and bytes of queued or running messages bounded. Shared by
/// `serve` and the proxy, whose reader also relays other traffic.
pub struct Dispatcher {
    broker: Broker,
    server_id: String,
    tx: LineSender,
    queue: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    answers: Arc<Semaphore>,
    tasks: JoinSet<()>,
}

impl Dispatcher {
    /// A dispatcher for `server_id` whose response lines go to `tx`.
    pub fn new(broker: Broker, server_id: &str, tx: LineSender) -> Dispatcher {
        let limits = broker.policy().limits;
        let max_line = limits.max_line_bytes.get();
        // Lines queued or running are bounded twice: in number, and in bytes (KiB permits,
        // taken before a line is decoded), so a flood of maximal lines cannot hold more than
        // the budget.
        let budget_kib = (crate::lines::budget(max_line) / 1024).min(Semaphore::MAX_PERMITS);
        Dispatcher {
            broker,
            server_id: server_id.to_owned(),
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

    /// Waits for room for a line of `len` bytes; the permit is held until it is answered.
    /// `None` once the dispatcher is closed.
    pub async fn reserve(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(1 + len / 1024).unwrap_or(u32::MAX);
        self.bytes.clone().acquire_many_owned(kib).await.ok()
    }

    /// Hands over one decoded line. A change waits for every earlier message to be answered
    /// and is answered before this returns; anything else runs concurrently. Returns false
    /// once the dispatcher cannot take more.
    pub async fn submit(
        &mut self,
        decoded: std::result::Result<Message, Response>,
        held: OwnedSemaphorePermit,
    ) -> bool {
        // Reap finished tasks so the set does not grow with the session's length.
        while self.tasks.try_join_next().is_some() {}
        let ordered = decoded
            .as_ref()
            .is_ok_and(|m| m.methods().any(crate::method::is_ordered));
        if ordered {
            // A change (consent, write, create, delete, rename) starts after every earlier
            // request has been answered, and nothing after it starts before it is answered.
            while self.tasks.join_next().await.is_some() {}
            let answered = self.broker.handle_decoded(&self.server_id, decoded).await;
            drop(held);
            if let Some(resp) = answered {
                let _ = self.tx.send(resp).await;
            }
            return true;
        }
        let Ok(permit) = self.queue.clone().acquire_owned().await else {
            return false;
        };
        let (b, id, tx) = (self.broker.clone(), self.server_id.clone(), self.tx.clone());
        let answers = self.answers.clone();
        self.tasks.spawn(async move {
            // The slot is held until the answer is in the output queue, whose own budget in
            // bytes then bounds it.
            let Ok(slot) = answers.acquire_owned().await else {
                return;
            };
            if let Some(resp) = b.handle_decoded(&id, decoded).await {
                let _ = tx.send(resp).await;
            }
            drop((slot, permit, held));
        });
        true
    }

    /// Waits for the messages in flight (at most [`SHUTDOWN_GRACE`] when `stopped`, after
    /// which they are abandoned).
    pub async fn finish(mut self, stopped: bool) {
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
