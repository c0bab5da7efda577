//! `proxy --url` in a 2026-07-28 session speaks that revision's Streamable HTTP: every
//! message is a POST of its own carrying `MCP-Protocol-Version`, `Mcp-Method` and (for
//! `tools/call`, `prompts/get`, `resources/read`) `Mcp-Name`, with no `Mcp-Session-Id`, no
//! GET stream and no DELETE; cancelling closes the request's stream; `subscriptions/listen`
//! is relayed like any streamed request. The server is `remote_evil.py modern`, a
//! modern-only server that refuses a request whose headers do not mirror its body.

use crate::common::Fixture;
use crate::remote::{RemoteServer, proxy, send_initialize};
use crate::sidecar;
use crate::sidecar::{Sidecar, file_uri};
use serde_json::{Value, json};
use std::time::Duration;

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test-host", "version": "1"}})
}

fn discover(p: &mut Sidecar, id: &str) -> Value {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"server/discover","params":{"_meta": meta()}}));
    p.wait_id(&json!(id))
}

fn call(p: &mut Sidecar, id: i64, name: &str) {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":name,"arguments":{},"_meta": meta()}}));
}

/// Opens a `subscriptions/listen` stream with id "listen" and the filter `notifications`.
fn listen(p: &mut Sidecar, notifications: Value) {
    p.send(
        &json!({"jsonrpc":"2.0","id":"listen","method":"subscriptions/listen",
        "params":{"notifications": notifications,"_meta": meta()}}),
    );
}

/// Every POST the server saw mirrors its body in the headers and carries no session.
fn assert_modern_wire(http: &[Value]) {
    assert!(!http.is_empty());
    for e in http {
        assert_eq!(e["method"], "POST", "only POSTs: {e}");
        assert_eq!(e["session"], Value::Null, "no session id: {e}");
        assert_eq!(e["protocolVersion"], "2026-07-28", "{e}");
        assert_eq!(
            e["mcpMethod"], e["rpc"],
            "Mcp-Method mirrors the method: {e}"
        );
    }
}

#[test]
fn a_modern_session_posts_each_message_with_the_headers_and_no_session() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    let d = discover(&mut p, "probe");
    assert_eq!(
        d["result"]["supportedVersions"],
        json!(["2026-07-28"]),
        "{d}"
    );
    // The server asks for roots: the broker answers, the proxy retries, the host sees only
    // the final result.
    call(&mut p, 1, "roots");
    let r = p.wait_id(&json!(1));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    let got: Value = serde_json::from_str(text).unwrap();
    assert_eq!(got["state"], "st1", "{got}");
    assert_eq!(got["roots"][0]["uri"], file_uri(&f.root), "{got}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    assert_modern_wire(&http);
    let calls: Vec<&Value> = http.iter().filter(|e| e["rpc"] == "tools/call").collect();
    assert_eq!(calls.len(), 2, "the call and the proxy's retry: {http:#?}");
    assert!(calls.iter().all(|e| e["mcpName"] == "roots"), "{http:#?}");
    assert!(http.iter().all(|e| e["error"].is_null()));
}

#[test]
fn auto_with_a_modern_only_server_goes_modern_after_the_refused_initialize() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &[], &[]);
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(
        r["error"]["data"]["supported"],
        json!(["2026-07-28"]),
        "{r}"
    );
    let d = discover(&mut p, "probe");
    assert!(d.get("result").is_some(), "{d}");
    call(&mut p, 2, "roots");
    let r = p.wait_id(&json!(2));
    assert!(r["result"]["content"][0]["text"].is_string(), "{r}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    // The initialize went by the legacy transport (it has no version header yet); every
    // message after it by the modern one.
    let after: Vec<Value> = http.iter().skip(1).cloned().collect();
    assert_eq!(http[0]["rpc"], "initialize", "{http:#?}");
    assert_modern_wire(&after);
}

#[test]
fn cancelling_closes_the_stream_and_sends_no_cancellation() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    discover(&mut p, "probe");
    call(&mut p, 7, "hold");
    server.wait_for("held call", |e| e["rpc"] == "tools/call");
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"user"}}));
    server.wait_for("closed stream", |e| {
        e["event"] == "closed" && e["what"] == 7
    });
    // The session goes on.
    let d = discover(&mut p, "again");
    assert!(d.get("result").is_some(), "{d}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    assert!(
        http.iter().all(|e| e["rpc"] != "notifications/cancelled"),
        "{http:#?}"
    );
    assert_modern_wire(&http);
}

