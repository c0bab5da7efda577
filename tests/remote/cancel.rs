//! The host's `notifications/cancelled` ends the request it names: the request's slot among
//! the 1024 that may wait for the server is freed (the TypeScript SDK sends no response to a
//! cancelled request, so nothing else would free it), its stream is let go, and the
//! cancellation reaches the server after the request it cancels, never before.

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected, start_tool};
use crate::sidecar;
use serde_json::json;

/// The proxy lets at most this many requests wait for the server.
const MAX_PENDING: i64 = 1024;

fn cancel(p: &mut sidecar::Sidecar, id: i64) {
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId": id, "reason": "the user gave up"}}));
}

#[test]
fn too_many_waiting_requests_are_busy_and_cancelling_them_frees_their_slots() {
    let f = Fixture::new();
    // The old transport answers every POST with 202 at once, so a thousand requests wait
    // without a thousand connections.
    let server = RemoteServer::start(&["--legacy"]);
    let mut p = connected(&server, &f, &[]);
    let never = json!({"method": "notifications/never", "timeoutMs": 600000});
    for id in 0..MAX_PENDING {
        start_tool(&mut p, id, "notes", never.clone());
    }
    start_tool(&mut p, MAX_PENDING, "notes", never.clone());
    let r = p.wait_id(&json!(MAX_PENDING));
    assert_eq!(r["error"]["data"]["reason"], "busy", "{r}");
    for id in 0..MAX_PENDING {
        cancel(&mut p, id);
    }
    let r = p.request("tools/list", json!({}));
    assert!(r["result"]["tools"].is_array(), "{r}");
    let (status, rest) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    // A cancelled request gets no response.
    for line in rest {
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        let id = v["id"].as_i64();
        assert!(
            id.is_none_or(|i| i >= MAX_PENDING),
            "a cancelled request was answered: {v}"
        );
    }
}

#[test]
fn a_cancelled_requests_stream_is_let_go_and_the_cancellation_follows_the_request() {
    let f = Fixture::new();
    // The tool call's answer is an event stream held open with keep-alives.
    let mut server = RemoteServer::evil("hold", "");
    let mut p = connected(&server, &f, &[]);
    // The cancellation is written right behind its request.
    start_tool(&mut p, 7, "slow", json!({}));
    cancel(&mut p, 7);
    server.wait_for("the stream let go", |e| {
        e["event"] == "closed" && e["what"] == 7
    });
    let posts: Vec<_> = server
        .named("http")
        .into_iter()
        .filter(|e| e["method"] == "POST")
        .collect();
    let call = posts.iter().position(|e| e["rpc"] == "tools/call");
    let cancelled = posts.iter().position(|e| e["cancels"] == 7);
    assert!(
        matches!((call, cancelled), (Some(a), Some(b)) if a < b),
        "{posts:#?}"
    );
    let r = p.request("tools/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    let (status, rest) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    for line in rest {
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_ne!(v["id"], 7, "the cancelled request was answered: {v}");
    }
}
