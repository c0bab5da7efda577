//! `fsbroker serve`: one server session over newline-delimited JSON-RPC.
//!
//! The reader takes one line at a time and hands it to a task; a semaphore bounds how many
//! lines are queued or running, so a peer that floods requests is slowed by backpressure on
//! its own pipe rather than by our memory. At most `limits.max_in_flight` answers are in the
//! making or waiting for the output queue at once, and that queue is bounded in bytes, so a
//! peer that stops reading holds up its answers without making them pile up. Reads run
//! concurrently and may be answered out of order; changes are barriers (see [`run`]), in the
//! order every face keeps. One writer task owns the output: responses and the session's
//! notifications are written whole, one per line, and nothing else goes to it.

use crate::broker::{Notifications, ServerSession};
use crate::framing::{Frame, next_frame};
use crate::jsonrpc;
use crate::lines::line_channel;
use crate::order::Dispatcher;
use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Serves `session` on `input`/`output`, with the session's own `notifications` (from
/// [`Broker::open_session`](crate::Broker::open_session)), until end of input or `shutdown`
/// completes; then ends the session (drops the handle).
///
/// The session's requests run in the order every face keeps: a message
/// holding an ordered method ([`crate::Method::is_ordered`]: consent and the write side) is
/// handled after every earlier request has been answered, and no later request starts until it
/// is answered. So a server may pipeline consent and the reads that depend on it, or the
/// chunks of an upload, and sees its own changes in order. A `notifications/cancelled` is
/// acted on as soon as it is read, a change in progress included.
pub async fn run<R, W, S>(
    session: ServerSession,
    outbound: Notifications,
    input: R,
    output: W,
    shutdown: S,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ()>,
{
    run_beside(session, outbound, input, output, shutdown, Beside::none()).await
}

/// Lines that share a session's stream without being its requests or answers: the daemon's
/// consent questions to an attached proxy, and the proxy's answers to them.
pub(crate) struct Beside {
    /// Lines to write between the session's own, whole.
    pub(crate) out: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    /// Looks at each line read first, and takes it (true) when it is one of its own.
    pub(crate) take: Taker,
    /// Whether the end of the input is the peer's departure (a connection to the daemon),
    /// which withdraws the session's consent questions at once, before the requests read
    /// ahead and in flight are finished: a question left open for a peer that is gone could
    /// be answered, and remembered, for nobody. `serve`'s stdin may end while its host
    /// still reads, so there the questions are asked and answered as before.
    pub(crate) input_is_peer: bool,
}

/// See [`Beside::take`].
pub(crate) type Taker = Box<dyn FnMut(&[u8]) -> bool + Send>;

impl Beside {
    /// Nothing beside the session.
    pub(crate) fn none() -> Beside {
        Beside {
            out: None,
            take: Box::new(|_| false),
            input_is_peer: false,
        }
    }
}

/// [`run`], with `beside` sharing the stream.
pub(crate) async fn run_beside<R, W, S>(
    session: ServerSession,
    outbound: Notifications,
    input: R,
    output: W,
    shutdown: S,
    beside: Beside,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = ()>,
{
    let Beside {
        out: extra,
        take,
        input_is_peer,
    } = beside;
    let broker = session.broker().clone();
    let max_line = broker.policy().limits.max_line_bytes.get();
    // Responses wait here for a host that reads slowly; bounded in bytes, since one read's
    // answer can be 4/3 of the largest chunk.
    let (tx, rx) = line_channel::<()>(256, crate::lines::budget(max_line));
    let writer = tokio::spawn(write_out(output, rx, extra, outbound));
    let mut lane = Dispatcher::held(broker.clone(), session.session().clone(), tx.clone());
    // The input is read by a future of its own into a queue of one frame, so that while a
    // change holds the session (no later request may start), the next line is still read: a
    // `notifications/cancelled` can then withdraw the change, and anything else waits in
    // `next` until the change is answered. Backpressure stays on the peer's pipe: at most one
    // frame is read ahead.
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel(1);
    let leaving = input_is_peer.then(|| session.session().clone());
    let reading = read_frames(input, max_line, take, leaving, frames_tx);
    let stopped = {
        let serving = serve_frames(
            &mut lane,
            &mut frames,
            &session,
            &tx,
            shutdown,
            input_is_peer,
        );
        tokio::pin!(serving);
        tokio::select! {
            stopped = &mut serving => stopped,
            () = reading => serving.await,
        }
    };
    lane.finish(stopped).await;
    drop(session);
    drop(tx);
    match writer.await {
        Ok(r) => r,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// The writer task: owns `output`, and writes the session's responses (from `rx`), the lines
/// beside them (`extra`) and the session's notifications (`outbound`), each whole on its own
/// line, until the responses end.
async fn write_out<W>(
    output: W,
    mut rx: crate::lines::LineReceiver<()>,
    mut extra: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    mut outbound: Notifications,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    let mut notifications_open = true;
    loop {
        // What goes beside the session first: a question's withdrawal, queued in the step
        // that gave up on it, goes out before the answer that followed.
        let line = tokio::select! {
            biased;
            e = next_beside(&mut extra) => match e {
                Some(l) => l,
                None => { extra = None; continue }
            },
            r = rx.recv() => match r { Some(l) => l, None => break },
            n = outbound.recv(), if notifications_open => match n {
                Some(n) => match serde_json::to_vec(&n.message) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                None => { notifications_open = false; continue }
            },
        };
        out.write_all(&line).await?;
        out.write_all(b"\n").await?;
        // Responses that are already queued join this one in the same write: a pipelining
        // peer then costs one system call per burst rather than one per response, and a
        // lone response is still sent at once.
        while let Some(more) = try_beside(&mut extra).or_else(|| rx.try_recv()) {
            out.write_all(&more).await?;
            out.write_all(b"\n").await?;
        }
        out.flush().await?;
    }
    out.flush().await
}

/// The reader: frames from `input` into `frames`, one ahead at most, but for the lines `take`
/// keeps. At the end of the input, notes it on `leaving` (when the input is the peer) at once.
async fn read_frames<R>(
    input: R,
    max_line: usize,
    mut take: Taker,
    leaving: Option<std::sync::Arc<crate::session::Session>>,
    frames_tx: tokio::sync::mpsc::Sender<std::io::Result<Frame>>,
) where
    R: AsyncRead + Unpin,
{
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    loop {
        let frame = next_frame(&mut reader, max_line).await;
        if matches!(&frame, Ok(Frame::Line(l)) if take(l)) {
            continue;
        }
        let more = matches!(frame, Ok(Frame::Line(_) | Frame::TooLong(_)));
        if !more && let Some(s) = &leaving {
            // Noted as soon as it is read, not when the lines before it are served: a
            // change that waits for the user holds the session until then.
            s.input_ended();
        }
        if frames_tx.send(frame).await.is_err() || !more {
            break;
        }
    }
}

/// Hands the frames read to `lane` in order until the input ends or `shutdown` completes
/// (then answers true): a change holds the session, while the lines read meanwhile wait in
/// [`Ahead`], but for a cancellation, which is acted on at once. A `peer`'s lines past the
/// room of [`Ahead`] are refused rather than left unread: the answer to the consent question
/// that holds the session may come behind them on the same stream.
async fn serve_frames<S>(
    lane: &mut Dispatcher,
    frames: &mut tokio::sync::mpsc::Receiver<std::io::Result<Frame>>,
    session: &ServerSession,
    tx: &crate::lines::LineSender<()>,
    shutdown: S,
    peer: bool,
) -> bool
where
    S: Future<Output = ()>,
{
    let broker = session.broker();
    let max_line = broker.policy().limits.max_line_bytes.get();
    tokio::pin!(shutdown);
    // Lines read while a change held the session, to run after it in their order.
    let mut ahead = Ahead::default();
    loop {
        let frame = match ahead.frames.pop_front() {
            Some(f) => f,
            None => tokio::select! {
                biased;
                () = &mut shutdown => return true,
                f = frames.recv() => f.unwrap_or(Ok(Frame::Eof)),
            },
        };
        let line = match frame {
            Ok(Frame::Eof) => return false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read input; ending session");
                return false;
            }
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(bytes = n, limit = max_line, "skipped an over-long message");
                let resp = jsonrpc::too_long(max_line).to_json();
                if let Ok(v) = serde_json::to_vec(&resp) {
                    let _ = tx.send(v).await;
                }
                continue;
            }
            Ok(Frame::Line(line)) => line,
        };
        let Some(held) = lane.reserve(line.len()).await else {
            return false;
        };
        let decoded = jsonrpc::decode(&line, max_line);
        drop(line);
        // Only a change holds the session long; anything else is handed over at once.
        let change = decoded.as_ref().is_ok_and(jsonrpc::Message::is_ordered);
        let submit = lane.submit(decoded, held);
        tokio::pin!(submit);
        let submitted = loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return true,
                r = &mut submit => break r,
                f = frames.recv(), if change && (ahead.has_room() || peer) => match f {
                    Some(Ok(Frame::Line(l))) if withdraws(&l, max_line, broker, session) => {}
                    Some(Ok(Frame::Line(l))) if !ahead.has_room() => {
                        if let Some(busy) = refused_while_held(&l, max_line) {
                            let _ = tx.send(busy).await;
                        }
                    }
                    f => ahead.push(f.unwrap_or(Ok(Frame::Eof))),
                },
            }
        };
        if !submitted {
            return false;
        }
        ahead.bytes = ahead.frames.iter().map(Ahead::len).sum();
    }
}

