//! A cheap look at a relayed line, or at one item of a batch: is it a request, a notification
//! or a response, with which method and id. The rest of the message is read in full but kept
//! as nothing (see [`super::strict`]), so relaying a large tool result costs one pass and no
//! tree of values.

use super::strict;
use serde_json::Value;

/// What a relayed line is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A request (it has a method and an id).
    Request {
        /// The method.
        method: String,
        /// The id, as sent.
        id: Value,
    },
    /// A notification (a method, no id).
    Notification {
        /// The method.
        method: String,
    },
    /// A response (an id, no method).
    Response {
        /// The id being answered.
        id: Value,
    },
    /// A batch (a JSON array): looked at item by item when it matters.
    Batch,
    /// Not JSON-RPC we understand: relayed as it is, for the other side to judge.
    Other,
}

/// Classifies one line, or one item of a batch (the same reader judges both).
pub(crate) fn peek(line: &[u8]) -> Kind {
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return Kind::Batch;
    }
    match strict::read(line) {
        Ok(e) if !e.duplicated => classify(e.method, e.id),
        // Not JSON we read exactly, or a key named twice in some object (parsers differ on
        // which of the two counts): `Other`, which the proxy never relays from a server to
        // its host.
        Ok(_) | Err(_) => Kind::Other,
    }
}

/// The kinds of a batch's items, each judged as a single line is; empty when the line is not
/// a batch we can read.
pub(crate) fn batch_kinds(line: &[u8]) -> Vec<Kind> {
    strict::BatchItems::new(line)
        .map(|item| item.map(peek))
        .collect::<Result<Vec<Kind>, _>>()
        .unwrap_or_default()
}

/// The id to answer a refused message with: its `id` when the message is exact JSON naming
/// `id` once, whatever else is wrong with it (an id named twice is none).
pub(super) fn refusal_id(line: &[u8]) -> Option<Value> {
    strict::read(line).ok().and_then(|e| e.id)
}

fn classify(method: Option<String>, id: Option<Value>) -> Kind {
    match (method, id) {
        (Some(method), Some(id)) if !id.is_null() => Kind::Request { method, id },
        (Some(method), _) => Kind::Notification { method },
        (None, Some(id)) => Kind::Response { id },
        (None, None) => Kind::Other,
    }
}

/// Whether `line` may contain `needle` once decoded: it does as written, or it has an escape
/// that could spell it otherwise. Cheap, so only such lines are parsed.
pub(crate) fn mentions(line: &[u8], needle: &[u8]) -> bool {
    line.windows(needle.len()).any(|w| w == needle)
        || line.windows(2).any(|w| w == b"\\u" || w == b"\\/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(
            peek(br#"{"jsonrpc":"2.0","id":1,"method":"files/read","params":{"path":"a"}}"#),
            Kind::Request {
                method: "files/read".into(),
                id: 1.into()
            }
        );
        assert_eq!(
            peek(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Kind::Notification {
                method: "notifications/initialized".into()
            }
        );
        assert_eq!(
            peek(br#"{"jsonrpc":"2.0","id":"x","result":{"big":[1,2,3]}}"#),
            Kind::Response { id: "x".into() }
        );
        assert_eq!(peek(b" [{}]"), Kind::Batch);
        assert_eq!(peek(b"not json"), Kind::Other);
        assert_eq!(peek(br#"{"method":7}"#), Kind::Other);
        assert_eq!(
            peek(br#"{"id":1,"method":"ping","method":"files/read"}"#),
            Kind::Other
        );
        assert_eq!(
            peek(br#"{"id":1,"method":"ping","params":{"a":{"b":1,"b":2}}}"#),
            Kind::Other
        );
        assert_eq!(
            refusal_id(br#"{"id":1,"method":"ping","method":"files/read"}"#),
            Some(1.into())
        );
        assert_eq!(refusal_id(br#"{"id":1,"method":"a","id":2}"#), None);
    }
}
