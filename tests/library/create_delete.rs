//! `files/create` and `files/delete`: kinds, exclusivity, parents, recursion, symlinks acted on
//! as names (never followed), the root itself, grants and parameter errors.

use crate::common::fs::*;
use crate::common::write::*;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

async fn create(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/create", params).await
}

async fn delete(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/delete", params).await
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

// ---- create ----

#[tokio::test]
async fn create_file_makes_an_empty_file_with_mode_0644_less_umask() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let r = create(&b, json!({"path": "project/new.txt", "type": "file"})).await;
    assert_eq!(ok(&r), &json!({"path": "project/new.txt", "type": "file"}));
    let meta = std::fs::symlink_metadata(f.root.join("new.txt")).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.len(), 0);
    assert_eq!(meta.permissions().mode() & 0o7777, 0o644 & !umask());
}

#[tokio::test]
async fn create_directory_makes_an_empty_directory() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let r = create(&b, json!({"path": "project/newdir", "type": "directory"})).await;
    assert_eq!(
        ok(&r),
        &json!({"path": "project/newdir", "type": "directory"})
    );
    assert!(f.root.join("newdir").is_dir());
    assert_eq!(std::fs::read_dir(f.root.join("newdir")).unwrap().count(), 0);
    // The new directory is usable at once.
    let r = create(&b, json!({"path": "project/newdir/x", "type": "file"})).await;
    ok(&r);
}

#[tokio::test]
async fn create_is_exclusive_for_files_directories_and_symlinks() {
    let f = Fixture::new();
    f.file("file.txt", "content");
    f.file("dir/inner.txt", "inner");
    f.symlink("file.txt", "link");
    f.symlink("missing-target", "dangling");
    f.symlink("dir", "dirlink");
    let b = writable(&f, "").await;
    for name in ["file.txt", "dir", "link", "dangling", "dirlink"] {
        for kind in ["file", "directory"] {
            let r = create(&b, json!({"path": format!("project/{name}"), "type": kind})).await;
            assert_error(&r, -31008, "ALREADY_EXISTS", "");
            assert_eq!(r["error"]["data"]["path"], format!("project/{name}"));
        }
    }
    assert_eq!(f.text_of("file.txt"), "content");
    assert_eq!(f.text_of("dir/inner.txt"), "inner");
    for (link, target) in [
        ("link", "file.txt"),
        ("dangling", "missing-target"),
        ("dirlink", "dir"),
    ] {
        assert!(is_symlink(&f.root.join(link)));
        assert_eq!(
            std::fs::read_link(f.root.join(link)).unwrap(),
            Path::new(target)
        );
    }
    assert!(!present(&f.root.join("missing-target")));
}

#[tokio::test]
async fn create_with_a_missing_parent_is_file_not_found() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    for kind in ["file", "directory"] {
        let r = create(&b, json!({"path": "project/a/b/c", "type": kind})).await;
        assert_error(&r, -31001, "FILE_NOT_FOUND", "");
        let r = create(
            &b,
            json!({"path": "project/a/b/c", "type": kind, "parents": false}),
        )
        .await;
        assert_error(&r, -31001, "FILE_NOT_FOUND", "");
    }
    assert!(!present(&f.root.join("a")));
}

#[tokio::test]
async fn create_with_parents_makes_the_whole_chain() {
    let f = Fixture::new();
    f.dir("a");
    let b = writable(&f, "").await;
    let r = create(
        &b,
        json!({"path": "project/a/b/c/file.txt", "type": "file", "parents": true}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"path": "project/a/b/c/file.txt", "type": "file"})
    );
    assert!(f.root.join("a/b/c").is_dir());
    assert_eq!(
        std::fs::metadata(f.root.join("a/b/c/file.txt"))
            .unwrap()
            .len(),
        0
    );
    let r = create(
        &b,
        json!({"path": "project/x/y/z", "type": "directory", "parents": true}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"path": "project/x/y/z", "type": "directory"})
    );
    assert!(f.root.join("x/y/z").is_dir());
    // parents does not make creation non-exclusive.
    let r = create(
        &b,
        json!({"path": "project/x/y/z", "type": "directory", "parents": true}),
    )
    .await;
    assert_error(&r, -31008, "ALREADY_EXISTS", "");
}

