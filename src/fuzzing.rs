//! Fuzz oracles, shared by the cargo-fuzz targets in `fuzz/` and by `cargo test`, which replays
//! every committed corpus file through them. An oracle fails by assertion: that is its job.
//! Nothing here runs on a peer's input in the broker itself.

use crate::path::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, RequestPath};
use crate::{Broker, Policy};
use serde_json::Value;
use std::sync::OnceLock;

mod plan;

pub use plan::ops_plan;

/// Parses arbitrary bytes as a request path and checks what an accepted path promises: every
/// component is non-empty, not `.` or `..`, free of `/`, NUL, control characters and
/// backslashes, and within the length limits; a mount-form path never climbs above its mount.
pub fn request_path(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = RequestPath::parse(text) else {
        return;
    };
    assert!(text.len() <= MAX_PATH_BYTES);
    let components: Vec<&String> = match &parsed {
        RequestPath::Mount { mount, rel } => {
            std::iter::once(mount).chain(rel.components()).collect()
        }
        RequestPath::Absolute(c) => c.iter().collect(),
    };
    for c in components {
        assert!(
            !c.is_empty() && c != "." && c != "..",
            "bad component {c:?}"
        );
        assert!(c.len() <= MAX_COMPONENT_BYTES);
        assert!(!c.contains(['/', '\\', '\0']));
        assert!(!c.chars().any(char::is_control));
    }
}

#[expect(
    clippy::panic,
    reason = "the oracles cannot run without a runtime, and a fuzzer or a test must see that"
)]
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("cannot start a runtime: {e}"),
        }
    })
}

/// The codes an error may carry: the JSON-RPC ones and the filesystem table.
fn documented(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603) || (-31012..=-31001).contains(&code)
}

/// Checks one response object: JSON-RPC 2.0, an id, exactly one of result and error, and a
/// documented error code.
fn check_response(v: &Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v.get("id").is_some(), "{v}");
    assert!(v.get("result").is_some() != v.get("error").is_some(), "{v}");
    if let Some(e) = v.get("error") {
        let code = e["code"].as_i64().unwrap_or(0);
        assert!(documented(code), "undocumented code in {v}");
        assert!(e["message"].is_string(), "{v}");
    }
}

/// Sends arbitrary bytes as one line to a broker and checks that the answer is nothing or a
/// well-formed response (or a batch of them, never over the line limit), and that the session
/// still answers afterwards. The same bytes are then sent again as an item of a batch, between
/// two ordinary items, since a batch item must be judged exactly as a single line is.
pub fn jsonrpc(data: &[u8]) {
    jsonrpc_line(data);
    let mut batch = br#"[{"jsonrpc":"2.0","id":"b1","method":"ping"},"#.to_vec();
    batch.extend_from_slice(data);
    batch.extend_from_slice(br#",{"jsonrpc":"2.0","method":"notifications/x"}]"#);
    jsonrpc_line(&batch);
}

#[expect(
    clippy::panic,
    reason = "an oracle reports a broken promise by panicking: that is how a fuzzer or a test sees it"
)]
fn jsonrpc_line(data: &[u8]) {
    static BROKER: OnceLock<Broker> = OnceLock::new();
    let broker = BROKER.get_or_init(|| {
        let text = "[consent]\nmode = \"deny\"\n[audit]\nenabled = false\n\
                    [limits]\nrequests_per_second = 1000000\nburst = 1000000\n\
                    max_violations_per_minute = 1000000\n";
        let built = Policy::parse(text, "fuzz")
            .map_err(|e| e.to_string())
            .and_then(|p| {
                runtime().block_on(async { Broker::builder(p).build().map_err(|e| e.to_string()) })
            });
        match built {
            Ok((b, _)) => b,
            Err(e) => panic!("{e}"),
        }
    });
    proxy_peek(data);
    runtime().block_on(async {
        if let Some(out) = broker.handle_line("fuzz", data).await {
            let v: Value = match serde_json::from_slice(&out) {
                Ok(v) => v,
                Err(e) => panic!("response is not json: {e}"),
            };
            match &v {
                Value::Array(items) => {
                    assert!(!items.is_empty());
                    let limit = broker.policy().limits.max_line_bytes.get();
                    assert!(out.len() <= limit, "a batch's answer passed the line limit");
                    items.iter().for_each(check_response);
                }
                other => check_response(other),
            }
        }
        let ping = broker
            .handle_line("fuzz", br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#)
            .await;
        assert!(ping.is_some(), "session stopped answering");
    });
}

/// The proxy's cheap look at a line agrees with a full decode: whatever the broker would take
/// as a request with some method, the proxy sees as that request. And what the proxy would
/// relay from a server to its host is UTF-8 JSON that holds no `roots/list` or `files/*`
/// message, however leniently the host reads it.
#[expect(
    clippy::panic,
    reason = "an oracle reports a broken promise by panicking: that is how a fuzzer or a test sees it"
)]
fn proxy_peek(data: &[u8]) {
    proxy_relay(data);
    use crate::jsonrpc::{Item, Message, decode};
    use crate::proxy::{Kind, peek};
    let seen = peek(data);
    if let Ok(Message::Single(Item::Request(r))) = decode(data, usize::MAX) {
        match &seen {
            Kind::Request { method, id } => {
                assert_eq!(method, &r.method);
                assert_eq!(id, r.id.as_value());
            }
            // A key named twice: the proxy reads no message there (and so never relays it to
            // a host), where the broker's decode takes the last duplicate.
            Kind::Other => {}
            other => panic!("peek saw {other:?} for a request to {}", r.method),
        }
    }
    if let Ok(Message::Batch(_)) = decode(data, usize::MAX) {
        assert_eq!(seen, Kind::Batch);
    }
}

