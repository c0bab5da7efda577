//! A server of the HTTP+SSE transport of 2024-11-05 (the TypeScript SDK's SSEServerTransport):
//! its 405 to the Streamable HTTP `initialize` makes the proxy fall back, open the event
//! stream, wait for the `endpoint` event, and POST every message there; the server's file
//! requests are brokered the same way. An endpoint on another origin is refused.

use crate::common::Fixture;
use crate::remote::{
    RemoteServer, ask, connected, error_of, initialize, ok, proxy, send_initialize,
};
use crate::sidecar;
use serde_json::json;

#[test]
fn an_old_http_sse_server_is_reached_through_the_fallback() {
    let f = Fixture::new();
    f.file("a.txt", "over the old transport");
    let mut server = RemoteServer::start(&["--legacy"]);
    let mut p = proxy(&server.url(), &f, &[], &[]);
    let init = initialize(&mut p, json!({}));
    assert_eq!(init["serverInfo"]["name"], "remote-test");
    let a = ask(
        &mut p,
        1,
        json!([
            ["roots/list", {}],
            ["files/consent", {"requestedPaths": ["project"]}],
            ["files/read", {"path": "project/a.txt"}],
            ["files/read", {"path": "project/../outside/secret.txt"}],
        ]),
    );
    assert_eq!(ok(&a[0])["roots"][0]["name"], "project");
    assert_eq!(ok(&a[2])["content"], "over the old transport");
    assert_eq!(error_of(&a[3]).2, "outside_root");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    // First the Streamable HTTP attempt, refused; then the stream; then messages to the
    // endpoint it named.
    server.stop();
    let http = server.named("http");
    assert_eq!(
        (http[0]["method"].as_str(), http[0]["path"].as_str()),
        (Some("POST"), Some("/mcp"))
    );
    assert_eq!(
        (http[1]["method"].as_str(), http[1]["path"].as_str()),
        (Some("GET"), Some("/mcp"))
    );
    assert!(
        http[2..]
            .iter()
            .all(|r| r["method"] == "POST" && r["path"] == "/messages"),
        "{http:#?}"
    );
    server.wait_for("legacy stream", |e| e["event"] == "legacy-stream");
}

#[test]
fn the_end_of_the_old_transports_stream_ends_the_proxy_with_an_error() {
    let f = Fixture::new();
    let mut server = RemoteServer::start(&["--legacy"]);
    let mut p = connected(&server, &f, &[]);
    server.kill();
    let status = p.wait_exit(sidecar::WAIT);
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(
        p.stderr()
            .contains("the remote server closed its event stream"),
        "{}",
        p.stderr()
    );
}

#[test]
fn an_endpoint_on_another_origin_is_refused() {
    let f = Fixture::new();
    let mut elsewhere = RemoteServer::evil("plain", "");
    let foreign = format!("http://127.0.0.1:{}/messages", elsewhere.port);
    let server = RemoteServer::evil("legacy-foreign", &foreign);
    let mut p = proxy(
        &server.url(),
        &f,
        &["--bearer-env", "FSBROKER_TEST_TOKEN"],
        &[("FSBROKER_TEST_TOKEN", "legacy-token")],
    );
    send_initialize(&mut p, json!({}));
    let r = p.wait_id(&json!("init"));
    assert_eq!(r["error"]["data"]["reason"], "foreign_endpoint", "{r}");
    let status = p.wait_exit(sidecar::WAIT);
    assert_eq!(status.code(), Some(1), "{}", p.stderr());
    assert!(p.stderr().contains("another origin"), "{}", p.stderr());
    let reached = elsewhere.stop_http();
    assert!(reached.is_empty(), "{reached:#?}");
}
