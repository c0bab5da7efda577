//! When the remote server cannot be reached, at the start or in the middle of a session, the
//! host gets JSON-RPC errors for its requests, stderr says what happened, and the proxy exits
//! with 1 within a bounded time (the retries with backoff, never a hang). Usage errors in the
//! remote options exit with 2 before anything is sent.

use crate::common::Fixture;
use crate::remote::{
    RemoteServer, connected, dead_port, proxy, proxy_defaults, send_initialize, start_tool,
    timed_exit,
};
use crate::sidecar;
use crate::sidecar::run_bounded;
use serde_json::json;
use std::ffi::OsString;
use std::time::Duration;

#[test]
fn an_endpoint_unreachable_at_the_start_is_an_error_and_an_exit() {
    let f = Fixture::new();
    let url = format!("http://127.0.0.1:{}/mcp", dead_port());
    let mut p = proxy(&url, &f, &[], &[]);
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "unreachable", "{r}");
    // Two retries: 200 ms and 400 ms of backoff. The bound only proves there is no hang.
    let (status, took) = timed_exit(&mut p, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    // Refused connections fail at once; waiting out the tool call would take its 30 s.
    assert!(took < Duration::from_secs(25), "took {took:?}");
    let err = p.stderr();
    assert!(
        err.contains(&format!(
            "fsbroker: cannot reach the remote server at {url}"
        )),
        "{err}"
    );
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
}

#[test]
fn a_server_gone_mid_session_fails_the_requests_in_flight_and_ends_the_proxy() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    // A tool call that waits on the server, its stream open: the notification it sends
    // first on that stream reaching the host shows the proxy has the stream.
    start_tool(
        &mut p,
        1,
        "notes",
        json!({"method": "notifications/never", "timeoutMs": 30000, "announce": true}),
    );
    let seen = p.notifications_until(sidecar::WAIT, |n| {
        n["method"] == "notifications/test/waiting"
    });
    assert!(!seen.is_empty(), "the tool call's stream did not open");
    server.kill();
    // The stream drops; resuming it finds nothing listening.
    let r = p.wait_id(&json!(1));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "unreachable", "{r}");
    let (status, took) = timed_exit(&mut p, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    // Refused connections fail at once; waiting out the tool call would take its 30 s.
    assert!(took < Duration::from_secs(25), "took {took:?}");
    assert!(
        p.stderr()
            .contains("fsbroker: cannot reach the remote server"),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_server_that_never_completes_the_connection_costs_one_connect_timeout() {
    let f = Fixture::new();
    // Connecting hangs, as with a host that drops packets: five retries of 3 s each (and
    // their backoff) would take 24 s.
    let server = RemoteServer::evil("blackhole", "");
    let mut p = proxy(
        &server.url(),
        &f,
        &["--connect-timeout", "3", "--retries", "5"],
        &[],
    );
    let started = std::time::Instant::now();
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    let took = started.elapsed();
    assert_eq!(r["error"]["data"]["reason"], "unreachable", "{r}");
    // One connect timeout (3 s) on any machine; retrying would take 24 s of timers, which no
    // speed shortens, so 20 s tells them apart even on a slow machine.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let (status, _) = timed_exit(&mut p, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
}

#[test]
fn a_host_that_leaves_before_the_server_is_reached_gets_an_answer_and_exit_1() {
    let f = Fixture::new();
    let url = format!("http://127.0.0.1:{}/mcp", dead_port());
    // The defaults: five retries (6.2 s of backoff) outlast the 5 s shutdown grace.
    let mut p = proxy_defaults(&url, &f, &[], &[]);
    send_initialize(&mut p, json!({}));
    p.close_stdin();
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "shutdown", "{r}");
    let (status, took) = timed_exit(&mut p, Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let err = p.stderr();
    assert!(err.contains("fsbroker: "), "{err}");
    assert!(err.contains("never reached"), "{err}");
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
}

#[test]
fn requests_still_waiting_when_the_grace_runs_out_are_answered_and_the_exit_is_1() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &["--shutdown-grace", "1"]);
    start_tool(
        &mut p,
        1,
        "notes",
        json!({"method": "notifications/never", "timeoutMs": 60000}),
    );
    server.wait_for("the tool call", |e| e["event"] == "notes-waiting");
    p.close_stdin();
    let r = p.wait_id(&json!(1));
    assert_eq!(r["error"]["data"]["reason"], "shutdown", "{r}");
    let (status, _) = timed_exit(&mut p, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(p.stderr().contains("1 request"), "{}", p.stderr());
    // The session is still ended on the server.
    server.wait_for("delete", |e| e["event"] == "delete");
}

fn usage(args: &[&str]) -> (Option<i32>, String) {
    let mut all: Vec<OsString> = vec!["proxy".into()];
    all.extend(args.iter().map(OsString::from));
    let out = run_bounded(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn credentials_on_the_command_line_are_refused() {
    let (code, err) = usage(&[
        "--url",
        "https://example.com/mcp",
        "--header",
        "Authorization: Bearer s3cr3t-value",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--header-env Authorization=VARIABLE"), "{err}");
    assert!(!err.contains("s3cr3t-value"), "{err}");
    let (code, err) = usage(&["--url", "https://me:s3cr3t-value@example.com/mcp"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("must not carry a user name or password"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t-value"), "{err}");
    let (code, err) = usage(&[
        "--url",
        "https://example.com/mcp",
        "--bearer-env",
        "FSBROKER_TEST_UNSET_VARIABLE",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("FSBROKER_TEST_UNSET_VARIABLE"), "{err}");
    let (code, err) = usage(&[
        "--url",
        "https://example.com/mcp",
        "--",
        "node",
        "server.js",
    ]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = usage(&["--header", "X-Team: blue", "--", "node", "server.js"]);
    assert_eq!(code, Some(2), "{err}");
}
