//! `Mcp-Param-*` headers of revision 2026-07-28 (basic/transports/streamable-http, "Custom
//! Headers from Tool Parameters"): a tool's `inputSchema` may mark a property with
//! `"x-mcp-header": "Name"`, and a client on Streamable HTTP must then mirror that argument
//! of every `tools/call` into `Mcp-Param-Name`, since the server refuses the call with
//! `-32020` without it. The proxy is that client towards a remote server in a modern
//! session, so it learns the declarations from the `tools/list` results the server sends
//! back, removes the tools whose declarations break the revision's constraints from those
//! results (as the revision requires of a client), and adds the headers to each call.
//!
//! Everything here reads data a peer shapes, so it is bounded: the schema walk is iterative
//! with a node budget, paths and names have a length limit, and at most [`MAX_TOOLS`] tools
//! with at most [`MAX_DECLS`](scan::MAX_DECLS) declarations each are remembered. A tool that cannot be
//! remembered within those bounds is removed from the list like an invalid one: the host
//! could not call it anyway, since its headers would be missing.

mod scan;

use super::pending::{MAX_PENDING, Pending};
use crate::jsonrpc::id_key;
use crate::locks::lock;
use base64::Engine;
use reqwest::header::{HeaderMap, HeaderValue};
use scan::{Decl, scan, shown};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// Tools with declarations remembered at most (tools without any need no entry).
pub(super) const MAX_TOOLS: usize = 1024;

/// The largest integer the revision lets be mirrored (JavaScript's safe range, 2^53 - 1).
const MAX_SAFE: i64 = (1 << 53) - 1;

/// The JSON-RPC code of a call the proxy refuses because an argument cannot be mirrored.
const INVALID_PARAMS: i64 = -32602;

/// What a session learnt of its tools, and the listings still to learn from.
#[derive(Debug, Default)]
struct ToolDecls {
    /// The declarations of each tool that has any, from the last `tools/list`.
    tools: HashMap<String, Vec<Decl>>,
    /// The host's `tools/list` requests waiting for their answer, each with whether it asks
    /// for the first page (no cursor), whose answer replaces what was known.
    lists: HashMap<String, (Value, bool)>,
}

/// The declarations learnt in one session.
#[derive(Debug, Default)]
pub(super) struct Params {
    state: Mutex<ToolDecls>,
}

