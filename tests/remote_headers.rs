//! Extra headers reach the remote server on every request: a bearer token read from the
//! environment (`--bearer-env`), never from the command line and never in the proxy's logs,
//! and plain headers (`--header`).

mod common;
#[path = "common/interop.rs"]
mod interop;
#[path = "common/remote.rs"]
mod remote;
#[path = "common/sidecar.rs"]
mod sidecar;

use common::Fixture;
use remote::{RemoteServer, ask, initialize, proxy};
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
    let http = server.named("http");
    assert!(http.len() >= 3, "{http:#?}");
    for r in &http {
        assert_eq!(r["authorization"], TOKEN, "{r}");
    }
    assert!(!p.stderr().contains(TOKEN));
}