#[tokio::test]
async fn create_with_parents_through_a_file_is_not_a_directory() {
    let f = Fixture::new();
    f.file("plain", "x");
    let b = writable(&f, "").await;
    let r = create(
        &b,
        json!({"path": "project/plain/sub/f", "type": "file", "parents": true}),
    )
    .await;
    assert_error(&r, -31009, "NOT_A_DIRECTORY", "");
    assert_eq!(f.text_of("plain"), "x");
}

#[tokio::test]
async fn create_with_a_bad_or_missing_type_is_invalid_params() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    for params in [
        json!({"path": "project/x", "type": "symlink"}),
        json!({"path": "project/x", "type": "File"}),
        json!({"path": "project/x", "type": 1}),
        json!({"path": "project/x"}),
        json!({"type": "file"}),
        json!({"path": "project/x", "type": "file", "parents": "yes"}),
    ] {
        let r = create(&b, params.clone()).await;
        assert_eq!(err(&r).0, -32602, "{params}: {r}");
    }
    assert!(!present(&f.root.join("x")));
}

#[tokio::test]
async fn create_of_the_root_itself_is_root_itself() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let abs = f.root.to_str().unwrap().to_owned();
    for path in [
        "project",
        "project/",
        "project/.",
        "project/sub/..",
        abs.as_str(),
    ] {
        for kind in ["file", "directory"] {
            for parents in [false, true] {
                let r = create(&b, json!({"path": path, "type": kind, "parents": parents})).await;
                assert_error(&r, -31003, "INVALID_PATH", "root_itself");
            }
        }
    }
    assert!(f.root.is_dir());
    assert!(!present(&f.root.join("sub")));
}

#[tokio::test]
async fn create_needs_a_write_grant_on_a_writable_root() {
    let f = Fixture::new();
    let ro = f.broker();
    consent_all(&ro, "s").await;
    let r = create(&ro, json!({"path": "project/x", "type": "file"})).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    let rw = f.broker_with("write", "");
    let r = create(&rw, json!({"path": "project/x", "type": "directory"})).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "no_consent");
    assert!(!present(&f.root.join("x")));
}

// ---- delete ----

#[tokio::test]
async fn delete_removes_a_file_and_answers_its_path() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    f.file("b.txt", "y");
    let b = writable(&f, "").await;
    let r = delete(&b, json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r), &json!({"path": "project/a.txt"}));
    assert!(!present(&f.root.join("a.txt")));
    assert!(f.root.join("b.txt").exists());
    // recursive is harmless on a file.
    let r = delete(&b, json!({"path": "project/b.txt", "recursive": true})).await;
    ok(&r);
    assert!(!present(&f.root.join("b.txt")));
}

#[tokio::test]
async fn delete_removes_an_empty_directory() {
    let f = Fixture::new();
    f.dir("empty");
    let b = writable(&f, "").await;
    let r = delete(&b, json!({"path": "project/empty"})).await;
    assert_eq!(ok(&r), &json!({"path": "project/empty"}));
    assert!(!present(&f.root.join("empty")));
}

#[tokio::test]
async fn delete_of_a_non_empty_directory_without_recursive_is_directory_not_empty() {
    let f = Fixture::new();
    f.file("full/a.txt", "a");
    f.file("hidden/.only", "h");
    let b = writable(&f, "").await;
    for path in ["project/full", "project/hidden"] {
        for params in [
            json!({"path": path}),
            json!({"path": path, "recursive": false}),
        ] {
            let r = delete(&b, params).await;
            assert_error(&r, -31011, "DIRECTORY_NOT_EMPTY", "");
        }
    }
    assert_eq!(f.text_of("full/a.txt"), "a");
    assert_eq!(f.text_of("hidden/.only"), "h");
}

#[tokio::test]
async fn recursive_delete_removes_a_tree_without_following_its_symlinks() {
    let f = Fixture::new();
    f.file("keep/file.txt", "kept");
    f.file("keep/dir/deep.txt", "deep");
    f.file("tree/a.txt", "a");
    f.file("tree/.hidden", "h");
    f.file("tree/sub/b.txt", "b");
    f.file("tree/sub/deeper/c.txt", "c");
    f.dir("tree/sub/empty");
    f.symlink("../../keep/file.txt", "tree/sub/to-file");
    f.symlink(f.root.join("keep/dir"), "tree/to-dir-abs");
    f.symlink("../keep", "tree/to-keep");
    f.symlink("nowhere", "tree/dangling");
    let b = writable(&f, "").await;
    let r = delete(&b, json!({"path": "project/tree", "recursive": true})).await;
    assert_eq!(ok(&r), &json!({"path": "project/tree"}));
    assert!(!present(&f.root.join("tree")));
    assert_eq!(f.text_of("keep/file.txt"), "kept");
    assert_eq!(f.text_of("keep/dir/deep.txt"), "deep");
}

