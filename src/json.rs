//! JSON text written once. A result goes from its typed value straight to the bytes of the
//! response line, never through a `serde_json::Value` tree: building, copying and freeing such
//! a tree was a third of a listing's time, and a read's content was copied twice on its way
//! out. The two results that carry bulk (a read's content, a listing's entries) are written
//! by hand with [`Object`], whose keys are the wire's and whose values are escaped as JSON
//! asks, so what it makes is always one JSON object.

use crate::error::{Error, ErrorKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One JSON value as text, ready to go into a response line as it is.
///
/// Made only by [`Json::of`] (serde) or [`Object::finish`], so it always holds exactly one
/// complete JSON value. An object may have been written after the head of the line it is to
/// go out in ([`Object::after`]), so that the line is this very buffer, not a copy of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Json {
    text: Vec<u8>,
    /// Where the value starts in `text`: after the head it was written behind, if any.
    start: usize,
}

impl Json {
    /// `value` encoded by its `Serialize`. Encoding the wire's types cannot fail, but should
    /// it ever, the request is answered with an internal error rather than a panic.
    pub(crate) fn of<T: Serialize>(value: &T) -> Result<Json, Error> {
        let mut out = Vec::with_capacity(128);
        serde_json::to_writer(&mut out, value).map_err(|e| {
            tracing::error!(error = %e, "cannot encode a result");
            Error::new(ErrorKind::Internal, "cannot encode the result")
        })?;
        Ok(Json {
            text: out,
            start: 0,
        })
    }

    /// The text of the value.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.text.get(self.start..).unwrap_or_default()
    }

    /// The whole buffer, when the value was written after exactly `head`: the line that
    /// `head` starts, as far as the value's end. Otherwise the value is given back.
    pub(crate) fn into_line(self, head: &[u8]) -> Result<Vec<u8>, Json> {
        if self.start > 0 && self.text.get(..self.start) == Some(head) {
            Ok(self.text)
        } else {
            Err(self)
        }
    }

    /// The value as a typed result (a host's typed call), or as a tree (the faces that hand
    /// JSON values to a host).
    pub(crate) fn decode<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(self.as_bytes()).map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("cannot decode the result: {e}"),
            )
        })
    }
}

/// A JSON object written field by field into one buffer.
///
/// Keys are `&'static str` from this crate: the wire's names, which need no escape. Values
/// are numbers, booleans, null, strings escaped as JSON asks, or base64 (whose alphabet needs
/// no escape), so every object finished is valid JSON.
pub(crate) struct Object {
    out: Vec<u8>,
    start: usize,
    first: bool,
}

/// Room kept beyond what a field needs, for the bytes that close the object and its line:
/// so they do not make the buffer move.
const SLACK: usize = 16;

impl Object {
    /// An empty object, its buffer sized for about `capacity` bytes.
    #[cfg(test)]
    pub(crate) fn with_capacity(capacity: usize) -> Object {
        Object::after(Vec::new(), capacity)
    }

    /// An empty object written after `head` (a response line's start), in `head`'s buffer,
    /// sized for about `capacity` bytes more (see [`Json::into_line`]).
    pub(crate) fn after(mut head: Vec<u8>, capacity: usize) -> Object {
        head.reserve(capacity.saturating_add(SLACK));
        let start = head.len();
        head.push(b'{');
        Object {
            out: head,
            start,
            first: true,
        }
    }

    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        &mut self.out
    }

    /// A string field.
    pub(crate) fn str(&mut self, key: &'static str, value: &str) {
        write_str(self.key(key), value);
    }

    /// A string field, or null.
    pub(crate) fn opt_str(&mut self, key: &'static str, value: Option<&str>) {
        match value {
            Some(v) => self.str(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    /// An unsigned number field.
    pub(crate) fn u64(&mut self, key: &'static str, value: u64) {
        // Writing to a Vec cannot fail, nor can serializing a number.
        drop(serde_json::to_writer(self.key(key), &value));
    }

    /// A boolean field.
    pub(crate) fn bool(&mut self, key: &'static str, value: bool) {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    /// `bytes` as a string field in standard base64 with padding, encoded straight into the
    /// buffer.
    pub(crate) fn base64(&mut self, key: &'static str, bytes: &[u8]) {
        let out = self.key(key);
        out.reserve(base64_simd::STANDARD.encoded_length(bytes.len()) + SLACK);
        out.push(b'"');
        base64_simd::STANDARD.encode_append(bytes, out);
        out.push(b'"');
    }

    /// Opens an array field whose items are objects, written in place by [`Items::push`];
    /// [`Items::close`] gives the object back.
    pub(crate) fn items(mut self, key: &'static str) -> Items {
        self.key(key).push(b'[');
        Items {
            object: self,
            count: 0,
        }
    }

    /// The object, closed.
    pub(crate) fn finish(mut self) -> Json {
        self.out.push(b'}');
        Json {
            text: self.out,
            start: self.start,
        }
    }
}

/// An array of objects being written inside an [`Object`], each straight into its buffer.
pub(crate) struct Items {
    object: Object,
    count: usize,
}

impl Items {
    /// Appends one object, whose fields `fill` writes.
    pub(crate) fn push(&mut self, fill: impl FnOnce(&mut Object)) {
        let mut out = std::mem::take(&mut self.object.out);
        if self.count > 0 {
            out.push(b',');
        }
        out.push(b'{');
        let mut item = Object {
            out,
            start: 0,
            first: true,
        };
        fill(&mut item);
        item.out.push(b'}');
        self.object.out = item.out;
        self.count += 1;
    }

    /// How many items there are.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Closes the array; the object goes on.
    pub(crate) fn close(mut self) -> Object {
        self.object.out.push(b']');
        self.object
    }
}

/// Serializes `value` to exactly the bytes `serde_json::to_vec` gives, faster for long
/// strings: a string that needs no escaping (base64 never does, text rarely) is found so in
/// blocks and copied whole, and the buffer is sized up front.
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

/// Appends `value`'s text to `out`.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
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

/// Appends `s` as a JSON string.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        drop(serde_json::to_writer(&mut *out, s));
    } else {
        out.reserve(s.len() + SLACK);
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

#[cfg(test)]
mod tests;
