//! "Allow this?": a refusal for want of consent on a path the server never asked for is
//! offered on the page; nothing is granted until the user allows it.

use crate::browser::Browser;
use crate::site::{Site, refused};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_offered_and_grants_only_when_allowed() {
    let site = Site::start();
    let auth = site.signin();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    refused(&mut s, "root/notes/n.md");
    let first = site.offer_after(&auth, None);
    let offer = b.find(&format!("[data-offer=\"{first}\"]")).await;
    let text = offer.text().await.unwrap();
    assert!(text.contains("root/notes/n.md"), "{text}");
    // Shown, not granted; the refusal's offer is the one allowed, once it is on the page.
    refused(&mut s, "root/notes/n.md");
    let second = site.offer_after(&auth, Some(&first));
    b.find(&format!("[data-offer=\"{second}\"]")).await;
    b.click(&format!("[data-offer=\"{second}\"] button.allow"))
        .await;
    b.gone("[data-offer]").await;
    let r = s.request("files/read", json!({"path": "root/notes/n.md"}));
    assert_eq!(r["result"]["content"], "note", "{r}");
    // Only that path.
    refused(&mut s, "root/docs/a.md");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dismissed_offer_grants_nothing() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    refused(&mut s, "root/notes/n.md");
    b.find("[data-offer]").await;
    b.click("[data-offer] button.dismiss").await;
    b.gone("[data-offer]").await;
    refused(&mut s, "root/notes/n.md");
    b.close().await;
}

#[test]
fn an_offer_to_a_session_that_ended_grants_nothing_to_the_next_of_its_name() {
    let site = Site::start();
    let auth = site.signin();
    let mut s = site.server("notes");
    refused(&mut s, "root/notes/n.md");
    let id = site.offer_after(&auth, None);
    drop(s);
    // The same name again, as a server restarted by its host would be, once the first
    // session has ended.
    let deadline = std::time::Instant::now() + crate::sidecar::WAIT;
    while !site.state(&auth)["sessions"].as_array().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the session did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut again = site.server("notes");
    let r = again.request("ping", json!({}));
    assert!(r["result"].is_object(), "{r}");
    assert_eq!(site.state(&auth)["sessions"][0]["server"], "notes");
    let a = site.post(&auth, &format!("/api/offers/{id}"), &json!({"allow": true}));
    assert_eq!(a.status, 409, "{a:?}");
    let r = again.request("files/read", json!({"path": "root/notes/n.md"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
}
