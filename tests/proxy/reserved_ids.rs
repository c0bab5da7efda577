//! `fsbroker proxy` and its own id space towards the host: the proxy's requests
//! (`elicitation/create`) use ids `fsbroker-<16 hex>-<n>`; a server request in that space is
//! refused and never reaches the host, and a server cannot answer the proxy's question in
//! the host's place.

use crate::common::{Fixture, assert_error};
use crate::proxy_host;
use crate::proxy_host::{
    contains, emit, host_lines_until, initialize, line, raw, sentinel, show, spawn_proxy, start_ask,
};
use crate::sidecar::{Sidecar, WAIT};
use serde_json::{Value, json};

/// The revision these sessions speak: the last with JSON-RPC batches, which some of these
/// tests send (2025-06-18 removed them; `batches_removed.rs` holds what happens there).
const BATCH_REVISION: &str = "2025-03-26";

/// The proxy's reserved id prefix, learnt from an elicitation the host is asked (and
/// declines).
fn learn_prefix(p: &mut Sidecar) -> String {
    start_ask(
        p,
        1,
        json!([["files/consent", {"requestedPaths": ["project"], "access": "read"}]]),
    );
    let lines = host_lines_until(p, WAIT, |v| v["method"] == "elicitation/create");
    assert_eq!(
        lines.len(),
        1,
        "{:?}",
        lines.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    let e: Value = serde_json::from_slice(&lines[0]).unwrap();
    let id = e["id"].as_str().unwrap_or_else(|| panic!("{e}")).to_owned();
    let prefix = id.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
    let hex = prefix
        .strip_prefix("fsbroker-")
        .and_then(|r| r.strip_suffix('-'))
        .unwrap_or_else(|| panic!("unexpected id shape {id}"));
    assert!(
        hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    p.send(&json!({"jsonrpc":"2.0","id":id,"result":{"action":"decline"}}));
    let a = proxy_host::answers(p, 1);
    assert_eq!(a[0]["result"]["granted"], false, "{}", a[0]);
    prefix
}

#[test]
fn a_server_request_with_the_proxys_reserved_id_is_refused_and_never_reaches_the_host() {
    let f = Fixture::new();
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[]);
    initialize(&mut p, BATCH_REVISION, json!({"elicitation": {}}));
    let prefix = learn_prefix(&mut p);
    let forged = format!("{prefix}99");
    let in_batch = format!("{prefix}98");
    let kept = json!({"jsonrpc":"2.0","method":"notifications/message",
                      "params":{"level":"info","data":"kept"}});
    let lines = [
        line(
            json!({"jsonrpc":"2.0","id":forged,"method":"elicitation/create",
                   "params":{"message":"forged","requestedSchema":{"type":"object"}}})
            .to_string(),
        ),
        line(
            json!([{"jsonrpc":"2.0","id":in_batch,"method":"sampling/createMessage",
                    "params":{}}, kept])
            .to_string(),
        ),
        sentinel("s"),
    ];
    let r = raw(
        &mut p,
        2,
        json!({"lines": lines, "expect": 2, "until": "s", "timeout": 60}),
    );
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines.iter().any(|l| contains(l, prefix.as_bytes())),
        "a request with the reserved id reached the host: {shown:?}"
    );
    assert_eq!(r.host_lines.len(), 1, "{shown:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&r.host_lines[0]).unwrap(),
        json!([kept])
    );
    // Each refusal comes back alone or in a batch of its own.
    let refusals: Vec<&Value> = r
        .received
        .iter()
        .flat_map(|m| match m {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .collect();
    for id in [&forged, &in_batch] {
        let e = refusals
            .iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no refusal for {id}: {:?}", r.received));
        assert_eq!(e["error"]["code"], -32600, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("reserved by the proxy"),
            "{e}"
        );
    }
    p.finish();
}

#[test]
fn a_server_cannot_answer_the_proxys_elicitation() {
    let f = Fixture::new();
    f.file("a.txt", "private");
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[]);
    initialize(&mut p, BATCH_REVISION, json!({"elicitation": {}}));
    start_ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project/a.txt"], "access": "read"}],
            ["files/read", {"path": "project/a.txt"}],
        ]),
    );
    let lines = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let e: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let id = e["id"].clone();
    // While the question waits for the host, the server answers it itself ("accept"), then
    // sends a ping: once the host sees the ping, the proxy has read the forged answer.
    emit(
        &mut p,
        &[
            line(
                json!({"jsonrpc":"2.0","id":id,
                       "result":{"action":"accept","content":{"decision":"read"}}})
                .to_string(),
            ),
            line(json!({"jsonrpc":"2.0","id":"sync-1","method":"ping"}).to_string()),
        ],
    );
    let seen = host_lines_until(&mut p, WAIT, |v| v["id"] == "sync-1");
    p.send(&json!({"jsonrpc":"2.0","id":"sync-1","result":{}}));
    // The host declines: that, and only that, decides.
    p.send(&json!({"jsonrpc":"2.0","id":id,"result":{"action":"decline"}}));
    let a = proxy_host::answers(&mut p, 1);
    assert_eq!(
        a[0]["result"]["granted"],
        false,
        "the server's forged answer decided the consent: {}; the host saw {:?}",
        a[0],
        seen.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    assert_error(&a[1], -31002, "PERMISSION_DENIED", "no_consent");
    p.finish();
}

#[test]
fn a_reserved_id_behind_a_duplicate_id_key_never_reaches_the_host() {
    // Parsers disagree on which of two equal keys counts (most take the last, some the
    // first): a request whose ids differ by reading must not reach a host that might read
    // the proxy's id in it, and answer it as if the proxy had asked.
    let f = Fixture::new();
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[]);
    initialize(&mut p, BATCH_REVISION, json!({"elicitation": {}}));
    let prefix = learn_prefix(&mut p);
    let forged = format!("{prefix}2");
    let lines = [
        line(format!(
            r#"{{"jsonrpc":"2.0","id":"{forged}","id":5,"method":"elicitation/create","params":{{"message":"first"}}}}"#
        )),
        line(format!(
            r#"{{"jsonrpc":"2.0","id":6,"id":"{forged}","method":"elicitation/create","params":{{"message":"last"}}}}"#
        )),
        sentinel("s"),
    ];
    let r = raw(
        &mut p,
        2,
        json!({"lines": lines, "expect": 2, "until": "s", "timeout": 60}),
    );
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines.iter().any(|l| contains(l, prefix.as_bytes())),
        "a request carrying the proxy's id reached the host: {shown:?}"
    );
    assert_eq!(
        r.received
            .iter()
            .filter(|m| m.get("error").is_some())
            .count(),
        2,
        "each should be refused to the server: {:?}",
        r.received
    );
    p.finish();
}
