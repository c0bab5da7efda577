//! `fsbroker proxy` and what the host sends in batches: the host's answer to the proxy's own
//! question inside a batch is taken by the proxy (and decides the consent) while the rest of
//! the batch still reaches the server as a batch; the host's `roots/list_changed` inside a
//! batch is dropped. The scripted server logs every line it receives ($RECV_LOG).

use crate::common::{Fixture, assert_error};
use crate::proxy_host;
use crate::proxy_host::{contains, host_lines_until, initialize, show, spawn_proxy, start_ask};
use crate::sidecar::WAIT;
use serde_json::{Value, json};
use std::path::Path;

/// The revision these sessions speak: the last with JSON-RPC batches, which some of these
/// tests send (2025-06-18 removed them; `batches_removed.rs` holds what happens there).
const BATCH_REVISION: &str = "2025-03-26";

/// The lines the server received, raw.
fn received(log: &Path) -> Vec<Vec<u8>> {
    std::fs::read(log)
        .unwrap_or_default()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn shown(lines: &[Vec<u8>]) -> Vec<String> {
    lines.iter().map(|l| show(l)).collect()
}

#[test]
fn the_hosts_answer_inside_a_batch_decides_consent_and_the_rest_reaches_the_server() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    let log = f.tmp.path().join("recv.log");
    let mut p = spawn_proxy(
        &f.root,
        &["--consent", "elicit", "--writable"],
        &[("RECV_LOG", log.to_str().unwrap())],
    );
    initialize(&mut p, BATCH_REVISION, json!({"elicitation": {}}));
    start_ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project/a.txt"], "access": "write"}],
            ["files/read", {"path": "project/a.txt"}],
            ["files/write", {"path": "project/a.txt", "content": "changed"}],
        ]),
    );
    let lines = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let e: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let id = e["id"].as_str().unwrap().to_owned();
    let hello = json!({"jsonrpc":"2.0","method":"notifications/test/hello","params":{"k":1}});
    let list = json!({"jsonrpc":"2.0","id":77,"method":"tools/list"});
    // The host allows reading only, in a batch with messages for the server.
    p.send(&json!([
        hello,
        {"jsonrpc":"2.0","id":id,"result":{"action":"accept","content":{"decision":"read"}}},
        list,
    ]));
    let tools = p.wait_id(&json!(77));
    assert_eq!(tools["result"]["tools"][0]["name"], "ask", "{tools}");
    let a = proxy_host::answers(&mut p, 1);
    assert_eq!(a[0]["result"]["granted"], true, "{}", a[0]);
    assert_eq!(a[0]["result"]["access"], "read", "{}", a[0]);
    assert_eq!(a[1]["result"]["content"], "original", "{}", a[1]);
    assert_error(&a[2], -31002, "PERMISSION_DENIED", "read_only");

    let got = received(&log);
    assert!(
        !got.iter().any(|l| contains(l, id.as_bytes())),
        "the server saw the proxy's id: {:?}",
        shown(&got)
    );
    let batches: Vec<Value> = got
        .iter()
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(Value::is_array)
        .collect();
    assert_eq!(
        batches,
        vec![json!([hello, list])],
        "the rest of the host's batch should reach the server as a batch: {:?}",
        shown(&got)
    );
    p.finish();
}

#[test]
fn roots_list_changed_inside_a_host_batch_is_dropped_and_the_rest_is_relayed() {
    let f = Fixture::new();
    let log = f.tmp.path().join("recv.log");
    let mut p = spawn_proxy(
        &f.root,
        &["--consent", "deny"],
        &[("RECV_LOG", log.to_str().unwrap())],
    );
    initialize(
        &mut p,
        BATCH_REVISION,
        json!({"roots": {"listChanged": true}}),
    );
    let changed = json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"});
    let list = json!({"jsonrpc":"2.0","id":78,"method":"tools/list"});
    p.send(&json!([changed, list]));
    p.wait_id(&json!(78));
    // A batch of nothing but the dropped notification leaves nothing to relay.
    p.send(&json!([changed]));
    let after = json!({"jsonrpc":"2.0","id":79,"method":"tools/list"});
    p.send(&after);
    p.wait_id(&json!(79));

    let got = received(&log);
    assert!(
        !got.iter().any(|l| contains(l, b"list_changed")),
        "the server saw the host's roots/list_changed: {:?}",
        shown(&got)
    );
    let parsed: Vec<Value> = got
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap_or(Value::Null))
        .collect();
    let at = parsed
        .iter()
        .position(|v| v == &json!([list]))
        .unwrap_or_else(|| {
            panic!(
                "no batch [tools/list] reached the server: {:?}",
                shown(&got)
            )
        });
    assert_eq!(
        parsed.get(at + 1),
        Some(&after),
        "something reached the server between the two requests: {:?}",
        shown(&got)
    );
    p.finish();
}

#[test]
fn a_host_batch_holding_only_the_answer_to_the_proxy_relays_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    let log = f.tmp.path().join("recv.log");
    let mut p = spawn_proxy(
        &f.root,
        &["--consent", "elicit"],
        &[("RECV_LOG", log.to_str().unwrap())],
    );
    initialize(&mut p, BATCH_REVISION, json!({"elicitation": {}}));
    start_ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": ["project/a.txt"], "access": "read"}]]),
    );
    let lines = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let e: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let id = e["id"].as_str().unwrap().to_owned();
    p.send(&json!([{"jsonrpc":"2.0","id":id,
        "result":{"action":"accept","content":{"decision":"read"}}}]));
    let a = proxy_host::answers(&mut p, 1);
    assert_eq!(a[0]["result"]["granted"], true, "{}", a[0]);
    let after = json!({"jsonrpc":"2.0","id":80,"method":"tools/list"});
    p.send(&after);
    p.wait_id(&json!(80));
    let got = received(&log);
    assert!(
        !got.iter().any(|l| contains(l, id.as_bytes())),
        "the server saw the proxy's id: {:?}",
        shown(&got)
    );
    let parsed: Vec<Value> = got
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap_or(Value::Null))
        .collect();
    assert!(
        !parsed.iter().any(|v| v.is_array()),
        "an (empty) batch reached the server: {:?}",
        shown(&got)
    );
    p.finish();
}
