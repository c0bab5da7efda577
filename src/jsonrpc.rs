//! JSON-RPC 2.0 wire types and decoding. No I/O happens here.
//!
//! [`decode`] turns one line of bytes into a [`Message`]: a single item or a batch, each item a
//! request, a notification, a response (which the broker ignores) or an invalid item that must
//! be answered with an error. Decoding is bounded: lines over the limit are refused before
//! parsing, and serde_json's recursion limit refuses deep nesting without exhausting the stack.

use crate::error::{Error, ErrorKind};
use crate::json::Json;
use crate::method::Method;
use serde_json::{Map, Value, json};

/// Most items a batch may hold; a larger batch is refused whole with one `-32600`, so that a
/// line of tiny items cannot make the broker produce a response per item without bound.
pub(crate) const MAX_BATCH: usize = 1024;

/// A request id: a string or an integer, never null (kept as the peer sent it, to echo back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Id(Value);

impl Id {
    /// The number `n` as an id (for calls that build their own request).
    pub(crate) fn number(n: u64) -> Id {
        Id(Value::from(n))
    }

    /// Accepts a string or an integral number.
    pub(crate) fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(_) => Some(Id(v.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Id(v.clone())),
            _ => None,
        }
    }

    /// The id as JSON.
    pub(crate) fn as_value(&self) -> &Value {
        &self.0
    }
}

/// The notification by which a peer withdraws one of its requests.
pub(crate) const CANCELLED: &str = "notifications/cancelled";

/// The request a `notifications/cancelled` with `params` names, when it names one the way
/// JSON-RPC ids are written (a string or an integer).
pub(crate) fn cancelled_request(params: &Value) -> Option<&Value> {
    params
        .get("requestId")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
}

/// The one key of a request id as a peer wrote it, for the maps that find what was sent
/// under it: its JSON text, which tells `1` from `"1"` (and, for a peer that breaks the
/// rules, any other value from both).
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The keys `id` may stand for in a peer that reads ids loosely: an integral number
/// (`1.0`, `1e0`) is that integer, and a string of digits (`"1"`) may be taken for it too
/// (the TypeScript SDK matches answers with `Number(id)`).
pub(crate) fn id_forms(id: &Value) -> Vec<String> {
    let mut forms = vec![id_key(id)];
    let integral = match id {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    if let Some(i) = integral {
        forms.push(i.to_string());
        forms.push(Value::String(i.to_string()).to_string());
    }
    forms
}

/// Whether a peer that reads ids loosely may take `a` and `b` for the same id.
pub(crate) fn loosely_same(a: &Value, b: &Value) -> bool {
    let forms = id_forms(b);
    id_forms(a).iter().any(|f| forms.contains(f))
}

/// The error response to the request `id` as a peer wrote it (null when unknown, or when it
/// is no string or integer): how the proxy answers a message itself.
pub(crate) fn refusal(id: Option<&Value>, error: Error) -> Value {
    Response {
        id: id.and_then(Id::from_value),
        outcome: Err(error),
    }
    .to_json()
}

/// A request: it has an id and expects one response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// The id to answer with.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// The method, when the broker answers it: parsed once, as the line is decoded, and
    /// read from here by the orderer, the rate limit and the dispatch.
    pub known: Option<Method>,
    /// The params: an object, or `Null` when absent. Arrays are passed on for the method to
    /// refuse with `-32602`.
    pub params: Value,
}

impl Request {
    /// A request for `method`, as a host's typed call makes it.
    pub(crate) fn new(id: Id, method: Method, params: Value) -> Request {
        Request {
            id,
            method: method.name().to_owned(),
            known: Some(method),
            params,
        }
    }

    /// Whether the request changes what later requests see ([`Method::is_ordered`]); a
    /// method the broker does not know changes nothing.
    pub(crate) fn is_ordered(&self) -> bool {
        self.known.is_some_and(Method::is_ordered)
    }
}

/// A notification: no id, no response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notification {
    /// The method name.
    pub method: String,
    /// The params, or `Null` when absent.
    pub params: Value,
}

/// One item of a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
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
pub(crate) enum Message {
    /// A single item.
    Single(Item),
    /// A batch (non-empty array).
    Batch(Vec<Item>),
}

impl Message {
    /// Whether the message holds a change (a request that [`Request::is_ordered`]): a batch
    /// holding one is one change. Notifications change nothing (the broker ignores them).
    pub(crate) fn is_ordered(&self) -> bool {
        let items: &[Item] = match self {
            Message::Single(item) => std::slice::from_ref(item),
            Message::Batch(items) => items,
        };
        items
            .iter()
            .any(|i| matches!(i, Item::Request(r) if r.is_ordered()))
    }
}

/// A response to send: the id (null when the request's id could not be read) and the result,
/// already encoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    /// The id being answered.
    pub id: Option<Id>,
    /// The result or the error.
    pub outcome: Result<Json, Error>,
}

