//! `files/rename`: files and directories, `overwrite`, moves into itself, across roots, the
//! root itself, missing ends, symlinks moved as links, grants on both ends and result fields.

use crate::common::fs::*;
use crate::common::write::*;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

async fn consent(b: &Broker, paths: Value, access: &str) -> Value {
    let r = call(
        b,
        "s",
        "files/consent",
        json!({"requestedPaths": paths, "access": access}),
    )
    .await;
    ok(&r).clone()
}

async fn rename(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/rename", params).await
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[tokio::test]
async fn rename_moves_a_file_and_answers_both_paths() {
    let f = Fixture::new();
    f.file("a.txt", "content");
    f.dir("sub");
    let b = writable(&f, "").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a.txt", "newPath": "project/sub/b.txt"}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "project/a.txt", "newPath": "project/sub/b.txt"})
    );
    assert!(!present(&f.root.join("a.txt")));
    assert_eq!(read(&f.root.join("sub/b.txt")), "content");
}

#[tokio::test]
async fn rename_result_paths_are_in_mount_form_for_absolute_and_uri_paths() {
    let f = Fixture::new();
    f.file("a.txt", "content");
    let b = writable(&f, "").await;
    let old = f.root.join("a.txt").to_str().unwrap().to_owned();
    let new = format!("file://{}", f.root.join("b.txt").display());
    let r = rename(&b, json!({"oldPath": old, "newPath": new})).await;
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "project/a.txt", "newPath": "project/b.txt"})
    );
    let r = rename(
        &b,
        json!({"oldPath": "project/./x/../b.txt", "newPath": "project//c.txt"}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "project/b.txt", "newPath": "project/c.txt"})
    );
    assert_eq!(read(&f.root.join("c.txt")), "content");
}

#[tokio::test]
async fn rename_moves_a_directory_with_its_contents() {
    let f = Fixture::new();
    f.file("d/x.txt", "x");
    f.file("d/sub/y.txt", "y");
    f.dir("dest");
    let b = writable(&f, "").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/d", "newPath": "project/dest/moved"}),
    )
    .await;
    ok(&r);
    assert!(!present(&f.root.join("d")));
    assert_eq!(read(&f.root.join("dest/moved/x.txt")), "x");
    assert_eq!(read(&f.root.join("dest/moved/sub/y.txt")), "y");
}

#[tokio::test]
async fn rename_without_overwrite_onto_an_existing_entry_is_already_exists() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    f.file("b.txt", "B");
    f.file("d/x", "x");
    f.symlink("nowhere", "dangling");
    let b = writable(&f, "").await;
    for (new, overwrite) in [
        ("project/b.txt", None),
        ("project/b.txt", Some(false)),
        ("project/d", Some(false)),
        ("project/dangling", Some(false)),
    ] {
        let mut params = json!({"oldPath": "project/a.txt", "newPath": new});
        if let Some(o) = overwrite {
            params["overwrite"] = json!(o);
        }
        let r = rename(&b, params).await;
        assert_error(&r, -31008, "ALREADY_EXISTS", "");
    }
    assert_eq!(read(&f.root.join("a.txt")), "A");
    assert_eq!(read(&f.root.join("b.txt")), "B");
    assert_eq!(read(&f.root.join("d/x")), "x");
    assert_eq!(
        std::fs::read_link(f.root.join("dangling")).unwrap(),
        Path::new("nowhere")
    );
}

#[tokio::test]
async fn rename_with_overwrite_replaces_the_target() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    f.file("b.txt", "B");
    let b = writable(&f, "").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a.txt", "newPath": "project/b.txt", "overwrite": true}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "project/a.txt", "newPath": "project/b.txt"})
    );
    assert!(!present(&f.root.join("a.txt")));
    assert_eq!(read(&f.root.join("b.txt")), "A");
    // overwrite on a missing target is a plain move.
    let r = rename(
        &b,
        json!({"oldPath": "project/b.txt", "newPath": "project/c.txt", "overwrite": true}),
    )
    .await;
    ok(&r);
    assert_eq!(read(&f.root.join("c.txt")), "A");
}

#[tokio::test]
async fn rename_onto_itself_succeeds_and_changes_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    let b = writable(&f, "").await;
    for overwrite in [false, true] {
        let r = rename(
            &b,
            json!({"oldPath": "project/a.txt", "newPath": "project/a.txt", "overwrite": overwrite}),
        )
        .await;
        ok(&r);
        assert_eq!(read(&f.root.join("a.txt")), "A");
    }
}

