//! A root nested in a writable root is never found again by following what the server can
//! shape: at start and at reload, the path below the writable root is opened one component at
//! a time without following links, and a link there refuses the policy with a message naming
//! both roots.

use crate::common::*;
use mcp_fsbroker::{Broker, Policy};
use serde_json::json;
use std::path::Path;

/// `repo` (writable) at the fixture's root and `docs` (writable too: a narrower root may not
/// nest in a wider one) at `rel` beneath it.
fn nested_policy(f: &Fixture, rel: &str) -> String {
    format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n\
         [[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"write\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = false\n",
        f.root,
        f.root.join(rel)
    )
}

/// Reads `docs/secret.txt` through a broker, if one starts: never the outside file.
async fn read_secret(b: &Broker) -> String {
    let c = call(b, "s", "files/consent", json!({"requestedPaths": ["docs"]})).await;
    assert_eq!(ok(&c)["granted"], true, "{c}");
    let r = call(b, "s", "files/read", json!({"path": "docs/secret.txt"})).await;
    r["result"]["content"].as_str().unwrap_or("").to_owned()
}

/// The server's move: the directory aside, a link to the outside in its place.
fn swap_for_link(at: &Path, outside: &Path) {
    std::fs::rename(at, at.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(outside, at).unwrap();
}

#[tokio::test]
async fn an_honest_nested_root_opens_and_serves() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let b = try_broker(&nested_policy(&f, "docs")).unwrap();
    assert_eq!(read_secret(&b).await, "docs");
}

#[tokio::test]
async fn a_nested_root_swapped_for_a_link_out_is_refused_at_start() {
    for rel in ["docs", "a/b/docs"] {
        let f = Fixture::new();
        f.file(&format!("{rel}/secret.txt"), "docs");
        let text = nested_policy(&f, rel);
        assert!(try_broker(&text).is_ok());
        // The server moves the nested root (or a directory above it) aside and leaves a link.
        let moved = f.root.join(rel.split('/').next().unwrap());
        let outside = if rel == "docs" {
            f.outside.clone()
        } else {
            std::fs::create_dir_all(f.outside.join("b")).unwrap();
            std::os::unix::fs::symlink(&f.outside, f.outside.join("b/docs")).unwrap();
            f.outside.clone()
        };
        swap_for_link(&moved, &outside);
        match try_broker(&text) {
            Ok(b) => {
                let got = read_secret(&b).await;
                assert_ne!(
                    got, SECRET,
                    "{rel}: the nested root followed the server's link"
                );
                panic!("{rel}: a policy with a nested root behind a link started");
            }
            Err(e) => {
                assert!(e.contains("docs") && e.contains("repo"), "{rel}: {e}");
            }
        }
        std::fs::remove_file(f.outside.join("b/docs")).ok();
        std::fs::remove_dir(f.outside.join("b")).ok();
        f.assert_canary_intact();
    }
}

#[tokio::test]
async fn a_nested_root_swapped_for_a_link_out_is_left_out_at_reload() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let text = nested_policy(&f, "docs");
    let b = try_broker(&text).unwrap();
    swap_for_link(&f.root.join("docs"), &f.outside);
    // The reload goes through without the root it cannot open safely: the link is not
    // followed, and the server cannot hold the reload back by making one.
    b.reload(Policy::parse(&text, "test").unwrap()).unwrap();
    assert!(b.roots().iter().all(|r| r.mount().as_str() != "docs"));
    let r = call(&b, "s", "files/read", json!({"path": "docs/secret.txt"})).await;
    assert_ne!(r["result"]["content"], SECRET, "{r}");
    f.assert_canary_intact();
}

