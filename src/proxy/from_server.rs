//! The server's lines: brokered requests go to the broker's lane, the rest to the host.
//!
//! This direction fails closed. The host may parse more leniently than we do (replacing
//! invalid UTF-8, taking lone surrogates or out-of-range numbers), so a line we cannot read
//! exactly is never relayed: otherwise a server could dress a `roots/list` so that we pass it
//! on and the host answers it with its own roots, or hide a request under the proxy's ids.
//! What is refused is answered to the server, so it never waits for an answer that will not
//! come. Refusals wait for room in the queue towards the server: whatever drains it (a
//! child's stdin writer, the remote transport's driver) never waits for this reader.

use super::cancel;
use super::era;
use super::host::HostChannel;
use super::peek::{self, Kind};
use super::strict::{self, BatchItems};
use super::{State, lock};
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::{Id, MAX_BATCH, Response};
use crate::lines::{LineReceiver, LineSender, SendError};
use crate::method::is_brokered;
use serde_json::Value;
use std::sync::Arc;

/// How long a server is told to wait when the broker's queue is full.
const RETRY_AFTER_MS: u64 = 100;

/// Reads the server's lines until its output ends. Never waits on the broker: a request that
/// does not fit in the lane's queue is refused with `RATE_LIMITED`, so host-bound traffic is
/// not held up behind broker work.
/// `to_host` is taken before this task starts: a host that sends its last lines and leaves
/// at once closes the host channel, maybe before this task first runs, and the server's
/// answers to those lines must still reach it.
pub(super) async fn read_server(
    mut from_server: LineReceiver,
    host: Arc<HostChannel>,
    to_host: Option<LineSender>,
    state: Arc<State>,
    lane: LineSender,
    to_server: LineSender,
) {
    let Some(to_host) = to_host else { return };
    while let Some(line) = from_server.recv().await {
        let Routed {
            lane: for_lane,
            host: for_host,
            mut refusals,
            input,
        } = route(line, &host, &state);
        for response in input {
            if let Some(l) = era::intercept(&state, response, to_host.clone(), to_server.clone())
                && to_host.send(l).await.is_err()
            {
                return;
            }
        }
        if let Some(ForLane { line, ids, batch }) = for_lane {
            match lane.try_send(line) {
                Ok(()) => {}
                Err(SendError::Full(_)) => {
                    forget(&state, &ids, batch);
                    tracing::warn!(requests = ids.len(), "broker queue full; refused");
                    let busy = Error::new(ErrorKind::RateLimited, "too many requests in flight")
                        .with_retry_after_ms(RETRY_AFTER_MS);
                    refusals.extend(ids.iter().map(|id| refusal(Some(id), busy.clone())));
                    refusals.batch |= batch;
                }
                // The lane has stopped: the session is ending and broker work is dropped,
                // but what the server says to the host (answers to its last requests) still
                // passes.
                Err(SendError::Closed(_)) => {
                    forget(&state, &ids, batch);
                    tracing::debug!(
                        requests = ids.len(),
                        "the session is ending; dropped brokered requests"
                    );
                }
            }
        }
        for l in refusals.encode() {
            if to_server.send(l).await.is_err() {
                return;
            }
        }
        for l in for_host {
            if to_host.send(l).await.is_err() {
                return;
            }
        }
    }
}

/// Forgets brokered requests that never reached the lane.
fn forget(state: &State, ids: &[Value], batch: bool) {
    if !batch {
        for id in ids {
            state.brokered.forget(id);
        }
    }
}

/// What of one server line would be relayed to the host, routed as in a session whose
/// `initialize` has not been seen: for the fuzz oracle that checks nothing brokered, and
/// nothing we cannot read exactly, ever reaches the host.
pub(crate) fn host_part(line: &[u8]) -> Option<Vec<u8>> {
    let (tx, _rx) = crate::lines::line_channel(1, 1024);
    let host = HostChannel::new(tx);
    let state = State::new();
    let routed = route(line.to_vec(), &host, &state);
    // The oracle's session has seen no `initialize`, so at most the server's line goes on.
    routed.host.into_iter().next()
}

/// Brokered requests of one line, for the lane.
struct ForLane {
    line: Vec<u8>,
    /// Their ids, to refuse them if the lane is full.
    ids: Vec<Value>,
    /// Whether they came as a batch (and so are answered as one).
    batch: bool,
}

/// Answers of the proxy's own, back to the server.
#[derive(Default)]
struct Refusals {
    items: Vec<Value>,
    /// Whether to answer as a batch: a refused batch is answered with an array.
    batch: bool,
}

impl Refusals {
    fn one(item: Value) -> Refusals {
        Refusals {
            items: vec![item],
            batch: false,
        }
    }

    fn extend(&mut self, more: impl IntoIterator<Item = Value>) {
        self.items.extend(more);
    }

