//! When the remote server cannot be reached, at the start or in the middle of a session, the
//! host gets JSON-RPC errors for its requests, stderr says what happened, and the proxy exits
//! with 1 within a bounded time (the retries with backoff, never a hang). Usage errors in the
//! remote options exit with 2 before anything is sent.

mod common;
#[path = "common/interop.rs"]
mod interop;
#[path = "common/remote.rs"]
mod remote;
#[path = "common/sidecar.rs"]
mod sidecar;

use common::Fixture;
use remote::{RemoteServer, dead_port, initialize, proxy, start_tool, timed_exit};
use serde_json::json;
use sidecar::run_bounded;
use std::ffi::OsString;
use std::time::Duration;

#[test]
fn an_endpoint_unreachable_at_the_start_is_an_error_and_an_exit() {
    let f = Fixture::new();
    let url = format!("http://127.0.0.1:{}/mcp", dead_port());
    let mut p = proxy(&url, &f, &[], &[]);
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion": remote::VERSION, "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "1"}}}),
    );
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "unreachable", "{r}");
    let (status, took) = timed_exit(&mut p, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    // Two retries: 200 ms and 400 ms of backoff.
    assert!(took < Duration::from_secs(5), "took {took:?}");
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
    let mut p = proxy(&server.url(), &f, &[], &[]);
    initialize(&mut p, json!({}));
    // A tool call that waits on the server, its stream open.
    start_tool(
        &mut p,
        1,
        "notes",
        json!({"method": "notifications/never", "timeoutMs": 30000}),
    );
    server.wait_for("the tool call", |e| e["event"] == "notes-waiting");
    server.kill();
    let r = p.wait_id(&json!(1));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    // Unreachable when the proxy tried to resume the stream; a connection that broke before
    // the answer's headers is a transport failure (the request is not sent twice).
    let reason = r["error"]["data"]["reason"].as_str().unwrap();
    assert!(["unreachable", "transport"].contains(&reason), "{r}");
    let (status, took) = timed_exit(&mut p, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        p.stderr()
            .contains("fsbroker: cannot reach the remote server"),
        "{}",
        p.stderr()
    );
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
