//! `fsbroker proxy` against a hostile server: what the server writes that is not a valid
//! JSON-RPC message, a brokered notification, or a `roots/list` however dressed, never reaches
//! the host; what the proxy answers the server instead; and batches the proxy has no business
//! touching reach the host byte for byte. The scripted server's `raw` tool writes the lines
//! verbatim and reports what came back to it; the test, as the host, sees the rest.

use crate::common::Fixture;
use crate::proxy_host::{
    Raw, contains, initialize, is_null_id_error, line, raw, sentinel, show, spawn_proxy,
};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};

/// The revision these sessions speak: the last with JSON-RPC batches, which some of these
/// tests send (2025-06-18 removed them; `batches_removed.rs` holds what happens there).
const BATCH_REVISION: &str = "2025-03-26";

/// A proxy (consent `deny`) in front of the scripted server, initialized by a host that
/// declares roots.
fn started(f: &Fixture) -> Sidecar {
    let mut p = spawn_proxy(&f.root, &["--consent", "deny"], &[]);
    initialize(
        &mut p,
        BATCH_REVISION,
        json!({"roots": {"listChanged": true}}),
    );
    p
}

/// Has the server write `bad` then a brokered sentinel; what is wrong, if anything: the host
/// must see nothing at all, and the server get exactly one error `code` with `id: null` back
/// (and the sentinel's answer: the connection still works).
fn refusal_problem(p: &mut Sidecar, call: i64, bad: &[u8], code: i64) -> Option<String> {
    let until = format!("sentinel-{call}");
    let r = raw(
        p,
        call,
        json!({"lines": [line(bad), sentinel(&until)], "expect": 1, "until": until, "timeout": 60}),
    );
    let what = show(bad);
    if !r.host_lines.is_empty() {
        let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
        return Some(format!("{what}: reached the host as {shown:?}"));
    }
    if r.received.len() != 1 || !is_null_id_error(&r.received[0], code) {
        return Some(format!(
            "{what}: the server should get one error {code} with id null, got {:?}",
            r.received
        ));
    }
    if !r.until_answer["result"]["roots"].is_array() {
        return Some(format!(
            "{what}: the connection is not usable afterwards: {}",
            r.until_answer
        ));
    }
    None
}

/// Runs [`refusal_problem`] for every case on one proxy and fails with all the problems.
fn assert_refused(cases: &[(&[u8], i64)]) {
    let f = Fixture::new();
    let mut p = started(&f);
    let problems: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, (bad, code))| refusal_problem(&mut p, i as i64 + 1, bad, *code))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    p.finish();
}

#[test]
fn invalid_utf8_from_the_server_never_reaches_the_host() {
    assert_refused(&[
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"a\xff\",\"method\":\"roots/list\"}",
            -32700,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"\xc3\x28\"}}",
            -32700,
        ),
    ]);
}

#[test]
fn a_lone_surrogate_from_the_server_never_reaches_the_host() {
    assert_refused(&[
        (
            br#"{"jsonrpc":"2.0","id":"b\ud800","method":"roots/list"}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\udfff"}}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message","extra":"\ud800"}"#,
            -32700,
        ),
    ]);
}

#[test]
fn an_out_of_range_number_from_the_server_never_reaches_the_host() {
    assert_refused(&[
        (
            br#"{"jsonrpc":"2.0","id":1e400,"method":"roots/list"}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","id":"n","method":"ping","params":{"x":-1e400}}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","id":"r","result":{"n":1e999}}"#,
            -32700,
        ),
    ]);
}

#[test]
fn truncated_json_from_the_server_never_reaches_the_host() {
    assert_refused(&[
        (br#"{"jsonrpc":"2.0","id":"t","method":"roots/li"#, -32700),
        (
            br#"[{"jsonrpc":"2.0","method":"notifications/message"}"#,
            -32700,
        ),
    ]);
}

#[test]
fn other_malformed_json_from_the_server_never_reaches_the_host() {
    assert_refused(&[
        // A raw control character in a string.
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"a\tb\"}}",
            -32700,
        ),
        // Two messages on one line, a host may take the second.
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message"} {"jsonrpc":"2.0","id":"g","method":"roots/list"}"#,
            -32700,
        ),
        (br#"{"jsonrpc":"2.0","method":"notifications/message"}{}"#, -32700),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"a":1,}}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"a":NaN}}"#,
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"a":01}}"#,
            -32700,
        ),
    ]);
}

