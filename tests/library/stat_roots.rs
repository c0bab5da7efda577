//! `files/stat`, `roots/list`, `ping` and the capability object.

use crate::common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};

async fn stat(b: &Broker, server: &str, path: &str) -> Value {
    call(b, server, "files/stat", json!({"path": path})).await
}

#[tokio::test]
async fn stat_of_a_file_reports_type_size_mime_etag_and_mtime() {
    let f = Fixture::new();
    f.file("src/main.rs", "fn main() {}\n");
    let b = f.broker();
    consent_all(&b, "s").await;
    let r = stat(&b, "s", "project/src/main.rs").await;
    let r = ok(&r);
    assert_eq!(r["path"], "project/src/main.rs");
    assert_eq!(r["type"], "file");
    assert_eq!(r["size"], 13);
    assert!(r["mimeType"].is_string(), "{r}");
    assert!(!r["etag"].as_str().unwrap().is_empty());
    assert!(r["mtime"].as_str().unwrap().ends_with('Z'), "{r}");
    // The etag agrees with files/read's.
    let read = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/src/main.rs"}),
    )
    .await;
    assert_eq!(ok(&read)["etag"], r["etag"]);
}

#[tokio::test]
async fn stat_of_a_directory_reports_directory_without_mime_type() {
    let f = Fixture::new();
    f.dir("src");
    let b = f.broker();
    consent_all(&b, "s").await;
    for path in ["project/src", "project"] {
        let r = stat(&b, "s", path).await;
        let r = ok(&r);
        assert_eq!(r["type"], "directory", "{path}");
        assert_eq!(r["path"], path);
        assert!(r.get("mimeType").is_none_or(Value::is_null), "{r}");
    }
}

#[tokio::test]
async fn stat_of_a_symlink_to_a_file_inside_follows_it() {
    let f = Fixture::new();
    f.file("docs/real.md", "# twelve chars");
    f.symlink("docs/real.md", "alias.md");
    let b = f.broker();
    consent_all(&b, "s").await;
    let r = stat(&b, "s", "project/alias.md").await;
    let r = ok(&r);
    assert_eq!(r["type"], "file");
    assert_eq!(r["size"], 14);
    assert_eq!(r["path"], "project/alias.md");
    // A missing path is FILE_NOT_FOUND.
    let r = stat(&b, "s", "project/missing").await;
    assert_eq!(err(&r).0, -31001);
}

#[tokio::test]
async fn readonly_is_true_on_a_read_only_root_and_false_with_a_write_grant() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker_with("read", "");
    consent_all(&b, "s").await;
    let r = stat(&b, "s", "project/a.txt").await;
    assert_eq!(ok(&r)["readonly"], true);
    let w = f.broker_with("write", "");
    consent_all(&w, "s").await;
    let r = stat(&w, "s", "project/a.txt").await;
    assert_eq!(ok(&r)["readonly"], false);
}

/// The canonical path as a `file://` URI, for a path whose components need no escaping.
fn plain_uri(p: &std::path::Path) -> String {
    let s = p.display().to_string();
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b)),
        "temporary path {s} would need escaping"
    );
    format!("file://{s}")
}

#[tokio::test]
async fn roots_list_shows_visible_roots_with_uri_and_display_name() {
    let f = Fixture::new();
    let spaced = f.tmp.path().join("my project");
    std::fs::create_dir(&spaced).unwrap();
    let hidden = f.tmp.path().join("hidden");
    std::fs::create_dir(&hidden).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\nname = \"The Project\"\n\n\
         [[roots]]\npath = {:?}\nmount = \"mine\"\n\n\
         [[roots]]\npath = {:?}\nservers = [\"other\"]\n\n\
         [consent]\nmode = \"auto\"\n[audit]\nenabled = false\n",
        f.root, spaced, hidden
    );
    let (b, _rx) = Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap();
    let tmp = std::fs::canonicalize(f.tmp.path()).unwrap();
    let base = plain_uri(&tmp);
    let r = call(&b, "s", "roots/list", json!({})).await;
    assert_eq!(
        ok(&r)["roots"],
        json!([
            {"uri": format!("{base}/project"), "name": "The Project"},
            {"uri": format!("{base}/my%20project"), "name": "mine"},
        ])
    );
    let r = call(&b, "other", "roots/list", json!({})).await;
    let roots = ok(&r)["roots"].as_array().unwrap().clone();
    assert_eq!(roots.len(), 3);
    assert_eq!(roots[2]["uri"], format!("{base}/hidden"));
    assert_eq!(roots[2]["name"], "hidden");
    // A root hidden from a server cannot be reached by it either.
    std::fs::write(hidden.join("h.txt"), "h").unwrap();
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["hidden"]}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], false);
}

#[tokio::test]
async fn roots_list_uri_is_of_the_canonical_path_through_a_symlinked_root() {
    let f = Fixture::new();
    let link = f.tmp.path().join("via-link");
    std::os::unix::fs::symlink(&f.root, &link).unwrap();
    let text =
        format!("[[roots]]\npath = {link:?}\nmount = \"project\"\n[audit]\nenabled = false\n");
    let (b, _rx) = Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap();
    let r = call(&b, "s", "roots/list", json!({})).await;
    let canonical = std::fs::canonicalize(&f.root).unwrap();
    assert_eq!(ok(&r)["roots"][0]["uri"], plain_uri(&canonical));
    assert_eq!(ok(&r)["roots"][0]["name"], "project");
}

#[tokio::test]
async fn ping_returns_an_empty_object() {
    let f = Fixture::new();
    let b = f.broker();
    let req = json!({"jsonrpc": "2.0", "id": 41, "method": "ping"});
    let r = b.handle_message("s", req).await.expect("a response");
    assert_eq!(ok(&r), &json!({}));
    assert_eq!(r["id"], 41);
    assert_eq!(r["jsonrpc"], "2.0");
    let r = call(&b, "s", "ping", json!({})).await;
    assert_eq!(ok(&r), &json!({}));
}

#[tokio::test]
async fn capabilities_offer_roots_with_list_changed_and_filesystem_brokering() {
    let f = Fixture::new();
    let b = f.broker();
    assert_eq!(
        b.capabilities(),
        json!({"roots": {"listChanged": true, "filesystemBrokering": true},
               "experimental": {"filesystemBrokering": {}}})
    );
}
