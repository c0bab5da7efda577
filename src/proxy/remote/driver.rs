//! The session's driver: takes the lines meant for the server in order and sends each the
//! way its kind needs, and ends the session when the host is gone.
//!
//! Order: the host's `initialize` is accepted (its answer's status and headers, which carry
//! the session id) before anything else is sent; a notification or response is sent only
//! after everything before it was accepted; a request is started in order but runs on its
//! own, since its answer may wait for the user while other messages must still flow (the
//! host's answers to the server's questions, say). The driver waits for acceptance only,
//! never for an answer's body: those are read on the requests' tasks.

use super::error::RemoteError;
use super::http::Post;
use super::listen::listen;
use super::modern;
use super::params;
use super::pending::request_ids;
use super::requests::{InFlight, Start};
use super::session::{Mode, RemoteSession, refuses_as_modern_only};
use crate::lines::LineReceiver;
use crate::proxy::link::Wire;
use crate::proxy::names::INITIALIZED;
use crate::proxy::names::{CANCELLED, INITIALIZE, cancelled_id_in};
use crate::proxy::peek::{Kind, peek};
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The driver's tasks: the requests, the streams the server sends on by itself (GET, the old
/// transport's), and answers of the proxy's own waiting for room towards the host.
struct Driver {
    shared: Arc<RemoteSession>,
    inflight: InFlight,
    background: JoinSet<()>,
    answers: JoinSet<()>,
}

/// Runs the session until the host is gone (`end`, or the end of `outgoing`) or the session
/// fails. Returns the exit code: 0 for a clean end, 1 after a failure, or when requests were
/// still unanswered at the end of the shutdown grace, or the server was never reached.
pub(super) async fn drive(
    shared: Arc<RemoteSession>,
    mut outgoing: LineReceiver<Option<Wire>>,
    mut end: oneshot::Receiver<()>,
) -> u8 {
    let mut d = Driver {
        shared: shared.clone(),
        inflight: InFlight::default(),
        background: JoinSet::new(),
        answers: JoinSet::new(),
    };
    let (failed, deadline) = d.send_all(&mut outgoing, &mut end).await;
    if !failed {
        let by = deadline.unwrap_or_else(|| Instant::now() + shared.cfg.grace);
        let _ = tokio::time::timeout_at(by, d.finish(&mut outgoing)).await;
    }
    // A failure while the host's last messages went out still counts.
    let failed = failed || shared.has_failed();
    let left = d.stop(&mut outgoing, failed).await;
    if failed {
        return 1;
    }
    shared.delete().await;
    let unreached = shared.never_reached();
    if left == 0 && unreached.is_none() {
        return 0;
    }
    if left > 0 {
        tracing::warn!(requests = left, "requests were left unanswered at the end");
    }
    shared.conclude(RemoteError::abandoned(left, shared.cfg.grace, unreached));
    1
}

/// Answers `left` (requests never answered) with the failure that ended the session, and
/// every request still waiting as well, or, after a clean end, with `shutdown`; lets the
/// proxy's own answers on their way arrive first.
async fn answer_left(d: &mut Driver, left: &[Value], failed: bool) {
    while d.answers.join_next().await.is_some() {}
    let shared = &d.shared;
    if failed {
        for id in left {
            shared.pass(shared.failure_response(id)).await;
        }
        shared.fail_all().await;
        return;
    }
    let shutdown = RemoteError::Shutdown(shared.cfg.grace);
    for id in left {
        shared.pass(shutdown.response_for(id)).await;
    }
}

fn log_panic(r: Result<(), tokio::task::JoinError>) {
    if let Err(e) = r
        && e.is_panic()
    {
        tracing::error!(error = %e, "a task of the remote session ended in a panic");
    }
}

impl Driver {
    /// Sends the host's lines in order until the host is gone or the session fails (then
    /// answers true). When the host left while a line was being sent, that line had until
    /// the end of the grace, which is returned.
    async fn send_all(
        &mut self,
        outgoing: &mut LineReceiver<Option<Wire>>,
        end: &mut oneshot::Receiver<()>,
    ) -> (bool, Option<Instant>) {
        let shared = self.shared.clone();
        loop {
            tokio::select! {
                biased;
                () = shared.failed() => return (true, None),
                _ = &mut *end => return (false, None),
                line = outgoing.recv_marked() => {
                    let Some((line, wire)) = line else { return (false, None) };
                    // Sending waits for the server to accept (within the limits): a failure
                    // meanwhile is not kept waiting, and the host leaving starts the grace.
                    let work = self.handle(line, wire);
                    tokio::pin!(work);
                    let interrupted = tokio::select! {
                        biased;
                        () = shared.failed() => Some(true),
                        _ = &mut *end => Some(false),
                        () = &mut work => None,
                    };
                    match interrupted {
                        None => {}
                        Some(true) => return (true, None),
                        Some(false) => {
                            let by = Instant::now() + shared.cfg.grace;
                            let _ = tokio::time::timeout_at(by, work).await;
                            return (false, Some(by));
                        }
                    }
                }
                Some(()) = self.inflight.join_next(), if !self.inflight.is_empty() => {}
                Some(r) = self.background.join_next(), if !self.background.is_empty() => log_panic(r),
                Some(r) = self.answers.join_next(), if !self.answers.is_empty() => log_panic(r),
            }
        }
    }

