//! Queues of whole lines bounded in bytes as well as in number.
//!
//! A queue of N lines can hold N times the line limit (32 MiB by default), so a peer that
//! sends maximal lines, or a reader that stops, would make a queue bounded only by count hold
//! gigabytes. Every line queued here holds permits for its size (in KiB, at most the whole
//! budget, so one over-sized line still fits alone) until it is taken off the queue.
//!
//! A line may carry a mark of the queue's own type (`()` for most): what its sender decided
//! about it that the receiver must not decide again (the proxy's judge marks the lines it
//! relays to a server with their protocol era).

use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc};

/// Lines a queue holds before a sender waits, whatever their size.
pub(crate) const QUEUE_LINES: usize = 64;

/// Bytes a queue holds before a sender waits, unless the line limit asks for more: a queue
/// always takes two maximal lines.
pub(crate) const QUEUE_BYTES: usize = 64 << 20;

/// The byte budget of a queue for lines of at most `max_line` bytes.
pub(crate) fn budget(max_line: usize) -> usize {
    QUEUE_BYTES.max(max_line.saturating_mul(2))
}

struct Line<M> {
    bytes: Vec<u8>,
    mark: M,
    _held: OwnedSemaphorePermit,
}

/// The sending half of a line queue; clones share the queue.
pub(crate) struct LineSender<M = ()> {
    tx: mpsc::Sender<Line<M>>,
    budget: Arc<Semaphore>,
    budget_kib: u32,
}

impl<M> Clone for LineSender<M> {
    fn clone(&self) -> Self {
        LineSender {
            tx: self.tx.clone(),
            budget: self.budget.clone(),
            budget_kib: self.budget_kib,
        }
    }
}

impl<M> std::fmt::Debug for LineSender<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineSender")
            .field("free_kib", &self.budget.available_permits())
            .finish_non_exhaustive()
    }
}

/// The receiving half of a line queue.
pub(crate) struct LineReceiver<M = ()> {
    rx: mpsc::Receiver<Line<M>>,
}

impl<M> std::fmt::Debug for LineReceiver<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineReceiver").finish_non_exhaustive()
    }
}

/// Why a line was not queued; the line comes back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The queue is full, in lines or in bytes (only from [`LineSender::try_send`]).
    Full(Vec<u8>),
    /// The receiver is gone.
    Closed(Vec<u8>),
}

/// A queue of at most `lines` lines and `bytes` bytes.
pub(crate) fn line_channel<M>(lines: usize, bytes: usize) -> (LineSender<M>, LineReceiver<M>) {
    let (tx, rx) = mpsc::channel(lines.max(1));
    let budget_kib =
        u32::try_from((bytes / 1024).clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
    let sender = LineSender {
        tx,
        budget: Arc::new(Semaphore::new(budget_kib as usize)),
        budget_kib,
    };
    (sender, LineReceiver { rx })
}

impl<M: Default> LineSender<M> {
    /// Queues `line`, unmarked, waiting for room.
    pub(crate) async fn send(&self, line: Vec<u8>) -> Result<(), SendError> {
        self.send_marked(line, M::default()).await
    }

    /// Queues `line`, unmarked, if there is room now.
    pub(crate) fn try_send(&self, line: Vec<u8>) -> Result<(), SendError> {
        self.try_send_marked(line, M::default())
    }
}

impl<M> LineSender<M> {
    fn kib(&self, line: &[u8]) -> u32 {
        u32::try_from(1 + line.len() / 1024)
            .unwrap_or(u32::MAX)
            .min(self.budget_kib)
    }

    /// Queues `line` with `mark`, waiting for room.
    pub(crate) async fn send_marked(&self, line: Vec<u8>, mark: M) -> Result<(), SendError> {
        let Ok(held) = self
            .budget
            .clone()
            .acquire_many_owned(self.kib(&line))
            .await
        else {
            return Err(SendError::Closed(line));
        };
        self.tx
            .send(Line {
                bytes: line,
                mark,
                _held: held,
            })
            .await
            .map_err(|e| SendError::Closed(e.0.bytes))
    }

    /// Queues `line` with `mark` if there is room now.
    pub(crate) fn try_send_marked(&self, line: Vec<u8>, mark: M) -> Result<(), SendError> {
        let held = match self.budget.clone().try_acquire_many_owned(self.kib(&line)) {
            Ok(held) => held,
            Err(TryAcquireError::NoPermits) => return Err(SendError::Full(line)),
            Err(TryAcquireError::Closed) => return Err(SendError::Closed(line)),
        };
        self.tx
            .try_send(Line {
                bytes: line,
                mark,
                _held: held,
            })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(l) => SendError::Full(l.bytes),
                mpsc::error::TrySendError::Closed(l) => SendError::Closed(l.bytes),
            })
    }

    /// Whether the receiver is gone (only the tests ask).
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl<M> LineReceiver<M> {
    /// The next line, waiting for one; `None` once every sender is gone and the queue is
    /// empty.
    pub(crate) async fn recv(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await.map(|l| l.bytes)
    }

    /// The next line if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Option<Vec<u8>> {
        self.rx.try_recv().ok().map(|l| l.bytes)
    }

    /// The next line and its mark, waiting for one.
    pub(crate) async fn recv_marked(&mut self) -> Option<(Vec<u8>, M)> {
        self.rx.recv().await.map(|l| (l.bytes, l.mark))
    }

    /// The next line and its mark if one is queued now.
    pub(crate) fn try_recv_marked(&mut self) -> Option<(Vec<u8>, M)> {
        self.rx.try_recv().ok().map(|l| (l.bytes, l.mark))
    }

    /// Refuses further lines; those already queued can still be received.
    pub(crate) fn close(&mut self) {
        self.rx.close();
    }
}

