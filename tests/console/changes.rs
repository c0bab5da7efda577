//! The Changes view: what an attached server changed is listed with what the recovery store
//! kept (in the place's own `XDG_STATE_HOME`), Restore on the page puts the old content back
//! on disk, "Undo this session" takes the session back and says in plain words what it left
//! alone; and the endpoints behind them answer only the console's own page.

use crate::browser::Browser;
use crate::site::Site;
use serde_json::{Value, json};

/// `notes` may write anywhere in the root, without a question.
const WRITABLE: &str = "[[grants]]\nservers = [\"notes\"]\npath = \"root\"\naccess = \"write\"\n";

fn ok(r: &Value) -> &Value {
    assert!(r.get("error").is_none(), "{r}");
    &r["result"]
}

fn write(s: &mut crate::sidecar::Sidecar, path: &str, content: &str) {
    ok(&s.request("files/write", json!({"path": path, "content": content})));
}

fn text(site: &Site, rel: &str) -> String {
    std::fs::read_to_string(site.place.root.join(rel)).unwrap()
}

/// The row of the change at `path`.
fn row(path: &str) -> String {
    format!("[data-changes^=\"notes@\"] tr[data-path=\"{path}\"]")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_is_listed_and_restore_on_the_page_puts_the_old_content_back() {
    let site = Site::start_with(WRITABLE);
    let mut s = site.server("notes");
    write(&mut s, "root/docs/a.md", "rewritten by notes");
    ok(&s.request("files/delete", json!({"path": "root/notes/n.md"})));
    write(&mut s, "root/docs/new.md", "fresh");
    assert_eq!(text(&site, "docs/a.md"), "rewritten by notes");

    let b = Browser::signed_in(&site.link).await;
    b.view("changes").await;
    let a = row("root/docs/a.md");
    b.text_contains(&format!("{a} td.what"), "Overwrote").await;
    b.text_contains(&format!("{a} td.kept"), "The old file")
        .await;
    b.text_contains(&format!("{} td.what", row("root/notes/n.md")), "Deleted")
        .await;
    b.text_contains(
        &format!("{} td.kept", row("root/notes/n.md")),
        "The deleted file",
    )
    .await;
    // A new file destroyed nothing: its way back is to take it away.
    let new = row("root/docs/new.md");
    b.text_contains(&format!("{new} td.what"), "Created").await;
    b.text_contains(&format!("{new} button.restore"), "Remove")
        .await;
    b.text_contains("[data-changes^=\"notes@\"] .card-head", "3 changes")
        .await;

    b.click(&format!("{a} button.restore")).await;
    b.text_contains(&format!("{a} .state-restored"), "Restored")
        .await;
    b.gone(&format!("{a} button.restore")).await;
    assert_eq!(text(&site, "docs/a.md"), "alpha");
    // What stood there is kept in turn, and listed as the user's own.
    b.text_contains(
        "[data-changes=\"user\"] tr[data-path=\"root/docs/a.md\"] td.kept",
        "What stood there",
    )
    .await;
    // The other changes stay as they were.
    assert!(!site.place.root.join("notes/n.md").exists());
    b.find(&format!("{new} button.restore")).await;
    b.screenshot("changes").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_on_the_page_takes_a_session_back_and_says_what_it_left_alone() {
    let site = Site::start_with(WRITABLE);
    let mut s = site.server("notes");
    write(&mut s, "root/docs/a.md", "rewritten by notes");
    write(&mut s, "root/docs/lib/b.md", "beta by notes");
    // The user edits b.md after the server did: undo must leave it.
    std::fs::write(site.place.root.join("docs/lib/b.md"), "beta, mine").unwrap();

    let b = Browser::signed_in(&site.link).await;
    b.view("changes").await;
    b.click_confirm("[data-changes^=\"notes@\"] button.undo")
        .await;
    let said = b
        .text_contains("[data-changes^=\"notes@\"] .undo-outcome", "left as it is")
        .await;
    assert!(said.contains("Undid 1 change."), "{said}");
    assert!(
        said.contains("root/docs/lib/b.md: it was changed again after this session changed it"),
        "{said}"
    );
    assert_eq!(text(&site, "docs/a.md"), "alpha");
    assert_eq!(text(&site, "docs/lib/b.md"), "beta, mine");
    b.find(&format!("{} .state-restored", row("root/docs/a.md")))
        .await;
    // The change it left alone can still be restored on its own.
    b.find(&format!("{} button.restore", row("root/docs/lib/b.md")))
        .await;
    b.screenshot("changes-undo").await;
    b.close().await;
}

/// A server that attaches as `user` is shown as the server it is: its own group, named
/// `server-user`, with "Undo this session"; "Your restores" holds only what the user's
/// restore kept, which the API marks `by` `user` (a field the broker sets, never a name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_names_itself_user_is_not_listed_as_the_users_restores() {
    // The policy grants what the renamed session will be named: the test is about who is
    // shown, not about consent.
    let site = Site::start_with(
        "[[grants]]\nservers = [\"server-user\"]\npath = \"root\"\naccess = \"write\"\n",
    );
    let mut s = crate::control::Control::open(&site.place);
    assert_eq!(s.attach_as("user"), "server-user");
    for (n, path) in [(2, "root/docs/a.md"), (3, "root/notes/n.md")] {
        let r = s.request(
            n,
            "files/write",
            json!({"path": path, "content": "by a server"}),
        );
        assert!(r.get("error").is_none(), "{r}");
    }
    let auth = site.signin();
    let listed: Value = serde_json::from_str(
        site.http("GET", "/api/changes", &auth.headers(), "")
            .json_body(),
    )
    .unwrap();
    let changes = listed["changes"].as_array().unwrap();
    let a_md = changes
        .iter()
        .find(|c| c["path"] == "root/docs/a.md")
        .unwrap();
    let id = a_md["id"].as_str().unwrap().to_owned();
    for c in changes {
        assert_eq!(c["by"], "server", "{c}");
    }
    let a = site.post(&auth, "/api/restore", &json!({"id": id}));
    assert_eq!(a.status, 200, "{a:?}");

    let b = Browser::signed_in(&site.link).await;
    b.view("changes").await;
    let theirs = "[data-changes^=\"server-user@\"][data-by=\"server\"]";
    b.text_contains(&format!("{theirs} .server-name"), "server-user")
        .await;
    b.find(&format!("{theirs} button.undo")).await;
    let mine = "[data-changes=\"user\"][data-by=\"user\"]";
    b.text_contains(&format!("{mine} .server-name"), "Your restores")
        .await;
    b.find(&format!("{mine} tr[data-path=\"root/docs/a.md\"]"))
        .await;
    // The server's other change is not the user's.
    b.gone(&format!("{mine} tr[data-path=\"root/notes/n.md\"]"))
        .await;
    b.find(&format!("{theirs} tr[data-path=\"root/notes/n.md\"]"))
        .await;
    b.screenshot("changes-server-named-user").await;
    b.close().await;
}

#[test]
fn restore_and_undo_answer_only_the_consoles_own_page() {
    let site = Site::start_with(WRITABLE);
    let mut s = site.server("notes");
    write(&mut s, "root/docs/a.md", "rewritten by notes");
    let auth = site.signin();
    let a = site.http("GET", "/api/changes", &auth.headers(), "");
    assert_eq!(a.status, 200, "{a:?}");
    let listed: Value = serde_json::from_str(a.json_body()).unwrap();
    assert_eq!(listed["enabled"], true, "{listed}");
    assert_eq!(listed["total"], 1, "{listed}");
    let store = site.place.tmp.path().join("state/fsbroker/recovery");
    assert_eq!(listed["store"], json!(store), "{listed}");
    let change = &listed["changes"][0];
    assert_eq!(change["server"], "notes", "{change}");
    assert_eq!(change["method"], "files/write", "{change}");
    let id = change["id"].as_str().unwrap();
    let body = json!({"id": id}).to_string();

    // Without the key, from another origin, or not as JSON: refused, and nothing restored.
    let cookie_only = [("Cookie", auth.cookie.as_str())];
    let a = site.http("GET", "/api/changes", &cookie_only, "");
    assert_eq!(a.status, 401, "{a:?}");
    let own = format!("http://{}", site.authority);
    let cases: [(&[(&str, &str)], u16); 4] = [
        (
            &[
                ("Origin", own.as_str()),
                ("Content-Type", "application/json"),
            ],
            401,
        ),
        (
            &[
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/json"),
            ],
            403,
        ),
        (&[("Content-Type", "application/json")], 403),
        (
            &[("Origin", own.as_str()), ("Content-Type", "text/plain")],
            415,
        ),
    ];
    for (i, (extra, status)) in cases.iter().enumerate() {
        // The first case leaves the key out; the others carry the whole sign-in.
        let mut headers: Vec<(&str, &str)> = if i == 0 {
            cookie_only.to_vec()
        } else {
            auth.headers()
        };
        headers.extend_from_slice(extra);
        for path in ["/api/restore", "/api/undo"] {
            let sent = if path == "/api/undo" {
                json!({"server": "notes"}).to_string()
            } else {
                body.clone()
            };
            let a = site.http("POST", path, &headers, &sent);
            assert_eq!(a.status, *status, "{path} {extra:?}: {a:?}");
        }
        assert_eq!(text(&site, "docs/a.md"), "rewritten by notes");
    }

    let a = site.post(&auth, "/api/restore", &json!({"id": "nope"}));
    assert_eq!(a.status, 404, "{a:?}");
    let a = site.post(&auth, "/api/restore", &json!({"id": id, "extra": 1}));
    assert_eq!(a.status, 400, "{a:?}");
    let a = site.post(&auth, "/api/restore", &json!({"id": id}));
    assert_eq!(a.status, 200, "{a:?}");
    let done: Value = serde_json::from_str(a.json_body()).unwrap();
    assert_eq!(done["restored"]["id"], id, "{done}");
    assert_eq!(text(&site, "docs/a.md"), "alpha");
    let a = site.post(&auth, "/api/restore", &json!({"id": id}));
    assert_eq!(a.status, 409, "{a:?}");
    assert!(a.body.contains("already restored"), "{a:?}");
    let a = site.post(&auth, "/api/undo", &json!({"server": "notes"}));
    assert_eq!(a.status, 200, "{a:?}");
    let undone: Value = serde_json::from_str(a.json_body()).unwrap();
    assert_eq!(undone, json!({"ok": true, "restored": [], "conflicts": []}));
}
