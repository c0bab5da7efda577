//! `fsbroker serve`: one server session over newline-delimited JSON-RPC.
//!
//! The reader takes one line at a time and hands it to a task; a semaphore bounds how many
//! lines are queued or running, so a peer that floods requests is slowed by backpressure on
//! its own pipe rather than by our memory. Reads run concurrently and may be answered out of
//! order; changes are barriers (see [`run`]). One writer task owns the output: responses and the
//! session's notifications are written whole, one per line, and nothing else goes to it.

use crate::broker::{Broker, OutboundReceiver};
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

/// Bytes of lines that may be queued or running at once (at least twice the line limit).
pub const QUEUE_BYTES: usize = 64 << 20;

/// How long a shutdown waits for operations in flight before giving up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves `server_id`'s session on `input`/`output` until end of input or `shutdown`
/// completes; then ends the session.
///
/// A message holding one of [`crate::ORDERED`] (consent and the write side) is a barrier: it
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
    let limits = broker.policy().limits.clone();
    let max_line = limits.max_line_bytes.get();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
    let me = server_id.to_owned();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::BufWriter::new(output);
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
            out.flush().await?;
        }
        out.flush().await
    });

    // Lines queued or running are bounded twice: in number, and in bytes (KiB permits, taken
    // before a line is decoded), so a flood of maximal lines cannot hold more than the budget.
    let queue = Arc::new(Semaphore::new(limits.max_in_flight.get().saturating_mul(4)));
    let budget_kib = (QUEUE_BYTES.max(2 * max_line) / 1024).min(Semaphore::MAX_PERMITS);
    let bytes = Arc::new(Semaphore::new(budget_kib));
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    tokio::pin!(shutdown);
    let mut stopped = false;
    loop {
        let frame = tokio::select! {
            biased;
            () = &mut shutdown => { stopped = true; break }
            f = next_frame(&mut reader, max_line) => f,
        };
        // Reap finished tasks so the set does not grow with the session's length.
        while tasks.try_join_next().is_some() {}
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
                let kib = u32::try_from(1 + line.len() / 1024).unwrap_or(u32::MAX);
                let Ok(held) = bytes.clone().acquire_many_owned(kib).await else {
                    break;
                };
                let decoded = jsonrpc::decode(&line, max_line);
                drop(line);
                let ordered = decoded
                    .as_ref()
                    .is_ok_and(|m| m.methods().any(crate::ops::is_ordered));
                if ordered {
                    // A change (consent, write, create, delete, rename) starts after every
                    // earlier request has been answered, and nothing after it starts before
                    // it is answered.
                    while tasks.join_next().await.is_some() {}
                    let answered = tokio::select! {
                        biased;
                        () = &mut shutdown => { stopped = true; break }
                        r = broker.handle_decoded(server_id, decoded) => r,
                    };
                    drop(held);
                    if let Some(resp) = answered {
                        let _ = tx.send(resp).await;
                    }
                    continue;
                }
                let Ok(permit) = queue.clone().acquire_owned().await else {
                    break;
                };
                let (b, id, tx) = (broker.clone(), server_id.to_owned(), tx.clone());
                tasks.spawn(async move {
                    if let Some(resp) = b.handle_decoded(&id, decoded).await {
                        let _ = tx.send(resp).await;
                    }
                    drop((permit, held));
                });
            }
        }
    }
    let drain = async { while tasks.join_next().await.is_some() {} };
    if stopped {
        if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
            tracing::warn!("operations still running at shutdown were abandoned");
        }
    } else {
        drain.await;
    }
    broker.end_session(server_id);
    drop(tx);
    match writer.await {
        Ok(r) => r,
        Err(e) => Err(std::io::Error::other(e)),
    }
}