impl Params {
    /// Notes the host's request `id` for `method` (the whole `line`), before it is sent: a
    /// `tools/list` has its answer read; any other request with the same id (ids may be
    /// reused once answered) does not. `pending` bounds the requests noted: when many are,
    /// those no longer waiting (a cancelled or failed list) are forgotten.
    pub(super) fn note_request(&self, id: &Value, method: &str, line: &[u8], pending: &Pending) {
        let k = id_key(id);
        let mut s = lock(&self.state);
        if method != "tools/list" {
            s.lists.remove(&k);
            return;
        }
        if s.lists.len() >= MAX_PENDING {
            s.lists
                .retain(|_, (id, _)| pending.any(std::slice::from_ref(id)));
        }
        let first = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.pointer("/params/cursor").cloned())
            .is_none_or(|c| c.is_null());
        s.lists.insert(k, (id.clone(), first));
    }

    /// Reads the response `line` to request `id`: when it answers a noted `tools/list`,
    /// learns its tools' declarations and returns it without the tools whose declarations
    /// are invalid (or cannot be remembered), each removal logged at warn. Any other line
    /// comes back unchanged.
    pub(super) fn read_response(&self, id: &Value, line: Vec<u8>) -> Vec<u8> {
        let first = {
            let mut s = lock(&self.state);
            match s.lists.remove(&id_key(id)) {
                Some((_, first)) => first,
                None => return line,
            }
        };
        let Ok(mut v) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        if !self.learn(&mut v, first) {
            return line;
        }
        serde_json::to_vec(&v).unwrap_or(line)
    }

    /// Learns the declarations of a `tools/list` answer the proxy asked for itself (the
    /// first page when `first`), which the host never sees. Returns the next page's cursor.
    pub(super) fn learn_own(&self, line: &[u8], first: bool) -> Option<String> {
        let mut v = serde_json::from_slice::<Value>(line).ok()?;
        self.learn(&mut v, first);
        v.pointer("/result/nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// Learns the declarations of the `tools/list` answer `v` (a first page replaces what
    /// was known, a later one adds to it) and removes from it the tools that are invalid or
    /// cannot be remembered. Returns whether it removed any.
    fn learn(&self, v: &mut Value, first: bool) -> bool {
        let Some(tools) = v.pointer_mut("/result/tools").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut learnt: HashMap<String, Vec<Decl>> = HashMap::new();
        let mut plain: Vec<String> = Vec::new();
        let mut s = lock(&self.state);
        let mut known = if first {
            HashMap::new()
        } else {
            std::mem::take(&mut s.tools)
        };
        let before = tools.len();
        tools.retain(|tool| {
            let name = tool.get("name").and_then(Value::as_str);
            let decls = match tool.get("inputSchema").map(scan) {
                None => Ok(Vec::new()),
                Some(r) => r,
            };
            match (name, decls) {
                (_, Err(reason)) => {
                    plain.extend(name.map(str::to_owned));
                    tracing::warn!(tool = ?name, reason = %reason, "removed a tool with an invalid x-mcp-header declaration from the remote server's tools/list");
                    false
                }
                (Some(name), Ok(decls)) if decls.is_empty() => {
                    plain.push(name.to_owned());
                    true
                }
                (None, Ok(decls)) if decls.is_empty() => true,
                (None, Ok(_)) => {
                    tracing::warn!("removed a tool without a name but with x-mcp-header declarations from the remote server's tools/list");
                    false
                }
                (Some(name), Ok(decls)) => {
                    let room = known.len() + learnt.len() < MAX_TOOLS
                        || known.contains_key(name)
                        || learnt.contains_key(name);
                    if room {
                        learnt.insert(name.to_owned(), decls);
                        true
                    } else {
                        tracing::warn!(tool = name, max = MAX_TOOLS, "removed a tool from the remote server's tools/list: too many tools with x-mcp-header declarations to remember");
                        false
                    }
                }
            }
        });
        // Tools without declarations, and invalid ones, drop what an earlier page said.
        for name in &plain {
            known.remove(name);
        }
        known.extend(learnt);
        s.tools = known;
        drop(s);
        tools.len() != before
    }

    /// Adds to `headers` the `Mcp-Param-*` headers of the host's `tools/call` `line`, from
    /// the declarations of the tool it names. An argument that is absent or null gets no
    /// header. Fails, with the JSON-RPC error to answer the host with, when an argument
    /// cannot be mirrored (an object, an array, a fraction, an integer beyond 2^53 - 1): the
    /// call is then never sent, since the server would refuse it or, worse, act on a
    /// request whose headers could not say what its body does.
    ///
    /// A value is always encoded first ([`encode_name`]: plain printable ASCII without
    /// spaces at either end, else the Base64 sentinel), and the header built from that
    /// ASCII only, so no argument can add a line break, a NUL or a header of its own.
    pub(super) fn mirror(&self, line: &[u8], headers: &mut HeaderMap) -> Result<(), String> {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return Ok(());
        };
        let Some(name) = v.pointer("/params/name").and_then(Value::as_str) else {
            return Ok(());
        };
        let decls = match lock(&self.state).tools.get(name) {
            Some(d) => d.clone(),
            None => return Ok(()),
        };
        let args = v.pointer("/params/arguments");
        for d in &decls {
            let mut at = args;
            for step in &d.path {
                at = at.and_then(|a| a.get(step.as_str()));
            }
            let Some(value) = at else { continue };
            let text = match header_text(value) {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(why) => {
                    return Err(format!(
                        "the argument {} of tool call {} cannot be sent as header {}: {why}",
                        shown(&d.path.join(".")),
                        shown(name),
                        d.header
                    ));
                }
            };
            // `encode_name` leaves only printable ASCII; checked again, since a header
            // must never carry anything else.
            if !text.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
                return Err(format!("header {} would not be plain ASCII", d.header));
            }
            let value = HeaderValue::from_str(&text)
                .map_err(|_| format!("header {} would not be a valid value", d.header))?;
            headers.insert(d.header.clone(), value);
        }
        Ok(())
    }
}

/// The JSON-RPC error for a call refused by [`Params::mirror`] with `why`.
pub(super) fn refusal(id: &Value, why: &str) -> Vec<u8> {
    let v = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": INVALID_PARAMS, "message": why,
        "data": {"reason": "unmirrorable_argument"}}});
    crate::json::encode(&v)
}

/// The header text for an argument: a string as it is (then [`encode_name`]), an integer
/// in decimal, a boolean as `true` or `false`; `None` for null (no header). An integer
/// written with a zero fraction (`42.0`) is that integer.
fn header_text(value: &Value) -> Result<Option<String>, &'static str> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(encode_name(s))),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if (-MAX_SAFE..=MAX_SAFE).contains(&i) {
                    return Ok(Some(i.to_string()));
                }
                return Err("an integer outside -(2^53 - 1)..=2^53 - 1");
            }
            if n.is_u64() {
                return Err("an integer outside -(2^53 - 1)..=2^53 - 1");
            }
            match n.as_f64() {
                Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE as f64 => {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "exact: the guard admits only whole values within 2^53, each an exact i64"
                    )]
                    let i = f as i64;
                    Ok(Some(i.to_string()))
                }
                _ => Err("a number that is not an integer within -(2^53 - 1)..=2^53 - 1"),
            }
        }
        Value::Array(_) | Value::Object(_) => Err("an object or array, which no header carries"),
    }
}

