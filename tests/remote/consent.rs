//! Consent for a remote server is asked the same way as for a local one: its `files/consent`
//! becomes an `elicitation/create` to the host, which shows the remote server's name, the
//! paths in mount form and its message; the user's answer decides what it may do.

use crate::common::Fixture;
use crate::remote::{RemoteServer, error_of, initialize, ok, proxy, start_tool, tool_result};
use serde_json::json;

#[test]
fn the_user_is_asked_through_the_host_and_their_answer_holds() {
    let f = Fixture::new();
    f.file("notes/todo.md", "buy milk");
    let server = RemoteServer::start(&[]);
    let mut p = proxy(
        &server.url(),
        &f,
        &["--writable", "--consent", "elicit"],
        &[],
    );
    initialize(&mut p, json!({"elicitation": {}}));
    start_tool(
        &mut p,
        1,
        "ask",
        json!({"requests": [
            ["files/consent", {"requestedPaths": ["project/notes"], "access": "write",
                               "message": "to sort your notes"}],
            ["files/read", {"path": "project/notes/todo.md"}],
            ["files/write", {"path": "project/notes/todo.md", "content": "changed"}],
        ]}),
    );
    let e = p.next();
    assert_eq!(e["method"], "elicitation/create", "{e}");
    let text = e["params"]["message"].as_str().unwrap();
    assert!(text.contains("remote-test"), "{text}");
    assert!(text.contains("project/notes"), "{text}");
    assert!(text.contains("to sort your notes"), "{text}");
    assert!(!text.contains(f.root.to_str().unwrap()), "{text}");
    assert_eq!(
        e["params"]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["read", "write", "deny"])
    );
    // The user allows reading only.
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    let a = tool_result(&mut p, 1);
    assert_eq!(ok(&a[0])["granted"], true, "{a}");
    assert_eq!(ok(&a[0])["access"], "read", "{a}");
    assert_eq!(ok(&a[1])["content"], "buy milk", "{a}");
    assert_eq!(error_of(&a[2]).1, "PERMISSION_DENIED", "{a}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("notes/todo.md")).unwrap(),
        "buy milk"
    );
    p.finish();
}

#[test]
fn a_declined_question_grants_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "private");
    let server = RemoteServer::start(&[]);
    let mut p = proxy(&server.url(), &f, &["--consent", "elicit"], &[]);
    initialize(&mut p, json!({"elicitation": {}}));
    start_tool(
        &mut p,
        1,
        "ask",
        json!({"requests": [
            ["files/consent", {"requestedPaths": ["project/a.txt"]}],
            ["files/read", {"path": "project/a.txt"}],
        ]}),
    );
    let e = p.next();
    assert_eq!(e["method"], "elicitation/create", "{e}");
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"decline"}}));
    let a = tool_result(&mut p, 1);
    assert_eq!(ok(&a[0])["granted"], false, "{a}");
    let (code, data_code, reason) = error_of(&a[1]);
    assert_eq!(
        (code, data_code.as_str(), reason.as_str()),
        (-31002, "PERMISSION_DENIED", "no_consent")
    );
    assert!(!format!("{a}").contains("private"));
    p.finish();
}