    /// The lines to send: one array for a refused batch, else one line per answer.
    fn encode(self) -> Vec<Vec<u8>> {
        if self.items.is_empty() {
            return Vec::new();
        }
        if self.batch {
            return serde_json::to_vec(&Value::Array(self.items))
                .ok()
                .into_iter()
                .collect();
        }
        self.items
            .iter()
            .filter_map(|v| serde_json::to_vec(v).ok())
            .collect()
    }
}

/// Where the parts of one server line go.
#[derive(Default)]
struct Routed {
    lane: Option<ForLane>,
    /// Lines for the host: the server's line, or the proxy's errors for the host's requests
    /// whose answers came in a refused batch.
    host: Vec<Vec<u8>>,
    refusals: Refusals,
    /// Answers to the host that ask for input: the proxy looks into them first.
    input: Vec<Value>,
}

impl Routed {
    fn refused(item: Value) -> Routed {
        Routed {
            refusals: Refusals::one(item),
            ..Routed::default()
        }
    }
}

fn route(line: Vec<u8>, host: &HostChannel, state: &State) -> Routed {
    // JSON is UTF-8; a host that decodes leniently must never see a line we did not read.
    if std::str::from_utf8(&line).is_err() {
        return Routed::refused(refusal(None, parse_error("message is not valid utf-8")));
    }
    match peek::peek(&line) {
        Kind::Request { method, id } if is_brokered(&method) && !state.serves(&method) => {
            Routed::refused(refusal(Some(&id), not_in_era(&method)))
        }
        Kind::Request { method, id } if is_brokered(&method) => {
            state.brokered.start(&id);
            Routed {
                lane: Some(ForLane {
                    line,
                    ids: vec![id],
                    batch: false,
                }),
                ..Routed::default()
            }
        }
        Kind::Request { id, .. } if host.is_reserved(&id) => {
            Routed::refused(refusal(Some(&id), reserved_id()))
        }
        Kind::Notification { method } if is_brokered(&method) => {
            tracing::debug!(%method, "dropped a brokered method sent as a notification");
            Routed::default()
        }
        Kind::Notification { method }
            if method == "notifications/cancelled" && state.era.server_cancelled(&line) =>
        {
            Routed::default()
        }
        Kind::Notification { method } if cancels_ours(&method, &line, state) => {
            tracing::debug!("the server cancelled a brokered request; stopped");
            Routed::default()
        }
        Kind::Response { id } if state.era.take_upstream_answer(&id, &line) => Routed::default(),
        Kind::Response { id } => {
            // The first answer to `initialize` (or a forwarded probe) settles it: a later one
            // with the same id cannot change the session's era.
            let answers_init = {
                let mut init = lock(&state.init_id);
                let hit = init.as_ref() == Some(&id);
                if hit {
                    init.take();
                }
                hit
            };
            if answers_init {
                state.note_server_name(&line);
                state.era.note_init_answer(&line);
            } else {
                state.learn_modern_name(&line);
            }
            match era::input_required(&line) {
                Some(response) => Routed {
                    input: vec![response],
                    ..Routed::default()
                },
                None if era::hides_roots(&line) => Routed {
                    input: vec![era::roots_refused(&id)],
                    ..Routed::default()
                },
                None => {
                    state.era.forget(&id);
                    Routed {
                        host: vec![line],
                        ..Routed::default()
                    }
                }
            }
        }
        Kind::Request { id, .. } if era::hides_roots(&line) => {
            Routed::refused(refusal(Some(&id), hidden_roots()))
        }
        Kind::Notification { .. } if era::hides_roots(&line) => {
            tracing::warn!("dropped a server notification carrying a roots/list input request");
            Routed::default()
        }
        Kind::Request { .. } | Kind::Notification { .. } => Routed {
            host: vec![line],
            ..Routed::default()
        },
        Kind::Batch => match state.without_batches() {
            Some(version) => {
                let refused = refuse_batch(&line, &version, &|id| state.era.is_upstream(id));
                // The proxy's retries answered in the batch fail, so the host's requests
                // they stand for get an error instead of waiting for ever.
                for id in &refused.ours {
                    let e = refusal(
                        Some(id),
                        Error::new(
                            ErrorKind::InvalidRequest,
                            "the server answered the proxy's retry in a batch, which this protocol revision does not have",
                        ),
                    );
                    if let Ok(l) = serde_json::to_vec(&e) {
                        state.era.take_upstream_answer(id, &l);
                    }
                }
                Routed {
                    host: refused.for_other_side,
                    refusals: Refusals {
                        items: refused.for_sender,
                        batch: false,
                    },
                    ..Routed::default()
                }
            }
            None => split_batch(line, host, state),
        },
        Kind::Other => {
            let id = peek::refusal_id(&line);
            Routed::refused(refusal(id.as_ref(), unreadable(&line)))
        }
    }
}

