//! Extra headers reach the remote server on every request: a bearer token read from the
//! environment (`--bearer-env`), never from the command line and never in the proxy's logs,
//! and plain headers (`--header`); never through a proxy the environment names when the
//! server is on loopback, and never after a redirect to another origin.

use crate::common::Fixture;
use crate::remote::{RemoteServer, ask, connected, initialize, proxy, send_initialize};
use crate::sidecar;
use serde_json::json;

const TOKEN: &str = "tok-7f3a9c-not-for-logs";

#[test]
fn a_bearer_token_from_the_environment_reaches_the_server_and_no_log() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&[]);
    let mut p = proxy(
        &server.url(),
        &f,
        &[
            "--bearer-env",
            "FSBROKER_TEST_TOKEN",
            "--header",
            "X-Team: blue",
        ],
        &[("FSBROKER_TEST_TOKEN", TOKEN)],
    );
    initialize(&mut p, json!({}));
    ask(&mut p, 1, json!([["roots/list", {}]]));
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    server.wait_for("delete", |e| e["event"] == "delete");
    let http = server.named("http");
    assert!(http.len() >= 4, "{http:#?}");
    for r in &http {
        assert_eq!(r["authorization"], format!("Bearer {TOKEN}"), "{r}");
        assert_eq!(r["team"], "blue", "{r}");
    }
    // Debug logs name the headers, never the token.
    let err = p.stderr();
    assert!(err.contains("authorization"), "{err}");
    assert!(!err.contains(TOKEN), "the token is in the log: {err}");
}

#[test]
fn headers_follow_the_fallback_to_the_old_transport() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&["--legacy"]);
    let mut p = proxy(
        &server.url(),
        &f,
        &["--header-env", "Authorization=FSBROKER_TEST_AUTH"],
        &[("FSBROKER_TEST_AUTH", TOKEN)],
    );
    initialize(&mut p, json!({}));
    p.finish();
    server.stop();
    let http = server.named("http");
    assert!(http.len() >= 3, "{http:#?}");
    for r in &http {
        assert_eq!(r["authorization"], TOKEN, "{r}");
    }
    assert!(!p.stderr().contains(TOKEN));
}

#[test]
fn a_proxy_named_by_the_environment_never_carries_traffic_to_loopback() {
    let f = Fixture::new();
    // An "HTTP proxy" that logs whatever reaches it; nothing may.
    let mut corporate = RemoteServer::evil("plain", "");
    let mut server = RemoteServer::evil("plain", "");
    let via = format!("http://127.0.0.1:{}", corporate.port);
    let url = format!("http://localhost:{}/mcp", server.port);
    let mut env = vec![
        ("FSBROKER_TEST_TOKEN", TOKEN),
        ("NO_PROXY", ""),
        ("no_proxy", ""),
    ];
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        env.push((name, &via));
    }
    let mut p = proxy(&url, &f, &["--bearer-env", "FSBROKER_TEST_TOKEN"], &env);
    initialize(&mut p, json!({}));
    let r = p.request("tools/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
    let leaked = corporate.stop_http();
    assert!(
        leaked.is_empty(),
        "the proxy variable's listener got: {leaked:#?}"
    );
    server.stop();
    let http = server.named("http");
    assert!(http.len() >= 3, "{http:#?}");
    for r in &http {
        assert_eq!(r["authorization"], format!("Bearer {TOKEN}"), "{r}");
    }
}

#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let f = Fixture::new();
    let mut elsewhere = RemoteServer::evil("plain", "");
    // Same host, another port: another origin.
    let target = format!("http://127.0.0.1:{}/mcp", elsewhere.port);
    let server = RemoteServer::evil("redirect", &target);
    let mut p = proxy(
        &server.url(),
        &f,
        &["--bearer-env", "FSBROKER_TEST_TOKEN"],
        &[("FSBROKER_TEST_TOKEN", TOKEN)],
    );
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["data"]["reason"], "http_status", "{r}");
    assert_eq!(r["error"]["data"]["status"], 307, "{r}");
    let status = p.wait_exit(sidecar::WAIT);
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    let reached = elsewhere.stop_http();
    assert!(reached.is_empty(), "{reached:#?}");
}

#[test]
fn redirects_within_the_origin_are_followed_five_times_and_no_more() {
    let f = Fixture::new();
    let server = RemoteServer::evil("redirects", "5");
    let mut p = connected(&server, &f, &[]);
    let r = p.request("tools/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());

    let server = RemoteServer::evil("redirects", "6");
    let mut p = proxy(&server.url(), &f, &[], &[]);
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["data"]["status"], 307, "{r}");
    assert_eq!(p.wait_exit(sidecar::WAIT).code(), Some(1));
}
