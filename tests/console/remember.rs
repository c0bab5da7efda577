//! "Remember": an answer kept as a standing grant in the state file, listed on the page,
//! held by the server's sessions after the daemon restarts, and forgotten from the page; a
//! question whose server left is shown withdrawn and takes no answer, so nothing is
//! remembered for a session that no longer exists.

use crate::browser::Browser;
use crate::site::{Site, ask};
use serde_json::{Value, json};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_server_left_is_withdrawn_and_nothing_is_remembered() {
    let site = Site::start();
    let auth = site.signin();
    // A server that goes without a word (killed, or a client that drops the connection):
    // attached as `serve --daemon` attaches, its question asked, the connection closed.
    let mut s = crate::control::Control::open(&site.place);
    assert_eq!(s.attach_as("notes"), "notes");
    s.send(
        1,
        "files/consent",
        json!({"requestedPaths": ["root/docs"], "access": "read"}),
    );
    let asked = site.state_when(&auth, |st| st["questions"][0]["id"].is_string());
    let id = asked["questions"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(asked["questions"][0]["withdrawn"], Value::Null, "{asked}");
    let b = Browser::signed_in(&site.link).await;
    b.find(&format!("[data-question=\"{id}\"] button.answer"))
        .await;

    // The server leaves while its question waits.
    drop(s);
    let gone = site.state_when(&auth, |st| st["questions"][0]["withdrawn"].is_string());
    let why = gone["questions"][0]["withdrawn"].as_str().unwrap();
    assert!(why.contains("the server left"), "{gone}");
    let card = format!("[data-question=\"{id}\"].withdrawn");
    b.text_contains(&card, "the server left").await;
    b.gone(&format!("{card} button.answer")).await;
    b.screenshot("consent-withdrawn").await;

    // An answer with "remember", as a stale page would send it: refused, nothing kept.
    let answer = json!({"answers": [{"path": "root/docs", "approve": true}], "remember": true});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &answer);
    assert_eq!(a.status, 410, "{a:?}");
    assert!(a.body.contains("withdrawn"), "{a:?}");
    let kept = std::fs::read_to_string(site.state_file()).unwrap_or_default();
    assert!(!kept.contains("root/docs"), "{kept}");
    assert_eq!(site.state(&auth)["remembered"], json!([]));
    // The next process to claim the name holds nothing of it.
    let mut next = site.server("notes");
    let r = next.request("files/read", json!({"path": "root/docs/a.md"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "inherited: {r}");
    let ran = site.place.verb(&["status", "--json"]);
    let status: Value = serde_json::from_str(&ran.out()).unwrap();
    let notes = status["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server"] == "notes")
        .cloned()
        .unwrap_or_else(|| panic!("no session notes: {status}"));
    assert_eq!(notes["grants"], json!([]), "{notes}");

    // Dismissed on the page, the card goes.
    b.click(&format!("{card} button.dismiss")).await;
    b.gone(&format!("[data-question=\"{id}\"]")).await;
    b.close().await;
}
