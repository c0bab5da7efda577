//! JSON-RPC 2.0 wire types and decoding. No I/O happens here.
//!
//! [`decode`] turns one line of bytes into a [`Message`]: a single item or a batch, each item a
//! request, a notification, a response (which the broker ignores) or an invalid item that must
//! be answered with an error. Decoding is bounded: lines over the limit are refused before
//! parsing, and serde_json's recursion limit refuses deep nesting without exhausting the stack.

use crate::error::{Error, ErrorKind};
use serde_json::{Map, Value, json};

/// Most items a batch may hold; a larger batch is refused whole with one `-32600`, so that a
/// line of tiny items cannot make the broker produce a response per item without bound.
pub const MAX_BATCH: usize = 1024;

/// A request id: a string or an integer, never null (kept as the peer sent it, to echo back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id(Value);

impl Id {
    /// Accepts a string or an integral number.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(_) => Some(Id(v.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Id(v.clone())),
            _ => None,
        }
    }

    /// The id as JSON.
    pub fn as_value(&self) -> &Value {
        &self.0
    }
}

/// A request: it has an id and expects one response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id to answer with.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// The params: an object, or `Null` when absent. Arrays are passed on for the method to
    /// refuse with `-32602`.
    pub params: Value,
}

/// A notification: no id, no response.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params, or `Null` when absent.
    pub params: Value,
}

/// One item of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A request to answer.
    Request(Request),
    /// A notification to act on without answering.
    Notification(Notification),
    /// A response from the peer to a request of ours; the broker sends none yet, so it is
    /// dropped.
    Response(Value),
    /// An item that is not valid JSON-RPC: answered with this error (id null when the item
    /// had no usable id).
    Invalid(Option<Id>, Error),
}

/// One decoded line.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A single item.
    Single(Item),
    /// A batch (non-empty array).
    Batch(Vec<Item>),
}

impl Message {
    /// The method names of the requests and notifications in the message.
    pub fn methods(&self) -> impl Iterator<Item = &str> {
        let items: &[Item] = match self {
            Message::Single(item) => std::slice::from_ref(item),
            Message::Batch(items) => items,
        };
        items.iter().filter_map(|i| match i {
            Item::Request(r) => Some(r.method.as_str()),
            Item::Notification(n) => Some(n.method.as_str()),
            _ => None,
        })
    }
}

/// A response to send: the id (null when the request's id could not be read) and the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id being answered.
    pub id: Option<Id>,
    /// The result or the error.
    pub outcome: Result<Value, Error>,
}

impl Response {
    /// The response as a JSON object.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert(
            "id".into(),
            self.id.as_ref().map_or(Value::Null, |i| i.0.clone()),
        );
        match &self.outcome {
            Ok(v) => obj.insert("result".into(), v.clone()),
            Err(e) => obj.insert("error".into(), e.to_json()),
        };
        Value::Object(obj)
    }
}

/// Decodes one line (without its newline). Errors are the single response to send.
pub fn decode(line: &[u8], max_len: usize) -> Result<Message, Response> {
    if line.len() > max_len {
        return Err(too_long(max_len));
    }
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        let msg = if e.to_string().contains("recursion limit") {
            "message is nested too deeply".to_owned()
        } else {
            format!("parse error at line {} column {}", e.line(), e.column())
        };
        error_response(Error::new(ErrorKind::ParseError, msg))
    })?;
    Ok(decode_value(value))
}

/// Decodes an already parsed JSON value.
pub fn decode_value(value: Value) -> Message {
    match value {
        Value::Array(items) if items.is_empty() => Message::Single(Item::Invalid(
            None,
            Error::new(ErrorKind::InvalidRequest, "empty batch"),
        )),
        Value::Array(items) if items.len() > MAX_BATCH => Message::Single(Item::Invalid(
            None,
            Error::new(
                ErrorKind::InvalidRequest,
                format!("batch has more than {MAX_BATCH} items"),
            ),
        )),
        Value::Array(items) => Message::Batch(items.into_iter().map(decode_item).collect()),
        other => Message::Single(decode_item(other)),
    }
}

/// The response to a line longer than `max_len` bytes, which is skipped unread.
pub fn too_long(max_len: usize) -> Response {
    error_response(Error::new(
        ErrorKind::InvalidRequest,
        format!("message is longer than the limit of {max_len} bytes"),
    ))
}

fn error_response(e: Error) -> Response {
    Response {
        id: None,
        outcome: Err(e),
    }
}

fn decode_item(value: Value) -> Item {
    let Value::Object(mut obj) = value else {
        return invalid(None, "message must be a json object");
    };
    let id = match obj.get("id") {
        None => None,
        Some(v) => match Id::from_value(v) {
            Some(id) => Some(id),
            None => return invalid(None, "id must be a string or an integer"),
        },
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid(id, "jsonrpc must be \"2.0\"");
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    if !matches!(params, Value::Null | Value::Object(_) | Value::Array(_)) {
        return invalid(id, "params must be an object or an array");
    }
    match obj.remove("method") {
        Some(Value::String(method)) => match id {
            Some(id) => Item::Request(Request { id, method, params }),
            None => Item::Notification(Notification { method, params }),
        },
        Some(_) => invalid(id, "method must be a string"),
        None if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) => {
            Item::Response(Value::Object(obj))
        }
        None => invalid(id, "message has no method"),
    }
}

fn invalid(id: Option<Id>, msg: &str) -> Item {
    Item::Invalid(id, Error::new(ErrorKind::InvalidRequest, msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_shapes() {
        let m = decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 100).unwrap();
        assert!(matches!(m, Message::Single(Item::Request(ref r)) if r.method == "ping"));
        let m = decode(br#"{"jsonrpc":"2.0","method":"x"}"#, 100).unwrap();
        assert!(matches!(m, Message::Single(Item::Notification(_))));
        let m = decode(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, 100).unwrap();
        assert!(matches!(m, Message::Single(Item::Invalid(None, _))));
        let m = decode(br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, 100).unwrap();
        assert!(matches!(m, Message::Single(Item::Invalid(None, _))));
        let m = decode(br#"[1,{"jsonrpc":"2.0","id":"a","method":"x"}]"#, 100).unwrap();
        assert!(matches!(m, Message::Batch(ref v) if v.len() == 2));
        assert!(decode(b"{", 100).is_err());
        assert!(decode(&[b' '; 101], 100).is_err());
        let deep = "[".repeat(10_000);
        assert!(decode(deep.as_bytes(), 100_000).is_err());
    }
}
