//! `fsbroker proxy --url` in front of a remote Streamable HTTP server written with the official
//! TypeScript SDK: the server lists roots, asks consent, reads, writes and watches files
//! through the proxy, on its tool call's stream and on its own GET stream, and the data is
//! checked against the disk.

use crate::common::Fixture;
use crate::remote;
use crate::remote::{RemoteServer, ask, connected, initialize, ok, proxy, tool};
use crate::sidecar::file_uri;
use serde_json::json;

#[test]
fn a_remote_server_lists_roots_reads_and_writes_through_the_proxy() {
    let f = Fixture::new();
    f.file("a.txt", "hello from the project");
    let server = RemoteServer::start(&[]);
    let mut p = proxy(&server.url(), &f, &["--writable"], &[]);
    let init = initialize(&mut p, json!({}));
    assert_eq!(init["serverInfo"]["name"], "remote-test");
    assert_eq!(init["protocolVersion"], remote::VERSION);
    let a = ask(
        &mut p,
        1,
        json!([
            ["roots/list", {}],
            ["files/consent", {"requestedPaths": ["project"], "access": "write"}],
            ["files/read", {"path": "project/a.txt"}],
            ["files/write", {"path": "project/new.txt", "content": "written remotely"}],
            ["files/list", {"path": "project"}],
            ["files/stat", {"path": "project/new.txt"}],
        ]),
    );
    let roots = &ok(&a[0])["roots"];
    assert_eq!(roots[0]["uri"], file_uri(&f.root), "{roots}");
    assert_eq!(roots[0]["name"], "project");
    assert_eq!(ok(&a[1])["granted"], true);
    assert_eq!(ok(&a[1])["access"], "write");
    assert_eq!(ok(&a[2])["content"], "hello from the project");
    assert_eq!(ok(&a[3])["path"], "project/new.txt");
    assert_eq!(
        std::fs::read_to_string(f.root.join("new.txt")).unwrap(),
        "written remotely"
    );
    let names: Vec<&str> = ok(&a[4])["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt", "new.txt"]);
    assert_eq!(ok(&a[5])["size"], 16);
    let (status, _) = p.finish();
    assert!(status.success(), "{status}; {}", p.stderr());
    f.assert_canary_intact();
}

#[test]
fn changes_under_a_watch_reach_the_remote_server() {
    let f = Fixture::new();
    f.file("w/a.txt", "one");
    let server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    let a = ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project/w"]}],
            ["files/watch", {"path": "project/w"}],
        ]),
    );
    let watch_id = ok(&a[1])["watchId"].clone();
    std::fs::write(f.root.join("w/b.txt"), "new").unwrap();
    let notes = tool(
        &mut p,
        2,
        "notes",
        json!({"method": "notifications/files/changed", "path": "project/w/b.txt"}),
    );
    let n = &notes[0]["params"];
    assert_eq!(n["watchId"], watch_id, "{notes}");
    assert_eq!(n["event"], "created", "{notes}");
    p.finish();
}

#[test]
fn requests_on_the_servers_own_get_stream_are_answered() {
    let f = Fixture::new();
    f.file("a.txt", "via get");
    let mut server = RemoteServer::start(&[]);
    let mut p = connected(&server, &f, &[]);
    // The proxy opens the GET stream once the session is initialized.
    server.wait_for_get_stream();
    let a = tool(
        &mut p,
        1,
        "ask",
        json!({"via": "get", "requests": [
            ["roots/list", {}],
            ["files/consent", {"requestedPaths": ["project/a.txt"]}],
            ["files/read", {"path": "project/a.txt"}],
        ]}),
    );
    assert_eq!(ok(&a[0])["roots"][0]["name"], "project", "{a}");
    assert_eq!(ok(&a[2])["content"], "via get", "{a}");
    p.finish();
}

#[test]
fn a_server_that_answers_with_json_bodies_works_as_well() {
    let f = Fixture::new();
    let server = RemoteServer::start(&["--json"]);
    let mut p = proxy(&server.url(), &f, &[], &[]);
    let init = initialize(&mut p, json!({}));
    assert_eq!(init["serverInfo"]["name"], "remote-test");
    let r = p.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "ask"), "{r}");
    p.finish();
}
