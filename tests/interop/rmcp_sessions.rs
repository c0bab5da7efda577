//! Sessions of rmcp connections: each connection holds its own broker session, even when two
//! servers report the same `serverInfo.name`; a name is given up when its connection ends,
//! closes or is dropped; an id the host gives is used as it is.
#![cfg(feature = "rmcp")]

use crate::common::Fixture;
use crate::rmcp_common;
use crate::rmcp_common::{
    CHANGED, Client, ask, connect, connect_as, consent, notifications, router_with, stop,
    wait_notification, watch,
};
use mcp_fsbroker::rmcp_adapter::BrokerClientHandler;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// What a `files/read` of `path` by the server behind `client` returns.
async fn read(client: &Client, path: &str) -> Value {
    ask(client, "files/read", json!({"path": path})).await
}

/// Asserts that `got` is the refusal of a path no consent covers.
/// Creates `rel` under the root and waits until `client` has heard of it: a notification
/// wrongly routed to `client` by an earlier change would have reached it before this one, as a
/// connection's notifications arrive in order. (No pause whose length a slow machine could
/// outgrow.)
async fn sentinel(f: &Fixture, client: &Client, rel: &str) {
    std::fs::File::create(f.root.join(rel)).unwrap();
    let path = format!("project/{rel}");
    wait_notification(client, |n| n["params"]["path"] == path.as_str()).await;
}

fn assert_no_consent(got: &Value) {
    assert_eq!(got["error"]["data"]["code"], "PERMISSION_DENIED", "{got}");
    assert_eq!(got["error"]["data"]["reason"], "no_consent", "{got}");
}