/// Writes `first` and then every line already queued in `rx`, each with its newline, and
/// flushes once.
pub(crate) async fn write_queued<W: AsyncWrite + Unpin, M>(
    out: &mut tokio::io::BufWriter<W>,
    first: Option<Vec<u8>>,
    rx: &mut LineReceiver<M>,
) -> std::io::Result<()> {
    let mut next = first;
    loop {
        if let Some(line) = next {
            out.write_all(&line).await?;
            out.write_all(b"\n").await?;
        }
        match rx.try_recv() {
            Some(more) => next = Some(more),
            None => break,
        }
    }
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_bound_the_queue_as_well_as_lines() {
        let (tx, mut rx) = line_channel::<()>(10, 4096);
        assert_eq!(tx.try_send(vec![b'a'; 3000]), Ok(()));
        // 3 KiB held of 4: a second line of 3000 bytes does not fit.
        assert!(matches!(
            tx.try_send(vec![b'b'; 3000]),
            Err(SendError::Full(_))
        ));
        assert_eq!(rx.recv().await.map(|l| l.len()), Some(3000));
        // Taking the line off the queue gave its bytes back.
        assert_eq!(tx.try_send(vec![b'b'; 3000]), Ok(()));
    }

    #[tokio::test]
    async fn a_line_larger_than_the_budget_still_goes_alone() {
        let (tx, mut rx) = line_channel::<()>(10, 2048);
        assert_eq!(tx.send(vec![0; 10_000]).await, Ok(()));
        assert!(matches!(tx.try_send(vec![0; 1]), Err(SendError::Full(_))));
        assert_eq!(rx.recv().await.map(|l| l.len()), Some(10_000));
        assert_eq!(tx.try_send(vec![0; 1]), Ok(()));
    }

    #[tokio::test]
    async fn lines_bound_the_queue_too_and_closing_is_seen() {
        let (tx, mut rx) = line_channel::<()>(1, 1 << 20);
        assert_eq!(tx.try_send(b"x".to_vec()), Ok(()));
        assert!(matches!(
            tx.try_send(b"y".to_vec()),
            Err(SendError::Full(_))
        ));
        rx.close();
        assert_eq!(rx.try_recv(), Some(b"x".to_vec()));
        assert!(matches!(
            tx.send(b"z".to_vec()).await,
            Err(SendError::Closed(_))
        ));
        assert!(tx.is_closed());
    }
}
