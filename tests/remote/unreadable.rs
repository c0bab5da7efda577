//! A remote server's event that is not a JSON-RPC message the proxy can read is never
//! relayed; when its id can be read, the server gets an error for it (as a local server's
//! line does), so it never waits for an answer that will not come.

use crate::common::Fixture;
use crate::remote::{RemoteServer, connected, start_tool};
use serde_json::json;

#[test]
fn an_unreadable_request_is_answered_with_an_error_and_never_relayed() {
    let f = Fixture::new();
    let mut server = RemoteServer::evil("unreadable", "");
    let mut p = connected(&server, &f, &[]);
    start_tool(&mut p, 7, "anything", json!({}));
    let r = p.wait_id(&json!(7));
    assert!(r.get("result").is_some(), "{r}");
    // The server is answered for the request it named a key of twice.
    let answer = server.wait_for("answer to bad1", |e| {
        e["event"] == "http" && e["method"] == "POST" && e["id"] == "bad1"
    });
    assert_eq!(answer["error"], -32600, "{answer}");
    assert_eq!(answer["rpc"], serde_json::Value::Null, "{answer}");
    // The host saw none of it.
    let (_, rest) = p.finish();
    for l in rest {
        let text = String::from_utf8_lossy(&l).into_owned();
        assert!(
            !text.contains("bad1") && !text.contains("not json"),
            "{text}"
        );
    }
    assert!(p.stderr().contains("cannot read"), "{}", p.stderr());
}
