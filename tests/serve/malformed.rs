//! Malformed input: broken JSON, wrong types, junk batches, unknown methods, deep nesting and
//! over-long lines, through the library's `handle_line` and through the real process. After
//! each, the same session must still answer `ping`.

use crate::common::*;
use crate::sidecar::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

const S: &str = "s";

/// Sends one line and parses the response line.
async fn line(b: &Broker, bytes: &[u8]) -> Value {
    let out = b
        .handle_line(S, bytes)
        .await
        .unwrap_or_else(|| panic!("no response to {:?}", String::from_utf8_lossy(bytes)));
    serde_json::from_slice(&out).expect("response line is JSON")
}

/// The session still works.
async fn assert_alive(b: &Broker) {
    let r = line(b, br#"{"jsonrpc":"2.0","id":"alive","method":"ping"}"#).await;
    assert_eq!(r["id"], "alive", "{r}");
    assert_eq!(r["result"], json!({}), "{r}");
}

/// Sends `bytes`, asserts one error response with `code` and `id`, then that ping works.
async fn expect_error(b: &Broker, bytes: &[u8], code: i64, id: Value) {
    let r = line(b, bytes).await;
    assert_eq!(r["jsonrpc"], "2.0", "{r}");
    assert_eq!(
        r["error"]["code"],
        code,
        "for {:?}: {r}",
        String::from_utf8_lossy(bytes)
    );
    assert_eq!(r["id"], id, "for {:?}: {r}", String::from_utf8_lossy(bytes));
    assert!(r.get("result").is_none(), "{r}");
    assert_alive(b).await;
}

/// A value shown in a failure message, cut to a readable length.
fn short(v: &Value) -> String {
    v.to_string().chars().take(300).collect()
}

fn fixture() -> (Fixture, Broker) {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker();
    (f, b)
}

#[tokio::test]
async fn broken_json_is_parse_error_with_null_id() {
    let (_f, b) = fixture();
    for bad in [
        &br#"{"jsonrpc":"2.0","id":1,"method":"ping""#[..],
        b"{",
        b"not json at all",
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#,
        b"\xff\xfe\x00garbage",
    ] {
        expect_error(&b, bad, -32700, Value::Null).await;
    }
}

#[tokio::test]
async fn bad_ids_are_invalid_request_with_null_id() {
    let (_f, b) = fixture();
    for bad in [
        &br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#[..],
        br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
    ] {
        expect_error(&b, bad, -32600, Value::Null).await;
    }
}

#[tokio::test]
async fn wrong_envelope_types_are_invalid_request() {
    let (_f, b) = fixture();
    let cases: [(&[u8], Value); 7] = [
        (br#"{"jsonrpc":"2.0","id":3,"method":5}"#, json!(3)),
        (
            br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":"x"}"#,
            json!(4),
        ),
        (
            br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":7}"#,
            json!(5),
        ),
        (br#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#, json!(6)),
        (br#"{"id":7,"method":"ping"}"#, json!(7)),
        (br#"{"jsonrpc":"2.0","id":8}"#, json!(8)),
        (b"42", Value::Null),
    ];
    for (bad, id) in cases {
        expect_error(&b, bad, -32600, id).await;
    }
    for bad in [&b"null"[..], b"\"ping\"", b"true"] {
        expect_error(&b, bad, -32600, Value::Null).await;
    }
}

#[tokio::test]
async fn bad_params_are_invalid_params() {
    let (_f, b) = fixture();
    let req = |method: &str, params: Value| {
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":9,"method":method,"params":params}))
            .unwrap()
    };
    let too_many: Vec<String> = (0..65).map(|i| format!("project/f{i}")).collect();
    let cases = [
        req("files/read", json!(["project/a.txt"])),
        req("files/read", json!({"path": 5})),
        req("files/read", json!({})),
        req("files/read", json!({"path": "project/a.txt", "offset": -1})),
        req(
            "files/read",
            json!({"path": "project/a.txt", "offset": "0"}),
        ),
        req(
            "files/read",
            json!({"path": "project/a.txt", "length": 1.5}),
        ),
        req(
            "files/read",
            json!({"path": "project/a.txt", "encoding": "utf-16"}),
        ),
        req("files/consent", json!({"requestedPaths": []})),
        req("files/consent", json!({"requestedPaths": too_many})),
        req("files/consent", json!({"requestedPaths": "project"})),
        req(
            "files/consent",
            json!({"requestedPaths": ["project"], "access": "admin"}),
        ),
        req("files/stat", json!({"path": null})),
        req("files/list", json!({"path": "project", "recursive": "yes"})),
    ];
    for bad in cases {
        expect_error(&b, &bad, -32602, json!(9)).await;
    }
}

#[tokio::test]
async fn exactly_64_requested_paths_are_accepted() {
    let (_f, b) = fixture();
    let paths: Vec<String> = (0..64).map(|i| format!("project/f{i}")).collect();
    let r = call(&b, S, "files/consent", json!({"requestedPaths": paths})).await;
    assert_eq!(ok(&r)["granted"], true);
}

#[tokio::test]
async fn invalid_params_message_stays_short_for_huge_values() {
    let (_f, b) = fixture();
    let huge = "x".repeat(100_000);
    for params in [
        json!({"path": "project/a.txt", "encoding": huge}),
        json!({"requestedPaths": [huge.clone()], "access": huge}),
    ] {
        let method = if params.get("path").is_some() {
            "files/read"
        } else {
            "files/consent"
        };
        let req = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params});
        let out = b
            .handle_line(S, &serde_json::to_vec(&req).unwrap())
            .await
            .unwrap();
        let r: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(r["error"]["code"], -32602, "{}", short(&r));
        assert!(
            out.len() < 2000,
            "error echoes the input back ({} bytes)",
            out.len()
        );
    }
    assert_alive(&b).await;
}

#[tokio::test]
async fn junk_batch_gets_one_invalid_request_per_item() {
    let (_f, b) = fixture();
    let r = line(&b, b"[1,2,3]").await;
    let arr = r.as_array().unwrap_or_else(|| panic!("not an array: {r}"));
    assert_eq!(arr.len(), 3, "{r}");
    for e in arr {
        assert_eq!(e["error"]["code"], -32600, "{e}");
        assert_eq!(e["id"], Value::Null, "{e}");
        assert_eq!(e["jsonrpc"], "2.0", "{e}");
    }
    assert_alive(&b).await;
}

#[tokio::test]
async fn empty_batch_is_a_single_invalid_request() {
    let (_f, b) = fixture();
    let r = line(&b, b"[]").await;
    assert!(r.is_object(), "one response, not an array: {r}");
    assert_eq!(r["error"]["code"], -32600);
    assert_eq!(r["id"], Value::Null);
    assert_alive(&b).await;
}

#[tokio::test]
async fn batch_of_only_notifications_and_responses_gets_no_response() {
    let (_f, b) = fixture();
    let out = b
        .handle_line(
            S,
            br#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":5,"result":{}}]"#,
        )
        .await;
    assert!(out.is_none(), "{:?}", out.map(String::from_utf8));
    let out = b
        .handle_line(S, br#"{"jsonrpc":"2.0","id":5,"result":{}}"#)
        .await;
    assert!(out.is_none(), "a peer's response is not answered");
    assert_alive(&b).await;
}

#[tokio::test]
async fn unknown_methods_are_method_not_found() {
    let (_f, b) = fixture();
    let long = "m".repeat(10_000);
    for m in [
        "files/Watch",
        "files/chmod",
        "files/Write",
        "nope",
        "",
        "rpc.discover",
        long.as_str(),
    ] {
        let req = json!({"jsonrpc":"2.0","id":"u","method":m,"params":{"path":"project/a.txt"}});
        let bytes = serde_json::to_vec(&req).unwrap();
        let r = line(&b, &bytes).await;
        assert_eq!(r["error"]["code"], -32601, "{m:.40}: {}", short(&r));
        assert_eq!(r["id"], "u");
        assert!(
            r.to_string().len() < 1000,
            "the method name is echoed whole"
        );
        assert_alive(&b).await;
    }
}

#[tokio::test]
async fn deep_nesting_is_an_error_not_a_crash() {
    let (_f, b) = fixture();
    let open = "[".repeat(100_000);
    let closed = format!("{open}{}", "]".repeat(100_000));
    let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    let in_params = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":{closed}}}}}"
    );
    for bad in [open, closed, objects, in_params] {
        let r = line(&b, bad.as_bytes()).await;
        let code = r["error"]["code"].as_i64().unwrap_or(0);
        assert!(code == -32700 || code == -32600, "{}", short(&r));
        assert_eq!(r["id"], Value::Null);
        assert_alive(&b).await;
    }
}

#[tokio::test]
async fn over_long_line_is_invalid_request_and_the_session_continues() {
    let f = Fixture::new();
    let b = f.broker_with("read", "[limits]\nmax_line_bytes = 1000\n");
    let pad = |total: usize| {
        let head = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":""#;
        let tail = r#""}}"#;
        let mut s = head.to_owned();
        s.push_str(&"a".repeat(total - head.len() - tail.len()));
        s.push_str(tail);
        assert_eq!(s.len(), total);
        s
    };
    expect_error(&b, pad(2000).as_bytes(), -32600, Value::Null).await;
    expect_error(&b, pad(1001).as_bytes(), -32600, Value::Null).await;
    // At the limit exactly, the line is a normal request.
    let r = line(&b, pad(1000).as_bytes()).await;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"], json!({}));
}

#[test]
fn malformed_lines_through_the_process_leave_it_serving() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let deep = "[".repeat(100_000);
    let cases: [(&[u8], i64); 5] = [
        (b"{broken", -32700),
        (br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, -32600),
        (b"[]", -32600),
        (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, -32600),
        (deep.as_bytes(), -32700),
    ];
    for (bad, code) in cases {
        s.send_raw(bad);
        let r = s.next();
        assert_eq!(r["error"]["code"], code, "{r}");
        assert_eq!(r["id"], Value::Null);
        assert_eq!(ok(&s.request("ping", json!({}))), &json!({}));
    }
    s.send_raw(b"[1,2,3]");
    let r = s.next();
    assert_eq!(r.as_array().map(Vec::len), Some(3), "{r}");
    let r = s.request("no/such", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    let r = s.request("files/read", json!({"path": "project/a.txt", "offset": -1}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(ok(&s.request("ping", json!({}))), &json!({}));
    let (status, rest) = s.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "unexpected extra lines: {rest:?}");
}

#[test]
fn hundred_megabyte_line_is_skipped_with_bounded_memory() {
    const MIB: usize = 1 << 20;
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let mut stdin = s.take_stdin();
    let writer = std::thread::spawn(move || {
        stdin
            .write_all(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#)
            .unwrap();
        let chunk = vec![b'a'; MIB];
        for _ in 0..100 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\"}}\n").unwrap();
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .unwrap();
        stdin.flush().unwrap();
        stdin
    });
    // Moving 100 MB through a pipe on a loaded machine may take a while; still bounded.
    let first = s.next_within(Duration::from_secs(60));
    assert_eq!(first["error"]["code"], -32600, "{}", short(&first));
    assert_eq!(first["id"], Value::Null);
    let second = s.next();
    assert_eq!(second["id"], 2, "{second}");
    assert_eq!(second["result"], json!({}));
    if let Some(hwm) = s.proc_status_kb("VmHWM") {
        assert!(hwm < 80 * 1024, "peak RSS {hwm} kB while skipping the line");
    }
    let stdin = writer.join().unwrap();
    drop(stdin);
    let (status, rest) = s.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "unexpected extra lines: {rest:?}");
}