    /// Stops every task of the session and answers the host's requests left (what is still
    /// queued was never sent), unless the host stopped reading. Returns how many were left.
    async fn stop(&mut self, outgoing: &mut LineReceiver<Option<Wire>>, failed: bool) -> usize {
        let shared = self.shared.clone();
        self.inflight.abort_all().await;
        self.background.abort_all();
        while self.background.join_next().await.is_some() {}
        shared.abort_readers();
        shared.drop_replayed();
        // What is still queued was never sent: its requests are answered here.
        outgoing.close();
        let mut left = Vec::new();
        while let Some(line) = outgoing.try_recv() {
            left.extend(request_ids(&line));
        }
        // The change notifications' streams end with the session and owe no answer.
        shared.pending.end_listens();
        // The host gets an answer for every request left, unless it stopped reading: then the
        // queue towards it stays full, and waiting would keep the proxy from ending.
        if !failed {
            left.extend(shared.pending.drain());
        }
        let limit = shared.cfg.connect_timeout;
        if tokio::time::timeout(limit, answer_left(self, &left, failed))
            .await
            .is_err()
        {
            tracing::warn!("the host is not taking the last answers; they are dropped");
            self.answers.abort_all();
        }
        left.len()
    }

    /// Sends one line the way its kind and its transport (as the proxy's judge marked it,
    /// see [`Wire`]) need.
    async fn handle(&mut self, line: Vec<u8>, wire: Option<Wire>) {
        let shared = self.shared.clone();
        let kind = peek(&line);
        if shared.follow(wire) == Wire::Modern {
            return self.modern(kind, line).await;
        }
        match kind {
            Kind::Request { method, id } if method == INITIALIZE => {
                self.initialize(line, id).await;
            }
            Kind::Notification { method } if method == INITIALIZED => {
                let first = shared.note_initialized(&line);
                inline(&shared, line).await;
                if first && matches!(shared.mode(), Mode::Streamable) {
                    self.background.spawn(listen(shared));
                }
            }
            Kind::Notification { method } if method == CANCELLED => {
                let id = cancelled_id_in(&line);
                let rest = match id {
                    Some(id) => self.inflight.cancel(&shared, &id, line),
                    None => Some(line),
                };
                if let Some(line) = rest {
                    inline(&shared, line).await;
                }
            }
            _ => {
                let ids = request_ids(&line);
                if ids.is_empty() {
                    inline(&shared, line).await;
                    return;
                }
                if let Err(e) = shared.pending.track(&ids) {
                    for id in &ids {
                        self.answer(e.response_for(id));
                    }
                    return;
                }
                self.inflight
                    .start(&shared, Start::Post(Bytes::from(line)), ids);
            }
        }
    }

