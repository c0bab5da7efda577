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

/// The offers of `state`, as (server, path) pairs.
fn offered(state: &serde_json::Value) -> Vec<(String, String)> {
    state["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or_default().to_owned();
            (s("server"), s("path"))
        })
        .collect()
}

#[test]
fn a_path_denied_or_narrowed_away_is_not_offered() {
    let site = Site::start();
    let auth = site.signin();
    let mut s = site.server("notes");
    crate::site::ask(&mut s, 1, &["root/docs", "root/notes"], "read");
    let deadline = std::time::Instant::now() + crate::sidecar::WAIT;
    let id = loop {
        if let Some(id) = site.state(&auth)["questions"][0]["id"].as_str() {
            break id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no question");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // `root/docs` narrowed to `root/docs/lib`; `root/notes` denied.
    let answer = json!({"answers": [
        {"path": "root/docs", "approve": true, "narrow": "lib"},
        {"path": "root/notes", "approve": false}]});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 200, "{a:?}");
    s.wait_id(&json!(1));
    refused(&mut s, "root/notes/n.md");
    refused(&mut s, "root/docs/a.md");
    let r = s.request("files/list", json!({"path": "root/docs"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    // A path never asked about is offered; once it is, the refusals before it were
    // considered and made none.
    refused(&mut s, "root/other.md");
    site.offer_after(&auth, None);
    let state = site.state(&auth);
    assert_eq!(
        offered(&state),
        [("notes".to_owned(), "root/other.md".to_owned())],
        "{state}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_listing_offers_that_directory_and_the_root_says_so() {
    let site = Site::start();
    let auth = site.signin();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    let r = s.request("files/list", json!({"path": "root/docs"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    let docs = site.offer_after(&auth, None);
    let state = site.state(&auth);
    let offer = &state["offers"][0];
    // Exactly what was refused, never wider.
    assert_eq!(offer["path"], "root/docs", "{state}");
    assert_eq!(offer["wholeRoot"], false, "{state}");
    let host = offer["hostPath"].as_str().unwrap();
    assert!(host.ends_with("/docs") && host.starts_with('/'), "{state}");
    let card = format!("[data-offer=\"{docs}\"]");
    b.text_contains(&card, host).await;
    assert_eq!(b.count(&format!("{card} .whole-root")).await, 0);

    let r = s.request("files/list", json!({"path": "root"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    let root = site.offer_after(&auth, Some(&docs));
    let card = format!("[data-offer=\"{root}\"]");
    b.text_contains(&format!("{card} .whole-root"), "whole root")
        .await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_are_grouped_and_capped_per_server_and_dismissed_per_server_or_all() {
    let site = Site::start();
    let auth = site.signin();
    let b = Browser::signed_in(&site.link).await;
    let mut notes = site.server("notes");
    let mut other = site.server("other");
    for i in 0..10 {
        refused(&mut notes, &format!("root/n{i}.md"));
    }
    refused(&mut other, "root/o.md");
    let deadline = std::time::Instant::now() + crate::sidecar::WAIT;
    while offered(&site.state(&auth)).len() < 11 {
        assert!(std::time::Instant::now() < deadline, "offers did not come");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let group = "[data-offer-server=\"notes\"]";
    b.text_contains(&format!("{group} .offer-more"), "and 2 more")
        .await;
    assert_eq!(b.count(&format!("{group} [data-offer]")).await, 8);
    // The other server's group may be drawn a moment after the first: waited for, then
    // counted.
    b.find("[data-offer-server=\"other\"] [data-offer]").await;
    assert_eq!(
        b.count("[data-offer-server=\"other\"] [data-offer]").await,
        1
    );
    b.screenshot("offers").await;

    // The dismissal is a change like any other: the console's own origin only.
    let mut headers = auth.headers();
    headers.push(("Content-Type", "application/json"));
    headers.push(("Origin", "http://evil.example"));
    let a = site.http("POST", "/api/offers/dismiss", &headers, "{}");
    assert_eq!(a.status, 403, "{a:?}");
    assert_eq!(offered(&site.state(&auth)).len(), 11);

    b.click(&format!("{group} button.dismiss-server")).await;
    b.gone(group).await;
    b.find("[data-offer-server=\"other\"]").await;
    b.click("button.dismiss-all-offers").await;
    b.gone("[data-offer]").await;
    assert!(offered(&site.state(&auth)).is_empty());
    // Dismissed, nothing granted.
    refused(&mut notes, "root/n0.md");
    refused(&mut other, "root/o.md");
    b.close().await;
}
