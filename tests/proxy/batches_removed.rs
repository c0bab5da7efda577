//! Protocol revision 2025-06-18 removed JSON-RPC batches. In a session of such a revision the
//! proxy refuses a batch from either side, as the revision says: nothing of it is relayed or
//! brokered, each request in it gets an error of its own (one message per line, never an
//! array), and nothing reaches the host as an array.

use crate::common::Fixture;
use crate::proxy_host::{initialize, line, raw, spawn_proxy};
use serde_json::{Value, json};

#[test]
fn a_servers_batch_is_refused_item_by_item_and_the_host_sees_none_of_it() {
    let f = Fixture::new();
    let mut p = spawn_proxy(&f.root, &["--consent", "deny"], &[]);
    initialize(&mut p, "2025-11-25", json!({"sampling": {}}));
    let batch = json!([
        {"jsonrpc":"2.0","id":"b1","method":"roots/list"},
        {"jsonrpc":"2.0","id":"b2","method":"sampling/createMessage","params":{
            "messages":[],"maxTokens":1}},
        {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},
    ]);
    let r = raw(
        &mut p,
        1,
        json!({"lines": [line(batch.to_string())], "expect": 2, "timeout": 20}),
    );
    assert!(!r.timed_out, "{:?}", r.received);
    let mut ids: Vec<&Value> = Vec::new();
    for m in &r.received {
        assert!(m.is_object(), "an answer came as a batch: {m}");
        assert_eq!(m["error"]["code"], -32600, "{m}");
        assert!(
            m["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2025-11-25"),
            "{m}"
        );
        ids.push(&m["id"]);
    }
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, [&json!("b1"), &json!("b2")]);
    for l in &r.host_lines {
        let text = String::from_utf8_lossy(l);
        assert!(!text.starts_with('['), "the host got a batch: {text}");
        assert!(!text.contains("b2") && !text.contains("sampling"), "{text}");
    }
    p.finish();
}

#[test]
fn a_hosts_batch_is_refused_and_never_reaches_the_server() {
    let f = Fixture::new();
    let mut p = spawn_proxy(&f.root, &["--consent", "deny"], &[]);
    initialize(&mut p, "2025-06-18", json!({}));
    p.send(&json!([
        {"jsonrpc":"2.0","id":"h1","method":"tools/list"},
        {"jsonrpc":"2.0","method":"notifications/message","params":{}},
    ]));
    let r = p.wait_id(&json!("h1"));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // Single messages still pass.
    let r = p.request("tools/list", json!({}));
    assert!(r["result"]["tools"].is_array(), "{r}");
    p.finish();
}

#[test]
fn batches_still_pass_in_a_revision_that_has_them() {
    let f = Fixture::new();
    let mut p = spawn_proxy(&f.root, &["--consent", "deny"], &[]);
    initialize(&mut p, "2025-03-26", json!({}));
    p.send(&json!([{"jsonrpc":"2.0","id":"h1","method":"tools/list"}]));
    let r = p.wait_id(&json!("h1"));
    assert!(r["result"]["tools"].is_array(), "{r}");
    p.finish();
}
