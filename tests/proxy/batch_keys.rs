//! `fsbroker proxy` reads every item of a server's batch with the same strict reader as a
//! single line (finding 10 of issue 14). A key named twice in an object is read as the first
//! by some parsers and as the last by others, so an item with one never reaches the host,
//! whichever key it doubles and however deep, and the server gets an error for that item. The
//! rest of the batch still goes where it would have gone, as the server wrote it.

use crate::common::Fixture;
use crate::proxy_host::{Raw, contains, initialize, line, raw, sentinel, show, spawn_proxy};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};

/// The revision these sessions speak: the last with JSON-RPC batches, which some of these
/// tests send (2025-06-18 removed them; `batches_removed.rs` holds what happens there).
const BATCH_REVISION: &str = "2025-03-26";

/// A proxy (consent `deny`) in front of the scripted server, initialized by a host that
/// declares roots (so it would answer a `roots/list` that reached it).
fn started(f: &Fixture) -> Sidecar {
    let mut p = spawn_proxy(&f.root, &["--consent", "deny"], &[]);
    initialize(
        &mut p,
        BATCH_REVISION,
        json!({"roots": {"listChanged": true}}),
    );
    p
}

/// Every marker of a message that must not reach the host: each bad item carries one.
const MARK: &[u8] = b"dupmark";

/// Has the server write `batches` (one line each) then a sentinel; returns what the host and
/// the server saw. Each batch must get exactly one answer line.
fn send_batches(p: &mut Sidecar, call: i64, batches: &[String]) -> Raw {
    let mut lines: Vec<Value> = batches.iter().map(line).collect();
    lines.push(sentinel("s"));
    let r = raw(
        p,
        call,
        json!({"lines": lines, "expect": batches.len(), "until": "s", "timeout": 60}),
    );
    assert!(!r.timed_out, "the server was not answered: {r:?}");
    r
}

/// The items of the server's answer lines, flattened.
fn answered_items(r: &Raw) -> Vec<Value> {
    r.received
        .iter()
        .flat_map(|m| match m {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        })
        .collect()
}

fn assert_no_marked_line_reached_the_host(r: &Raw) {
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines.iter().any(|l| contains(l, MARK)),
        "an item with a duplicated key reached the host: {shown:?}"
    );
}

/// Asserts the server got an error (`code`) for `id` (`null` for an ambiguous id).
fn assert_refused(items: &[Value], id: Value, code: i64) {
    let found = items
        .iter()
        .any(|i| i["id"] == id && i["error"]["code"] == json!(code) && i.get("result").is_none());
    assert!(found, "no error {code} for id {id} in {items:?}");
}