/// A line to write beside the session's own, when one is waiting.
fn try_beside(extra: &mut Option<tokio::sync::mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    extra.as_mut().and_then(|rx| rx.try_recv().ok())
}

/// The next line to write beside the session's own; pending for ever once there is none.
async fn next_beside(extra: &mut Option<tokio::sync::mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match extra {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Lines read while a change holds the session. Bounded (at most [`AHEAD`] lines, and
/// [`AHEAD_BYTES`] and one line), so that a peer cannot make the broker buffer its input: past that,
/// nothing more is read until the change is answered, and a cancellation sent after that
/// many lines is seen only then.
#[derive(Default)]
struct Ahead {
    frames: std::collections::VecDeque<std::io::Result<Frame>>,
    bytes: usize,
}

/// Most lines read ahead while a change holds the session.
const AHEAD: usize = 64;

/// Bytes read ahead past which no more lines are read (one more line may pass it, up to the
/// line limit).
const AHEAD_BYTES: usize = 1 << 20;

impl Ahead {
    fn len(frame: &std::io::Result<Frame>) -> usize {
        match frame {
            Ok(Frame::Line(l)) => l.len(),
            _ => 0,
        }
    }

    fn has_room(&self) -> bool {
        let ended = matches!(self.frames.back(), Some(Ok(Frame::Eof) | Err(_)));
        !ended && self.frames.len() < AHEAD && self.bytes < AHEAD_BYTES
    }

    fn push(&mut self, frame: std::io::Result<Frame>) {
        self.bytes += Ahead::len(&frame);
        self.frames.push_back(frame);
    }
}

/// How long a peer refused while a change holds its session is told to wait.
const HELD_RETRY_AFTER_MS: u64 = 100;

/// The answer to a peer's `line` read while a change holds the session and the lines read
/// ahead fill their room: its requests refused as too many in flight (a batch's together);
/// nothing for a notification, which the broker would not act on (a cancellation was taken
/// before this). Only the ids are read: a long line is skipped through, not built.
fn refused_while_held(line: &[u8], max_line: usize) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let busy = |head: &Head| {
        let id = head.id.as_ref().filter(|_| head.method.is_some())?;
        let e = crate::error::Error::new(
            crate::error::ErrorKind::RateLimited,
            "too many requests in flight while a change holds the session",
        )
        .with_retry_after_ms(HELD_RETRY_AFTER_MS);
        Some(jsonrpc::refusal(Some(id), e))
    };
    let batch = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let heads = if batch {
        serde_json::from_slice::<Vec<Head>>(line).ok()
    } else {
        serde_json::from_slice::<Head>(line).ok().map(|h| vec![h])
    };
    let answer = match heads {
        Some(heads) => {
            let mut all: Vec<serde_json::Value> = heads.iter().filter_map(busy).collect();
            match all.len() {
                0 => return None,
                1 if !batch => all.pop()?,
                _ => serde_json::Value::Array(all),
            }
        }
        // A line that is no JSON-RPC we can read is answered as the session answers it.
        None => match jsonrpc::decode(line, max_line) {
            Err(response) => response.to_json(),
            Ok(_) => return None,
        },
    };
    tracing::debug!("refused a request read while a change holds the session");
    serde_json::to_vec(&answer).ok()
}

/// Whether `line` is a `notifications/cancelled`; if so it is handed over, which withdraws the
/// request it names at once.
fn withdraws(
    line: &[u8],
    max_line: usize,
    broker: &crate::broker::Broker,
    session: &ServerSession,
) -> bool {
    let Ok(message) = jsonrpc::decode(line, max_line) else {
        return false;
    };
    let is_cancel = matches!(&message, jsonrpc::Message::Single(jsonrpc::Item::Notification(n))
        if n.method == jsonrpc::CANCELLED);
    if is_cancel {
        drop(broker.hand_over_held(session.session(), Some(&message)));
    }
    is_cancel
}
