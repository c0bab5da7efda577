//! The Streamable HTTP session as the seed describes it, seen from the remote server (the
//! TypeScript SDK): the headers of every request, the session id kept and sent, a new
//! session when the server forgets ours (404), and DELETE when the host is gone.

use crate::common::Fixture;
use crate::remote::{RemoteServer, ask, connected, ok, proxy, send_initialize, tool};
use crate::{remote, sidecar};
use serde_json::json;

#[test]
fn every_request_carries_the_accept_header_session_id_and_protocol_version() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    ask(&mut p, 1, json!([["roots/list", {}]]));
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let session = server.wait_for("initialize", |e| e["event"] == "initialize")["session"].clone();
    server.wait_for("delete", |e| e["event"] == "delete");
    let http = server.named("http");
    let (first, rest) = http.split_first().expect("requests");
    assert_eq!(first["method"], "POST");
    assert!(first["session"].is_null(), "{first}");
    assert!(first["protocolVersion"].is_null(), "{first}");
    assert_eq!(first["accept"], "application/json, text/event-stream");
    for r in rest {
        assert_eq!(r["session"], session, "{r}");
        assert_eq!(r["protocolVersion"], remote::VERSION, "{r}");
        match r["method"].as_str() {
            Some("POST") => assert_eq!(r["accept"], "application/json, text/event-stream"),
            Some("GET") => assert_eq!(r["accept"], "text/event-stream"),
            Some("DELETE") => {}
            other => panic!("unexpected method {other:?}"),
        }
    }
    let methods: Vec<&str> = rest.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert!(methods.contains(&"GET"), "{methods:?}");
    assert_eq!(methods.last(), Some(&"DELETE"), "{methods:?}");
}

#[test]
fn a_forgotten_session_is_replaced_and_the_request_still_succeeds() {
    let f = Fixture::new();
    f.file("a.txt", "still here");
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    let a = ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": ["project"]}]]),
    );
    assert_eq!(ok(&a[0])["granted"], true);
    let first = server.wait_for("initialize", |e| e["event"] == "initialize")["session"].clone();
    tool(&mut p, 2, "forget", json!({}));
    server.wait_for("forgot", |e| e["event"] == "forgot");
    // The next request gets 404; the proxy starts a new session and sends it again.
    let r = p.request("tools/list", json!({}));
    assert!(r["result"]["tools"].is_array(), "{r}");
    let inits = server.wait_count("initialize", 2, |e| e["event"] == "initialize");
    assert_eq!(inits.len(), 2, "{:#?}", server.seen);
    let second = inits[1]["session"].clone();
    assert_ne!(first, second);
    // The host saw one initialize response, not two.
    let a = ask(
        &mut p,
        3,
        json!([["files/read", {"path": "project/a.txt"}]]),
    );
    // Grants belong to the proxy's session with the broker, which goes on.
    assert_eq!(ok(&a[0])["content"], "still here", "{a:?}");
    let (status, rest) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    for line in rest {
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_ne!(
            v["id"], "init",
            "a second initialize response reached the host: {v}"
        );
    }
    assert!(
        p.stderr().contains("starting a new session"),
        "{}",
        p.stderr()
    );
    // The new session, not the old, is the one deleted.
    let deleted = server.wait_for("delete", |e| e["event"] == "delete");
    assert_eq!(deleted["session"], second);
    // After the new session started, requests carry its id.
    let after: Vec<_> = server
        .named("http")
        .into_iter()
        .skip_while(|e| e["session"] != second)
        .collect();
    assert!(after.iter().all(|e| e["session"] == second), "{after:#?}");
}

#[test]
fn messages_sent_just_before_the_host_leaves_are_still_answered() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = proxy(&server.url(), &f, &[], &[]);
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion": remote::VERSION, "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "1"}}}),
    );
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    p.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    // The host leaves at once; the proxy sends what it had and waits for the answers.
    let (status, rest) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let answers: Vec<serde_json::Value> = rest
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == "init" && a["result"].is_object()),
        "{answers:?}; stderr: {}",
        p.stderr()
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 1 && a["result"]["tools"].is_array()),
        "{answers:?}"
    );
    server.wait_for("delete", |e| e["event"] == "delete");
}

#[test]
fn a_session_id_outside_visible_ascii_ends_the_session() {
    for value in ["space", "latin1"] {
        let f = Fixture::new();
        let mut server = RemoteServer::evil("bad-session", value);
        let mut p = proxy(&server.url(), &f, &[], &[]);
        send_initialize(&mut p, json!({}));
        let r = p.wait_id(&json!("init"));
        assert_eq!(
            r["error"]["data"]["reason"], "bad_session_id",
            "{value}: {r}"
        );
        let status = p.wait_exit(sidecar::WAIT);
        assert_eq!(status.code(), Some(1), "{value}: {}", p.stderr());
        assert!(
            p.stderr().contains("invalid Mcp-Session-Id"),
            "{value}: {}",
            p.stderr()
        );
        // Nothing was sent with it.
        let later: Vec<_> = server
            .stop_http()
            .into_iter()
            .filter(|e| e["rpc"] != "initialize")
            .collect();
        assert!(later.is_empty(), "{value}: {later:#?}");
    }
}

#[test]
fn a_server_without_a_stream_of_its_own_is_asked_once() {
    let f = Fixture::new();
    // GET is answered 405.
    let mut server = RemoteServer::evil("plain", "");
    let mut p = connected(&server, &f, &[]);
    server.wait_for("GET", |e| e["method"] == "GET");
    let r = p.request("tools/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    // A retry would come after 200 ms.
    server.observe(std::time::Duration::from_secs(1));
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    server.stop();
    assert_eq!(server.gets().len(), 1, "{:#?}", server.seen);
    assert!(p.stderr().contains("HTTP 405"), "{}", p.stderr());
}

#[test]
fn sigterm_ends_the_remote_session_with_a_delete() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    let session = server.wait_for("initialize", |e| e["event"] == "initialize")["session"].clone();
    let pid = rustix::process::Pid::from_raw(p.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    // The host's input stays open: the signal alone ends the session.
    let status = p.wait_exit(sidecar::WAIT);
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    let deleted = server.wait_for("delete", |e| e["event"] == "delete");
    assert_eq!(deleted["session"], session);
}
