//! The host's requests in flight: one task per POST that carried requests, which reads its
//! answer, and for each request id the way to reach that task when the host cancels it.
//!
//! A cancelled request stops waiting at once (its slot among the requests that may wait is
//! free again, and the host expects no answer), and its task sends the cancellation on once
//! the server has accepted the request itself, so a cancellation never overtakes its
//! request. A task whose requests are all cancelled lets go of its stream.

use super::error::RemoteError;
use super::http::Post;
use super::modern::Answered;
use super::session::RemoteSession;
use crate::jsonrpc::id_key;
use bytes::Bytes;
use reqwest::Response;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::{self, JoinSet};

/// How a request task starts.
pub(super) enum Start {
    /// POST this line (requests of the host) first.
    Post(Bytes),
    /// The POST was made already (the host's `initialize`, which the driver waits to see
    /// accepted): only its answer is left to read, within the request timeout, and a
    /// failure ends the session, since the host cannot go on without it.
    Init(Response),
    /// POST this request by the 2026-07-28 transport, with these request metadata headers:
    /// its cancellation is closing the answer's stream, and nothing is sent for it.
    Modern(Bytes, HeaderMap),
}

/// The request tasks and how to reach them by request id.
#[derive(Default)]
pub(super) struct InFlight {
    tasks: JoinSet<()>,
    by_id: HashMap<String, (task::Id, mpsc::Sender<Vec<u8>>)>,
    ids_of: HashMap<task::Id, Vec<String>>,
}

impl InFlight {
    /// Starts the task for requests `ids` (already tracked as waiting).
    pub(super) fn start(&mut self, shared: &Arc<RemoteSession>, start: Start, ids: Vec<Value>) {
        // Each id is cancelled at most once (its entry goes with the cancellation), so the
        // channel never fills.
        let (tx, rx) = mpsc::channel(ids.len().max(1));
        let keys: Vec<String> = ids.iter().map(id_key).collect();
        let handle = self.tasks.spawn(run(shared.clone(), start, ids, rx));
        for k in &keys {
            self.by_id.insert(k.clone(), (handle.id(), tx.clone()));
        }
        self.ids_of.insert(handle.id(), keys);
    }

    /// Cancels request `id` with the host's `line`: it stops waiting, and its task sends
    /// `line` on. Returns `line` when no task can take it (the request is not in flight),
    /// for the caller to send.
    pub(super) fn cancel(
        &mut self,
        shared: &RemoteSession,
        id: &Value,
        line: Vec<u8>,
    ) -> Option<Vec<u8>> {
        shared.pending.take(std::slice::from_ref(id));
        match self.by_id.remove(&id_key(id)) {
            Some((_, tx)) => tx.try_send(line).err().map(|e| match e {
                mpsc::error::TrySendError::Full(l) | mpsc::error::TrySendError::Closed(l) => l,
            }),
            None => Some(line),
        }
    }

    /// Whether no task runs.
    pub(super) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits for a task to end and forgets it; `None` when none runs.
    pub(super) async fn join_next(&mut self) -> Option<()> {
        let (id, outcome) = match self.tasks.join_next_with_id().await? {
            Ok((id, ())) => (id, None),
            Err(e) => (e.id(), Some(e)),
        };
        if let Some(e) = outcome
            && e.is_panic()
        {
            tracing::error!(error = %e, "a request to the remote server ended in a panic");
        }
        for k in self.ids_of.remove(&id).unwrap_or_default() {
            if self.by_id.get(&k).is_some_and(|(t, _)| *t == id) {
                self.by_id.remove(&k);
            }
        }
        Some(())
    }

    /// Ends every task and waits until they are gone.
    pub(super) async fn abort_all(&mut self) {
        self.tasks.abort_all();
        while self.join_next().await.is_some() {}
    }
}

/// One request task: POSTs the requests (unless the driver did), reads the answer, and
/// sends on the host's cancellations once the server has accepted the POST.
async fn run(
    shared: Arc<RemoteSession>,
    start: Start,
    ids: Vec<Value>,
    mut cancels: mpsc::Receiver<Vec<u8>>,
) {
    let modern = matches!(start, Start::Modern(..));
    serve(&shared, start, &ids, &mut cancels).await;
    // Cancellations queued meanwhile still go out; once the channel is closed, the driver
    // sends those that come later itself. In the modern transport the stream, closed by
    // now, was the cancellation.
    cancels.close();
    while let Ok(line) = cancels.try_recv() {
        if !modern {
            send_cancel(&shared, line).await;
        }
    }
}

/// The body of [`run`]: returns once the requests are answered, failed or all cancelled.
async fn serve(
    shared: &Arc<RemoteSession>,
    start: Start,
    ids: &[Value],
    cancels: &mut mpsc::Receiver<Vec<u8>>,
) {
    let modern = matches!(start, Start::Modern(..));
    let (resp, init) = match start {
        Start::Init(resp) => (resp, true),
        Start::Modern(body, headers) => {
            let Some(id) = ids.first() else { return };
            let posting = shared.post_request_modern(&body, &headers, id);
            tokio::pin!(posting);
            let answered = loop {
                tokio::select! {
                    r = &mut posting => break r,
                    Some(_) = cancels.recv() => {
                        if !shared.pending.any(ids) {
                            // Dropping the POST closes its connection: the server's
                            // cancellation signal, even before it answered.
                            tracing::debug!("let go of a cancelled request before its answer");
                            return;
                        }
                    }
                }
            };
            match answered {
                Ok(Answered::Accepted(resp)) => (resp, false),
                Ok(Answered::Said(line)) => return shared.deliver(line).await,
                Err(e) => return failed(shared, ids, e, false).await,
            }
        }
        Start::Post(body) => match shared.post(&body, true, Post::Message).await {
            Ok(resp) => (resp, false),
            Err(e) => return failed(shared, ids, e, false).await,
        },
    };
    let limit = shared.cfg.request_timeout;
    let reading = async {
        if init {
            let read = tokio::time::timeout(limit, shared.answer(resp, ids)).await;
            read.unwrap_or(Err(RemoteError::Timeout(limit)))
        } else {
            shared.answer(resp, ids).await
        }
    };
    tokio::pin!(reading);
    loop {
        tokio::select! {
            r = &mut reading => {
                if let Err(e) = r {
                    failed(shared, ids, e, init).await;
                }
                return;
            }
            Some(line) = cancels.recv() => {
                if !modern {
                    send_cancel(shared, line).await;
                }
                if !shared.pending.any(ids) {
                    tracing::debug!("let go of the stream of a cancelled request");
                    return;
                }
            }
        }
    }
}

/// Sends the host's cancellation on; a server that cannot be reached ends the session.
async fn send_cancel(shared: &Arc<RemoteSession>, line: Vec<u8>) {
    if let Err(e) = shared.notify(Bytes::from(line), Post::Message).await {
        tracing::warn!(error = %e, "a cancellation did not reach the remote server");
        if e.ends_session() {
            shared.fatal(e);
        }
    }
}

/// Answers the requests of `ids` still waiting with `e`, and ends the session when `e`
/// says it cannot go on (or it was the host's `initialize`).
async fn failed(shared: &RemoteSession, ids: &[Value], e: RemoteError, init: bool) {
    shared.fail(ids, &e).await;
    if init || e.ends_session() {
        shared.fatal(e);
    }
}
