//! The proxy's decisions, one function per direction: [`server::judge`] says what becomes of
//! one message the server sent, [`host::judge`] of one the host sent. A single line is one
//! message and each item of a batch is one, judged by the same function; a batch is cut into
//! its items once ([`read`]), and what a batch as a whole becomes (refused in a revision
//! without batches, refused for an item that must be judged alone) is decided here too, once.
//!
//! Nothing here does IO, spawns a task or waits: a judgement reads and notes what the session
//! knows, and says where the message goes. The readers (`from_server`, `from_host`) frame
//! lines, ask here, and send what the verdict says. Every refusal is an [`Error`], so its
//! code comes from the one error table.

pub(super) mod host;
pub(super) mod server;
#[cfg(test)]
mod tests;

use super::peek::{self, Kind};
use super::strict::BatchItems;
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::MAX_BATCH;
pub(super) use crate::jsonrpc::refusal;
use serde_json::Value;

/// A batch line, cut into its items.
pub(super) struct Batch<'a> {
    /// The items as written and what each is (at most [`MAX_BATCH`] of them).
    pub(super) items: Vec<(&'a [u8], Kind)>,
    /// Why it could not be read in full, if it could not.
    pub(super) fault: Option<Fault>,
}

/// Why a batch could not be read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// It is not an array of JSON values we can cut out.
    NotAnArray,
    /// It has more than [`MAX_BATCH`] items.
    TooLong,
}

impl Fault {
    /// The error that refuses the batch `line` for this fault.
    pub(super) fn error(self, line: &[u8]) -> Error {
        match self {
            Fault::NotAnArray => unreadable(line),
            Fault::TooLong => Error::new(
                ErrorKind::InvalidRequest,
                format!("batch has more than {MAX_BATCH} items"),
            ),
        }
    }
}

/// Cuts a batch `line` into its items once, each classified as a single line is. Reading
/// stops at the first item that cannot be cut out and past [`MAX_BATCH`] items, so what a
/// batch costs is bounded whatever its length.
pub(super) fn read_batch(line: &[u8]) -> Batch<'_> {
    let mut items = Vec::new();
    let mut fault = None;
    for item in BatchItems::new(line) {
        let Ok(item) = item else {
            fault = Some(Fault::NotAnArray);
            break;
        };
        if items.len() == MAX_BATCH {
            fault = Some(Fault::TooLong);
            break;
        }
        items.push((item, peek::peek(item)));
    }
    Batch { items, fault }
}

/// The answers to a batch refused whole, for both directions.
pub(super) struct RefusedBatch {
    /// Errors for the sender's requests in it (or one with id null when it named none).
    pub(super) for_sender: Vec<Value>,
    /// Lines for the other side: an error for each of its requests whose answer came in the
    /// batch, so that it does not wait for an answer that will not come.
    pub(super) for_other_side: Vec<Vec<u8>>,
    /// Ids of the proxy's own requests answered in it (refused all the same).
    pub(super) ours: Vec<Value>,
}

/// Refuses a batch whole with `error`: nothing of it is relayed or acted on. Each request in
/// it gets `error`; each response in it becomes `error` for the request it answered (the
/// other side's, or the proxy's own when `ours` says so); notifications are dropped.
pub(super) fn refuse_batch(
    items: &[(&[u8], Kind)],
    error: &Error,
    ours: &dyn Fn(&Value) -> bool,
) -> RefusedBatch {
    let mut out = RefusedBatch {
        for_sender: Vec::new(),
        for_other_side: Vec::new(),
        ours: Vec::new(),
    };
    for (item, kind) in items {
        match kind {
            Kind::Request { id, .. } => out.for_sender.push(refusal(Some(id), error.clone())),
            Kind::Response { id } if ours(id) => out.ours.push(id.clone()),
            Kind::Response { id } => {
                if let Ok(l) = serde_json::to_vec(&refusal(Some(id), error.clone())) {
                    out.for_other_side.push(l);
                }
            }
            Kind::Other => {
                if let Some(id) = peek::refusal_id(item) {
                    out.for_sender.push(refusal(Some(&id), error.clone()));
                }
            }
            Kind::Notification { .. } | Kind::Batch => {}
        }
    }
    if out.for_sender.is_empty() && out.for_other_side.is_empty() && out.ours.is_empty() {
        out.for_sender.push(refusal(None, error.clone()));
    }
    out
}

/// The refusal of a batch in `version`, a protocol revision without batches.
pub(super) fn no_batches(version: &str) -> Error {
    tracing::warn!(%version, "refused a JSON-RPC batch: this protocol revision has none");
    Error::new(
        ErrorKind::InvalidRequest,
        format!("protocol revision {version} has no JSON-RPC batches; send messages one by one"),
    )
}

/// The error for a message (a line or an item of a batch) that is not a JSON-RPC message we
/// can read: a parse error when it is not JSON we can read in full (a number out of range
/// included), and an invalid request when an object in it names a key twice or it is no
/// JSON-RPC message.
pub(super) fn unreadable(message: &[u8]) -> Error {
    match serde_json::from_slice::<Value>(message) {
        Err(e) => Error::new(
            ErrorKind::ParseError,
            format!("parse error at line {} column {}", e.line(), e.column()),
        ),
        Ok(_) if super::strict::has_duplicated_key(message) == Some(true) => Error::new(
            ErrorKind::InvalidRequest,
            "an object in the message names a key twice",
        ),
        Ok(_) => Error::new(ErrorKind::InvalidRequest, "not a json-rpc message"),
    }
}

/// Adds one item, as written, to a batch being built (`[` and `,` included).
pub(super) fn append(batch: &mut Vec<u8>, item: &[u8]) {
    batch.push(if batch.is_empty() { b'[' } else { b',' });
    batch.extend_from_slice(item);
}

/// Ends a batch being built; `None` when it has no item.
pub(super) fn close(mut batch: Vec<u8>) -> Option<Vec<u8>> {
    if batch.is_empty() {
        return None;
    }
    batch.push(b']');
    Some(batch)
}

/// The lines that answer the sender: one array when `batch`, else one line per answer.
pub(super) fn encode(items: Vec<Value>, batch: bool) -> Vec<Vec<u8>> {
    if items.is_empty() {
        return Vec::new();
    }
    if batch {
        return serde_json::to_vec(&Value::Array(items))
            .ok()
            .into_iter()
            .collect();
    }
    items
        .iter()
        .filter_map(|v| serde_json::to_vec(v).ok())
        .collect()
}
