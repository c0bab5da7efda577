//! What a remote server says when it refuses a request reaches the host (its JSON-RPC error
//! in `data.server`), a request lost when the server forgot the session is
//! `session_expired`, and a server that says 400 "unknown session" (instead of 404) gets a
//! new session once, or ends the proxy with a clear error rather than fail every call.

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected, error_of};
use crate::{remote, sidecar};
use serde_json::{Value, json};
use std::time::Duration;

fn call(p: &mut sidecar::Sidecar, id: i64) -> Value {
    remote::start_tool(p, id, "anything", json!({}));
    p.wait_id(&json!(id))
}

#[test]
fn the_servers_error_body_is_kept_in_data() {
    let f = Fixture::new();
    let server = RemoteServer::evil("say400", "");
    let mut p = connected(&server, &f, &[]);
    let r = call(&mut p, 1);
    assert_eq!(error_of(&r).2, "http_status", "{r}");
    let data = &r["error"]["data"];
    assert_eq!(data["status"], 400, "{r}");
    assert_eq!(data["server"]["code"], -32602, "{r}");
    assert_eq!(
        data["server"]["message"], "Bad Request: arguments rejected",
        "{r}"
    );
    assert_eq!(data["server"]["data"]["field"], "x", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("arguments rejected"),
        "{r}"
    );
    p.finish();
}

#[test]
fn a_request_lost_when_the_server_forgot_the_session_is_session_expired() {
    let f = Fixture::new();
    let server = RemoteServer::evil("lost-on-restart", "");
    let mut p = connected(&server, &f, &[]);
    let r = call(&mut p, 1);
    assert_eq!(error_of(&r).2, "session_expired", "{r}");
    assert_eq!(r["error"]["data"]["status"], 404, "{r}");
    assert_eq!(
        r["error"]["data"]["server"]["message"], "Session not found",
        "{r}"
    );
    p.finish();
}

#[test]
fn a_400_for_a_forgotten_session_starts_a_new_one() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("forget400", "");
    let mut p = connected(&server, &f, &[]);
    let r = call(&mut p, 1);
    assert!(r.get("result").is_some(), "{r}");
    let r = call(&mut p, 2);
    assert!(r.get("result").is_some(), "{r}");
    p.finish();
    server.stop();
    assert_eq!(server.named("initialize").len(), 2, "{:?}", server.seen);
}

#[test]
fn a_server_that_keeps_saying_400_unknown_session_ends_the_proxy_clearly() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("forget400-always", "");
    let mut p = connected(&server, &f, &[]);
    let r = call(&mut p, 1);
    assert_eq!(error_of(&r).2, "session_expired", "{r}");
    let status = p.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    let (_, _) = p.finish();
    let err = p.stderr();
    assert!(
        err.contains("refuses every session as unknown") && err.contains("No valid session ID"),
        "{err}"
    );
    // One new session was tried, not one per call.
    server.stop();
    assert_eq!(server.named("initialize").len(), 2, "{:?}", server.seen);
}
