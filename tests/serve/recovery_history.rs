//! `fsbroker history` and `fsbroker undo` through the real binary: what `history --json`
//! tells of each change (method, paths, what was kept and where in the store, the etags
//! before and after), `--since` and `--server` picking changes, `undo` taking a session's
//! changes back newest first to the state before it, and leaving (exit 1, named) each change
//! whose place changed since.

use crate::common::*;
use crate::recovery::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Milliseconds since the epoch, now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waits until the clock is past `at` (ms): so that the next change is journaled in a later
/// millisecond, which `--since` needs to tell it from the last. A precondition, not an
/// outcome: no assertion depends on how long this takes.
fn after(at: &Value) {
    let at = at.as_u64().unwrap();
    while now_ms() <= at {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The ids of a `history --json` document's changes.
fn ids(doc: &Value) -> Vec<String> {
    let changes = doc["changes"].as_array().unwrap();
    changes.iter().map(|c| id(c).to_owned()).collect()
}

#[test]
fn history_json_tells_each_change_what_it_kept_where_and_its_etags() {
    let r = Rec::new();
    let p = |n: &str| r.root.join(n);
    std::fs::write(p("a.txt"), "old a").unwrap();
    std::fs::write(p("f.txt"), "old f").unwrap();
    std::fs::write(p("m.txt"), "moved").unwrap();
    std::fs::write(p("s.txt"), "source").unwrap();
    std::fs::write(p("t.txt"), "replaced target").unwrap();
    std::fs::create_dir(p("d")).unwrap();
    std::fs::write(p("d/x"), "x").unwrap();
    let (a_ino, d_meta) = (ino(&p("a.txt")), std::fs::metadata(p("d")).unwrap());
    let mut s = r.serve("agent");
    let before: BTreeMap<&str, Value> = ["a.txt", "f.txt", "m.txt", "s.txt", "t.txt"]
        .into_iter()
        .map(|n| (n, etag(&mut s, &format!("w/{n}"))))
        .collect();
    ok(&s.request("files/create", json!({"path": "w/n.txt", "type": "file"})));
    let written = write(&mut s, "w/a.txt", b"new a");
    ok(&s.request(
        "files/rename",
        json!({"oldPath": "w/m.txt", "newPath": "w/m2.txt"}),
    ));
    let over = json!({"oldPath": "w/s.txt", "newPath": "w/t.txt", "overwrite": true});
    ok(&s.request("files/rename", over));
    ok(&s.request("files/delete", json!({"path": "w/f.txt"})));
    ok(&s.request("files/delete", json!({"path": "w/d", "recursive": true})));
    let created = etag(&mut s, "w/n.txt");
    s.finish();

    let doc = r.history(&[]);
    let store = r.state.join("fsbroker/recovery");
    assert_eq!(doc["store"], json!(store));
    for d in [store.clone(), store.join("objects")] {
        assert_eq!(crate::common::fs::mode(&d), 0o700, "{d:?}");
    }
    assert_eq!(crate::common::fs::mode(&store.join("journal.jsonl")), 0o600);
    let changes = doc["changes"].as_array().unwrap();
    let methods: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| (c["method"].as_str().unwrap(), c["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        methods,
        [
            ("files/create", "w/n.txt"),
            ("files/write", "w/a.txt"),
            ("files/rename", "w/m.txt"),
            ("files/rename", "w/s.txt"),
            ("files/delete", "w/f.txt"),
            ("files/delete", "w/d"),
        ]
    );
    for c in changes {
        assert_eq!(c["server"], "agent", "{c}");
        assert!(c["session"].as_str().unwrap().contains("agent"), "{c}");
        assert_eq!(c["root"], json!(r.root), "{c}");
        // A kept change's place is its object in the store; nothing else has one.
        match c["kept"].is_object() {
            true => assert_eq!(c["place"], json!(store.join("objects").join(id(c)))),
            false => assert!(c.get("place").is_none(), "{c}"),
        }
    }
    let kept = |c: &Value| (c["kept"]["how"].clone(), c["kept"]["kind"].clone());
    let place = |c: &Value| PathBuf::from(c["place"].as_str().unwrap());
    let (create, write, mv, over, del_f, del_d) = (
        &changes[0],
        &changes[1],
        &changes[2],
        &changes[3],
        &changes[4],
        &changes[5],
    );
    assert_eq!(
        (&create["kept"], &create["etagBefore"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(create["etagAfter"], created);
    assert_eq!(kept(write), (json!("link"), json!("file")));
    assert_eq!(
        (&write["etagBefore"], &write["etagAfter"]),
        (&before["a.txt"], &written["etag"])
    );
    assert_eq!(std::fs::read(place(write)).unwrap(), b"old a");
    assert_eq!(ino(&place(write)), a_ino, "a hard link to the old file");
    assert_eq!(
        (&mv["to"], &mv["kept"], &mv["etagBefore"]),
        (&json!("w/m2.txt"), &Value::Null, &Value::Null)
    );
    assert_eq!(mv["etagAfter"], before["m.txt"]);
    assert_eq!(kept(over), (json!("link"), json!("file")));
    assert_eq!(
        (&over["etagBefore"], &over["etagAfter"]),
        (&before["t.txt"], &before["s.txt"])
    );
    assert_eq!(std::fs::read(place(over)).unwrap(), b"replaced target");
    assert_eq!(kept(del_f), (json!("move"), json!("file")));
    assert_eq!(
        (&del_f["etagBefore"], &del_f["etagAfter"]),
        (&before["f.txt"], &Value::Null)
    );
    assert_eq!(std::fs::read(place(del_f)).unwrap(), b"old f");
    assert_eq!(kept(del_d), (json!("move"), json!("directory")));
    let dir_tag = format!("\"dir:{:x}:{:x}\"", d_meta.dev(), d_meta.ino());
    assert_eq!(
        (&del_d["etagBefore"], &del_d["etagAfter"]),
        (&json!(dir_tag), &Value::Null)
    );
    assert_eq!(std::fs::read(place(del_d).join("x")).unwrap(), b"x");
    // The listing for people names every change, and says what destroyed nothing.
    let text = r.run_ok(&["history"]);
    assert_eq!(text.lines().count(), 6, "{text}");
    for c in changes {
        assert!(text.contains(id(c)), "{text}");
    }
    assert!(
        text.lines().next().unwrap().contains("nothing destroyed"),
        "{text}"
    );
}

#[test]
fn history_since_and_server_pick_the_changes_made_from_then_by_that_server() {
    let r = Rec::new();
    std::fs::write(r.root.join("a.txt"), "0").unwrap();
    let mut at = Value::Null;
    for (server, content) in [("agent", "first"), ("other", "second"), ("agent", "third")] {
        if !at.is_null() {
            after(&at);
        }
        let mut s = r.serve(server);
        write(&mut s, "w/a.txt", content.as_bytes());
        s.finish();
        at = r.changes().last().unwrap()["at"].clone();
    }
    let all = r.changes();
    let all_ids: Vec<String> = all.iter().map(|c| id(c).to_owned()).collect();
    assert_eq!(all_ids.len(), 3);
    let time = |i: usize| all[i]["time"].as_str().unwrap();
    let pick = |args: &[&str]| ids(&r.history(args));
    assert_eq!(pick(&["--since", time(0)]), all_ids);
    assert_eq!(pick(&["--since", time(1)]), all_ids[1..]);
    assert_eq!(pick(&["--since", time(2)]), all_ids[2..]);
    // At the boundary: a millisecond after a change leaves it out.
    let later = |i: usize| {
        let ns = (all[i]["at"].as_u64().unwrap() as i128 + 1) * 1_000_000;
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(ns).unwrap();
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    assert_eq!(pick(&["--since", &later(0)]), all_ids[1..]);
    assert_eq!(pick(&["--since", &later(1)]), all_ids[2..]);
    assert_eq!(pick(&["--since", "1h"]), all_ids);
    assert_eq!(
        pick(&["--since", "2999-01-01T00:00:00Z"]),
        Vec::<String>::new()
    );
    assert_eq!(
        pick(&["--server", "agent"]),
        [all_ids[0].clone(), all_ids[2].clone()]
    );
    assert_eq!(
        pick(&["--server", "other", "--since", time(0)]),
        all_ids[1..2]
    );
    assert_eq!(
        pick(&["--server", "agent", "--since", time(1)]),
        all_ids[2..]
    );
    let session = all[1]["session"].as_str().unwrap();
    assert_eq!(pick(&["--server", session]), all_ids[1..2]);
    let bad = r.run(&["history", "--since", "yesterday"]);
    assert_eq!(bad.status.unwrap().code(), Some(2), "{}", bad.log());
}

#[test]
fn undo_takes_back_the_latest_session_newest_first_to_the_state_before_it() {
    let r = Rec::new();
    let p = |n: &str| r.root.join(n);
    put(&p("a.txt"), &bytes(5, 4000), 0o640);
    put(&p("b.dat"), &bytes(6, 100_000), 0o600);
    put(&p("src.txt"), b"source", 0o644);
    put(&p("dst.txt"), b"the target it replaces", 0o600);
    put(&p("old.txt"), b"before any session", 0o644);
    make_tree(&p("tree"), 20);
    // An earlier session of the same server: not the latest, so left by a plain undo.
    let mut s = r.serve("agent");
    write(&mut s, "w/old.txt", b"the first session's");
    s.finish();
    let initial = snapshot(&r.root);
    let mut s = r.serve("agent");
    write(&mut s, "w/a.txt", b"overwritten");
    upload(&mut s, "w/b.dat", &bytes(7, 90_000), 30_000);
    let over = json!({"oldPath": "w/src.txt", "newPath": "w/dst.txt", "overwrite": true});
    ok(&s.request("files/rename", over));
    ok(&s.request("files/delete", json!({"path": "w/tree", "recursive": true})));
    ok(&s.request("files/create", json!({"path": "w/n.txt", "type": "file"})));
    s.finish();
    assert_ne!(snapshot(&r.root), initial);
    let changes = r.changes();
    assert_eq!(changes.len(), 6, "{changes:#?}");
    assert_ne!(changes[0]["session"], changes[1]["session"]);
    assert!(
        changes[1..]
            .iter()
            .all(|c| c["session"] == changes[1]["session"])
    );

    let ran = r.run(&["undo", "--server", "agent", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    let undone: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(undone["conflicts"], json!([]), "{undone}");
    let order: Vec<(&str, &str)> = undone["restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (id(u), u["path"].as_str().unwrap()))
        .collect();
    let newest_first: Vec<(&str, &str)> = changes[1..]
        .iter()
        .rev()
        .map(|c| (id(c), c["path"].as_str().unwrap()))
        .collect();
    assert_eq!(order, newest_first);
    assert_eq!(
        order.iter().map(|o| o.1).collect::<Vec<_>>(),
        ["w/n.txt", "w/tree", "w/src.txt", "w/b.dat", "w/a.txt"]
    );
    assert_same_tree(
        &snapshot(&r.root),
        &initial,
        "the state before the latest session",
    );

    // With --since, every session's changes from then: the first session's one is left.
    let ran = r.run(&[
        "undo",
        "--server",
        "agent",
        "--json",
        "--since",
        changes[0]["time"].as_str().unwrap(),
    ]);
    assert!(ran.success(), "{}", ran.log());
    let undone: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(undone["restored"].as_array().unwrap().len(), 1, "{undone}");
    assert_eq!(undone["restored"][0]["id"], changes[0]["id"]);
    assert_eq!(std::fs::read(p("old.txt")).unwrap(), b"before any session");
}

#[test]
fn undo_leaves_each_change_whose_place_changed_since_names_it_and_exits_1() {
    let r = Rec::new();
    let p = |n: &str| r.root.join(n);
    std::fs::write(p("a.txt"), "a0").unwrap();
    std::fs::write(p("b.txt"), "b0").unwrap();
    std::fs::write(p("c.txt"), "c0").unwrap();
    let mut s = r.serve("agent");
    write(&mut s, "w/a.txt", b"a1 by the server");
    write(&mut s, "w/b.txt", b"b1 by the server");
    ok(&s.request("files/delete", json!({"path": "w/c.txt"})));
    s.finish();
    // The user edits one file and makes the deleted one anew after the server's changes.
    std::fs::write(p("a.txt"), "a2, the user's edit since").unwrap();
    std::fs::write(p("c.txt"), "c2, the user's new file").unwrap();
    let changes = r.changes();
    let (a, b, c) = (id(&changes[0]), id(&changes[1]), id(&changes[2]));
    let ran = r.run(&["undo", "--server", "agent"]);
    assert_eq!(ran.status.unwrap().code(), Some(1), "{}", ran.log());
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(out.contains(&format!("left {a} at w/a.txt")), "{out}");
    assert!(out.contains(&format!("left {c} at w/c.txt")), "{out}");
    assert!(out.contains(&format!("undid {b} at w/b.txt")), "{out}");
    assert_eq!(
        std::fs::read_to_string(p("a.txt")).unwrap(),
        "a2, the user's edit since"
    );
    assert_eq!(
        std::fs::read_to_string(p("c.txt")).unwrap(),
        "c2, the user's new file"
    );
    assert_eq!(std::fs::read_to_string(p("b.txt")).unwrap(), "b0");
    let changes = r.changes();
    assert!(changes[0].get("restoredBy").is_none(), "{changes:#?}");
    assert!(changes[1]["restoredBy"].is_array(), "{changes:#?}");
    // Asked again, the same two are left, as JSON, and still untouched.
    let ran = r.run(&["undo", "--server", "agent", "--json"]);
    assert_eq!(ran.status.unwrap().code(), Some(1), "{}", ran.log());
    let undone: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(undone["restored"], json!([]));
    let left: Vec<(&str, &str)> = undone["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (id(c), c["path"].as_str().unwrap()))
        .collect();
    assert_eq!(left, [(c, "w/c.txt"), (a, "w/a.txt")]);
    assert!(
        undone["conflicts"][1]["why"]
            .as_str()
            .unwrap()
            .contains("changed since")
    );
    assert_eq!(
        std::fs::read_to_string(p("a.txt")).unwrap(),
        "a2, the user's edit since"
    );
}