/// Splits a server's batch into brokered requests, the rest, and refusals. Each item is
/// judged by the strict reader exactly as a single line is, and kept as the bytes the server
/// wrote: what goes on is never a re-encoding of what we read. The broker's answers come back
/// as a batch of their own. A batch with nothing to take out is relayed as the server wrote
/// it, byte for byte. A batch of more than [`MAX_BATCH`] items is refused whole, as the broker
/// refuses one, so the proxy's own answers to a batch are bounded too.
fn split_batch(line: Vec<u8>, host: &HostChannel, state: &State) -> Routed {
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    let mut ids = Vec::new();
    let mut refusals = Refusals {
        items: Vec::new(),
        batch: true,
    };
    let mut changed = false;
    let mut input = Vec::new();
    let mut count = 0;
    for item in BatchItems::new(&line) {
        let Ok(item) = item else {
            return Routed::refused(refusal(None, unreadable(&line)));
        };
        count += 1;
        if count > MAX_BATCH {
            let e = Error::new(
                ErrorKind::InvalidRequest,
                format!("batch has more than {MAX_BATCH} items"),
            );
            return Routed::refused(refusal(None, e));
        }
        match peek::peek(item) {
            Kind::Request { method, id } if is_brokered(&method) && !state.serves(&method) => {
                refusals.items.push(refusal(Some(&id), not_in_era(&method)));
                changed = true;
            }
            Kind::Request { method, id } if is_brokered(&method) => {
                ids.push(id);
                append(&mut ours, item);
                changed = true;
            }
            Kind::Request { id, .. } if host.is_reserved(&id) => {
                refusals.items.push(refusal(Some(&id), reserved_id()));
                changed = true;
            }
            Kind::Notification { method } if is_brokered(&method) => changed = true,
            Kind::Notification { method }
                if method == "notifications/cancelled" && state.era.server_cancelled(item) =>
            {
                changed = true
            }
            Kind::Notification { method } if cancels_ours(&method, item, state) => changed = true,
            Kind::Other | Kind::Batch => {
                let id = peek::refusal_id(item);
                refusals.items.push(refusal(id.as_ref(), unreadable(item)));
                changed = true;
            }
            Kind::Response { id } if state.era.take_upstream_answer(&id, item) => changed = true,
            Kind::Response { .. } if era::input_required(item).is_some() => {
                if let Some(response) = era::input_required(item) {
                    input.push(response);
                }
                changed = true;
            }
            Kind::Response { id } if era::hides_roots(item) => {
                input.push(era::roots_refused(&id));
                changed = true;
            }
            Kind::Request { id, .. } if era::hides_roots(item) => {
                refusals.items.push(refusal(Some(&id), hidden_roots()));
                changed = true;
            }
            Kind::Notification { .. } if era::hides_roots(item) => changed = true,
            Kind::Request { .. } | Kind::Notification { .. } | Kind::Response { .. } => {
                append(&mut theirs, item)
            }
        }
    }
    if count == 0 {
        let empty = Error::new(ErrorKind::InvalidRequest, "empty batch");
        return Routed::refused(refusal(None, empty));
    }
    state.brokered.note_batch(&ids);
    let host_line = if !changed { Some(line) } else { close(theirs) };
    let lane = close(ours).map(|line| ForLane {
        line,
        ids,
        batch: true,
    });
    Routed {
        lane,
        host: host_line.into_iter().collect(),
        refusals,
        input,
    }
}

/// The proxy's answers to a batch refused in a protocol revision without batches.
pub(super) struct RefusedBatch {
    /// Errors for the sender's requests in it (or one with id null when it named none).
    pub(super) for_sender: Vec<Value>,
    /// Lines for the other side: an error for each of its requests whose answer came in the
    /// batch, so that it does not wait for an answer that will not come.
    pub(super) for_other_side: Vec<Vec<u8>>,
    /// Ids of the proxy's own requests answered in it (refused all the same).
    pub(super) ours: Vec<Value>,
}