#[test]
fn json_that_is_not_json_rpc_from_the_server_is_refused_not_relayed() {
    assert_refused(&[
        (b"7", -32600),
        (br#""x""#, -32600),
        (br#"{"foo":1}"#, -32600),
    ]);
}

#[test]
fn an_empty_batch_from_the_server_is_refused_and_not_relayed() {
    assert_refused(&[(b"[]", -32600), (b" [ ] ", -32600)]);
}

#[test]
fn brokered_notifications_from_the_server_are_dropped() {
    let f = Fixture::new();
    f.file("a.txt", "not for notifications");
    // Consent by elicitation from a host that can answer: a consent "notification" that
    // reached the broker would show up here as a question.
    let mut p = spawn_proxy(&f.root, &["--consent", "elicit"], &[]);
    initialize(
        &mut p,
        BATCH_REVISION,
        json!({"roots": {"listChanged": true}, "elicitation": {}}),
    );
    let notes = [
        json!({"jsonrpc":"2.0","method":"roots/list","params":{"marker":"n1"}}),
        json!({"jsonrpc":"2.0","id":null,"method":"roots/list","params":{"marker":"n2"}}),
        json!({"jsonrpc":"2.0","method":"files/read","params":{"path":"project/a.txt"}}),
        json!({"jsonrpc":"2.0","id":null,"method":"files/consent",
               "params":{"requestedPaths":["project"]}}),
        json!({"jsonrpc":"2.0","method":"files/consent","params":{"requestedPaths":["project"]}}),
    ];
    let mut lines: Vec<Value> = notes.iter().map(|n| line(n.to_string())).collect();
    lines.push(sentinel("s"));
    let r = raw(
        &mut p,
        1,
        json!({"lines": lines, "until": "s", "timeout": 60}),
    );
    assert!(
        r.host_lines.is_empty(),
        "brokered notifications reached the host: {:?}",
        r.host_lines.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    assert!(!r.timed_out, "the broker's lane is stuck: {r:?}");
    p.finish();
}

#[test]
fn a_brokered_notification_inside_a_server_batch_is_dropped() {
    let f = Fixture::new();
    let mut p = started(&f);
    let kept = json!({"jsonrpc":"2.0","method":"notifications/message",
                      "params":{"level":"info","data":"kept"}});
    let mixed = json!([
        {"jsonrpc":"2.0","method":"files/read","params":{"path":"project/a.txt"}},
        kept,
        {"jsonrpc":"2.0","id":null,"method":"roots/list"},
    ]);
    let only_ours = json!([{"jsonrpc":"2.0","method":"roots/list"}]);
    let r = raw(
        &mut p,
        1,
        json!({"lines": [line(mixed.to_string()), line(only_ours.to_string()), sentinel("s")],
               "until": "s", "timeout": 60}),
    );
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines
            .iter()
            .any(|l| contains(l, b"files/read") || contains(l, b"roots/list")),
        "a brokered notification reached the host: {shown:?}"
    );
    assert_eq!(r.host_lines.len(), 1, "{shown:?}");
    let got: Value = serde_json::from_slice(&r.host_lines[0]).unwrap();
    assert_eq!(
        got,
        json!([kept]),
        "the rest of the batch should reach the host"
    );
    p.finish();
}

#[test]
fn a_server_batch_with_nothing_brokered_reaches_the_host_byte_for_byte() {
    let f = Fixture::new();
    let mut p = started(&f);
    let batch: &[u8] = br#"[{"method":"notifications/message","jsonrpc":"2.0","params":{"zeta":1,"alpha":{"b":2,"a":1},"big":123456789012345678901234567890,"f":1.50,"s":"caf\u00e9 \/"}}, {"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}]"#;
    let r: Raw = raw(
        &mut p,
        1,
        json!({"lines": [line(batch), sentinel("s")], "until": "s", "timeout": 60}),
    );
    assert_eq!(
        r.host_lines.len(),
        1,
        "{:?}",
        r.host_lines.iter().map(|l| show(l)).collect::<Vec<_>>()
    );
    assert!(
        r.host_lines[0] == batch,
        "the batch was changed on its way:\n sent {}\n  got {}",
        show(batch),
        show(&r.host_lines[0])
    );
    p.finish();
}

#[test]
fn a_host_with_roots_never_receives_the_servers_roots_list() {
    let f = Fixture::new();
    let mut p = started(&f);
    let kept = json!({"jsonrpc":"2.0","method":"notifications/message",
                      "params":{"level":"info","data":"mixed"}});
    let lines = [
        line(r#"{"jsonrpc":"2.0","id":"p1","method":"roots/list"}"#),
        line(
            r#"[{"jsonrpc":"2.0","id":"b1","method":"roots/list"},{"jsonrpc":"2.0","id":"b2","method":"roots/list","params":{}}]"#,
        ),
        line(json!([{"jsonrpc":"2.0","id":"m1","method":"roots/list"}, kept]).to_string()),
        line(r#"{"jsonrpc":"2.0","id":"e1","method":"roots\/list"}"#),
        line(r#"{"jsonrpc":"2.0","id":"d1","method":"ping","method":"roots/list"}"#),
        line(b"{\"jsonrpc\":\"2.0\",\"id\":\"u\xff\",\"method\":\"roots/list\"}"),
        line(r#"{"jsonrpc":"2.0","id":"s\ud800","method":"roots/list"}"#),
        line(r#"{"jsonrpc":"2.0","id":1e400,"method":"roots/list"}"#),
        line(r#"{"jsonrpc":"2.0","id":"t1","method":"roots/list""#),
        sentinel("s"),
    ];
    // p1, b1+b2 (one batch), m1, e1, d1 (answered or refused: duplicate keys), and four
    // refusals.
    let r = raw(
        &mut p,
        1,
        json!({"lines": lines, "expect": 9, "until": "s", "timeout": 60}),
    );
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines
            .iter()
            .any(|l| contains(l, b"roots/list") || contains(l, b"roots\\/list")),
        "the host got a roots/list: {shown:?}"
    );
    assert_eq!(r.host_lines.len(), 1, "{shown:?}");
    let answered = |id: &str| {
        r.received.iter().any(|m| {
            let items = match m {
                Value::Array(items) => items.clone(),
                other => vec![other.clone()],
            };
            items
                .iter()
                .any(|i| i["id"] == id && i["result"]["roots"].is_array())
        })
    };
    for id in ["p1", "b1", "b2", "m1", "e1"] {
        assert!(
            answered(id),
            "{id} not answered by the proxy: {:?}",
            r.received
        );
    }
    p.finish();
}

#[test]
fn a_roots_list_behind_a_duplicate_method_key_never_reaches_the_host() {
    // Most parsers take the last of two equal keys, some the first: a request that is a
    // brokered one under either reading must not reach the host.
    let f = Fixture::new();
    let mut p = started(&f);
    let lines = [
        line(r#"{"jsonrpc":"2.0","id":"dm1","method":"roots/list","method":"ping"}"#),
        line(
            r#"{"jsonrpc":"2.0","id":"dm2","method":"files/read","params":{"path":"project/a.txt"},"method":"ping"}"#,
        ),
        sentinel("s"),
    ];
    let r = raw(
        &mut p,
        1,
        json!({"lines": lines, "expect": 2, "until": "s", "timeout": 60}),
    );
    let shown: Vec<String> = r.host_lines.iter().map(|l| show(l)).collect();
    assert!(
        !r.host_lines
            .iter()
            .any(|l| contains(l, b"roots/list") || contains(l, b"files/read")),
        "a brokered method reached the host: {shown:?}"
    );
    assert_eq!(
        r.received.len(),
        2,
        "each should be answered: {:?}",
        r.received
    );
    p.finish();
}
