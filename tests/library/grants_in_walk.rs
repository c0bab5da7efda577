//! The resolver asks the grants before it looks and before it creates (issue 14, findings 3,
//! 4 and 5): a path that leads through an ungranted place is refused the same way whatever
//! exists there, `parents: true` creates nothing where no write grant reaches, and a chunked
//! upload commits only into the directory it started in, at the same place.

use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

/// A broker over a writable root whose session `s` holds exactly the grants `grants`
/// (path, access), each asked for with `files/consent` under mode `auto`.
async fn granted(f: &Fixture, grants: &[(&str, &str)]) -> Broker {
    let b = f.broker_with("write", "");
    for (path, access) in grants {
        let r = call(
            &b,
            "s",
            "files/consent",
            json!({"requestedPaths": [path], "access": access}),
        )
        .await;
        assert_eq!(ok(&r)["granted"], true, "{r}");
    }
    b
}

/// The error triple of a response, as one comparable value.
fn triple(r: &Value) -> (i64, String, String) {
    err(r)
}

// ---- finding 3: existence probing without a grant ----

/// `pub/p -> ../secret/NAME/../../pub/t.txt` with a grant on `pub` only: the answer must not
/// depend on whether `secret/NAME` is a directory, missing, or a link out of the root.
#[tokio::test]
async fn finding_3_a_link_through_an_ungranted_place_answers_the_same_whatever_is_there() {
    let mut answers: Vec<Vec<(i64, String, String)>> = Vec::new();
    for variant in ["directory", "missing", "link_out", "file"] {
        let f = Fixture::new();
        f.file("pub/t.txt", "public");
        f.dir("secret");
        match variant {
            "directory" => {
                f.dir("secret/NAME");
            }
            "missing" => {}
            "link_out" => f.symlink(&f.outside, "secret/NAME"),
            _ => {
                f.file("secret/NAME", "x");
            }
        }
        f.symlink("../secret/NAME/../../pub/t.txt", "pub/p");
        let b = granted(&f, &[("project/pub", "write")]).await;
        let mut seen = Vec::new();
        for (method, params) in [
            ("files/read", json!({"path": "project/pub/p"})),
            ("files/stat", json!({"path": "project/pub/p"})),
            ("files/list", json!({"path": "project/pub/p"})),
            (
                "files/write",
                json!({"path": "project/pub/p", "content": "x"}),
            ),
            (
                "files/create",
                json!({"path": "project/pub/p/new", "type": "file"}),
            ),
        ] {
            let r = call(&b, "s", method, params).await;
            let t = triple(&r);
            assert_eq!(
                (t.0, t.2.as_str()),
                (-31002, "no_consent"),
                "{variant} {method}: {r}"
            );
            seen.push(t);
        }
        f.assert_canary_intact();
        assert_eq!(
            std::fs::read_to_string(f.root.join("pub/t.txt")).unwrap(),
            "public"
        );
        answers.push(seen);
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
}

/// A link into an ungranted directory is refused before the walk looks inside it, for a name
/// that exists there and one that does not alike.
#[tokio::test]
async fn a_link_into_an_ungranted_directory_does_not_reveal_its_entries() {
    let f = Fixture::new();
    f.file("secret/there.txt", "hidden");
    f.dir("pub");
    f.symlink("../secret", "pub/s");
    let b = granted(&f, &[("project/pub", "read")]).await;
    let there = call(
        &b,
        "s",
        "files/stat",
        json!({"path": "project/pub/s/there.txt"}),
    )
    .await;
    let missing = call(
        &b,
        "s",
        "files/stat",
        json!({"path": "project/pub/s/missing.txt"}),
    )
    .await;
    assert_eq!(triple(&there).2, "no_consent", "{there}");
    assert_eq!(triple(&there), triple(&missing));
}

// ---- finding 5: create with parents creates nothing without a grant ----

#[tokio::test]
async fn finding_5_create_parents_through_a_link_creates_nothing_where_no_grant_reaches() {
    let f = Fixture::new();
    f.dir("sub");
    f.dir("other");
    f.symlink("../other", "sub/l");
    // A dangling link: what it names does not exist yet.
    f.symlink("../nowhere", "sub/d");
    let b = granted(&f, &[("project/sub", "write")]).await;
    for path in ["project/sub/l/planted/a/b", "project/sub/d/planted/a/b"] {
        for kind in ["file", "directory"] {
            let r = call(
                &b,
                "s",
                "files/create",
                json!({"path": path, "type": kind, "parents": true}),
            )
            .await;
            assert_eq!(triple(&r).2, "no_consent", "{path}: {r}");
        }
    }
    assert!(!f.root.join("other/planted").exists());
    assert!(!f.root.join("nowhere").exists());
    f.assert_canary_intact();
}

#[tokio::test]
async fn finding_5_create_parents_into_a_read_only_grant_creates_nothing() {
    let f = Fixture::new();
    f.dir("sub");
    f.dir("ro");
    f.symlink("../ro", "sub/l");
    let b = granted(&f, &[("project/sub", "write"), ("project/ro", "read")]).await;
    let r = call(
        &b,
        "s",
        "files/create",
        json!({"path": "project/sub/l/x/y", "type": "directory", "parents": true}),
    )
    .await;
    assert_eq!(triple(&r).2, "read_only", "{r}");
    assert!(!f.root.join("ro/x").exists());
}

#[tokio::test]
async fn create_parents_still_creates_missing_directories_under_a_write_grant() {
    let f = Fixture::new();
    f.dir("sub");
    let b = granted(&f, &[("project/sub", "write")]).await;
    let r = call(
        &b,
        "s",
        "files/create",
        json!({"path": "project/sub/a/b/c.txt", "type": "file", "parents": true}),
    )
    .await;
    ok(&r);
    assert!(f.root.join("sub/a/b/c.txt").is_file());
}

// ---- finding 4: an upload commits only where it started ----

async fn chunk(b: &Broker, path: &str, content: &str, offset: u64, last: bool) -> Value {
    call(
        b,
        "s",
        "files/write",
        json!({"path": path, "content": content, "offset": offset, "final": last}),
    )
    .await
}

#[tokio::test]
async fn finding_4_an_upload_whose_directory_moved_out_of_the_root_does_not_commit() {
    let f = Fixture::new();
    f.dir("up");
    let b = granted(&f, &[("project", "write")]).await;
    ok(&chunk(&b, "project/up/f.txt", "first ", 0, false).await);
    let away = f.tmp.path().join("away");
    std::fs::rename(f.root.join("up"), &away).unwrap();
    let r = chunk(&b, "project/up/f.txt", "last", 6, true).await;
    assert!(r.get("error").is_some(), "{r}");
    assert!(!away.join("f.txt").exists(), "written outside the root");
    assert!(!f.root.join("up").exists());
}

#[tokio::test]
async fn finding_4_an_upload_whose_directory_moved_into_an_ungranted_place_does_not_commit() {
    let f = Fixture::new();
    f.dir("pub/up");
    f.dir("secret");
    let b = granted(&f, &[("project/pub", "write")]).await;
    ok(&chunk(&b, "project/pub/up/f.txt", "first ", 0, false).await);
    std::fs::rename(f.root.join("pub/up"), f.root.join("secret/up")).unwrap();
    // The same path now leads elsewhere through a link: into the moved directory.
    f.symlink("../secret/up", "pub/up");
    let r = chunk(&b, "project/pub/up/f.txt", "last", 6, true).await;
    assert_eq!(triple(&r).2, "no_consent", "{r}");
    assert!(!f.root.join("secret/up/f.txt").exists());
}

#[tokio::test]
async fn finding_4_an_upload_whose_directory_was_replaced_does_not_commit_into_either() {
    let f = Fixture::new();
    f.dir("up");
    let b = granted(&f, &[("project", "write")]).await;
    ok(&chunk(&b, "project/up/f.txt", "first ", 0, false).await);
    std::fs::rename(f.root.join("up"), f.root.join("old")).unwrap();
    std::fs::create_dir(f.root.join("up")).unwrap();
    let r = chunk(&b, "project/up/f.txt", "last", 6, true).await;
    assert_eq!(triple(&r).1, "CONCURRENCY_CONFLICT", "{r}");
    assert!(!f.root.join("up/f.txt").exists());
    assert!(!f.root.join("old/f.txt").exists());
    // The failed upload is over: a new one at the same path works from the start.
    ok(&chunk(&b, "project/up/f.txt", "whole", 0, true).await);
    assert_eq!(
        std::fs::read_to_string(f.root.join("up/f.txt")).unwrap(),
        "whole"
    );
}

#[tokio::test]
async fn an_upload_whose_directory_stayed_put_commits() {
    let f = Fixture::new();
    f.dir("up");
    let b = granted(&f, &[("project", "write")]).await;
    ok(&chunk(&b, "project/up/f.txt", "first ", 0, false).await);
    ok(&chunk(&b, "project/up/f.txt", "last", 6, true).await);
    assert_eq!(
        std::fs::read_to_string(f.root.join("up/f.txt")).unwrap(),
        "first last"
    );
}

// ---- from the review after the fixes ----

/// `readonly` in `files/stat` is about the real path too: a link from a writable grant to a
/// file under a read grant is read-only.
#[tokio::test]
async fn stat_through_a_link_into_a_read_grant_says_readonly() {
    let f = Fixture::new();
    f.dir("pub");
    f.file("ro/f", "x");
    f.symlink("../ro/f", "pub/l");
    let b = granted(&f, &[("project/pub", "write"), ("project/ro", "read")]).await;
    let r = call(&b, "s", "files/stat", json!({"path": "project/pub/l"})).await;
    assert_eq!(ok(&r)["readonly"], true, "{r}");
    let w = call(
        &b,
        "s",
        "files/write",
        json!({"path": "project/pub/l", "content": "y"}),
    )
    .await;
    assert_eq!(triple(&w).2, "read_only", "{w}");
}

/// `parents: true` creates every missing directory of a long path, however many: nothing
/// races it, so nothing is left half made.
#[tokio::test]
async fn create_parents_makes_a_path_of_two_thousand_directories() {
    let f = Fixture::new();
    f.dir("pub");
    let b = granted(&f, &[("project/pub", "write")]).await;
    let path = format!("project/pub/{}", ["d"; 2000].join("/"));
    let r = call(
        &b,
        "s",
        "files/create",
        json!({"path": path, "type": "directory", "parents": true}),
    )
    .await;
    ok(&r);
    let r = call(&b, "s", "files/stat", json!({"path": path})).await;
    assert_eq!(ok(&r)["type"], "directory", "{r}");
}
