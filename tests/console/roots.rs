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

/// A root deleted and made again: the console's root edits work, though the deleted root's
/// directory (its inode) is now the configuration directory that holds the grant file. The
/// inode reuse is made certain by moving the old root there (a reuse by the filesystem is
/// the same to the daemon); before, the old pin was kept and every edit was refused,
/// claiming the grant file lay beneath the root.
#[test]
fn a_root_made_again_is_pinned_anew_and_root_edits_still_work() {
    let site = Site::start();
    let config = site.state_file().parent().unwrap().to_owned();
    let _ = std::fs::remove_dir_all(&config);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::rename(&site.place.root, &config).unwrap();
    std::fs::create_dir(&site.place.root).unwrap();
    let auth = site.signin();
    let path = site.extra().display().to_string();
    let a = site.post(
        &auth,
        "/api/roots",
        &json!({"op": "add", "path": path, "access": "read"}),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let kept = std::fs::read_to_string(site.state_file()).unwrap();
    assert!(kept.contains("extra"), "{kept}");
}