#[tokio::test]
async fn rename_of_a_directory_into_itself_is_into_itself() {
    let f = Fixture::new();
    f.file("a/x", "x");
    f.symlink("a", "link-to-a");
    let b = writable(&f, "").await;
    for new in ["project/a/b", "project/a/x/y/z", "project/link-to-a/b"] {
        for overwrite in [false, true] {
            let r = rename(
                &b,
                json!({"oldPath": "project/a", "newPath": new, "overwrite": overwrite}),
            )
            .await;
            assert_error(&r, -31003, "INVALID_PATH", "into_itself");
        }
    }
    assert_eq!(read(&f.root.join("a/x")), "x");
    // A sibling whose name extends the source's is not inside it.
    let r = rename(&b, json!({"oldPath": "project/a", "newPath": "project/ab"})).await;
    ok(&r);
    assert_eq!(read(&f.root.join("ab/x")), "x");
}

/// A broker over `project` and a second writable root `other`, with write consent on both.
async fn two_roots(f: &Fixture) -> (Broker, PathBuf) {
    let other = f.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let extra = format!("[[roots]]\npath = {other:?}\nmount = \"other\"\naccess = \"write\"\n");
    let b = f.broker_with("write", &extra);
    let c = consent(&b, json!(["project", "other"]), "write").await;
    assert_eq!(c["approvedPaths"], json!(["project", "other"]), "{c}");
    (b, other)
}

#[tokio::test]
async fn rename_across_roots_is_cross_root() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    f.dir("d");
    let (b, other) = two_roots(&f).await;
    std::fs::write(other.join("o.txt"), "O").unwrap();
    let abs_other = other.join("moved.txt").to_str().unwrap().to_owned();
    for (old, new) in [
        ("project/a.txt", "other/a.txt"),
        ("project/d", "other/d"),
        ("other/o.txt", "project/o.txt"),
        ("project/a.txt", abs_other.as_str()),
        ("project/a.txt", "other/o.txt"),
    ] {
        for overwrite in [false, true] {
            let r = rename(
                &b,
                json!({"oldPath": old, "newPath": new, "overwrite": overwrite}),
            )
            .await;
            assert_error(&r, -31003, "INVALID_PATH", "cross_root");
        }
    }
    assert_eq!(read(&f.root.join("a.txt")), "A");
    assert!(f.root.join("d").is_dir());
    assert_eq!(read(&other.join("o.txt")), "O");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
    // Within the second root a rename works.
    let r = rename(
        &b,
        json!({"oldPath": "other/o.txt", "newPath": "other/p.txt"}),
    )
    .await;
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "other/o.txt", "newPath": "other/p.txt"})
    );
}

#[tokio::test]
async fn rename_of_or_onto_the_root_itself_is_root_itself() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    f.dir("d");
    let b = writable(&f, "").await;
    let abs = f.root.to_str().unwrap().to_owned();
    for (old, new) in [
        ("project", "project/d/moved"),
        ("project", "project2"),
        (abs.as_str(), "project/x"),
        ("project/a.txt", "project"),
        ("project/a.txt", "project/d/.."),
        ("project/d", abs.as_str()),
    ] {
        for overwrite in [false, true] {
            let r = rename(
                &b,
                json!({"oldPath": old, "newPath": new, "overwrite": overwrite}),
            )
            .await;
            let (c, d, why) = err(&r);
            if new == "project2" {
                // Not a mount: outside every root, refused before the root check.
                assert_eq!(
                    (c, d.as_str(), why.as_str()),
                    (-31002, "PERMISSION_DENIED", "outside_root")
                );
            } else {
                assert_error(&r, -31003, "INVALID_PATH", "root_itself");
            }
        }
    }
    assert_eq!(read(&f.root.join("a.txt")), "A");
    assert!(f.root.join("d").is_dir());
    f.assert_canary_intact();
}

#[tokio::test]
async fn rename_of_a_missing_source_is_file_not_found() {
    let f = Fixture::new();
    f.file("b.txt", "B");
    let b = writable(&f, "").await;
    for (new, overwrite) in [("project/x", false), ("project/b.txt", true)] {
        let r = rename(
            &b,
            json!({"oldPath": "project/missing", "newPath": new, "overwrite": overwrite}),
        )
        .await;
        assert_error(&r, -31001, "FILE_NOT_FOUND", "");
    }
    assert_eq!(read(&f.root.join("b.txt")), "B");
    assert!(!present(&f.root.join("x")));
}

