//! Dropped streams are resumed: the remote server (the TypeScript SDK with an event store)
//! closes a stream in the middle of a tool call and goes on sending; the proxy reconnects
//! with `Last-Event-ID`, the server replays what it sent meanwhile, and nothing is lost.

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected, ok, tool};
use serde_json::json;

fn requests() -> serde_json::Value {
    json!([
        ["roots/list", {}],
        ["files/consent", {"requestedPaths": ["project/a.txt"]}],
        ["files/read", {"path": "project/a.txt"}],
    ])
}

#[test]
fn a_tool_calls_stream_closed_midway_is_resumed_and_replayed() {
    let f = Fixture::new();
    f.file("a.txt", "after the drop");
    // The server advises a 300 ms reconnection delay, so what it sends right after closing
    // the stream is stored before the proxy comes back for it: it must be replayed.
    let mut server = RemoteServer::start(&["--retry-ms", "300"]);
    let mut p = connected(&server, &f, &[]);
    let a = tool(
        &mut p,
        1,
        "ask",
        json!({"requests": requests(), "dropAfter": 1}),
    );
    assert_eq!(ok(&a[0])["roots"][0]["name"], "project", "{a}");
    assert_eq!(ok(&a[1])["granted"], true, "{a}");
    assert_eq!(ok(&a[2])["content"], "after the drop", "{a}");
    server.wait_for("closed-stream", |e| e["event"] == "closed-stream");
    let resume = server.wait_for("resuming GET", |e| {
        e["event"] == "http" && e["method"] == "GET" && e["lastEventId"].is_string()
    });
    assert!(resume["session"].is_string(), "{resume}");
    let replay = server.wait_for("replay", |e| e["event"] == "replay");
    assert!(
        replay["replayed"].as_u64().unwrap() >= 1,
        "the request sent after the drop was not replayed: {replay}"
    );
    assert_eq!(replay["lastEventId"], resume["lastEventId"]);
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
}

#[test]
fn the_servers_own_stream_closed_midway_is_resumed_and_replayed() {
    let f = Fixture::new();
    f.file("a.txt", "after the drop");
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    server.wait_for_get_stream();
    let a = tool(
        &mut p,
        1,
        "ask",
        json!({"requests": requests(), "dropAfter": 1, "via": "get"}),
    );
    assert_eq!(ok(&a[1])["granted"], true, "{a}");
    assert_eq!(ok(&a[2])["content"], "after the drop", "{a}");
    server.wait_for("closed-stream", |e| {
        e["event"] == "closed-stream" && e["via"] == "get"
    });
    server.wait_for("resuming GET", |e| {
        e["event"] == "http" && e["method"] == "GET" && e["lastEventId"].is_string()
    });
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
}
