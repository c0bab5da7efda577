//! `files/list`: order, types, hidden entries, recursion, depth, symlinks and paging.

use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

async fn list(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/list", params).await
}

/// A recursive listing of `path` down to `depth`.
async fn list_depth(b: &Broker, path: &str, depth: u64) -> Value {
    list(
        b,
        json!({"path": path, "recursive": true, "maxDepth": depth}),
    )
    .await
}

/// A recursive listing of the whole root, hidden entries included.
async fn list_everything(b: &Broker) -> Value {
    list(
        b,
        json!({"path": "project", "recursive": true, "includeHidden": true}),
    )
    .await
}

/// The `path` of every entry of a successful listing.
fn paths(r: &Value) -> Vec<String> {
    ok(r)["entries"]
        .as_array()
        .expect("entries array")
        .iter()
        .map(|e| e["path"].as_str().expect("path string").to_owned())
        .collect()
}

fn entry<'a>(r: &'a Value, path: &str) -> &'a Value {
    ok(r)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("no entry {path} in {r}"))
}

#[tokio::test]
async fn non_recursive_lists_direct_children_sorted_with_types() {
    let f = Fixture::new();
    f.file("b.txt", "bb");
    f.file("a.txt", "a");
    f.file("B.txt", "B");
    f.file("c/inner.txt", "deep");
    f.symlink("a.txt", "d");
    let sock = f.root.join("e.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project"})).await;
    assert_eq!(
        paths(&r),
        [
            "project/B.txt",
            "project/a.txt",
            "project/b.txt",
            "project/c",
            "project/d",
            "project/e.sock"
        ]
    );
    assert!(ok(&r).get("nextCursor").is_none_or(Value::is_null));
    let types: Vec<&str> = ok(&r)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["file", "file", "file", "directory", "symlink", "other"]
    );
    let b_txt = entry(&r, "project/b.txt");
    assert_eq!(b_txt["name"], "b.txt");
    assert_eq!(b_txt["size"], 2);
    assert!(b_txt["mtime"].is_string(), "{b_txt}");
}

#[tokio::test]
async fn hidden_entries_are_listed_only_with_include_hidden() {
    let f = Fixture::new();
    f.file(".env", "SECRET=1");
    f.file(".git/config", "[core]");
    f.file("visible.txt", "v");
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project"})).await;
    assert_eq!(paths(&r), ["project/visible.txt"]);
    let r = list(&b, json!({"path": "project", "includeHidden": true})).await;
    assert_eq!(
        paths(&r),
        ["project/.env", "project/.git", "project/visible.txt"]
    );
}

#[tokio::test]
async fn recursion_enters_hidden_directories_only_with_include_hidden() {
    let f = Fixture::new();
    f.file(".git/objects/x", "obj");
    f.file("src/.cache/c", "c");
    f.file("src/main.rs", "fn main() {}");
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project", "recursive": true})).await;
    assert_eq!(paths(&r), ["project/src", "project/src/main.rs"]);
    let r = list_everything(&b).await;
    assert_eq!(
        paths(&r),
        [
            "project/.git",
            "project/.git/objects",
            "project/.git/objects/x",
            "project/src",
            "project/src/.cache",
            "project/src/.cache/c",
            "project/src/main.rs",
        ]
    );
}

#[tokio::test]
async fn recursive_listing_is_pre_order() {
    let f = Fixture::new();
    f.file("a/x.txt", "x");
    f.file("a/y/z.txt", "z");
    f.file("a.txt", "a");
    f.file("b.txt", "b");
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project", "recursive": true})).await;
    assert_eq!(
        paths(&r),
        [
            "project/a",
            "project/a/x.txt",
            "project/a/y",
            "project/a/y/z.txt",
            "project/a.txt",
            "project/b.txt",
        ]
    );
    assert_eq!(entry(&r, "project/a/y")["type"], "directory");
    assert_eq!(entry(&r, "project/a/y/z.txt")["name"], "z.txt");
}

#[tokio::test]
async fn max_depth_limits_recursion() {
    let f = Fixture::new();
    f.file("a/b/c/d.txt", "d");
    f.file("top.txt", "t");
    let b = consented(&f).await;
    let r = list_depth(&b, "project", 1).await;
    assert_eq!(paths(&r), ["project/a", "project/top.txt"]);
    let r = list_depth(&b, "project", 2).await;
    assert_eq!(paths(&r), ["project/a", "project/a/b", "project/top.txt"]);
    let r = list_depth(&b, "project/a", 2).await;
    assert_eq!(paths(&r), ["project/a/b", "project/a/b/c"]);
}