#[tokio::test]
async fn a_server_that_moves_a_nested_root_away_cannot_hold_back_a_narrowing_reload() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let b = try_broker(&nested_policy(&f, "docs")).unwrap();
    // The server renames the nested root's directory away; the user then makes `repo`
    // read-only (and so `docs`, which may not be wider than the root it lies in).
    std::fs::rename(f.root.join("docs"), f.root.join("docs.bak")).unwrap();
    let narrowed = nested_policy(&f, "docs").replace("access = \"write\"", "access = \"read\"");
    let file = f.tmp.path().join("narrowed.toml");
    std::fs::write(&file, narrowed).unwrap();
    b.reload(Policy::load_for_reload(&file).unwrap()).unwrap();
    let repo = b
        .roots()
        .iter()
        .find(|r| r.mount().as_str() == "repo")
        .cloned();
    assert_eq!(repo.map(|r| r.access()), Some(mcp_fsbroker::Access::Read));
    let c = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["repo"]}),
    )
    .await;
    assert_eq!(ok(&c)["granted"], true, "{c}");
    let w = call(
        &b,
        "s",
        "files/write",
        json!({"path": "repo/new.txt", "content": "x"}),
    )
    .await;
    assert!(w.get("error").is_some(), "{w}");
    assert!(!f.root.join("new.txt").exists());
}

#[tokio::test]
async fn a_narrower_root_inside_a_wider_one_is_refused_naming_both() {
    // Through `repo/docs/...` every server that sees `repo` would write the read-only `docs`.
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let read_only = nested_policy(&f, "docs").replacen(
        "mount = \"docs\"\naccess = \"write\"",
        "mount = \"docs\"\naccess = \"read\"",
        1,
    );
    let e = try_broker(&read_only).expect_err("a read-only root inside a writable one");
    assert!(
        e.contains("docs") && e.contains("repo") && e.contains("read"),
        "{e}"
    );
    // Seen by fewer servers: the others would read it through `repo`.
    let hidden = nested_policy(&f, "docs").replacen(
        "mount = \"docs\"\naccess = \"write\"",
        "mount = \"docs\"\naccess = \"write\"\nservers = [\"other\"]",
        1,
    );
    let e = try_broker(&hidden).expect_err("a root seen by fewer servers inside one seen by all");
    assert!(
        e.contains("docs") && e.contains("repo") && e.contains("fewer servers"),
        "{e}"
    );
}

/// A root reached through a link the user made outside every writable root still opens: only
/// what lies beneath a writable root is held to no-follow.
#[tokio::test]
async fn a_link_outside_every_writable_root_is_still_followed() {
    let f = Fixture::new();
    f.file("docs/secret.txt", "docs");
    let alias = f.tmp.path().join("alias");
    std::os::unix::fs::symlink(&f.root, &alias).unwrap();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"read\"\n\n\
         [consent]\nmode = \"auto\"\n\n[audit]\nenabled = false\n",
        alias.join("docs")
    );
    let b = try_broker(&text).unwrap();
    assert_eq!(read_secret(&b).await, "docs");
}

#[tokio::test]
async fn a_root_narrowed_to_a_link_the_server_made_is_never_followed_on_any_reload() {
    // `repo` is P, writable; the server makes P/sub a link out. The user narrows `repo` to
    // P/sub: neither that reload nor any later one may open where the link leads.
    let f = Fixture::new();
    let b = try_broker(&format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n",
        f.root
    ))
    .unwrap();
    std::os::unix::fs::symlink(&f.outside, f.root.join("sub")).unwrap();
    let narrowed = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n",
        f.root.join("sub")
    );
    let file = f.tmp.path().join("narrowed.toml");
    std::fs::write(&file, narrowed).unwrap();
    for reload in 0..2 {
        b.reload(Policy::load_for_reload(&file).unwrap()).unwrap();
        assert!(b.roots().iter().next().is_none(), "reload {reload}");
        let c = call(
            &b,
            "s",
            "files/consent",
            json!({"requestedPaths": ["repo"]}),
        )
        .await;
        let r = call(&b, "s", "files/read", json!({"path": "repo/secret.txt"})).await;
        assert_ne!(r["result"]["content"], SECRET, "reload {reload}: {c} {r}");
    }
    f.assert_canary_intact();
}

#[tokio::test]
async fn the_same_directory_as_a_wider_and_a_narrower_root_is_refused() {
    let f = Fixture::new();
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n[[roots]]\npath = {:?}\nmount = \"again\"\naccess = \"read\"\n",
        f.root,
        f.root.join("x/..")
    );
    std::fs::create_dir_all(f.root.join("x")).unwrap();
    let e = try_broker(&text).expect_err("one directory as two roots of different access");
    assert!(e.contains("again") && e.contains("repo"), "{e}");
}