#[test]
fn change_notifications_come_on_the_relayed_listen_stream() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    discover(&mut p, "probe");
    listen(&mut p, json!({"toolsListChanged": true}));
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|m: &Value| m["method"] == "notifications/tools/list_changed")
    {
        seen.push(p.next_within(Duration::from_secs(30)));
    }
    // The host ends the subscription as it ends any request: by cancelling it.
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":"listen"}}));
    server.wait_for("closed listen stream", |e| {
        e["event"] == "closed" && e["what"] == "listen"
    });
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    assert_modern_wire(&http);
}

#[test]
fn the_host_leaving_ends_an_open_listen_stream_cleanly() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    // A long grace: were the listen stream counted as a request left unanswered, the proxy
    // would wait all of it and exit 1.
    let mut p = proxy(
        &server.url(),
        &f,
        &["--era", "modern", "--shutdown-grace", "600"],
        &[],
    );
    discover(&mut p, "probe");
    listen(&mut p, json!({"toolsListChanged": true}));
    // The stream is open once its first notification reached the host (the server reports
    // its close only from then on).
    loop {
        let m = p.next_within(Duration::from_secs(30));
        if m["method"] == "notifications/subscriptions/acknowledged" {
            break;
        }
    }
    let (status, rest) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let rest: Vec<Value> = rest
        .iter()
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    assert!(
        rest.iter().all(|m| m["id"] != "listen"),
        "no error for the listen stream: {rest:?}"
    );
    server.wait_for("closed listen stream", |e| {
        e["event"] == "closed" && e["what"] == "listen"
    });
}

#[test]
fn the_request_metadata_headers_cannot_be_set_by_hand() {
    let f = Fixture::new();
    for header in ["Mcp-Method: tools/list", "mcp-name: x"] {
        let out = sidecar::run_bounded(&[
            "proxy".into(),
            "--url".into(),
            "http://127.0.0.1:9/mcp".into(),
            "--root".into(),
            f.root.clone().into(),
            "--header".into(),
            header.into(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{header}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.to_lowercase().contains("mcp-"), "{header}: {err}");
    }
}

/// A listen stream the server drops (no resumption in 2026-07-28) is not reopened behind the
/// host's back, which would hide that changes in the gap were lost: the host gets its
/// `subscriptions/listen` answered with an error naming the lost stream, and its SDK opens a
/// new one and lists again. The session goes on.
#[test]
fn a_dropped_listen_stream_is_an_error_for_the_host_and_the_session_goes_on() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    discover(&mut p, "probe");
    listen(
        &mut p,
        json!({"toolsListChanged": true, "dropAfterFirst": true}),
    );
    let answer = p.wait_id(&json!("listen"));
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "stream_lost", "{answer}");
    // The session goes on: the host's next request is answered.
    p.send(&json!({"jsonrpc":"2.0","id":"after","method":"tools/list",
        "params":{"_meta": meta()}}));
    let after = p.wait_id(&json!("after"));
    assert_eq!(after["result"]["tools"], json!([]), "{after}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    let listens = http
        .iter()
        .filter(|e| e["rpc"] == "subscriptions/listen")
        .count();
    assert_eq!(
        listens, 1,
        "the proxy opened no listen stream of its own: {http:#?}"
    );
    assert_modern_wire(&http);
}

/// The tasks extension's requests name their task in `Mcp-Name` (`params.taskId`), as its
/// HTTP binding asks and the TypeScript SDK 2.x server checks.
#[test]
fn tasks_requests_name_their_task_in_the_headers() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("modern", "");
    let mut p = proxy(&server.url(), &f, &["--era", "modern"], &[]);
    discover(&mut p, "probe");
    p.send(&json!({"jsonrpc":"2.0","id":"task","method":"tasks/get",
        "params":{"taskId":"t-1","_meta": meta()}}));
    let answer = p.wait_id(&json!("task"));
    assert!(
        answer.get("result").is_some(),
        "no header mismatch: {answer}"
    );
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let http = server.stop_http();
    let task = http.iter().find(|e| e["rpc"] == "tasks/get").unwrap();
    assert_eq!(task["mcpName"], "t-1", "{task}");
    assert_modern_wire(&http);
}
