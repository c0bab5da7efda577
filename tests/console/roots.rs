//! Roots managed on the page: one added reaches an attached server through
//! `notifications/roots/list_changed`, a switch to read-only holds on the next write, and a
//! removal ends access; the change is kept across a restart.

use crate::browser::Browser;
use crate::site::Site;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_added_on_the_page_reaches_the_server() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    let before = s.request("roots/list", json!({}));
    assert_eq!(
        before["result"]["roots"].as_array().unwrap().len(),
        1,
        "{before}"
    );

    b.view("roots").await;
    let path = site.extra().display().to_string();
    b.find("form.add-root input[name=path]")
        .await
        .send_keys(&path)
        .await
        .unwrap();
    b.click("form.add-root [type=submit]").await;
    b.find("[data-root=\"extra\"]").await;
    b.screenshot("roots").await;
    let told = s.next();
    assert_eq!(told["method"], "notifications/roots/list_changed", "{told}");
    let after = s.request("roots/list", json!({}));
    let names: Vec<String> = after["result"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "extra"), "{after}");

    b.click_confirm("[data-root=\"root\"] button.remove").await;
    b.gone("[data-root=\"root\"]").await;
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert!(r["error"].is_object(), "a removed root still answers: {r}");
    let kept = std::fs::read_to_string(site.state_file()).unwrap();
    assert!(
        kept.contains("extra") && kept.contains("\"root\""),
        "{kept}"
    );
    b.close().await;
}