#[tokio::test]
async fn deleting_a_symlink_removes_the_link_and_keeps_its_target() {
    let f = Fixture::new();
    f.file("target.txt", "inside");
    f.file("tdir/x", "x");
    let links: [(&str, &Path, bool); 8] = [
        ("to-file", Path::new("target.txt"), false),
        ("to-file-r", Path::new("target.txt"), true),
        ("to-dir", Path::new("tdir"), false),
        ("to-dir-r", Path::new("tdir"), true),
        ("to-out-file", &f.outside.join("secret.txt"), false),
        ("to-out-file-r", Path::new("../outside/secret.txt"), true),
        ("to-out-dir", &f.outside, false),
        ("to-out-dir-r", Path::new("../outside"), true),
    ];
    for (link, target, _) in &links {
        f.symlink(target, link);
    }
    let b = writable(&f, "").await;
    for (link, _, recursive) in links {
        let r = delete(
            &b,
            json!({"path": format!("project/{link}"), "recursive": recursive}),
        )
        .await;
        assert_eq!(ok(&r), &json!({"path": format!("project/{link}")}));
        assert!(!present(&f.root.join(link)), "{link} still there");
    }
    assert_eq!(f.text_of("target.txt"), "inside");
    assert_eq!(f.text_of("tdir/x"), "x");
    f.assert_canary_intact();
}

#[tokio::test]
async fn recursive_delete_of_a_dir_holding_a_link_to_an_outside_dir_keeps_the_outside_dir() {
    let f = Fixture::new();
    f.file("d/own.txt", "own");
    f.symlink(&f.outside, "d/out-abs");
    f.symlink("../../outside", "d/out-rel");
    f.symlink(f.outside.join("secret.txt"), "d/out-file");
    let b = writable(&f, "").await;
    let r = delete(&b, json!({"path": "project/d", "recursive": true})).await;
    ok(&r);
    assert!(!present(&f.root.join("d")));
    f.assert_canary_intact();
}

#[tokio::test]
async fn delete_of_a_missing_path_is_file_not_found() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    for params in [
        json!({"path": "project/missing"}),
        json!({"path": "project/missing", "recursive": true}),
        json!({"path": "project/nodir/missing"}),
    ] {
        let r = delete(&b, params).await;
        assert_error(&r, -31001, "FILE_NOT_FOUND", "");
    }
}

#[tokio::test]
async fn delete_of_the_root_is_root_itself_by_mount_name_and_absolute_path() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = writable(&f, "").await;
    let abs = f.root.to_str().unwrap().to_owned();
    let uri = format!("file://{abs}");
    for path in [
        "project",
        "project/",
        "project/./x/..",
        abs.as_str(),
        uri.as_str(),
    ] {
        for recursive in [false, true] {
            let r = delete(&b, json!({"path": path, "recursive": recursive})).await;
            assert_error(&r, -31003, "INVALID_PATH", "root_itself");
        }
    }
    assert_eq!(f.text_of("a.txt"), "a");
}

#[tokio::test]
async fn delete_needs_a_write_grant() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let ro = f.broker();
    consent_all(&ro, "s").await;
    let r = delete(&ro, json!({"path": "project/a.txt"})).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    let rw = f.broker_with("write", "");
    let r = delete(&rw, json!({"path": "project/a.txt"})).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "no_consent");
    let r = call(
        &rw,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "read"}),
    )
    .await;
    ok(&r);
    let r = delete(&rw, json!({"path": "project/a.txt"})).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    assert!(f.root.join("a.txt").exists());
}

#[tokio::test]
async fn delete_with_bad_params_is_invalid_params() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = writable(&f, "").await;
    for params in [
        json!({}),
        json!({"path": 3}),
        json!({"path": "project/a.txt", "recursive": "yes"}),
    ] {
        let r = delete(&b, params.clone()).await;
        assert_eq!(err(&r).0, -32602, "{params}: {r}");
    }
    assert!(f.root.join("a.txt").exists());
}
