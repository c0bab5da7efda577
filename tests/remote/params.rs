//! `proxy --url` in a 2026-07-28 session mirrors tool arguments into `Mcp-Param-*` headers
//! (revision 2026-07-28, basic/transports/streamable-http, "Custom Headers from Tool
//! Parameters"): the proxy learns each tool's `x-mcp-header` declarations from the server's
//! `tools/list` results (a JSON body or an event stream, pages merged), removes the tools
//! whose declarations are invalid before the host sees them, and adds the encoded headers to
//! every `tools/call`. The server is `params_server.py`, which logs the headers it got.

use crate::common::Fixture;
use crate::remote::{RemoteServer, proxy};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test-host", "version": "1"}})
}

fn request(p: &mut Sidecar, id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
    p.wait_id(&json!(id))
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Runs the whole exchange against the server started with `args`.
fn mirrored(args: &[&str]) {
    let f = Fixture::new();
    let mut server = RemoteServer::stdlib("params_server.py", args);
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    let d = request(&mut p, 1, "server/discover", json!({}));
    assert!(d.get("result").is_some(), "{d}");

    // Invalid declarations take their tool out of the host's list, on both pages.
    let first = request(&mut p, 2, "tools/list", json!({}));
    assert_eq!(names(&first), ["echo", "plain"], "{first}");
    assert_eq!(first["result"]["nextCursor"], "p2", "{first}");
    let second = request(&mut p, 3, "tools/list", json!({"cursor": "p2"}));
    assert_eq!(names(&second), ["nested"], "{second}");

    let calls = [
        (10, "echo", json!({"s": "us-west1", "n": 42, "b": true})),
        (
            11,
            "echo",
            json!({"s": "Hello, 世界", "n": -7, "b": false, "opt": null}),
        ),
        (12, "echo", json!({"s": " padded "})),
        (13, "echo", json!({"s": "=?base64?literal?="})),
        (14, "echo", json!({"s": "x\r\nEvil: 1"})),
        (15, "nested", json!({"cfg": {"region": "eu-west1"}})),
        (16, "plain", json!({"q": "no headers"})),
    ];
    for (id, name, args) in &calls {
        let r = request(
            &mut p,
            *id,
            "tools/call",
            json!({"name": name, "arguments": args}),
        );
        assert!(r["result"]["content"][0]["text"].is_string(), "{r}");
    }
    // An integer beyond 2^53 - 1 cannot be mirrored: the call is refused, never sent.
    let r = request(
        &mut p,
        17,
        "tools/call",
        json!({"name": "echo", "arguments": {"s": "a", "n": 9_007_199_254_740_992_u64}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());

    let http = server.stop_http();
    let of = |id: i64| -> Value {
        http.iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("no POST of id {id}: {http:#?}"))["params"]
            .clone()
    };
    assert_eq!(
        of(10),
        json!({"mcp-param-s": "us-west1", "mcp-param-n": "42", "mcp-param-b": "true"})
    );
    // Non-ASCII goes in the Base64 sentinel; null and absent arguments get no header.
    assert_eq!(
        of(11),
        json!({"mcp-param-s": "=?base64?SGVsbG8sIOS4lueVjA==?=", "mcp-param-n": "-7",
               "mcp-param-b": "false"})
    );
    assert_eq!(of(12), json!({"mcp-param-s": "=?base64?IHBhZGRlZCA=?="}));
    assert_eq!(
        of(13),
        json!({"mcp-param-s": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="})
    );
    assert_eq!(
        of(14),
        json!({"mcp-param-s": "=?base64?eA0KRXZpbDogMQ==?="})
    );
    assert_eq!(of(15), json!({"mcp-param-region": "eu-west1"}));
    assert_eq!(of(16), json!({}));
    assert!(
        http.iter().all(|e| e["id"] != 17),
        "the refused call never reached the server: {http:#?}"
    );
    // No argument and no declaration added a header of its own.
    for e in &http {
        let headers = e["headers"].as_array().unwrap();
        assert!(!headers.iter().any(|h| h == "evil"), "{e}");
    }
    // Each removal was logged, naming the tool.
    let log = p.stderr();
    for bad in [
        "bad_number",
        "bad_duplicate",
        "bad_items",
        "bad_token",
        "bad_injection",
        "bad_empty",
        "bad_anyof",
        "bad_object",
    ] {
        assert!(
            log.lines().any(|l| l.contains("WARN") && l.contains(bad)),
            "no warning for {bad}: {log}"
        );
    }
}

#[test]
fn tool_arguments_are_mirrored_into_mcp_param_headers_from_a_json_tools_list() {
    mirrored(&[]);
}

#[test]
fn tool_arguments_are_mirrored_into_mcp_param_headers_from_an_event_stream_tools_list() {
    mirrored(&["sse"]);
}

#[test]
fn a_call_refused_for_its_headers_is_tried_once_more_after_the_proxy_lists_the_tools() {
    retried(&["strict"]);
}

#[test]
fn the_proxys_own_tools_list_is_read_from_an_event_stream_too() {
    retried(&["strict", "sse"]);
}

/// A call before any list, against the strict server started with `args`.
fn retried(args: &[&str]) {
    let f = Fixture::new();
    let mut server = RemoteServer::stdlib("params_server.py", args);
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    request(&mut p, 1, "server/discover", json!({}));
    // The host calls before it ever listed the tools: the server refuses the headers, the
    // proxy lists the tools itself (both pages) and tries the call once more.
    let r = request(
        &mut p,
        5,
        "tools/call",
        json!({"name": "echo", "arguments": {"s": "eu", "n": 3}}),
    );
    assert!(r["result"]["content"][0]["text"].is_string(), "{r}");
    // A tool whose declarations are invalid stays unknown: one retry, then the refusal.
    let r = request(
        &mut p,
        6,
        "tools/call",
        json!({"name": "bad_number", "arguments": {"x": 1.5}}),
    );
    assert_eq!(r["error"]["code"], -32020, "{r}");
    let (status, rest) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    let calls: Vec<&Value> = http.iter().filter(|e| e["id"] == 5).collect();
    assert_eq!(calls.len(), 2, "the call and one retry: {http:#?}");
    assert_eq!(calls[0]["params"], json!({}));
    assert_eq!(
        calls[1]["params"],
        json!({"mcp-param-s": "eu", "mcp-param-n": "3"})
    );
    assert_eq!(http.iter().filter(|e| e["id"] == 6).count(), 2, "{http:#?}");
    let lists: Vec<&Value> = http.iter().filter(|e| e["rpc"] == "tools/list").collect();
    assert_eq!(
        lists.len(),
        4,
        "the proxy's own list, both pages, twice: {http:#?}"
    );
    // The proxy's lists never reached the host.
    assert!(
        !rest
            .iter()
            .any(|l| String::from_utf8_lossy(l).contains("fsbroker-mcp-param-list")),
        "{rest:?}"
    );
}
