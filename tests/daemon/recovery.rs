//! The recovery store through the daemon's socket: `history` lists what an attached session
//! changed, with what was kept (in the place's own `XDG_STATE_HOME`); `restore` puts one
//! change back on disk, or elsewhere, and refuses it twice; `undo` takes a session's changes back and
//! leaves alone, naming it, one the user changed since.

use crate::attach::attach;
use crate::control::Control;
use crate::place::Place;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};

fn ok(r: &Value) -> &Value {
    assert!(r.get("error").is_none(), "{r}");
    &r["result"]
}

fn write(s: &mut Sidecar, path: &str, content: &str) {
    ok(&s.request("files/write", json!({"path": path, "content": content})));
}

fn text(p: &Place, rel: &str) -> String {
    std::fs::read_to_string(p.root.join(rel)).unwrap()
}

#[test]
fn history_lists_a_sessions_changes_and_restore_puts_one_back_once() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "one").unwrap();
    std::fs::write(p.root.join("b.txt"), "bee").unwrap();
    let _d = p.start_with(&["--writable", "--consent", "auto"]);
    let mut s = attach(&p, "alpha");
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["root"], "access": "write"}),
    );
    assert_eq!(r["result"]["granted"], true, "{r}");
    write(&mut s, "root/a.txt", "two");
    ok(&s.request("files/delete", json!({"path": "root/b.txt"})));

    let mut c = Control::open(&p);
    let changes = c.history(json!({"op": "history"}));
    let methods: Vec<&str> = changes
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["files/write", "files/delete"], "{changes:?}");
    let store = p.tmp.path().join("state/fsbroker/recovery");
    for (change, path) in changes.iter().zip(["root/a.txt", "root/b.txt"]) {
        assert_eq!(change["server"], "alpha", "{change}");
        let session = change["session"].as_str().unwrap();
        assert!(
            session.starts_with("alpha@") && session.contains('#'),
            "{change}"
        );
        assert_eq!(change["path"], path, "{change}");
        assert_eq!(change["kept"]["kind"], "file", "{change}");
        // What was kept is in the place's own state directory, and holds the old content.
        let place = std::path::PathBuf::from(change["place"].as_str().unwrap());
        assert!(place.starts_with(&store), "{change}");
    }
    assert_eq!(
        std::fs::read_to_string(changes[0]["place"].as_str().unwrap()).unwrap(),
        "one"
    );
    assert!(
        c.history(json!({"op": "history", "server": "nobody"}))
            .is_empty()
    );
    let later = changes[1]["at"].as_u64().unwrap() + 60_000;
    assert!(
        c.history(json!({"op": "history", "since": later}))
            .is_empty()
    );
    let session = changes[0]["session"].clone();
    assert_eq!(
        c.history(json!({"op": "history", "server": session})).len(),
        2
    );

    let id = changes[0]["id"].as_str().unwrap();
    let a = c.ask(&json!({"op": "restore", "id": id}));
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["restored"]["id"], id, "{a}");
    assert_eq!(a["restored"]["path"], "root/a.txt", "{a}");
    assert_eq!(text(&p, "a.txt"), "one");
    // What stood there ("two") is kept in turn, as the user's change.
    let displaced = a["restored"]["kept"][0].as_str().unwrap().to_owned();
    let after = c.history(json!({"op": "history"}));
    let mine = after.iter().find(|c| c["id"] == displaced).unwrap();
    assert_eq!(mine["server"], "user", "{mine}");
    assert_eq!(
        std::fs::read_to_string(mine["place"].as_str().unwrap()).unwrap(),
        "two"
    );
    let restored = after.iter().find(|c| c["id"] == id).unwrap();
    assert_eq!(restored["restoredBy"], json!([displaced]), "{restored}");

    let a = c.ask(&json!({"op": "restore", "id": id}));
    assert_eq!(a["ok"], false, "{a}");
    assert_eq!(a["code"], "CONCURRENCY_CONFLICT", "{a}");
    assert!(
        a["error"].as_str().unwrap().contains("already restored"),
        "{a}"
    );
    assert_eq!(text(&p, "a.txt"), "one");
    // Put elsewhere: the deleted b.txt comes back under another name, b.txt stays gone.
    let deleted = changes[1]["id"].as_str().unwrap();
    let a = c.ask(&json!({"op": "restore", "id": deleted, "to": "root/b-again.txt"}));
    assert_eq!(a["restored"]["path"], "root/b-again.txt", "{a}");
    assert_eq!(text(&p, "b-again.txt"), "bee");
    assert!(!p.root.join("b.txt").exists());
    let a = c.ask(&json!({"op": "restore", "id": "no-such-change"}));
    assert_eq!(a["code"], "FILE_NOT_FOUND", "{a}");
    // The connection serves on after refusals, malformed requests too.
    for bad in [
        json!({"op": "restore"}),
        json!({"op": "undo"}),
        json!({"op": "history", "all": true}),
    ] {
        let a = c.ask(&bad);
        assert_eq!(a["ok"], false, "{bad}: {a}");
    }
    assert_eq!(c.ask(&json!({"op": "status"}))["ok"], true);
}