#[tokio::test]
async fn symlinked_directories_are_listed_as_symlinks_and_not_entered() {
    let f = Fixture::new();
    f.file("real/inside.txt", "i");
    f.symlink("real", "link");
    f.symlink(&f.outside, "escape");
    let b = consented(&f).await;
    let r = list_everything(&b).await;
    assert_eq!(
        paths(&r),
        [
            "project/escape",
            "project/link",
            "project/real",
            "project/real/inside.txt"
        ]
    );
    assert_eq!(entry(&r, "project/link")["type"], "symlink");
    assert_eq!(entry(&r, "project/escape")["type"], "symlink");
    assert!(!r.to_string().contains("secret.txt"));
    f.assert_canary_intact();
}

/// Builds a tree of 160 entries: 10 directories, each with 4 files and a subdirectory of 9
/// files (10 * (1 + 4 + 1 + 9) = 150), and 10 files at the top. Returns the count.
fn paging_tree(f: &Fixture) -> usize {
    for d in 0..10 {
        for i in 0..4 {
            f.file(&format!("d{d}/f{i}.txt"), "x");
        }
        for i in 0..9 {
            f.file(&format!("d{d}/sub/g{i}.txt"), "y");
        }
    }
    for i in 0..10 {
        f.file(&format!("top{i}.txt"), "z");
    }
    160
}

async fn all_pages(b: &Broker, base: Value, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut params = base.clone();
        params["limit"] = json!(limit);
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let r = list(b, params).await;
        let page = paths(&r);
        assert!(
            page.len() <= limit,
            "page of {} over limit {limit}",
            page.len()
        );
        out.extend(page);
        match ok(&r).get("nextCursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
    panic!("paging did not end");
}

#[tokio::test]
async fn paging_with_next_cursor_visits_every_entry_once_in_order() {
    let f = Fixture::new();
    let total = paging_tree(&f);
    let b = consented(&f).await;
    let base = json!({"path": "project", "recursive": true});
    let mut one = base.clone();
    one["limit"] = json!(10000);
    let whole = paths(&list(&b, one).await);
    assert_eq!(whole.len(), total);
    let paged = all_pages(&b, base, 7).await;
    assert_eq!(paged, whole);
    let mut unique = paged.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), total, "an entry was listed twice");
}

#[tokio::test]
async fn paging_a_flat_directory_visits_every_entry_once() {
    let f = Fixture::new();
    paging_tree(&f);
    let b = consented(&f).await;
    let whole = paths(&list(&b, json!({"path": "project"})).await);
    assert_eq!(whole.len(), 20);
    for limit in [1, 3, 20, 21] {
        let paged = all_pages(&b, json!({"path": "project"}), limit).await;
        assert_eq!(paged, whole, "limit {limit}");
    }
}

#[tokio::test]
async fn invalid_cursor_is_invalid_params() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = consented(&f).await;
    for cursor in ["!!not base64!!", "bm90IGpzb24", ""] {
        let r = list(&b, json!({"path": "project", "cursor": cursor})).await;
        assert_eq!(err(&r).0, -32602, "cursor {cursor:?}: {r}");
    }
}

#[tokio::test]
async fn limit_zero_is_invalid_params_and_above_the_maximum_is_quota_exceeded() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project", "limit": 0})).await;
    assert_eq!(err(&r).0, -32602);
    let r = list(&b, json!({"path": "project", "limit": 10001})).await;
    assert_eq!(err(&r).0, -31007);
    assert_eq!(r["error"]["data"]["limit"], 10000);
    let r = list(&b, json!({"path": "project", "limit": 10000})).await;
    assert_eq!(paths(&r), ["project/a.txt"]);
}

#[tokio::test]
async fn max_depth_zero_is_invalid_params() {
    let f = Fixture::new();
    let b = consented(&f).await;
    let r = list_depth(&b, "project", 0).await;
    assert_eq!(err(&r).0, -32602);
}

#[tokio::test]
async fn listing_a_file_is_not_a_directory() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = consented(&f).await;
    let r = list(&b, json!({"path": "project/a.txt"})).await;
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31009, "NOT_A_DIRECTORY"));
    assert_eq!(r["error"]["data"]["path"], "project/a.txt");
}

#[tokio::test]
async fn listing_the_root_by_mount_name_alone_works() {
    let f = Fixture::new();
    f.file("only.txt", "o");
    let b = consented(&f).await;
    for path in ["project", "project/", "project/.", "project/sub/.."] {
        let r = list(&b, json!({"path": path})).await;
        assert_eq!(paths(&r), ["project/only.txt"], "{path}");
    }
}
