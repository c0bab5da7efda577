//! What the page shows live: a session and its grants, its reads in the activity stream, a
//! refusal standing out; and revocation from the page, effective on the next operation.

use crate::browser::Browser;
use crate::site::{Site, refused};
use serde_json::json;

const STANDING: &str =
    "[[grants]]\nservers = [\"notes\"]\npath = \"root/docs\"\naccess = \"read\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_show_in_the_activity_and_a_revoke_on_the_page_holds() {
    let site = Site::start_with(STANDING);
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    refused(&mut s, "root/notes/n.md");

    b.view("activity").await;
    b.text_contains("[data-event].ok .path", "root/docs/a.md")
        .await;
    b.text_contains("[data-event].refusal .path", "root/notes/n.md")
        .await;

    b.view("sessions").await;
    b.find("[data-session=\"notes\"] [data-grant=\"root/docs\"]")
        .await;
    b.screenshot("sessions").await;
    b.click("[data-session=\"notes\"] [data-grant=\"root/docs\"] button.revoke")
        .await;
    b.gone("[data-session=\"notes\"] [data-grant=\"root/docs\"]")
        .await;
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "revoked", "{r}");
    b.close().await;
}

/// The page `fsbroker console` gives the desktop's opener signs the browser in: the step
/// from a local file to the console is cross-site, and the sign-in still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_given_to_the_opener_signs_the_browser_in() {
    let site = Site::start();
    let (args, _) = site.console_through_opener();
    let b = Browser::open().await;
    b.c.goto(&format!("file://{}", args.trim())).await.unwrap();
    b.text_contains("#status", "live").await;
    let url = b.c.current_url().await.unwrap();
    assert!(
        !url.as_str().contains("key="),
        "the key stayed in the address: {url}"
    );
    b.find("[data-view=\"consent\"]:not([hidden])").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_session_says_why_and_resume_on_the_page_lifts_it() {
    let site = Site::start_with(STANDING);
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    for _ in 0..20 {
        let r = s.request("files/read", json!({"path": "/etc/passwd"}));
        assert_eq!(r["error"]["data"]["reason"], "outside_root", "{r}");
    }
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "suspended", "{r}");
    b.view("sessions").await;
    b.text_contains(
        "[data-session=\"notes\"] .banner.suspended",
        "20 security violations within a minute (outside_root 20)",
    )
    .await;
    b.screenshot("suspended").await;
    b.click("[data-session=\"notes\"] button.resume").await;
    b.gone("[data-session=\"notes\"] .banner.suspended").await;
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    b.close().await;
}
