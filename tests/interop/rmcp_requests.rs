//! The rmcp adapter answers a real rmcp server's requests: our capabilities and roots, a
//! read after consent, escapes refused, and errors passed through with their code, message
//! and data. The server runs in a child process (see `common/rmcp.rs`).
#![cfg(feature = "rmcp")]

use crate::common::{Fixture, SECRET};
use crate::rmcp_common::{ask, consent, start, stop, tool};
use serde_json::json;

#[tokio::test]
async fn the_server_sees_our_capabilities_and_roots() {
    let f = Fixture::new();
    let (client, handler, broker) = start(&f, "auto").await;

    let (init, _) = tool(&client, "client", json!({})).await;
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["capabilities"]["roots"], json!({"listChanged": true}));
    assert_eq!(
        init["capabilities"]["experimental"]["filesystemBrokering"],
        json!({})
    );

    // The server asks with rmcp's own `list_roots`.
    let (roots, failed) = tool(&client, "roots", json!({})).await;
    assert!(!failed, "{roots}");
    let canonical = f.root.canonicalize().unwrap();
    assert_eq!(
        roots["result"]["roots"],
        json!([{"uri": format!("file://{}", canonical.display()), "name": "project"}])
    );
    // The session is named by the server's `serverInfo.name`.
    assert_eq!(handler.session_id(), Some("rmcp-files-server"));
    assert_eq!(broker.sessions(), vec!["rmcp-files-server".to_owned()]);

    stop(client).await;
    assert!(handler.end_session());
    assert!(broker.sessions().is_empty());
    // A second end finds nothing to end.
    assert!(!handler.end_session());
}

#[tokio::test]
async fn consent_then_read_returns_the_file() {
    let f = Fixture::new();
    f.file("notes/hello.txt", "hello through rmcp\n");
    let (client, _handler, _broker) = start(&f, "auto").await;

    let (out, failed) = tool(
        &client,
        "read_file",
        json!({"path": "project/notes/hello.txt"}),
    )
    .await;
    assert!(!failed, "{out}");
    assert_eq!(out["consent"]["result"]["granted"], true);
    assert_eq!(
        out["consent"]["result"]["approvedPaths"],
        json!(["project/notes/hello.txt"])
    );
    let read = &out["read"]["result"];
    assert_eq!(read["content"], "hello through rmcp\n");
    assert_eq!(read["size"], 19);
    assert_eq!(read["eof"], true);

    // Any `files/*` request passes through whole, here under the same grant.
    let stat = ask(
        &client,
        "files/stat",
        json!({"path": "project/notes/hello.txt"}),
    )
    .await;
    assert_eq!(stat["result"]["path"], "project/notes/hello.txt", "{stat}");
    assert_eq!(stat["result"]["type"], "file");
    assert_eq!(stat["result"]["etag"], read["etag"]);
    stop(client).await;
}

#[tokio::test]
async fn escapes_are_refused_with_the_error_data_preserved() {
    let f = Fixture::new();
    f.symlink(&f.outside, "link-out");
    let (client, _handler, _broker) = start(&f, "auto").await;
    consent(&client, &["project"]).await;

    let outside = f.outside.join("secret.txt");
    for path in [
        "project/../outside/secret.txt".to_owned(),
        "project/../../../../etc/passwd".to_owned(),
        outside.display().to_string(),
        "project/link-out/secret.txt".to_owned(),
    ] {
        let (got, failed) = tool(
            &client,
            "request",
            json!({"method": "files/read", "params": {"path": path}}),
        )
        .await;
        assert!(failed, "{path}: {got}");
        let e = &got["error"];
        assert_eq!(e["code"], -31002, "{path}: {got}");
        assert_eq!(e["data"]["code"], "PERMISSION_DENIED", "{path}: {got}");
        assert_eq!(e["data"]["reason"], "outside_root", "{path}: {got}");
        assert!(!e["message"].as_str().unwrap().is_empty());
        assert!(!got.to_string().contains(SECRET));
        // No host path comes back in an error, not even the one the server sent.
        assert!(
            !got.to_string().contains(f.tmp.path().to_str().unwrap()),
            "{got}"
        );
    }
    f.assert_canary_intact();
    stop(client).await;
}

#[tokio::test]
async fn refused_consent_and_protocol_errors_pass_through() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (client, _handler, _broker) = start(&f, "deny").await;

    let (out, failed) = tool(&client, "read_file", json!({"path": "project/a.txt"})).await;
    assert!(failed);
    assert_eq!(out["consent"]["result"]["granted"], false);
    assert_eq!(
        out["consent"]["result"]["deniedPaths"],
        json!(["project/a.txt"])
    );
    assert_eq!(
        out["read"]["error"],
        json!({"code": -31002, "message": "no consent covers this path",
            "data": {"code": "PERMISSION_DENIED", "reason": "no_consent", "path": "project/a.txt"}})
    );

    // JSON-RPC faults keep their codes: bad params, a `files/` method the broker lacks, and
    // a method outside `files/`, which rmcp's default answers.
    let bad = ask(&client, "files/read", json!({"path": 7})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let unknown = ask(&client, "files/frobnicate", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let other = ask(&client, "other/method", json!({})).await;
    assert_eq!(other["error"]["code"], -32601, "{other}");
    assert_eq!(other["error"]["message"], "other/method");
    stop(client).await;
}