#[tokio::test]
async fn rename_into_a_missing_parent_is_file_not_found() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    let b = writable(&f, "").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a.txt", "newPath": "project/nodir/a.txt"}),
    )
    .await;
    assert_error(&r, -31001, "FILE_NOT_FOUND", "");
    assert_eq!(read(&f.root.join("a.txt")), "A");
    assert!(!present(&f.root.join("nodir")));
}

#[tokio::test]
async fn renaming_a_symlink_moves_the_link_not_its_target() {
    let f = Fixture::new();
    f.file("target.txt", "T");
    f.file("tdir/x", "x");
    f.symlink("target.txt", "link");
    f.symlink("tdir", "dirlink");
    f.symlink(f.outside.join("secret.txt"), "outlink");
    let b = writable(&f, "").await;
    for (old, new) in [
        ("link", "link2"),
        ("dirlink", "dirlink2"),
        ("outlink", "outlink2"),
    ] {
        let before = std::fs::read_link(f.root.join(old)).unwrap();
        let r = rename(
            &b,
            json!({"oldPath": format!("project/{old}"), "newPath": format!("project/{new}")}),
        )
        .await;
        ok(&r);
        assert!(!present(&f.root.join(old)));
        let meta = std::fs::symlink_metadata(f.root.join(new)).unwrap();
        assert!(meta.file_type().is_symlink(), "{new} is not a link");
        assert_eq!(std::fs::read_link(f.root.join(new)).unwrap(), before);
    }
    assert_eq!(read(&f.root.join("target.txt")), "T");
    assert_eq!(read(&f.root.join("tdir/x")), "x");
    assert_eq!(std::fs::read_dir(f.root.join("tdir")).unwrap().count(), 1);
    f.assert_canary_intact();
}

#[tokio::test]
async fn rename_needs_a_write_grant_on_both_ends() {
    let f = Fixture::new();
    f.file("a/x", "x");
    f.dir("b");
    let b = f.broker_with("write", "");
    // Write on a only: the target in b has no grant at all.
    consent(&b, json!(["project/a"]), "write").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a/x", "newPath": "project/b/x"}),
    )
    .await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "no_consent");
    // Read on b: the target is read-only.
    consent(&b, json!(["project/b"]), "read").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a/x", "newPath": "project/b/x"}),
    )
    .await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    // The other direction: the source in b is read-only.
    std::fs::write(f.root.join("b/y"), "y").unwrap();
    let r = rename(
        &b,
        json!({"oldPath": "project/b/y", "newPath": "project/a/y"}),
    )
    .await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    assert_eq!(read(&f.root.join("a/x")), "x");
    assert_eq!(read(&f.root.join("b/y")), "y");
    assert!(!present(&f.root.join("b/x")) && !present(&f.root.join("a/y")));
    // With write on b as well, it works.
    consent(&b, json!(["project/b"]), "write").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a/x", "newPath": "project/b/x"}),
    )
    .await;
    ok(&r);
    assert_eq!(read(&f.root.join("b/x")), "x");
}

#[tokio::test]
async fn rename_on_a_read_only_root_is_read_only() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    let b = f.broker();
    consent_all(&b, "s").await;
    let r = rename(
        &b,
        json!({"oldPath": "project/a.txt", "newPath": "project/b.txt"}),
    )
    .await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    assert_eq!(read(&f.root.join("a.txt")), "A");
}

#[tokio::test]
async fn rename_with_bad_params_is_invalid_params() {
    let f = Fixture::new();
    f.file("a.txt", "A");
    let b = writable(&f, "").await;
    for params in [
        json!({"oldPath": "project/a.txt"}),
        json!({"newPath": "project/b.txt"}),
        json!({"old_path": "project/a.txt", "new_path": "project/b.txt"}),
        json!({"oldPath": "project/a.txt", "newPath": "project/b.txt", "overwrite": 1}),
    ] {
        let r = rename(&b, params.clone()).await;
        assert_eq!(err(&r).0, -32602, "{params}: {r}");
    }
    assert_eq!(read(&f.root.join("a.txt")), "A");
}