impl Response {
    /// The response as a JSON object (for the faces that hand a host JSON values). A result
    /// that cannot be read back, which the encoders never make, is answered as an internal
    /// error rather than passed on.
    pub(crate) fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert(
            "id".into(),
            self.id.as_ref().map_or(Value::Null, |i| i.0.clone()),
        );
        match self.outcome.as_ref().map(Json::decode::<Value>) {
            Ok(Ok(v)) => obj.insert("result".into(), v),
            Ok(Err(e)) => obj.insert("error".into(), e.to_json()),
            Err(e) => obj.insert("error".into(), e.to_json()),
        };
        Value::Object(obj)
    }

    /// The response line (without its newline). The result's text is never parsed again:
    /// when it was written behind this line's head ([`result_head`]) the line is its own
    /// buffer, else it is copied in. The keys come in the order a JSON object of them is
    /// written (`error`, `id`, `jsonrpc`, `result`), as they always have.
    pub(crate) fn encode(self) -> Vec<u8> {
        match self.outcome {
            Ok(result) => {
                let head = result_head(self.id.as_ref());
                let mut line = match result.into_line(&head) {
                    Ok(line) => line,
                    Err(result) => {
                        let mut line = head;
                        line.reserve(result.as_bytes().len() + 1);
                        line.extend_from_slice(result.as_bytes());
                        line
                    }
                };
                line.push(b'}');
                line
            }
            Err(e) => {
                let mut out = Vec::with_capacity(256);
                out.extend_from_slice(b"{\"error\":");
                crate::json::write_value(&mut out, &e.to_json());
                out.extend_from_slice(b",\"id\":");
                crate::json::write_value(&mut out, self.id.as_ref().map_or(&Value::Null, |i| &i.0));
                out.extend_from_slice(b",\"jsonrpc\":\"2.0\"}");
                out
            }
        }
    }
}

/// How the line that answers `id` with a result starts, up to the result itself: a result
/// written behind it ([`crate::json::Object::after`]) becomes the line without a copy.
pub(crate) fn result_head(id: Option<&Id>) -> Vec<u8> {
    let mut head = Vec::with_capacity(64);
    head.extend_from_slice(b"{\"id\":");
    crate::json::write_value(&mut head, id.map_or(&Value::Null, |i| &i.0));
    head.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
    head
}

/// Decodes one line (without its newline). Errors are the single response to send.
pub(crate) fn decode(line: &[u8], max_len: usize) -> Result<Message, Box<Response>> {
    if line.len() > max_len {
        return Err(Box::new(too_long(max_len)));
    }
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        let msg = if e.to_string().contains("recursion limit") {
            "message is nested too deeply".to_owned()
        } else {
            format!("parse error at line {} column {}", e.line(), e.column())
        };
        Box::new(error_response(Error::new(ErrorKind::ParseError, msg)))
    })?;
    Ok(decode_value(value))
}

/// Decodes an already parsed JSON value.
pub(crate) fn decode_value(value: Value) -> Message {
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
pub(crate) fn too_long(max_len: usize) -> Response {
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
            Some(id) => Item::Request(Request {
                id,
                known: Method::parse(&method),
                method,
                params,
            }),
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

    #[test]
    fn a_response_line_is_its_json_object_written_out() {
        let ids = [None, Some(json!(7)), Some(json!("a\"b")), Some(json!(-3))];
        let results = [json!({}), json!({"x": [1, "y\n"], "b": null}), json!("s")];
        for id in &ids {
            let id = id.as_ref().and_then(Id::from_value);
            for r in &results {
                let resp = Response {
                    id: id.clone(),
                    outcome: Ok(Json::of(r).unwrap()),
                };
                assert_eq!(
                    resp.clone().encode(),
                    serde_json::to_vec(&resp.to_json()).unwrap()
                );
                assert_eq!(resp.to_json()["result"], *r);
                // Written behind its line's head, the same result makes the same line.
                let mut o = crate::json::Object::after(result_head(id.as_ref()), 0);
                for (k, v) in r.as_object().into_iter().flatten() {
                    match (k.as_str(), v) {
                        ("x", _) => o.u64("x", 1),
                        (_, _) => o.opt_str("b", None),
                    }
                }
                let behind = Response {
                    id: id.clone(),
                    outcome: Ok(o.finish()),
                };
                assert_eq!(
                    behind.clone().encode(),
                    serde_json::to_vec(&behind.to_json()).unwrap()
                );
            }
            let resp = Response {
                id: id.clone(),
                outcome: Err(Error::new(ErrorKind::FileNotFound, "no \"such\" file")),
            };
            assert_eq!(
                resp.clone().encode(),
                serde_json::to_vec(&resp.to_json()).unwrap()
            );
            assert!(resp.to_json()["error"]["code"].is_i64());
        }
    }
}