#[test]
fn undo_takes_a_session_back_and_leaves_what_the_user_changed_since() {
    let p = Place::new();
    for (name, text) in [("a.txt", "one"), ("b.txt", "bee"), ("c.txt", "sea")] {
        std::fs::write(p.root.join(name), text).unwrap();
    }
    let _d = p.start_with(&["--writable", "--consent", "auto"]);
    let mut s = attach(&p, "alpha");
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["root"], "access": "write"}),
    );
    assert_eq!(r["result"]["granted"], true, "{r}");
    write(&mut s, "root/a.txt", "two");
    ok(&s.request("files/delete", json!({"path": "root/b.txt"})));
    write(&mut s, "root/c.txt", "sea two");
    // The user edits c.txt after the server did: undo must not throw that away.
    std::fs::write(p.root.join("c.txt"), "the user's own").unwrap();

    let mut c = Control::open(&p);
    let a = c.ask(&json!({"op": "undo", "server": "alpha"}));
    assert_eq!(a["ok"], true, "{a}");
    let restored: Vec<&str> = a["restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    // Newest first.
    assert_eq!(restored, ["root/b.txt", "root/a.txt"], "{a}");
    let conflicts = a["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{a}");
    assert_eq!(conflicts[0]["path"], "root/c.txt", "{a}");
    assert!(
        conflicts[0]["why"]
            .as_str()
            .unwrap()
            .contains("changed since"),
        "{a}"
    );
    assert_eq!(text(&p, "a.txt"), "one");
    assert_eq!(text(&p, "b.txt"), "bee");
    assert_eq!(text(&p, "c.txt"), "the user's own");
    // Undone once: a second undo finds only the change it left alone.
    let a = c.ask(&json!({"op": "undo", "server": "alpha"}));
    assert_eq!(a["restored"], json!([]), "{a}");
    assert_eq!(a["conflicts"][0]["path"], "root/c.txt", "{a}");
}

/// A server that names itself `user` is a server: `--server-id user` is refused, a client
/// that attaches as `user` is given `server-user`, and `history` marks its change `by`
/// `server` and the user's own restore `by` `user` (a field the broker sets, never a name).
#[test]
fn a_server_that_names_itself_user_is_never_taken_for_the_user() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "one").unwrap();
    let _d = p.start_with(&["--writable", "--consent", "auto"]);
    let daemon = format!("--daemon={}", p.socket().display());
    for name in ["user", "User#2"] {
        let refused = p.verb(&["serve", &daemon, "--server-id", name]);
        assert_eq!(refused.code(), Some(2), "{name}: {}", refused.err());
        assert!(refused.err().contains("reserved"), "{}", refused.err());
    }

    let mut s = Control::open(&p);
    assert_eq!(s.attach_as("user"), "server-user");
    let r = s.request(
        1,
        "files/consent",
        json!({"requestedPaths": ["root"], "access": "write"}),
    );
    assert_eq!(r["result"]["granted"], true, "{r}");
    let r = s.request(
        2,
        "files/write",
        json!({"path": "root/a.txt", "content": "two"}),
    );
    assert!(r.get("error").is_none(), "{r}");

    let mut c = Control::open(&p);
    let id = c.history(json!({"op": "history"}))[0]["id"].clone();
    let a = c.ask(&json!({"op": "restore", "id": id}));
    assert_eq!(a["ok"], true, "{a}");
    let displaced = a["restored"]["kept"][0].clone();

    let ran = p.verb(&["history", "--json"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.err());
    let listed: Value = serde_json::from_str(&ran.out()).unwrap();
    let changes = listed["changes"].as_array().unwrap();
    let server = changes.iter().find(|c| c["id"] == id).unwrap();
    assert_eq!(server["by"], "server", "{server}");
    assert_eq!(server["server"], "server-user", "{server}");
    let mine = changes.iter().find(|c| c["id"] == displaced).unwrap();
    assert_eq!(mine["by"], "user", "{mine}");
    // The listing for people names the server as the server.
    let ran = p.verb(&["history"]);
    let line = ran.out();
    let line = line
        .lines()
        .find(|l| l.contains(id.as_str().unwrap()))
        .unwrap();
    assert!(line.contains("server-user"), "{line}");
}
