//! What a server line says about input: cheap byte checks first, so only the lines that
//! may matter are parsed, and walks with a stack of their own, never recursion on what a
//! server shaped.

use crate::proxy::names::{INPUT_REQUESTS, INPUT_REQUIRED, ROOTS_LIST};
use serde_json::Value;

pub(crate) use crate::proxy::peek::mentions;

/// Whether a server line may be an `input_required` result (to be parsed and judged).
pub(crate) fn may_need_input(line: &[u8]) -> bool {
    mentions(line, INPUT_REQUIRED.as_bytes())
}

/// The response in `line` when it asks for input, parsed; `None` for any other line.
pub(crate) fn input_required(line: &[u8]) -> Option<Value> {
    if !may_need_input(line) {
        return None;
    }
    serde_json::from_slice::<Value>(line)
        .ok()
        .filter(needs_input)
}

/// Whether a server message carries, anywhere in it, an `inputRequests` map with a
/// `roots/list` entry, outside an `input_required` result the proxy takes over (the tasks
/// extension, or a shape not foreseen): such a message is never relayed to the host.
pub(crate) fn hides_roots(line: &[u8]) -> bool {
    if !mentions(line, INPUT_REQUESTS.as_bytes()) {
        return false;
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(v) => asks_roots(&v),
        // What the proxy cannot read never reaches the host anyway (`from_server`).
        Err(_) => false,
    }
}

/// Whether `v` holds, anywhere, an `inputRequests` map with a `roots/list` entry. Walked
/// with a stack of its own: no recursion on what a server shaped.
pub(crate) fn asks_roots(v: &Value) -> bool {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                for (k, inner) in o {
                    let asks =
                        |r: &Value| r.get("method").and_then(Value::as_str) == Some(ROOTS_LIST);
                    // The specification's shape is a map; a list is looked into as well.
                    let found = k == INPUT_REQUESTS
                        && match inner {
                            Value::Object(m) => m.values().any(asks),
                            Value::Array(a) => a.iter().any(asks),
                            _ => false,
                        };
                    if found {
                        return true;
                    }
                    todo.push(inner);
                }
            }
            Value::Array(a) => todo.extend(a),
            _ => {}
        }
    }
    false
}

/// Whether a response asks for input (`result.resultType` is `input_required`).
pub(crate) fn needs_input(response: &Value) -> bool {
    response
        .pointer("/result/resultType")
        .and_then(Value::as_str)
        == Some(INPUT_REQUIRED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_hidden_anywhere_are_found() {
        let task = br#"{"jsonrpc":"2.0","id":1,"result":{"task":{"status":"input_required","inputRequests":{"k":{"method":"roots/list"}}}}}"#;
        assert!(hides_roots(task));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"x":[{"inputRequests":{"k":{"method":"roots/list"}}}]}}"#;
        assert!(hides_roots(note));
        let sampling = br#"{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{"k":{"method":"sampling/createMessage"}}}}"#;
        assert!(!hides_roots(sampling));
    }

    #[test]
    fn escapes_count_as_mentions() {
        assert!(mentions(br#"{"a":"input_required"}"#, b"input_required"));
        assert!(mentions(
            br#"{"a":"input\u005frequired"}"#,
            b"input_required"
        ));
        assert!(!mentions(br#"{"a":"complete"}"#, b"input_required"));
    }
}
