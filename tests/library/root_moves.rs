//! A root that moves is not followed: once its directory no longer sits at its configured path
//! (renamed, deleted, or another directory put there), every operation on it is
//! `PERMISSION_DENIED` `root_unavailable`, `roots/list` leaves it out and the session is sent
//! `notifications/roots/list_changed`; when the path names the same directory again (or after a
//! reload) it comes back, with another `list_changed`. Waits are for notifications, never sleeps.

use crate::common::*;
use mcp_fsbroker::{Broker, Notifications, Policy};
use serde_json::{Value, json};
use std::time::Duration;

const EXPECT: Duration = Duration::from_secs(60);
const LIST_CHANGED: &str = "notifications/roots/list_changed";

fn library(f: &Fixture) -> (Broker, Notifications) {
    let text = format!(
        "{}\n[consent]\nmode = \"auto\"\n",
        f.policy_text("write", "")
    );
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

/// Waits for `notifications/roots/list_changed` to session `s`.
async fn list_changed(rx: &mut Notifications) {
    let deadline = tokio::time::Instant::now() + EXPECT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(m)) if m.server_id == "s" && m.message["method"] == LIST_CHANGED => return,
            Ok(Some(_)) => {}
            _ => panic!("no roots/list_changed"),
        }
    }
}

async fn roots(b: &Broker) -> Vec<Value> {
    let r = call(b, "s", "roots/list", json!({})).await;
    ok(&r)["roots"].as_array().unwrap().clone()
}

fn assert_unavailable(r: &Value) {
    let (_, code, reason) = err(r);
    assert_eq!(
        (code.as_str(), reason.as_str()),
        ("PERMISSION_DENIED", "root_unavailable"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_root_is_not_followed_and_comes_back_when_it_returns() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (b, mut rx) = library(&f);
    consent_all(&b, "s").await;
    assert_eq!(roots(&b).await.len(), 1);
    let moved = f.tmp.path().join("moved");
    std::fs::rename(&f.root, &moved).unwrap();
    // Every method on the moved root is refused, and nothing lands in the moved folder.
    let w = call(
        &b,
        "s",
        "files/write",
        json!({"path": "project/new.txt", "content": "x"}),
    )
    .await;
    assert_unavailable(&w);
    assert!(
        !moved.join("new.txt").exists(),
        "a write landed in the moved folder"
    );
    for (method, params) in [
        ("files/read", json!({"path": "project/a.txt"})),
        ("files/stat", json!({"path": "project"})),
        ("files/list", json!({"path": "project"})),
        ("files/delete", json!({"path": "project/a.txt"})),
        (
            "files/create",
            json!({"path": "project/d", "type": "directory"}),
        ),
        ("files/watch", json!({"path": "project"})),
    ] {
        assert_unavailable(&call(&b, "s", method, params).await);
    }
    assert!(moved.join("a.txt").exists());
    list_changed(&mut rx).await;
    assert!(roots(&b).await.is_empty(), "a moved root is still listed");
    // Back at its path: served again, and the session is told.
    std::fs::rename(&moved, &f.root).unwrap();
    assert_eq!(roots(&b).await.len(), 1);
    list_changed(&mut rx).await;
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["content"], "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_root_leaves_the_list_and_another_directory_at_its_path_is_not_it() {
    let f = Fixture::new();
    let (b, mut rx) = library(&f);
    consent_all(&b, "s").await;
    std::fs::remove_dir(&f.root).unwrap();
    assert!(roots(&b).await.is_empty(), "a deleted root is still listed");
    list_changed(&mut rx).await;
    // Another directory at the same path is not the root the user approved.
    std::fs::create_dir(&f.root).unwrap();
    std::fs::write(f.root.join("planted.txt"), "p").unwrap();
    let r = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/planted.txt"}),
    )
    .await;
    assert_unavailable(&r);
    assert!(roots(&b).await.is_empty());
    // A reload opens what the path names now.
    let text = format!(
        "{}\n[consent]\nmode = \"auto\"\n",
        f.policy_text("write", "")
    );
    b.reload(Policy::parse(&text, "test").unwrap()).unwrap();
    assert_eq!(roots(&b).await.len(), 1);
    list_changed(&mut rx).await;
    consent_all(&b, "s").await;
    let r = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/planted.txt"}),
    )
    .await;
    assert_eq!(ok(&r)["content"], "p");
}