/// What the proxy would relay to the host, read twice: by a reader that keeps the first of
/// two equal keys and by one that keeps the last (serde_json's `Value`). Both must see the
/// same message, and neither a brokered method in it.
#[expect(
    clippy::panic,
    reason = "an oracle reports a broken promise by panicking: that is how a fuzzer or a test sees it"
)]
fn proxy_relay(data: &[u8]) {
    let Some(out) = crate::proxy::host_part(data) else {
        return;
    };
    let text = match std::str::from_utf8(&out) {
        Ok(t) => t,
        Err(e) => panic!("relayed a line that is not utf-8: {e}"),
    };
    let last: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("relayed a line that is not json: {e}"),
    };
    let first = match serde_json::from_str::<FirstKeyWins>(text) {
        Ok(v) => v.0,
        Err(e) => panic!("relayed a line the first-key reader cannot read: {e}"),
    };
    assert_eq!(
        first, last,
        "two readers see two messages in what reaches the host: {text:.300}"
    );
    for reading in [first, last] {
        let items = match reading {
            Value::Array(items) => items,
            one => vec![one],
        };
        for item in &items {
            if let Some(method) = item.get("method").and_then(Value::as_str) {
                assert!(
                    !crate::method::is_brokered(method),
                    "relayed a brokered message to the host: {item}"
                );
            }
        }
    }
}

/// A JSON value read by a parser that keeps the first of two equal keys in an object, as some
/// hosts' parsers do (serde_json's `Value` keeps the last).
struct FirstKeyWins(Value);

impl<'de> serde::Deserialize<'de> for FirstKeyWins {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FirstKeyVisitor)
    }
}

struct FirstKeyVisitor;

impl<'de> serde::de::Visitor<'de> for FirstKeyVisitor {
    type Value = FirstKeyWins;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any json value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(v.into()))
    }
    fn visit_unit<E>(self) -> Result<FirstKeyWins, E> {
        Ok(FirstKeyWins(Value::Null))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<FirstKeyWins, A::Error> {
        let mut items = Vec::new();
        while let Some(FirstKeyWins(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(FirstKeyWins(Value::Array(items)))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<FirstKeyWins, A::Error> {
        let mut obj = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let FirstKeyWins(v) = map.next_value()?;
            obj.entry(key).or_insert(v);
        }
        Ok(FirstKeyWins(Value::Object(obj)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_readers_differ_on_a_key_named_twice() {
        let text = r#"[{"method":"ping","id":1,"method":"roots/list","p":{"a":1,"a":2}}]"#;
        let first = serde_json::from_str::<FirstKeyWins>(text).map(|v| v.0).ok();
        let last = serde_json::from_str::<Value>(text).ok();
        assert_eq!(
            first,
            Some(json!([{"method": "ping", "id": 1, "p": {"a": 1}}]))
        );
        assert_eq!(
            last,
            Some(json!([{"method": "roots/list", "id": 1, "p": {"a": 2}}]))
        );
    }
}
