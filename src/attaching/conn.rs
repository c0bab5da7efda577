//! One attached session's connection: `attach`, and then its two tasks (one writes the lines
//! to the broker, one reads what comes back and routes it: answers to the server or to the
//! attaching side's own calls, consent questions to its asker).

use super::ask;
use super::control::{Reader, connect, exchange, said};
use super::door::Writer;
use super::pending::{Head, Pending, Route, heads};
use super::protocol::{AttachRequest, Attached, Request};
use super::{Answered, Attach, Naming};
use crate::framing::{Frame, next_frame};
use crate::lines::{LineReceiver, LineSender, QUEUE_LINES, budget, line_channel, write_queued};
use crate::locks::lock;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Answers to consent questions waiting to be written to the broker (each a few hundred
/// bytes; the requests' own queue is bounded in bytes).
const ANSWERS: usize = 16;

/// An attached session's live connection.
pub(super) struct Live {
    epoch: u64,
    session: String,
    lines: LineSender,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Live {
    /// The connection's number (see [`Pending::begin`]).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The session's name on the daemon.
    pub(super) fn session(&self) -> &str {
        &self.session
    }

    /// Sends `line`; false when the connection is gone.
    pub(super) async fn send(&self, line: Vec<u8>) -> bool {
        self.lines.send(line).await.is_ok()
    }

    /// Ends the session: the daemon sees the end of its input, answers what it has under
    /// way within its grace, and closes.
    pub(super) async fn finish(self) {
        drop(self.lines);
        let grace = crate::order::SHUTDOWN_GRACE + Duration::from_secs(5);
        let _ = tokio::time::timeout(grace, self.writer).await;
        let mut reader = self.reader;
        if tokio::time::timeout(grace, &mut reader).await.is_err() {
            reader.abort();
        }
    }
}

/// Connects, attaches and starts the session's tasks.
pub(super) async fn open<M: Default + Send + 'static>(
    attach: &Attach,
    naming: &dyn Naming,
    pending: &Arc<Pending>,
    output: &LineSender<M>,
    answered: &Answered,
) -> Result<Live, String> {
    let (mut r, mut w) = connect(attach.door.as_ref()).await?;
    let request = Request::Attach(AttachRequest {
        server: naming.name(),
        server_pid: attach.server_pid,
        era: naming.era(),
        sandbox: attach.sandbox.clone(),
        asks: attach.asker.is_some(),
        identity: attach.identity.get().await.map(Box::new),
    });
    let welcome = exchange(&mut r, &mut w, &request).await?;
    let session = match serde_json::from_value::<Attached>(welcome.clone()) {
        Ok(a) if welcome["ok"] == true => a.session,
        _ => return Err(said(&welcome)),
    };
    let epoch = pending.begin();
    // Bounded in bytes as `serve`'s own queues are: while the daemon holds the session (a
    // change, a consent question), the server is held up on its own pipe.
    let (lines, queued) = line_channel(QUEUE_LINES, budget(attach.max_line));
    let (answers, answers_rx) = mpsc::channel(ANSWERS);
    let writer = tokio::spawn(write(w, queued, answers_rx));
    let reader = tokio::spawn(read(
        r,
        Reading {
            epoch,
            max_line: attach.max_line,
            pending: pending.clone(),
            output: output.clone(),
            answered: answered.clone(),
            asker: attach.asker.clone(),
            answers,
            asking: Asking::default(),
        },
    ));
    Ok(Live {
        epoch,
        session,
        lines,
        reader,
        writer,
    })
}

/// Writes the queued lines, a burst at a time, and the answers to consent questions between
/// them, until the session's sender is gone.
async fn write(w: Writer, mut queued: LineReceiver, mut answers: mpsc::Receiver<Vec<u8>>) {
    let mut out = BufWriter::with_capacity(64 * 1024, w);
    let mut answering = true;
    loop {
        let line = tokio::select! {
            l = queued.recv() => match l {
                Some(l) => l,
                None => break,
            },
            a = answers.recv(), if answering => match a {
                Some(a) => a,
                None => { answering = false; continue }
            },
        };
        if write_queued(&mut out, Some(line), &mut queued)
            .await
            .is_err()
        {
            // The daemon is gone: the reader sees it and answers what is owed.
            return;
        }
    }
    let _ = out.shutdown().await;
}

/// What the reading task needs.
struct Reading<M> {
    epoch: u64,
    max_line: usize,
    pending: Arc<Pending>,
    output: LineSender<M>,
    answered: Answered,
    asker: Option<Arc<dyn super::Asker>>,
    /// For the answers to consent questions.
    answers: mpsc::Sender<Vec<u8>>,
    /// The questions being asked, by id: a withdrawn one is stopped where it stands.
    asking: Asking,
}

/// The tasks asking the broker's questions, by the question's id.
type Asking = Arc<std::sync::Mutex<std::collections::HashMap<String, JoinHandle<()>>>>;

/// Reads the daemon's lines until the connection ends, then answers what it owed.
async fn read<M: Default + Send + 'static>(mut r: Reader, how: Reading<M>) {
    // The daemon's lines are at most its own limit; one longer is not from a daemon.
    let limit = how.max_line.saturating_mul(2).max(1 << 20);
    loop {
        let line = match next_frame(&mut r, limit).await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::TooLong(n)) => {
                tracing::warn!(bytes = n, "dropped an over-long line from the daemon");
                continue;
            }
            Ok(Frame::Eof) | Err(_) => break,
        };
        if !route(line, &how).await {
            return;
        }
    }
    let owed = how.pending.lose(how.epoch);
    if !owed.is_empty() {
        tracing::warn!(
            requests = owed.len(),
            "lost the daemon with requests unanswered; they fail with broker_unavailable"
        );
    }
    for answer in owed {
        if let Some(id) = answer.get("id") {
            (how.answered)(id);
        }
        if let Ok(l) = serde_json::to_vec(&answer) {
            let _ = how.output.send(l).await;
        }
    }
}