    /// Sends one line by the 2026-07-28 transport: a request as a POST of its own that runs
    /// on its own task; the host's cancellation of a request in flight by closing its
    /// stream (nothing is sent); another notification as a POST judged on its status. A
    /// batch (which that revision does not have) has each request answered `-32600`, and a
    /// response (servers send no requests there) is dropped.
    async fn modern(&mut self, kind: Kind, line: Vec<u8>) {
        let shared = self.shared.clone();
        match kind {
            Kind::Request { id, method } => {
                let ids = vec![id];
                if let Err(e) = shared.pending.track(&ids) {
                    self.answer(e.response_for(&ids[0]));
                    return;
                }
                if method == "subscriptions/listen" {
                    shared.pending.note_listen(&ids[0]);
                }
                shared
                    .params
                    .note_request(&ids[0], &method, &line, &shared.pending);
                match modern::headers_for(&line) {
                    Ok(mut headers) => {
                        if method == "tools/call"
                            && let Err(why) = shared.params.mirror(&line, &mut headers)
                        {
                            // Never sent: the headers could not say what the body does.
                            tracing::warn!(%why, "refused a tool call whose argument cannot be mirrored in a header");
                            for id in shared.pending.take(&ids) {
                                self.answer(params::refusal(&id, &why));
                            }
                            return;
                        }
                        let start = Start::Modern(Bytes::from(line), headers);
                        self.inflight.start(&shared, start, ids);
                    }
                    Err(e) => {
                        for id in shared.pending.take(&ids) {
                            self.answer(e.response_for(&id));
                        }
                    }
                }
            }
            Kind::Notification { method } if method == CANCELLED => {
                let id = cancelled_id_in(&line);
                if let Some(id) = id {
                    // Whatever comes back is for a request the host no longer waits for.
                    let _ = self.inflight.cancel(&shared, &id, line);
                }
            }
            Kind::Notification { .. } => {
                let sent = match modern::headers_for(&line) {
                    Ok(headers) => shared
                        .post_modern(&Bytes::from(line), &headers, None)
                        .await
                        .map(drop),
                    Err(e) => Err(e),
                };
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "a notification to the remote server was not delivered");
                    if e.ends_session() {
                        shared.fatal(e);
                    }
                }
            }
            Kind::Batch => {
                tracing::warn!("refused a batch in a 2026-07-28 session, which has none");
                for id in request_ids(&line) {
                    self.answer(batch_refused(&id));
                }
            }
            Kind::Response { .. } | Kind::Other => {
                tracing::warn!(
                    "dropped a response or unreadable message meant for the remote server: the 2026-07-28 transport carries none"
                );
            }
        }
    }

    /// Sends the host's `initialize` and waits until the server accepted it; its answer is
    /// read on a task of its own. A server that refuses the POST with 400, 404 or 405 is
    /// tried with the 2024-11-05 HTTP+SSE transport. When no session can be had, the host
    /// gets an error for its `initialize` and the session ends.
    async fn initialize(&mut self, line: Vec<u8>, id: Value) {
        let shared = self.shared.clone();
        let first = shared.begin_initialize(&line, &id);
        let ids = vec![id];
        if let Err(e) = shared.pending.track(&ids) {
            self.answer(e.response_for(&ids[0]));
            return;
        }
        let body = Bytes::from(line);
        let result = match shared.post(&body, true, Post::Init).await {
            Err(RemoteError::Status {
                server: Some(said), ..
            }) if refuses_as_modern_only(&modern_only_answer(&ids[0], &said)) => {
                // A modern-only server says so in the body of a 400: its answer goes to the
                // host (the era rule learns from it), and no session is made.
                tracing::info!("the remote server refused initialize as modern-only");
                for id in shared.pending.take(&ids) {
                    self.answer(modern_only_answer(&id, &said));
                }
                return;
            }
            Err(RemoteError::Status { status: s, .. })
                if first
                    && matches!(shared.mode(), Mode::Streamable)
                    && matches!(s.as_u16(), 400 | 404 | 405) =>
            {
                tracing::info!(
                    status = %s,
                    "the remote server refused a Streamable HTTP initialize; trying the HTTP+SSE transport of 2024-11-05"
                );
                match super::legacy::open(&shared).await {
                    Ok((endpoint, reader)) => {
                        shared.set_legacy(endpoint);
                        self.background.spawn(reader);
                        shared.post(&body, true, Post::Init).await
                    }
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match result {
            Ok(resp) => self.inflight.start(&shared, Start::Init(resp), ids),
            Err(e) => {
                for id in shared.pending.take(&ids) {
                    tracing::warn!(error = %e, "the remote server's initialize failed");
                    self.answer(e.response_for(&id));
                }
                shared.fatal(e);
            }
        }
    }

    /// Gives the host an answer the proxy made up. Never waits here: the queue towards the
    /// host drains only as fast as the proxy's server reader, which may itself be waiting for
    /// room in the queue this driver drains.
    fn answer(&mut self, line: Vec<u8>) {
        if let Some(line) = self.shared.try_pass(line) {
            let shared = self.shared.clone();
            self.answers.spawn(async move { shared.pass(line).await });
        }
    }

    /// After the host left: sends what it queued and what the broker still answers, until
    /// no request of the host waits any more (the caller bounds this by the grace).
    async fn finish(&mut self, outgoing: &mut LineReceiver<Option<Wire>>) {
        let shared = self.shared.clone();
        let mut open = true;
        loop {
            // Open `subscriptions/listen` streams last as long as the session: they do not
            // hold up its end.
            if self.inflight.is_empty() || shared.pending.only_listening() {
                // Nothing waits for an answer: what is queued now still goes out, then the
                // session ends.
                match outgoing.try_recv_marked() {
                    Some((line, wire)) => {
                        self.handle(line, wire).await;
                        continue;
                    }
                    None => return,
                }
            }
            tokio::select! {
                biased;
                () = shared.failed() => return,
                line = outgoing.recv_marked(), if open => match line {
                    Some((line, wire)) => self.handle(line, wire).await,
                    None => open = false,
                },
                Some(()) = self.inflight.join_next() => {}
            }
        }
    }
}

/// The host's answer carrying the JSON-RPC error `said` of a server's HTTP error.
fn modern_only_answer(id: &Value, said: &Value) -> Vec<u8> {
    let v = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": said});
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The answer to a request in a batch the 2026-07-28 transport cannot carry.
fn batch_refused(id: &Value) -> Vec<u8> {
    let e = crate::error::Error::new(
        crate::error::ErrorKind::InvalidRequest,
        "a batch cannot be sent to a server in a 2026-07-28 session",
    );
    serde_json::to_vec(&crate::jsonrpc::refusal(Some(id), e)).unwrap_or_default()
}

/// Sends a notification or response and waits until the server has accepted it.
async fn inline(shared: &Arc<RemoteSession>, line: Vec<u8>) {
    if let Err(e) = shared.notify(Bytes::from(line), Post::Message).await {
        tracing::warn!(error = %e, "a message to the remote server was not delivered");
        if e.ends_session() {
            shared.fatal(e);
        }
    }
}