#[test]
fn finding_10_a_batch_item_with_two_methods_never_reaches_the_host() {
    let f = Fixture::new();
    f.file("a.txt", "secret of the root");
    let mut p = started(&f);
    // Both orders: last-key-wins takes the second, first-key-wins the first.
    let batches = [
        format!(
            r#"[{{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{{"m":"{m}"}},"method":"roots/list"}}]"#,
            m = "dupmark"
        ),
        format!(
            r#"[{{"jsonrpc":"2.0","id":"t2","method":"roots/list","params":{{"m":"{m}"}},"method":"tools/call"}}]"#,
            m = "dupmark"
        ),
        format!(
            r#"[{{"jsonrpc":"2.0","id":"t3","method":"files/read","params":{{"path":"project/a.txt","m":"{m}"}},"method":"ping"}}]"#,
            m = "dupmark"
        ),
        format!(
            r#"[{{"jsonrpc":"2.0","id":"t4","method":"ping","params":{{"m":"{m}"}},"method":"files/read"}}]"#,
            m = "dupmark"
        ),
        // The second key spelled with an escape is the same key.
        format!(
            r#"[{{"jsonrpc":"2.0","id":"t5","method":"roots/list","m\u0065thod":"ping","params":{{"m":"{m}"}}}}]"#,
            m = "dupmark"
        ),
    ];
    let r = send_batches(&mut p, 1, &batches);
    assert_no_marked_line_reached_the_host(&r);
    assert!(
        r.host_lines.is_empty(),
        "{:?}",
        r.host_lines.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    let items = answered_items(&r);
    for id in ["t1", "t2", "t3", "t4", "t5"] {
        assert_refused(&items, json!(id), -32600);
    }
    assert!(
        !items.iter().any(|i| i.get("result").is_some()),
        "an ambiguous item was answered as a request: {items:?}"
    );
    assert!(
        !items
            .iter()
            .any(|i| i.to_string().contains("secret of the root")),
        "{items:?}"
    );
    p.finish();
}

#[test]
fn finding_10_a_batch_item_with_two_ids_never_reaches_the_host() {
    let f = Fixture::new();
    let mut p = started(&f);
    let batches = [
        r#"[{"jsonrpc":"2.0","id":"i1","method":"ping","params":{"m":"dupmark"},"id":"i2"}]"#
            .to_owned(),
        r#"[{"jsonrpc":"2.0","id":7,"method":"roots/list","id":8,"params":{"m":"dupmark"}}]"#
            .to_owned(),
        // A response whose id is doubled: the host could match it to either request.
        r#"[{"jsonrpc":"2.0","id":"init","result":{"m":"dupmark"},"id":"other"}]"#.to_owned(),
    ];
    let r = send_batches(&mut p, 1, &batches);
    assert_no_marked_line_reached_the_host(&r);
    let items = answered_items(&r);
    // An id named twice is no id: the refusal says `null`.
    assert_eq!(items.len(), 3, "{items:?}");
    for item in &items {
        assert_eq!(item["id"], Value::Null, "{items:?}");
        assert_eq!(item["error"]["code"], -32600, "{items:?}");
    }
    p.finish();
}

#[test]
fn finding_10_any_key_named_twice_in_a_batch_item_keeps_it_from_the_host() {
    let f = Fixture::new();
    let mut p = started(&f);
    let kept = json!({"jsonrpc":"2.0","method":"notifications/message",
                      "params":{"level":"info","data":"kept"}});
    // Each bad item doubles another key: the envelope's `jsonrpc`, `params`, `result` and
    // `error`, or a key deep inside `params`.
    let bad = [
        r#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":"k1","method":"ping","params":{"m":"dupmark"}}"#,
        r#"{"jsonrpc":"2.0","id":"k2","method":"ping","params":{"m":"dupmark"},"params":{}}"#,
        r#"{"jsonrpc":"2.0","id":"k3","result":{"m":"dupmark"},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":"k4","error":{"code":1,"message":"dupmark"},"result":{}, "error":{}}"#,
        r#"{"jsonrpc":"2.0","id":"k5","method":"ping","params":{"a":[{"b":1,"m":"dupmark","b":2}]}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"dupmark","data":"x"}}"#,
    ];
    let batches: Vec<String> = bad
        .iter()
        .map(|item| format!("[{kept},{item},{kept}]"))
        .collect();
    let r = send_batches(&mut p, 1, &batches);
    assert_no_marked_line_reached_the_host(&r);
    // The rest of each batch still reaches the host, item by item as written.
    let want = format!("[{kept},{kept}]");
    assert_eq!(r.host_lines.len(), bad.len(), "{r:?}");
    for l in &r.host_lines {
        assert_eq!(show(l), want);
    }
    let items = answered_items(&r);
    for id in ["k1", "k2", "k3", "k4", "k5"] {
        assert_refused(&items, json!(id), -32600);
    }
    // The notification has no id to answer, and is refused all the same.
    assert_refused(&items, Value::Null, -32600);
    p.finish();
}

#[test]
fn finding_10_a_single_line_is_judged_as_a_batch_item_is() {
    let f = Fixture::new();
    let mut p = started(&f);
    // A key doubled deep inside `params` of a single line: the host must not see it either.
    let single = r#"{"jsonrpc":"2.0","id":"s1","method":"ping","params":{"x":{"m":"dupmark","m":"roots/list"}}}"#;
    let r = raw(
        &mut p,
        1,
        json!({"lines": [line(single), sentinel("s")], "expect": 1, "until": "s", "timeout": 60}),
    );
    assert_no_marked_line_reached_the_host(&r);
    assert_refused(&answered_items(&r), json!("s1"), -32600);
    p.finish();
}

#[test]
fn finding_10_a_mixed_batch_is_split_item_by_item_as_written() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    let mut p = started(&f);
    // Unusual but exact spellings survive: the host gets the items' bytes, not a re-encoding.
    let theirs = r#"{"method":"notifications/message","jsonrpc":"2.0","params":{"s":"caf\u00e9 \/","f":1.50}}"#;
    let ours =
        r#"{"jsonrpc":"2.0","id":"r1","method":"files/read","params":{"path":"project/a.txt"}}"#;
    let dup = r#"{"jsonrpc":"2.0","id":"d1","method":"ping","params":{"m":"dupmark"},"method":"roots/list"}"#;
    let batch = format!("[ {theirs} ,{ours},\t{dup} ]");
    let r = raw(
        &mut p,
        1,
        json!({"lines": [line(&batch), sentinel("s")], "expect": 2, "until": "s", "timeout": 60}),
    );
    assert_no_marked_line_reached_the_host(&r);
    assert_eq!(r.host_lines.len(), 1, "{r:?}");
    assert_eq!(show(&r.host_lines[0]), format!("[{theirs}]"));
    let items = answered_items(&r);
    assert_refused(&items, json!("d1"), -32600);
    // Consent is `deny`: the read is the broker's, answered with its error.
    assert!(
        items
            .iter()
            .any(|i| i["id"] == "r1" && i["error"].is_object()),
        "{items:?}"
    );
    p.finish();
}
