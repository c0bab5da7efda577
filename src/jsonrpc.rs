//! JSON-RPC 2.0 wire types and decoding. No I/O happens here.
//!
//! [`decode`] turns one line of bytes into a [`Message`]: a single item or a batch, each item a
//! request, a notification, a response (which the broker ignores) or an invalid item that must
//! be answered with an error. Decoding is bounded: lines over the limit are refused before
//! parsing, and serde_json's recursion limit refuses deep nesting without exhausting the stack.

use crate::error::{Error, ErrorKind};
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

/// A response to send: the id (null when the request's id could not be read) and the result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    /// The id being answered.
    pub id: Option<Id>,
    /// The result or the error.
    pub outcome: Result<Value, Error>,
}

impl Response {
    /// The response as a JSON object.
    pub(crate) fn to_json(&self) -> Value {
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

    /// The response as a JSON object, moving the result into it rather than copying it (a
    /// read's result holds up to a whole chunk of content).
    pub(crate) fn into_json(self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), self.id.map_or(Value::Null, |i| i.0));
        match self.outcome {
            Ok(v) => obj.insert("result".into(), v),
            Err(e) => obj.insert("error".into(), e.to_json()),
        };
        Value::Object(obj)
    }
}

/// Serializes `value` to exactly the bytes `serde_json::to_vec` gives, faster for the long
/// strings of `files/read`: a string that needs no escaping (base64 never does, text rarely)
/// is found so eight bytes at a time and copied whole, and the buffer is sized up front, so a
/// chunk is not scanned byte by byte and reallocated as it grows.
pub(crate) fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint(value, 3));
    write_value(&mut out, value);
    out
}

/// About how many bytes `value` takes, looking `depth` levels down.
fn size_hint(value: &Value, depth: u8) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Object(m) if depth > 0 => {
            let inner: usize = m
                .iter()
                .map(|(k, v)| k.len() + 4 + size_hint(v, depth - 1))
                .sum();
            inner + 2
        }
        Value::Array(a) if depth > 0 => a.iter().map(|v| size_hint(v, depth - 1) + 1).sum(),
        Value::Object(m) => 64 * m.len(),
        Value::Array(a) => 64 * a.len(),
        _ => 24,
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing to a Vec cannot fail, nor can serializing a number.
        Value::Number(n) => drop(serde_json::to_writer(&mut *out, n)),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_value(out, v);
            }
            out.push(b'}');
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        drop(serde_json::to_writer(&mut *out, s));
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Whether JSON needs an escape in `bytes`: a control character, a quote or a backslash
/// (serde_json escapes nothing else). Blocks of 64 bytes are folded without an early exit,
/// which the compiler turns into vector instructions; only the block result is branched on.
fn needs_escape(bytes: &[u8]) -> bool {
    let bad = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let mut blocks = bytes.chunks_exact(64);
    for block in &mut blocks {
        if block.iter().fold(false, |acc, &b| acc | bad(b)) {
            return true;
        }
    }
    blocks.remainder().iter().any(|&b| bad(b))
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
    fn encode_is_serde_json() {
        let long = "QUJD".repeat(1000);
        let mut tricky: Vec<String> = vec![
            String::new(),
            "plain".into(),
            long.clone(),
            format!("{long}\"{long}"),
            format!("{long}\\"),
            "\u{7f}\u{80}é漢字🎉 and \u{1f}".into(),
            "\n\r\t\u{0}\u{8}\u{c}".into(),
        ];
        // Every byte that needs an escape, at every position of an eight-byte word.
        for b in (0u8..0x20).chain([b'"', b'\\']) {
            for at in 0..9 {
                let mut v = vec![b'a'; 9];
                v[at] = b;
                tricky.push(String::from_utf8(v).unwrap());
            }
        }
        for s in tricky {
            let v =
                json!({"id": 1, "result": {"content": s, "n": [1.5, -2, u64::MAX, null, true]}});
            assert_eq!(encode(&v), serde_json::to_vec(&v).unwrap(), "{s:?}");
        }
        let list = json!([{"a": {"b": [{"c": "d"}, [], {}]}}, "x\u{1}y", false, 0.1]);
        assert_eq!(encode(&list), serde_json::to_vec(&list).unwrap());
    }
}