/// A header value for `value`: as it is when it is printable ASCII without spaces at either
/// end (and does not look like the sentinel), else the revision's Base64 sentinel
/// `=?base64?...?=` of its UTF-8 bytes, so the server can compare it with the body exactly.
pub(super) fn encode_name(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value == value.trim()
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        return value.to_owned();
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
    format!("=?base64?{b64}?=")
}

#[cfg(test)]
mod tests {
    use super::scan::MAX_NODES;
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_sent_plain_or_in_the_base64_sentinel() {
        assert_eq!(encode_name("get_weather"), "get_weather");
        assert_eq!(encode_name("file:///a b.txt"), "file:///a b.txt");
        assert_eq!(encode_name(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(encode_name("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode_name("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }

    fn headers(p: &Params, args: Value) -> Result<Vec<(String, String)>, String> {
        let line = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"t","arguments":args}}))
        .unwrap_or_default();
        let mut h = HeaderMap::new();
        p.mirror(&line, &mut h)?;
        let mut out: Vec<(String, String)> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
            .collect();
        out.sort();
        Ok(out)
    }

    fn learn(p: &Params, tools: Value) -> Value {
        let pending = Pending::with_cap(8);
        let id = json!(1);
        p.note_request(&id, "tools/list", b"{}", &pending);
        let line = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"result":{"tools":tools}}))
            .unwrap_or_default();
        serde_json::from_slice(&p.read_response(&id, line)).unwrap_or(Value::Null)
    }

    #[test]
    fn values_are_mirrored_encoded() {
        let p = Params::default();
        learn(
            &p,
            json!([{"name":"t","inputSchema":{"type":"object","properties":{
                "s":{"type":"string","x-mcp-header":"S"},
                "n":{"type":"integer","x-mcp-header":"N"},
                "b":{"type":"boolean","x-mcp-header":"B"},
                "o":{"type":"object","properties":{"deep":{"type":"string","x-mcp-header":"Deep"}}}}}}]),
        );
        let got = headers(
            &p,
            json!({"s":"x\r\nEvil: 1","n":42.0,"b":false,"o":{"deep":"v"}}),
        );
        assert_eq!(
            got,
            Ok(vec![
                ("mcp-param-b".into(), "false".into()),
                ("mcp-param-deep".into(), "v".into()),
                ("mcp-param-n".into(), "42".into()),
                ("mcp-param-s".into(), "=?base64?eA0KRXZpbDogMQ==?=".into()),
            ])
        );
        assert_eq!(headers(&p, json!({"s":null})), Ok(vec![]));
        assert!(headers(&p, json!({"n": 9_007_199_254_740_992_i64})).is_err());
        assert!(headers(&p, json!({"n": 1.5})).is_err());
        assert!(headers(&p, json!({"s": [1]})).is_err());
        assert_eq!(
            headers(&p, json!({"n": -9_007_199_254_740_991_i64})),
            Ok(vec![("mcp-param-n".into(), "-9007199254740991".into())])
        );
    }

    #[test]
    fn invalid_declarations_remove_the_tool() {
        let bad = [
            json!({"type":"object","x-mcp-header":"Root"}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":""}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A\r\nX"}}}),
            json!({"properties":{"a":{"type":"number","x-mcp-header":"A"}}}),
            json!({"properties":{"a":{"x-mcp-header":"A"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A"},
                                  "b":{"type":"string","x-mcp-header":"a"}}}),
            json!({"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}),
            json!({"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}),
            json!({"$defs":{"x":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}}),
        ];
        for schema in bad {
            assert!(scan(&schema).is_err(), "{schema}");
        }
        let p = Params::default();
        let out = learn(
            &p,
            json!([{"name":"bad","inputSchema":{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}},
                   {"name":"good","inputSchema":{"properties":{"a":{"type":"string"}}}}]),
        );
        assert_eq!(out["result"]["tools"].as_array().map(Vec::len), Some(1));
        assert_eq!(out["result"]["tools"][0]["name"], "good");
    }

    #[test]
    fn deep_or_huge_schemas_are_bounded() {
        let mut schema = json!({"type":"string","x-mcp-header":"D"});
        for _ in 0..100 {
            schema = json!({"type":"object","properties":{"p":schema}});
        }
        assert!(scan(&schema).is_err_and(|e| e.contains("deeper")));
        // What the server chose reaches the log escaped and cut.
        let bad =
            json!({"properties":{"a\nINFO forged":{"type":"string","x-mcp-header":"A\r\nB"}}});
        assert!(scan(&bad).is_err_and(|e| !e.contains('\n') && !e.contains('\r')));
        let long = "x".repeat(10_000);
        let bad = json!({"properties":{"a":{"type":"string","x-mcp-header":format!("{long} ")}}});
        assert!(scan(&bad).is_err_and(|e| e.len() < 300));
        let many: serde_json::Map<String, Value> = (0..MAX_NODES + 1)
            .map(|i| (format!("p{i}"), json!({"type":"string"})))
            .collect();
        assert!(scan(&json!({"properties": many})).is_err());
    }
}
