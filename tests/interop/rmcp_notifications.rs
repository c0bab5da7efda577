//! The broker's notifications reach an rmcp server through the `NotificationRouter`: a
//! change under a watch, the end of a watch on revocation, and a roots change after a reload.
#![cfg(feature = "rmcp")]

use crate::common::Fixture;
use crate::rmcp_common;
use crate::rmcp_common::{CHANGED, consent, start, stop, tool, wait_notification, watch};
use mcp_fsbroker::Policy;
use serde_json::json;

#[tokio::test]
async fn broker_notifications_reach_the_server() {
    let f = Fixture::new();
    f.dir("watched");
    let (client, _handler, broker) = start(&f, "auto").await;
    consent(&client, &["project"]).await;
    let watch_id = watch(&client, "project/watched").await;

    f.file("watched/new.txt", "x");
    let changed = wait_notification(&client, |n| {
        n["method"] == CHANGED && n["params"]["path"] == "project/watched/new.txt"
    })
    .await;
    assert_eq!(changed["params"]["watchId"], watch_id.as_str());
    assert_eq!(changed["params"]["event"], "created");

    // Revocation ends the watch, and the server is told.
    broker.revoke_all();
    let ended = wait_notification(&client, |n| n["params"]["event"] == "unwatched").await;
    assert_eq!(ended["params"]["watchId"], watch_id.as_str());
    assert_eq!(ended["params"]["reason"], "revoked");

    // A new root in force: rmcp's own `notifications/roots/list_changed`.
    let second = f.tmp.path().join("second");
    std::fs::create_dir(&second).unwrap();
    let text = format!(
        "{}\n[[roots]]\npath = {:?}\nmount = \"second\"\n",
        f.policy_text("read", "[consent]\nmode = \"auto\"\n"),
        second
    );
    broker
        .reload(Policy::parse(&text, "test").unwrap())
        .unwrap();
    wait_notification(&client, |n| {
        n["method"] == "notifications/roots/list_changed"
    })
    .await;
    let (roots, _) = tool(&client, "roots", json!({})).await;
    let names: Vec<&str> = roots["result"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["project", "second"]);
    stop(client).await;
}

#[tokio::test]
async fn a_watch_ended_by_the_server_sends_nothing_more() {
    let f = Fixture::new();
    f.dir("watched");
    let (client, _handler, _broker) = start(&f, "auto").await;
    consent(&client, &["project"]).await;
    let first = watch(&client, "project/watched").await;
    let ended = rmcp_common::ask(&client, "files/unwatch", json!({"watchId": first})).await;
    assert_eq!(ended["result"], json!({}), "{ended}");
    // A second watch still gets its changes; the first, ended, gets none.
    let second = watch(&client, "project/watched").await;
    f.file("watched/new.txt", "x");
    wait_notification(&client, |n| n["params"]["watchId"] == second.as_str()).await;
    let got = rmcp_common::notifications(&client).await;
    assert!(
        got.iter().all(|n| n["params"]["watchId"] != first.as_str()),
        "{got:?}"
    );
    stop(client).await;
}