/// Sends one line of the daemon where it goes; false when the server's side is gone.
async fn route<M: Default + Send + 'static>(line: Vec<u8>, how: &Reading<M>) -> bool {
    let (messages, batch) = heads(&line);
    if batch {
        for head in messages {
            if let Some(id) = head.id {
                how.pending.answered(&id);
                (how.answered)(&id);
            }
        }
        return how.output.send(line).await.is_ok();
    }
    match messages.into_iter().next() {
        Some(Head {
            id: None,
            method: Some(m),
        }) if m == ask::WITHDRAW_METHOD => {
            withdraw(&line, how).await;
            true
        }
        Some(Head {
            id: Some(id),
            method: Some(m),
        }) if m == ask::ASK_METHOD => {
            ask_user(id, &line, how);
            true
        }
        Some(Head {
            id: Some(id),
            method: None,
        }) => match how.pending.answered(&id) {
            Route::Call(answer) => {
                if let Ok(v) = serde_json::from_slice(&line) {
                    let _ = answer.send(v);
                }
                true
            }
            Route::Server => {
                (how.answered)(&id);
                how.output.send(line).await.is_ok()
            }
        },
        _ => how.output.send(line).await.is_ok(),
    }
}

/// Puts a consent question to this side's asker, on a task of its own (the user may take a
/// while), and sends the answer back; without an asker, answers at once that nobody here
/// could be asked.
fn ask_user<M>(id: Value, line: &[u8], how: &Reading<M>) {
    let question = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| ask::read_question(&v));
    let answers = how.answers.clone();
    let asker = how.asker.clone();
    let key = crate::jsonrpc::id_key(&id);
    let asking = how.asking.clone();
    // Held while the task is noted, so that the task's own removal comes after.
    let mut tasks = lock(&how.asking);
    let task = tokio::spawn({
        let key = key.clone();
        async move {
            let decided = match (question, asker) {
                (Some((_, request)), Some(asker)) => asker.ask(request).await,
                _ => None,
            };
            lock(&asking).remove(&key);
            let _ = answers.send(ask::answer(&id, decided.as_ref())).await;
        }
    });
    tasks.insert(key, task);
}

/// Stops asking the question a withdrawal line names: the asker's future is dropped, which
/// closes a host's dialog, before the next line of the broker's is passed on (the answer it
/// then sends the server comes after the host heard). The broker wants no answer to it.
async fn withdraw<M>(line: &[u8], how: &Reading<M>) {
    let id = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| ask::read_withdrawal(&v));
    let task = id.and_then(|id| lock(&how.asking).remove(&crate::jsonrpc::id_key(&id)));
    if let Some(task) = task {
        task.abort();
        // Ends once the task is dropped, its asker's future with it.
        let _ = task.await;
    }
}
