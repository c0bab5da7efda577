//! Answering a batch within the line limit.
//!
//! A batch's items run one after another and are answered as one array. That array is built
//! as a line of bytes, each answer encoded as soon as its item is done, and never grows past
//! the line limit (`limits.max_line_bytes`): once an item's answer would not fit, it and every
//! item after it are answered `QUOTA_EXCEEDED` instead, and the items after it are not run.
//! So a batch holds no more memory than one maximal line and one answer in the making, like a
//! single request, however many large reads it asks for.

use super::Broker;
use super::running::Seat;
use crate::error::Error;
use crate::jsonrpc::{Id, Item, Response};

/// Room kept in a batch's line for the error answering each item still to come, beyond the
/// item's id: every error the broker answers an item with, unrun, is shorter (a unit test
/// checks it). So the errors always fit.
const ERROR_ROOM: usize = 256;

/// Room a change (`files/consent`, a write, create, delete, rename, watch) needs left in the
/// line before it runs, so that a change that was made is answered with its result and not
/// with an error for want of room: the answer to a change is far shorter (the longest, to a
/// consent for 64 paths, is under 600 KiB).
const CHANGE_ROOM: usize = 1 << 20;

/// The room to keep for the answer to `item` should it not run: its id and [`ERROR_ROOM`];
/// nothing for an item that gets no answer.
fn error_room(item: &Item) -> usize {
    let id = match item {
        Item::Request(r) => Some(&r.id),
        Item::Invalid(id, _) => id.as_ref(),
        Item::Notification(_) | Item::Response(_) => return 0,
    };
    ERROR_ROOM + id.map_or(4, |id| crate::json::encode(id.as_value()).len())
}

/// The error for a request of a batch that was not run: the answers before it filled the line.
fn not_run(limit: usize) -> Error {
    Error::quota(
        "not run: the batch's answer reached the line limit; send this request again",
        limit as u64,
    )
}

/// The error for a request of a batch whose answer did not fit in the line that is left.
fn did_not_fit(limit: usize) -> Error {
    Error::quota(
        "the answer does not fit in what is left of the batch's line; send this request alone",
        limit as u64,
    )
}

fn error_line(id: Id, e: Error) -> Vec<u8> {
    Response {
        id: Some(id),
        outcome: Err(e),
    }
    .encode()
}

impl Broker {
    /// Answers a batch's items in order as one line of at most the line limit (see the module
    /// documentation); `None` when no item calls for an answer.
    pub(super) async fn answer_batch(&self, seat: &Seat, items: Vec<Item>) -> Option<Vec<u8>> {
        let limit = self.inner.config().policy.limits.max_line_bytes.get();
        let change_room = CHANGE_ROOM.min(limit / 2);
        // Room kept for the errors of the items after the one at hand. If the ids alone fill
        // the line, every request is answered with an error: the line then echoes the ids,
        // no longer than the batch that sent them plus ERROR_ROOM per item.
        let mut kept: usize = items.iter().map(error_room).sum();
        let mut line = vec![b'['];
        let mut full = false;
        for item in items {
            kept = kept.saturating_sub(error_room(&item));
            let answer = match item {
                Item::Request(req) => {
                    // What this answer may take: all but the comma before it, the closing
                    // bracket, and the room kept for the items after it.
                    let room = limit.saturating_sub(line.len() + 2 + kept);
                    let needed = if req.is_ordered() { change_room } else { 0 };
                    if full || room < needed {
                        full = true;
                        Some(error_line(req.id, not_run(limit)))
                    } else {
                        let id = req.id.clone();
                        let encoded = self.handle_request(seat, req).await.encode();
                        if encoded.len() <= room {
                            Some(encoded)
                        } else {
                            full = true;
                            Some(error_line(id, did_not_fit(limit)))
                        }
                    }
                }
                other => self.handle_item(seat, other).await.map(|r| r.encode()),
            };
            if let Some(a) = answer {
                if line.len() > 1 {
                    line.push(b',');
                }
                line.extend_from_slice(&a);
            }
        }
        if line.len() == 1 {
            return None;
        }
        line.push(b']');
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn errors_for_unrun_items_fit_their_room() {
        let limit = 1usize << 30;
        let id = Id::from_value(&serde_json::json!("x")).unwrap();
        let errors = [
            not_run(limit),
            did_not_fit(limit),
            Error::new(
                ErrorKind::InvalidRequest,
                "params must be an object or an array",
            ),
            Error::new(
                ErrorKind::InvalidRequest,
                "id must be a string or an integer",
            ),
        ];
        for e in errors {
            let line = error_line(id.clone(), e);
            // The comma before it included; `"x"` is three bytes of id.
            assert!(
                line.len() < ERROR_ROOM + 3,
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }
}