/// Refuses a batch in `version`, a revision that has none: nothing of it is relayed or acted
/// on. Each request in it gets an error, one line each; each response in it becomes an
/// error for the request it answered; notifications are dropped.
/// `ours` tells the proxy's own request ids towards the sender (its consent questions to the
/// host, its retries to the server): answers to them are the proxy's, never the other side's.
pub(super) fn refuse_batch(
    line: &[u8],
    version: &str,
    ours: &dyn Fn(&Value) -> bool,
) -> RefusedBatch {
    tracing::warn!(%version, "refused a JSON-RPC batch: this protocol revision has none");
    let e = Error::new(
        ErrorKind::InvalidRequest,
        format!("protocol revision {version} has no JSON-RPC batches; send messages one by one"),
    );
    let mut out = RefusedBatch {
        for_sender: Vec::new(),
        for_other_side: Vec::new(),
        ours: Vec::new(),
    };
    for item in BatchItems::new(line).take(MAX_BATCH) {
        let Ok(item) = item else { break };
        match peek::peek(item) {
            Kind::Request { id, .. } => out.for_sender.push(refusal(Some(&id), e.clone())),
            Kind::Response { id } if ours(&id) => out.ours.push(id),
            Kind::Response { id } => {
                if let Ok(l) = serde_json::to_vec(&refusal(Some(&id), e.clone())) {
                    out.for_other_side.push(l);
                }
            }
            Kind::Other => {
                if let Some(id) = peek::refusal_id(item) {
                    out.for_sender.push(refusal(Some(&id), e.clone()));
                }
            }
            Kind::Notification { .. } | Kind::Batch => {}
        }
    }
    if out.for_sender.is_empty() && out.for_other_side.is_empty() && out.ours.is_empty() {
        out.for_sender.push(refusal(None, e));
    }
    out
}

/// Whether `message`, a notification with `method`, is the server's cancellation of one of
/// its brokered requests: the request is then stopped, and the notification is not the
/// host's (it never saw that id).
fn cancels_ours(method: &str, message: &[u8], state: &State) -> bool {
    method == "notifications/cancelled"
        && cancel::cancelled_id(message).is_some_and(|id| state.brokered.cancel(&id))
}

/// Adds one item, as written, to a batch being built (`[` and `,` included).
fn append(batch: &mut Vec<u8>, item: &[u8]) {
    batch.push(if batch.is_empty() { b'[' } else { b',' });
    batch.extend_from_slice(item);
}

/// Ends a batch being built; `None` when it has no item.
fn close(mut batch: Vec<u8>) -> Option<Vec<u8>> {
    if batch.is_empty() {
        return None;
    }
    batch.push(b']');
    Some(batch)
}

/// An error response of the proxy's own to the request `id` (null when unknown).
fn refusal(id: Option<&Value>, error: Error) -> Value {
    Response {
        id: id.and_then(Id::from_value),
        outcome: Err(error),
    }
    .to_json()
}

fn reserved_id() -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        "request id is reserved by the proxy",
    )
}

fn not_in_era(method: &str) -> Error {
    Error::new(
        ErrorKind::MethodNotFound,
        format!(
            "{method} is brokered only in a session that began with initialize (protocol revision 2025-11-25 or earlier)"
        ),
    )
}

fn hidden_roots() -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        "a roots/list input request is answered by the proxy, never relayed to the host",
    )
}

fn parse_error(message: &str) -> Error {
    Error::new(ErrorKind::ParseError, message)
}

/// The error for a message (a line or an item of a batch) that is not a JSON-RPC message we
/// can read: a parse error when it is not JSON we can read in full (a number out of range
/// included), and an invalid request when an object in it names a key twice or it is no
/// JSON-RPC message.
fn unreadable(message: &[u8]) -> Error {
    match serde_json::from_slice::<Value>(message) {
        Err(e) => parse_error(&format!(
            "parse error at line {} column {}",
            e.line(),
            e.column()
        )),
        Ok(_) if strict::has_duplicated_key(message) == Some(true) => Error::new(
            ErrorKind::InvalidRequest,
            "an object in the message names a key twice",
        ),
        Ok(_) => Error::new(ErrorKind::InvalidRequest, "not a json-rpc message"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::line_channel;
    use std::time::Duration;

    #[tokio::test]
    async fn the_host_still_gets_the_servers_lines_once_the_lane_has_stopped() {
        let (server_out, from_server) = line_channel(8, 1 << 20);
        let (host_tx, mut host_rx) = line_channel(8, 1 << 20);
        let host = Arc::new(HostChannel::new(host_tx));
        // The lane stopped: the session is ending.
        let (lane, lane_rx) = line_channel(8, 1 << 20);
        drop(lane_rx);
        let (to_server, _server_in) = line_channel(8, 1 << 20);
        let reader = tokio::spawn(read_server(
            from_server,
            host.clone(),
            host.sender(),
            Arc::new(State::new()),
            lane,
            to_server,
        ));
        // A brokered request, then the answer to one of the host's last requests.
        let roots = br#"{"jsonrpc":"2.0","id":"r","method":"roots/list"}"#;
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        for line in [roots.to_vec(), answer.to_vec()] {
            assert_eq!(server_out.send(line).await, Ok(()));
        }
        let got = tokio::time::timeout(Duration::from_secs(5), host_rx.recv()).await;
        assert_eq!(got.ok().flatten().as_deref(), Some(&answer[..]));
        reader.abort();
    }
}
