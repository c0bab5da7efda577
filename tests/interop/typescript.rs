//! The official TypeScript SDK on both sides of `fsbroker proxy`: an SDK `Client` as the host
//! launches `fsbroker proxy -- node ts_server.mjs`, whose SDK `Server` lists roots with its own
//! API and sends `files/*` through its generic request API. The data is checked end to end,
//! against the disk, and escapes from the server are refused.
//!
//! The SDK (pinned in `tests/interop/package-lock.json`) is installed on first use; see
//! `tests/common/interop.rs`.

use crate::common::{Fixture, SECRET};
use crate::interop;
use crate::sidecar::{Sidecar, file_uri};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;

/// A host and proxy over `f`'s root, writable, consent approved automatically.
fn host(f: &Fixture) -> Sidecar {
    let args: Vec<OsString> = ["--root".into(), f.root.clone().into()]
        .into_iter()
        .chain(["--writable", "--consent", "auto"].map(OsString::from))
        .collect();
    interop::ts_host(&args, &json!({}), None)
}

/// Has the server send `method` with `params` to the client; returns `{result}` or `{error}`.
fn ask(h: &mut Sidecar, method: &str, params: Value) -> Value {
    let r = h.request("request", json!({"method": method, "params": params}));
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("the host failed: {r}"))
}

fn ok(outcome: &Value) -> &Value {
    outcome
        .get("result")
        .unwrap_or_else(|| panic!("expected a result: {outcome}"))
}

/// Asserts a refusal as the SDK server saw it: code, `data.code` and `data.reason`.
fn refused(outcome: &Value, code: i64, data_code: &str, reason: &str) {
    let e = &outcome["error"];
    assert_eq!(e["code"], code, "{outcome}");
    assert_eq!(e["data"]["code"], data_code, "{outcome}");
    assert_eq!(e["data"]["reason"], reason, "{outcome}");
}

fn consent_write(h: &mut Sidecar) {
    let c = ask(
        h,
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    );
    assert_eq!(ok(&c)["granted"], true, "{c}");
    assert_eq!(ok(&c)["access"], "write", "{c}");
}

