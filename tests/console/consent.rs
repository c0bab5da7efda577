//! Consent answered on the page: a server's question waits there; one folder is approved
//! narrowed to a sub-folder, another approved whole, and the server's reads succeed and fail
//! accordingly. The server's message is shown as text, never as markup.

use crate::browser::Browser;
use crate::site::{Site, ask, refused, rpc};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_one_path_narrow_another_and_reads_follow() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    s.send(&rpc(
        1,
        "files/consent",
        json!({"requestedPaths": ["root/docs", "root/notes", "root"], "access": "write",
               "message": "to index <b>your</b> notes"}),
    ));
    let card = b.find("[data-question]").await;
    let text = card.text().await.unwrap();
    assert!(text.contains("notes"), "{text}");
    assert!(
        text.contains("<b>your</b>"),
        "the message was not shown as text: {text}"
    );
    b.screenshot("consent").await;
    b.click("[data-path=\"root/docs\"] input[value=allow]")
        .await;
    b.find("[data-path=\"root/docs\"] input.narrow")
        .await
        .send_keys("lib")
        .await
        .unwrap();
    b.click("[data-path=\"root/notes\"] input[value=allow]")
        .await;
    b.click("[data-path=\"root/notes\"] input.read-only").await;
    b.click("[data-question] button.answer").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], true, "{r}");
    b.gone("[data-question]").await;

    let read = |s: &mut crate::sidecar::Sidecar, path: &str| {
        s.request("files/read", json!({"path": path}))
    };
    let ok = read(&mut s, "root/docs/lib/b.md");
    assert_eq!(ok["result"]["content"], "beta", "{ok}");
    let no = read(&mut s, "root/docs/a.md");
    assert_eq!(
        no["error"]["data"]["reason"], "no_consent",
        "narrowed away: {no}"
    );
    let ok = read(&mut s, "root/notes/n.md");
    assert_eq!(ok["result"]["content"], "note", "{ok}");
    let no = read(&mut s, "root/x.md");
    assert_eq!(no["error"]["data"]["reason"], "no_consent", "denied: {no}");
    // Lowered to read on the page: a write under root/notes is refused.
    let w = s.request(
        "files/write",
        json!({"path": "root/notes/n.md", "content": "x", "overwrite": true}),
    );
    assert_eq!(w["error"]["data"]["reason"], "read_only", "{w}");
    // Narrowed to write under docs/lib: allowed there.
    let w = s.request(
        "files/write",
        json!({"path": "root/docs/lib/b.md", "content": "gamma", "overwrite": true}),
    );
    assert!(w["result"].is_object(), "{w}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_all_refuses_and_nothing_is_granted() {
    let site = Site::start();
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    ask(&mut s, 1, &["root/docs"], "read");
    b.find("[data-question]").await;
    b.click("[data-question] button.deny-all").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["granted"], false, "{r}");
    refused(&mut s, "root/docs/a.md");
    b.close().await;
}

/// With `consent.roots = "ask"`, a server's first `roots/list` waits for the page's answer,
/// which shows only the roots allowed, and grants nothing in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_shown_to_a_server_only_once_allowed_on_the_page() {
    // Right after the policy's `[consent]` section, so in it.
    let site = Site::start_with("roots = \"ask\"\n");
    let b = Browser::signed_in(&site.link).await;
    let mut s = site.server("notes");
    s.send(&rpc(1, "roots/list", json!({})));
    let card = b.find("[data-question]").await;
    let text = card.text().await.unwrap();
    assert!(text.contains("asks to see"), "{text}");
    assert!(
        b.c.find_all(fantoccini::Locator::Css("[data-question] input.narrow"))
            .await
            .unwrap()
            .is_empty()
    );
    b.screenshot("roots-question").await;
    // Nothing to narrow or lower in it.
    let auth = site.signin();
    let id = site.state(&auth)["questions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let narrowed = json!({"answers": [{"path": "root", "approve": true, "narrow": "docs"}]});
    let a = site.post(&auth, &format!("/api/questions/{id}"), &narrowed);
    assert_eq!(a.status, 400, "{a:?}");
    b.click("[data-path=\"root\"] input[value=allow]").await;
    b.click("[data-question] button.answer").await;
    let r = s.wait_id(&json!(1));
    assert_eq!(r["result"]["roots"][0]["name"], "root", "{r}");
    refused(&mut s, "root/docs/a.md");
    b.close().await;
}
