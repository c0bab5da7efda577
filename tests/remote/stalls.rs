//! A remote server cannot stall the session or make the proxy spin: a slow answer to a
//! notification, a flood of requests before the `initialize` result, a new session whose
//! `initialize` never ends, a GET stream that always says 404 and streams that close as soon
//! as they open are each met with a bounded wait or a bounded number of attempts, and the
//! host's other traffic goes on. Each server here is `tests/interop/remote_evil.py`.

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected, initialize, proxy, send_initialize, start_tool};
use crate::{remote, sidecar};
use serde_json::json;
use std::time::Duration;

/// `tools/list` and `ping` both get their results, and the host leaving ends the proxy with 0.
fn traffic_flows_and_the_end_is_clean(p: &mut sidecar::Sidecar) {
    p.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    p.send(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    let r = p.wait_id(&json!(1));
    assert!(r["result"].is_object(), "{r}");
    let r = p.wait_id(&json!(2));
    assert!(r["result"].is_object(), "{r}");
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}

#[test]
fn an_endless_answer_to_a_notification_holds_nothing_up() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("notif-sse", "");
    // The server answers `notifications/initialized` with an event stream that never ends.
    let mut p = connected(&server, &f, &[]);
    server.wait_for("initialized", |e| e["rpc"] == "notifications/initialized");
    traffic_flows_and_the_end_is_clean(&mut p);
}

#[test]
fn requests_before_the_initialize_result_do_not_wedge_the_proxy() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("init-flood", "");
    let mut p = proxy(&server.url(), &f, &[], &[]);
    // 400 roots/list requests come on the initialize stream before its result: far more than
    // the queues between the proxy's tasks hold.
    let r = initialize(&mut p, json!({}));
    assert_eq!(r["serverInfo"]["name"], "evil");
    traffic_flows_and_the_end_is_clean(&mut p);
    // Each of the server's requests got an answer (a result or a refusal) POSTed back.
    let answered = server
        .stop()
        .iter()
        .filter(|e| e["method"] == "POST" && e["id"].as_str().is_some_and(|i| i.starts_with('r')))
        .count();
    assert!(answered > 0, "no answer reached the server");
}

#[test]
fn a_new_session_whose_initialize_streams_forever_does_not_hold_up_requests() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("renew-hang", "");
    let mut p = connected(&server, &f, &[]);
    // Session s1 is forgotten at once (404); the second initialize is answered with an event
    // stream that never brings its result. Its headers carry the new session id, which is
    // all the proxy waits for.
    traffic_flows_and_the_end_is_clean(&mut p);
    // The server's log trails its answers: wait for the request on the new session, after
    // which both initialize events have been read.
    server.wait_for("tools/list on session s2", |e| {
        e["event"] == "http"
            && e["method"] == "POST"
            && e["rpc"] == "tools/list"
            && e["session"] == "s2"
    });
    assert_eq!(server.named("initialize").len(), 2, "{:#?}", server.seen);
    // The session id comes from the answer to initialize only, not from the 202 to the
    // replayed notifications/initialized.
    let all = server.stop();
    assert!(
        all.iter().all(|e| e["session"] != "not-from-initialize"),
        "{all:#?}"
    );
}

#[test]
fn a_new_session_that_never_starts_fails_within_the_request_timeout() {
    let f = Fixture::new();
    let server = RemoteServer::evil("renew-silent", "");
    let mut p = connected(&server, &f, &["--request-timeout", "2"]);
    // The second initialize gets no answer at all.
    p.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    let r = p.wait_id(&json!(1));
    assert_eq!(r["error"]["data"]["reason"], "session_expired", "{r}");
    let (status, _) = remote::timed_exit(&mut p, Duration::from_secs(15));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(
        p.stderr().contains("cannot start a new remote session"),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_get_stream_that_always_says_404_is_given_up_after_one_new_session() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("get404", "");
    let mut p = connected(&server, &f, &[]);
    // The first GET's 404 starts a new session, whose GET is refused the same way.
    let gets = std::cell::Cell::new(0);
    server.wait_for("a second GET", |e| {
        if e["method"] == "GET" {
            gets.set(gets.get() + 1);
        }
        gets.get() >= 2
    });
    // Then nothing more: a storm shows within seconds (it used to be some 25 initialize
    // POSTs a second).
    server.observe(Duration::from_secs(2));
    let inits = server.named("initialize").len();
    let gets = server.gets().len();
    assert!(
        inits == 2 && gets == 2,
        "{inits} initialize, {gets} GET: {:#?}",
        server.seen
    );
    // The session goes on with the new session's id.
    let r = p.request("tools/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    assert_eq!(server.wait_post("tools/list")["session"], "s2");
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}

#[test]
fn streams_that_close_at_once_are_resumed_a_bounded_number_of_times() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("resume-storm", "");
    let mut p = connected(&server, &f, &[]);
    // The tool call's stream carries an event id and closes; every GET (the resumption and
    // the server's own stream) is an event stream that closes at once, with `retry: 0`.
    start_tool(&mut p, 1, "anything", json!({}));
    let r = p.wait_id(&json!(1));
    assert_eq!(r["error"]["data"]["reason"], "stream_lost", "{r}");
    server.observe(Duration::from_secs(3));
    let resumed = server
        .gets()
        .iter()
        .filter(|e| e["lastEventId"] == "ev1")
        .count();
    let fresh = server.gets().len() - resumed;
    // --retries 2: two resumptions that bring nothing, and the GET stream opened at most
    // three times in a row without bringing anything.
    assert!(resumed <= 2, "{resumed} resumptions: {:#?}", server.seen);
    assert!(fresh <= 3, "{fresh} GET streams: {:#?}", server.seen);
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}

#[test]
fn an_idle_stream_the_server_closes_now_and_then_is_reopened_for_good() {
    let f = Fixture::new();
    // Every GET stream stays open 1.2 s, brings nothing, and closes: longer than the connect
    // timeout, so none counts against the one retry allowed.
    let mut server = RemoteServer::evil("get-idle", "");
    let mut p = proxy(
        &server.url(),
        &f,
        &["--connect-timeout", "1", "--retries", "1"],
        &[],
    );
    initialize(&mut p, json!({}));
    let gets = std::cell::Cell::new(0);
    server.wait_for("a fourth GET", |e| {
        if e["method"] == "GET" {
            gets.set(gets.get() + 1);
        }
        gets.get() >= 4
    });
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}

#[test]
fn the_host_leaving_is_seen_while_the_server_floods() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("init-flood", "");
    let mut p = proxy(&server.url(), &f, &[], &[]);
    send_initialize(&mut p, json!({}));
    server.wait_for("initialize", |e| e["event"] == "initialize");
    // More lines than the queue towards the server holds, then the host leaves: its leaving
    // must still be seen, and each line answered.
    for id in 0..100 {
        p.send(&json!({"jsonrpc":"2.0","id":id,"method":"ping"}));
    }
    p.close_stdin();
    let (status, took) = remote::timed_exit(&mut p, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let (_, rest) = p.finish();
    let lines: Vec<serde_json::Value> = rest
        .iter()
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    assert!(
        lines
            .iter()
            .any(|v| v["id"] == "init" && v["result"].is_object()),
        "{}",
        p.stderr()
    );
    let answered = lines
        .iter()
        .filter(|v| v["id"].is_i64() && v.get("method").is_none())
        .count();
    assert_eq!(answered, 100, "{}", p.stderr());
}
