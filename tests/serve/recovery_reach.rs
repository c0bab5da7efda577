//! What a server reaches once its change went into the store, through the real binary: a
//! watched tree it deleted stops reporting (its watch ends `moved_out`) and nothing done in
//! the store afterwards reaches it; a nested root that a delete moved into the store is
//! `root_unavailable`, never served from there; and a delete through a link whose target is
//! not UTF-8 is refused before anything is kept or journaled.

use crate::common::*;
use crate::recovery::*;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;

/// How long an expected notification may take: generous, as it only bounds a wait.
const EXPECT: Duration = Duration::from_secs(60);

/// The notifications that arrive until one satisfies `want`; fails if none does in time.
fn notes_until(s: &mut Sidecar, what: &str, want: impl Fn(&Value) -> bool) -> Vec<Value> {
    let seen = s.notifications_until(EXPECT, |n| want(n));
    assert!(
        seen.last().is_some_and(&want),
        "no notification for {what} within {EXPECT:?}; got {seen:#?}; stderr: {}",
        s.stderr()
    );
    seen
}

#[test]
fn a_watched_tree_deleted_into_the_store_ends_its_watch_and_the_stores_changes_never_reach_it() {
    let r = Rec::new();
    std::fs::create_dir_all(r.root.join("tree/sub/deeper")).unwrap();
    std::fs::write(r.root.join("tree/sub/f.txt"), "x").unwrap();
    let mut s = r.serve("evil");
    let watch = |s: &mut Sidecar, path: &str| {
        let w = s.request("files/watch", json!({"path": path, "recursive": true}));
        ok(&w)["watchId"].as_str().unwrap().to_owned()
    };
    let outer = watch(&mut s, "w/tree");
    let inner = watch(&mut s, "w/tree/sub");
    ok(&s.request(
        "files/delete",
        json!({"path": "w/tree/sub", "recursive": true}),
    ));
    let ended = notes_until(&mut s, "the deleted tree's watch to end", |n| {
        n["params"]["watchId"] == inner.as_str() && n["params"]["event"] == "unwatched"
    });
    assert_eq!(
        ended.last().unwrap()["params"]["reason"],
        "moved_out",
        "{ended:#?}"
    );
    // The user, or a prune, changes the kept tree in the store: a new name, a new
    // directory, a removal.
    let objects = r.state.join("fsbroker/recovery/objects");
    let kept: Vec<_> = std::fs::read_dir(&objects)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    std::fs::write(kept[0].join("IN-STORE-NAME.txt"), "s").unwrap();
    std::fs::create_dir(kept[0].join("deeper/in-store-dir")).unwrap();
    std::fs::remove_file(kept[0].join("f.txt")).unwrap();
    std::fs::write(objects.join("IN-STORE-TOP"), "s").unwrap();
    // A sentinel in the tree still watched: events come in order, so anything the store's
    // changes had been reported as would come before it.
    let temp = r.root.join("tree/.sentinel.incoming");
    std::fs::write(&temp, "sentinel").unwrap();
    std::fs::rename(&temp, r.root.join("tree/sentinel")).unwrap();
    let after = notes_until(&mut s, "the sentinel", |n| {
        n["params"]["watchId"] == outer.as_str() && n["params"]["path"] == "w/tree/sentinel"
    });
    for n in &after {
        let text = n.to_string();
        assert!(
            !text.contains("IN-STORE") && !text.contains("in-store") && !text.contains("f.txt"),
            "the store's change reached the server: {n}"
        );
        assert_ne!(
            n["params"]["watchId"],
            inner.as_str(),
            "an ended watch spoke: {n}"
        );
    }
}

#[test]
fn a_nested_root_moved_into_the_store_by_a_delete_is_unavailable_not_served_from_there() {
    let r = Rec::new();
    std::fs::create_dir_all(r.root.join("docs")).unwrap();
    std::fs::write(r.root.join("docs/notes.txt"), "the user's notes").unwrap();
    let policy = r.tmp.path().join("nested.toml");
    std::fs::write(
        &policy,
        format!(
            "[[roots]]\npath = {:?}\nmount = \"repo\"\naccess = \"write\"\n\n\
             [[roots]]\npath = {:?}\nmount = \"docs\"\naccess = \"write\"\n\n\
             [consent]\nmode = \"auto\"\n",
            r.root,
            r.root.join("docs")
        ),
    )
    .unwrap();
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--no-audit".into(),
        "--server-id".into(),
        "evil".into(),
        "--policy".into(),
        policy.into(),
    ];
    let mut s = Sidecar::spawn_env(&args, &[("XDG_STATE_HOME", r.state.to_str().unwrap())]);
    let c = s.request(
        "files/consent",
        json!({"requestedPaths": ["repo", "docs"], "access": "write"}),
    );
    assert_eq!(ok(&c)["granted"], true, "{c}");
    ok(&s.request(
        "files/delete",
        json!({"path": "repo/docs", "recursive": true}),
    ));
    for (method, params) in [
        ("files/read", json!({"path": "docs/notes.txt"})),
        (
            "files/write",
            json!({"path": "docs/x", "content": "into the store?"}),
        ),
        ("files/list", json!({"path": "docs"})),
        ("files/stat", json!({"path": "docs"})),
    ] {
        let a = s.request(method, params);
        let (_, code, reason) = err(&a);
        assert_eq!(
            (code.as_str(), reason.as_str()),
            ("PERMISSION_DENIED", "root_unavailable"),
            "{method}: {a}"
        );
    }
    s.finish();
    // The kept tree is as the delete left it: nothing was written into the store.
    let objects = r.state.join("fsbroker/recovery/objects");
    let kept: Vec<_> = std::fs::read_dir(&objects)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let mut names: Vec<_> = std::fs::read_dir(&kept[0])
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.txt"], "the store's copy changed");
}

#[test]
fn a_delete_through_a_link_whose_target_is_not_utf8_is_refused_and_nothing_is_kept() {
    use std::os::unix::ffi::OsStrExt;
    let r = Rec::new();
    let odd = r.root.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("data.txt"), "user data").unwrap();
    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(b"caf\xe9"), r.root.join("d")).unwrap();
    let mut s = r.serve("evil");
    let a = s.request("files/delete", json!({"path": "w/d/data.txt"}));
    let (_, code, reason) = err(&a);
    assert_eq!(
        (code.as_str(), reason.as_str()),
        ("IO_ERROR", "not_utf8"),
        "{a}"
    );
    s.finish();
    assert_eq!(
        std::fs::read_to_string(odd.join("data.txt")).unwrap(),
        "user data"
    );
    assert!(r.changes().is_empty(), "{:#?}", r.changes());
}