#[test]
fn the_sdk_server_sees_the_brokering_capability_and_lists_roots_with_its_own_api() {
    let f = Fixture::new();
    let mut h = host(&f);
    let seen = h.request("client", json!({}));
    let caps = &seen["result"]["result"]["capabilities"];
    assert_eq!(caps["roots"]["listChanged"], true, "{seen}");
    // The SDK drops unknown keys under `roots`; the experimental flag survives its parsing.
    assert!(
        caps["experimental"]["filesystemBrokering"].is_object(),
        "{seen}"
    );
    // The host's own identity passes through unchanged.
    assert_eq!(seen["result"]["result"]["clientInfo"]["name"], "ts-host");

    let roots = h.request("roots", json!({}));
    assert_eq!(
        roots["result"]["result"]["roots"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{roots}"
    );
    // The host's view of the server is the server's own.
    let server = h.request("$server", json!({}));
    assert_eq!(server["result"]["serverInfo"]["name"], "ts-files-server");
}

#[test]
fn consent_read_write_and_list_round_trip_through_both_sdks() {
    let f = Fixture::new();
    f.file("notes/a.txt", "first line\nsecond line\n");
    f.file("notes/b.bin", [0u8, 159, 146, 150, 255]);
    let mut h = host(&f);
    consent_write(&mut h);

    let r = ask(&mut h, "files/read", json!({"path": "project/notes/a.txt"}));
    assert_eq!(ok(&r)["content"], "first line\nsecond line\n");
    assert_eq!(ok(&r)["eof"], true);
    assert_eq!(ok(&r)["size"], 23);
    let r = ask(&mut h, "files/read", json!({"path": "project/notes/b.bin"}));
    assert_eq!(ok(&r)["encoding"], "base64");
    assert_eq!(ok(&r)["content"], "AJ+Slv8=");

    let w = ask(
        &mut h,
        "files/write",
        json!({"path": "project/notes/new.md", "content": "# written by the TS server\n"}),
    );
    assert_eq!(ok(&w)["created"], true, "{w}");
    assert_eq!(ok(&w)["path"], "project/notes/new.md");
    assert_eq!(
        std::fs::read_to_string(f.root.join("notes/new.md")).unwrap(),
        "# written by the TS server\n"
    );
    // The etag the write returned is the one a read reports.
    let back = ask(
        &mut h,
        "files/read",
        json!({"path": "project/notes/new.md"}),
    );
    assert_eq!(ok(&back)["etag"], ok(&w)["etag"]);

    let l = ask(&mut h, "files/list", json!({"path": "project/notes"}));
    let names: Vec<&str> = ok(&l)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt", "b.bin", "new.md"], "{l}");
    let entry = &ok(&l)["entries"][0];
    assert_eq!(entry["path"], "project/notes/a.txt");
    assert_eq!(entry["type"], "file");
    assert_eq!(entry["size"], 23);
}

#[test]
fn escapes_from_the_sdk_server_are_refused_and_nothing_outside_leaks() {
    let f = Fixture::new();
    f.file("inside.txt", "inside");
    f.symlink(f.outside.join("secret.txt"), "link");
    let mut h = host(&f);
    consent_write(&mut h);
    let outside = f.outside.join("secret.txt");
    let sibling = f.sibling.join("secret.txt");
    let attempts = [
        "project/../outside/secret.txt".to_owned(),
        outside.to_str().unwrap().to_owned(),
        format!("file://{}", outside.to_str().unwrap()),
        sibling.to_str().unwrap().to_owned(),
        "project/link".to_owned(),
    ];
    let mut seen = String::new();
    for path in &attempts {
        let r = ask(&mut h, "files/read", json!({"path": path}));
        refused(&r, -31002, "PERMISSION_DENIED", "outside_root");
        seen.push_str(&r.to_string());
        let w = ask(
            &mut h,
            "files/write",
            json!({"path": path, "content": "overwritten"}),
        );
        assert_eq!(w["error"]["code"], -31002, "{path}: {w}");
        seen.push_str(&w.to_string());
    }
    // Consent is never given outside the roots either.
    let c = ask(
        &mut h,
        "files/consent",
        json!({"requestedPaths": [outside.to_str().unwrap()]}),
    );
    assert_eq!(ok(&c)["granted"], false, "{c}");
    assert_eq!(ok(&c)["approvedPaths"], json!([]));
    // The answer echoes the string the server sent (and only that): it names no place the
    // server did not name itself, and gives it no mount form.
    assert_eq!(
        ok(&c)["deniedPaths"],
        json!([outside.to_str().unwrap()]),
        "{c}"
    );
    assert_eq!(ok(&c)["mountPaths"], json!({}), "{c}");

    assert!(!seen.contains(SECRET), "the secret leaked: {seen}");
    assert!(
        !seen.contains(f.tmp.path().to_str().unwrap()),
        "a host path leaked: {seen}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), SECRET);
    assert_eq!(std::fs::read_to_string(&sibling).unwrap(), SECRET);
}

#[test]
fn the_sdk_server_receives_change_notifications_for_its_watch() {
    let f = Fixture::new();
    f.dir("watched");
    let mut h = host(&f);
    consent_write(&mut h);
    let w = ask(&mut h, "files/watch", json!({"path": "project/watched"}));
    let watch_id = ok(&w)["watchId"].clone();
    assert!(watch_id.is_string(), "{w}");
    std::fs::write(f.root.join("watched/fresh.txt"), "hello").unwrap();
    let n = h.request("notifications", json!({"atLeast": 1, "timeoutMs": 5000}));
    let changes = n["result"]["result"].as_array().unwrap().clone();
    let created = changes
        .iter()
        .find(|c| c["path"] == "project/watched/fresh.txt")
        .unwrap_or_else(|| panic!("no change for the new file: {n}"));
    assert_eq!(created["watchId"], watch_id);
    assert_eq!(created["event"], "created");
    let u = ask(&mut h, "files/unwatch", json!({"watchId": watch_id}));
    assert_eq!(ok(&u), &json!({}));
    h.close_stdin();
    let status = h.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "host exit: {status}\n{}", h.stderr());
}
