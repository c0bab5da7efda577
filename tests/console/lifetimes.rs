//! How long an answer holds, chosen on the page: this request only, this session, an hour,
//! or until revoked; the Sessions view shows what each grant lasts (a timed one counts
//! down), lists a remembered grant once, and revokes one with "forget" so that it does not
//! come back.

use crate::browser::Browser;
use crate::site::{Site, ask};
use serde_json::{Value, json};

/// Answers the page's question allowing `root/docs` for `lifetime` (the radio of that
/// value), and waits for the server's answer.
async fn allow_docs_for(b: &Browser, s: &mut crate::sidecar::Sidecar, lifetime: &str) {
    ask(s, 1, &["root/docs"], "read");
    b.find("[data-question] button.answer").await;
    b.click("[data-path=\"root/docs\"] input[value=allow]")
        .await;
    b.click(&format!(
        "[data-question] .lifetime input[value=\"{lifetime}\"]"
    ))
    .await;
    b.click("[data-question] button.answer").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_is_shown_counting_down_in_sessions() {
    let site = Site::start();
    let auth = site.signin();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    allow_docs_for(&b, &mut s, "hour").await;
    let grant = site.state(&auth)["sessions"][0]["grants"][0].clone();
    assert_eq!(grant["lifetime"], "timed", "{grant}");
    assert!(grant["expires"].is_string(), "{grant}");
    b.view("sessions").await;
    let row = "[data-grant=\"root/docs\"][data-lifetime=\"timed\"] .lasts";
    let left = b.text_contains(row, " left").await;
    assert!(
        left.starts_with("59:") || left.starts_with("60:"),
        "an hour's grant shows {left:?}"
    );
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    b.screenshot("sessions-timed").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_request_only_holds_for_one_request() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    allow_docs_for(&b, &mut s, "once").await;
    b.view("sessions").await;
    b.text_contains("[data-grant=\"root/docs\"] .lasts", "next request only")
        .await;
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["result"]["content"], "alpha", "{r}");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    b.gone("[data-grant=\"root/docs\"]").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_grant_is_listed_once_and_revoke_can_forget_it() {
    let site = Site::start();
    let auth = site.signin();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    allow_docs_for(&b, &mut s, "forever").await;
    site.state_when(&auth, |st| st["remembered"][0]["path"] == "root/docs");
    b.view("sessions").await;
    let row = "[data-session=\"notes\"] [data-grant=\"root/docs\"]";
    b.text_contains(&format!("{row} .lasts"), "until revoked")
        .await;
    let rows = b.count(row).await;
    assert_eq!(rows, 1, "a remembered grant listed {rows} times");
    b.screenshot("sessions-remembered").await;
    b.click(&format!("{row} button.revoke-forget")).await;
    let after = site.state_when(&auth, |st| st["remembered"] == json!([]));
    assert_eq!(after["remembered"], json!([]));
    let kept = std::fs::read_to_string(site.state_file()).unwrap();
    assert!(!kept.contains("root/docs"), "still remembered: {kept}");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "revoked", "still held: {r}");
    b.close().await;
    drop(s);

    // Not back after a restart.
    let site = Site::again(site.stop());
    let mut s = site.server("notes");
    let r = s.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "came back: {r}");
}

#[test]
fn a_lifetime_is_taken_and_remember_with_another_is_refused() {
    let site = Site::start();
    let auth = site.signin();
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    let st = site.state_when(&auth, |st| st["questions"][0]["id"].is_string());
    let id = st["questions"][0]["id"].as_str().unwrap().to_owned();
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}],
                        "remember": true, "lifetime": "hour"});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 400, "{a:?}");
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}],
                        "lifetime": "fortnight"});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 400, "{a:?}");
    assert_eq!(site.state(&auth)["questions"][0]["id"], id.as_str());
    // Either alone is an answer.
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}],
                        "lifetime": "session"});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 200, "{a:?}");
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");
    let grant = &site.state(&auth)["sessions"][0]["grants"][0];
    assert_eq!(grant["lifetime"], "session", "{grant}");
}

/// The views this work changed, at a laptop's and a phone's width, light and dark: a
/// question with its lifetimes and offers from two servers (Consent), and grants of each
/// lifetime (Sessions). With `FSBROKER_SCREENSHOTS=DIR`, kept as `DIR/NAME-WIDTH-THEME.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_changed_views_at_two_widths_and_both_themes() {
    let site = Site::start();
    let auth = site.signin();
    let mut notes = site.server("notes");
    let mut other = site.server("indexer");
    let b = Browser::signed_in(&site.link).await;
    allow_docs_for(&b, &mut notes, "hour").await;
    b.close().await;
    for i in 0..10 {
        crate::site::refused(&mut other, &format!("root/cache/c{i}.db"));
    }
    crate::site::refused(&mut notes, "root/todo.md");
    ask(&mut notes, 2, &["root/notes"], "write");
    site.state_when(&auth, |st| {
        st["offers"].as_array().is_some_and(|o| o.len() == 11)
            && st["questions"][0]["id"].is_string()
    });
    for (width, height) in [(1280, 800), (390, 844)] {
        for dark in [false, true] {
            let theme = if dark { "dark" } else { "light" };
            let b = Browser::signed_in_as(&site.fresh_link(), width, height, dark).await;
            b.find("[data-question] .lifetime").await;
            b.text_contains("[data-offer-server=\"indexer\"] .offer-more", "and 2 more")
                .await;
            b.screenshot(&format!("consent-lifetimes-{width}-{theme}"))
                .await;
            b.scroll_to("[data-offer-server=\"indexer\"] .offer-more")
                .await;
            b.screenshot(&format!("consent-offers-{width}-{theme}"))
                .await;
            b.scroll_to("[data-nav=\"sessions\"]").await;
            b.view("sessions").await;
            b.text_contains("[data-grant=\"root/docs\"] .lasts", " left")
                .await;
            b.scroll_to("[data-grant=\"root/docs\"]").await;
            b.screenshot(&format!("sessions-lifetimes-{width}-{theme}"))
                .await;
            b.close().await;
        }
    }
}

#[test]
fn a_remembered_answer_is_one_grant_in_the_sessions_list() {
    let site = Site::start();
    let auth = site.signin();
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    let st = site.state_when(&auth, |st| st["questions"][0]["id"].is_string());
    let id = st["questions"][0]["id"].as_str().unwrap().to_owned();
    // As a page before lifetimes sends it.
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}], "remember": true});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 200, "{a:?}");
    s.wait_id(&json!(1));
    let st = site.state_when(&auth, |st| st["remembered"][0]["path"] == "root/docs");
    let grants = st["sessions"][0]["grants"].as_array().unwrap();
    let docs: Vec<&Value> = grants.iter().filter(|g| g["path"] == "root/docs").collect();
    // Held twice (the answer's grant, and the standing grant remembering adds), listed once:
    // the one that lasts longest.
    assert_eq!(docs.len(), 1, "{grants:?}");
    assert_eq!(docs[0]["origin"], "standing", "{grants:?}");
}