#[tokio::test]
async fn servers_with_the_same_name_do_not_share_a_session() {
    let f = Fixture::new();
    f.file("notes/a.txt", "for A only");
    f.dir("watched");
    let (router, broker) = router_with(&f, "auto", "");
    let a = BrokerClientHandler::new(&router);
    let b = BrokerClientHandler::new(&router);
    let ca = connect_as(a.clone(), Some("twin")).await;
    let cb = connect_as(b.clone(), Some("twin")).await;

    // A is granted the root and watches a directory.
    consent(&ca, &["project"]).await;
    let a_watch = watch(&ca, "project/watched").await;
    assert_eq!(
        read(&ca, "project/notes/a.txt").await["result"]["content"],
        "for A only"
    );

    // B, whose server reports the same name, has a session of its own, without A's grant.
    assert_no_consent(&read(&cb, "project/notes/a.txt").await);
    assert_eq!(a.session_id(), Some("twin"));
    assert_eq!(b.session_id(), Some("twin#2"));
    let mut sessions = broker.sessions();
    sessions.sort();
    assert_eq!(sessions, ["twin", "twin#2"]);

    // B watches the same directory under its own consent; each server hears only of its
    // own watch.
    consent(&cb, &["project/watched"]).await;
    let b_watch = watch(&cb, "project/watched").await;
    f.file("watched/new.txt", "x");
    let is_new =
        |n: &Value| n["method"] == CHANGED && n["params"]["path"] == "project/watched/new.txt";
    let got_a = wait_notification(&ca, is_new).await;
    let got_b = wait_notification(&cb, is_new).await;
    assert_eq!(got_a["params"]["watchId"], a_watch.as_str());
    assert_eq!(got_b["params"]["watchId"], b_watch.as_str());
    sentinel(&f, &cb, "watched/sentinel.txt").await;
    let b_got = notifications(&cb).await;
    assert!(
        b_got
            .iter()
            .all(|n| n["params"]["watchId"] != a_watch.as_str()),
        "A's changes reached B: {b_got:?}"
    );

    // B ends its session: A keeps its grant and its watch.
    assert!(b.end_session());
    assert_eq!(
        read(&ca, "project/notes/a.txt").await["result"]["content"],
        "for A only"
    );
    f.file("watched/after.txt", "y");
    wait_notification(&ca, |n| n["params"]["path"] == "project/watched/after.txt").await;
    assert_eq!(broker.sessions(), ["twin"]);
    // B's server is refused from now on, and its session stays ended.
    let late = read(&cb, "project/notes/a.txt").await;
    assert_eq!(late["error"]["code"], -32603, "{late}");
    assert_eq!(broker.sessions(), ["twin"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b_got = notifications(&cb).await;
    assert!(
        b_got
            .iter()
            .all(|n| n["params"]["watchId"] != a_watch.as_str()),
        "A's changes reached B: {b_got:?}"
    );
    stop(ca).await;
    stop(cb).await;
}

#[tokio::test]
async fn a_second_server_with_the_name_misses_the_per_server_grants() {
    let f = Fixture::new();
    f.file("a.txt", "standing");
    let grant = "[[grants]]\npath = \"project\"\naccess = \"read\"\nservers = [\"indexer\"]\n";
    let (router, _broker) = router_with(&f, "deny", grant);
    let first = connect_as(BrokerClientHandler::new(&router), Some("indexer")).await;
    let second = connect_as(BrokerClientHandler::new(&router), Some("indexer")).await;
    assert_eq!(
        read(&first, "project/a.txt").await["result"]["content"],
        "standing"
    );
    // The policy names `indexer`; the second connection is `indexer#2`, which it does not.
    assert_no_consent(&read(&second, "project/a.txt").await);
    stop(first).await;
    stop(second).await;
}

#[tokio::test]
async fn a_closed_connection_gives_up_its_name_and_its_grants() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (router, broker) = router_with(&f, "auto", "");
    let a = BrokerClientHandler::new(&router);
    let ca = connect_as(a.clone(), Some("twin")).await;
    consent(&ca, &["project"]).await;
    // A's server goes, but its host neither ends the session nor drops the handler.
    stop(ca).await;

    let c = BrokerClientHandler::new(&router);
    let cc = connect_as(c.clone(), Some("twin")).await;
    assert_no_consent(&read(&cc, "project/a.txt").await);
    assert_eq!(c.session_id(), Some("twin"));
    consent(&cc, &["project"]).await;
    // A's late end is no longer A's to make: C's grant stays.
    assert!(!a.end_session());
    assert_eq!(read(&cc, "project/a.txt").await["result"]["content"], "a");
    assert_eq!(broker.sessions(), ["twin"]);
    stop(cc).await;
}

#[tokio::test]
async fn a_dropped_handler_ends_its_session() {
    let f = Fixture::new();
    let (router, broker) = router_with(&f, "auto", "");
    let client = connect(BrokerClientHandler::new(&router)).await;
    consent(&client, &["project"]).await;
    assert_eq!(broker.sessions(), ["rmcp-files-server"]);
    // Dropping the client drops its handler once rmcp's tasks end.
    drop(client);
    let deadline = Instant::now() + rmcp_common::STEP;
    while !(broker.sessions().is_empty() && router.sessions().is_empty()) {
        assert!(Instant::now() < deadline, "{:?}", broker.sessions());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn host_ids_are_kept_and_never_handed_to_a_server() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (router, broker) = router_with(&f, "auto", "");

    // A server named like a host id gets a session of its own.
    let host = BrokerClientHandler::new(&router).with_server_id("notes");
    let ch = connect(host.clone()).await;
    consent(&ch, &["project"]).await;
    let named = BrokerClientHandler::new(&router);
    let cn = connect_as(named.clone(), Some("notes")).await;
    assert_no_consent(&read(&cn, "project/a.txt").await);
    assert_eq!(named.session_id(), Some("notes#2"));

    // Handlers the host gives one id share its session, which ends with the last of them.
    let again = BrokerClientHandler::new(&router).with_server_id("notes");
    let ca = connect(again.clone()).await;
    assert_eq!(read(&ca, "project/a.txt").await["result"]["content"], "a");
    assert!(host.end_session());
    assert_eq!(read(&ca, "project/a.txt").await["result"]["content"], "a");
    assert!(again.end_session());
    assert!(!broker.sessions().contains(&"notes".to_owned()));

    // A host id that a live server's name holds is refused, not shared.
    let squatter = connect_as(BrokerClientHandler::new(&router), Some("mine")).await;
    consent(&squatter, &["project"]).await;
    let late = BrokerClientHandler::new(&router).with_server_id("mine");
    let cl = connect(late.clone()).await;
    let refused = read(&cl, "project/a.txt").await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(late.session_id(), None);

    for client in [ch, cn, ca, squatter, cl] {
        stop(client).await;
    }
}

#[tokio::test]
async fn handlers_sharing_a_host_id_each_hear_of_their_own_watches() {
    let f = Fixture::new();
    f.dir("watched");
    let (router, _broker) = router_with(&f, "auto", "");
    let one = connect(BrokerClientHandler::new(&router).with_server_id("shared")).await;
    let two = connect(BrokerClientHandler::new(&router).with_server_id("shared")).await;
    consent(&one, &["project"]).await;
    let first = watch(&one, "project/watched").await;
    let second = watch(&two, "project/watched").await;
    f.file("watched/new.txt", "x");
    wait_notification(&one, |n| n["params"]["watchId"] == first.as_str()).await;
    wait_notification(&two, |n| n["params"]["watchId"] == second.as_str()).await;
    sentinel(&f, &one, "watched/sentinel-one.txt").await;
    sentinel(&f, &two, "watched/sentinel-two.txt").await;
    for (client, other) in [(&one, &second), (&two, &first)] {
        let got = notifications(client).await;
        assert!(
            got.iter().all(|n| n["params"]["watchId"] != other.as_str()),
            "{got:?}"
        );
    }
    stop(one).await;
    stop(two).await;
}

#[tokio::test]
async fn an_embedder_given_id_names_the_session() {
    let f = Fixture::new();
    let (router, broker) = router_with(&f, "auto", "");
    let handler = BrokerClientHandler::new(&router).with_server_id("notes");
    let client = connect(handler.clone()).await;
    consent(&client, &["project"]).await;
    assert_eq!(broker.sessions(), vec!["notes".to_owned()]);
    assert_eq!(handler.session_id(), Some("notes"));
    stop(client).await;
    // Ending the session drops the grant: a new session must ask again.
    assert!(handler.end_session());
    let read = broker
        .handle_message(
            "notes",
            json!({"jsonrpc": "2.0", "id": 1, "method": "files/stat", "params": {"path": "project"}}),
        )
        .await
        .unwrap();
    assert_eq!(read["error"]["data"]["reason"], "no_consent", "{read}");
}
