//! "Remember": an answer kept as a standing grant in the state file, listed on the page,
//! held by the server's sessions after the daemon restarts, and forgotten from the page.

use crate::browser::Browser;
use crate::site::{Site, ask};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_answer_survives_a_restart_and_forgetting_takes_it_back() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    b.find("[data-question]").await;
    b.click("[data-path=\"root/docs\"] input[value=allow]")
        .await;
    b.click("[data-question] input.remember").await;
    b.click("[data-question] button.answer").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");
    drop(s);
    b.close().await;
    let kept = std::fs::read_to_string(site.state_file()).unwrap();
    assert!(kept.contains("root/docs"), "{kept}");

    let site = Site::again(site.stop());
    let mut s = site.server("notes");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "not remembered: {r}");
    let mut other = site.server("other");
    let r = other.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(
        r["error"]["data"]["reason"], "no_consent",
        "another server got it: {r}"
    );

    let b = Browser::signed_in(&site.link).await;
    b.view("remembered").await;
    b.find("[data-remembered=\"notes root/docs\"]").await;
    b.screenshot("remembered").await;
    b.click("[data-remembered=\"notes root/docs\"] button.forget")
        .await;
    b.gone("[data-remembered]").await;
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "revoked", "still held: {r}");
    let kept = std::fs::read_to_string(site.state_file()).unwrap();
    assert!(!kept.contains("root/docs"), "{kept}");
    b.close().await;
}
