//! Live policy: `fsbroker serve --policy FILE` reloads when FILE changes and on SIGHUP, tells
//! the session when its roots changed, ends the watches of removed roots and revoked standing
//! grants, and keeps the old policy when the new one does not load; `Broker::reload` reports
//! what changed. Every wait is bounded (the file is polled every second).

use crate::common::*;
use crate::sidecar::*;
use mcp_fsbroker::{Broker, Notifications, Policy};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an expected reload or notification may take: generous, as it only bounds a wait.
const EXPECT: Duration = Duration::from_secs(60);
const QUIET: Duration = Duration::from_millis(400);
const LIST_CHANGED: &str = "notifications/roots/list_changed";

/// One `[[roots]]` entry.
fn root(path: &Path, mount: &str, servers: &str) -> String {
    format!(
        "[[roots]]\npath = {path:?}\nmount = \"{mount}\"\naccess = \"read\"\nservers = {servers}\n\n"
    )
}

/// A policy: the given roots, consent mode `mode`, audit off, and `extra` TOML.
fn policy(roots: &[String], mode: &str, extra: &str) -> String {
    format!(
        "{}[consent]\nmode = \"{mode}\"\n\n[audit]\nenabled = false\n\n{extra}",
        roots.concat()
    )
}

/// Writes the policy file atomically (a complete file is all the poller can see).
fn put(file: &Path, text: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// `fsbroker serve --policy FILE --server-id t`, with the policy written into its own
/// temporary directory; the session exists once this returns.
fn serve(text: &str) -> (tempfile::TempDir, PathBuf, Sidecar) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    put(&file, text);
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--policy".into(),
        file.clone().into(),
        "--server-id".into(),
        "t".into(),
    ];
    // Info logs say when a reload happened, so a test need not wait for the poll blindly.
    let mut s = Sidecar::spawn_env(&args, &[("FSBROKER_LOG", "info")]);
    ok(&s.request("roots/list", json!({})));
    (dir, file, s)
}

/// How many reloads the process has logged.
fn reloads(s: &Sidecar) -> usize {
    s.stderr().matches("policy reloaded").count()
}

/// Waits (at most [`EXPECT`]) until a reload after `before` is logged.
fn wait_reloads(s: &Sidecar, before: usize) {
    let deadline = std::time::Instant::now() + EXPECT;
    while reloads(s) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload within {EXPECT:?}: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn roots_of(s: &mut Sidecar) -> Value {
    let r = s.request("roots/list", json!({}));
    ok(&r)["roots"].clone()
}

/// Notifications until one has `method` (and, for change notifications, `event`).
fn wait_for(s: &mut Sidecar, method: &str, event: Option<&str>) -> Vec<Value> {
    let is = |n: &Value| n["method"] == method && event.is_none_or(|e| n["params"]["event"] == e);
    let seen = s.notifications_until(EXPECT, is);
    assert!(
        seen.last().is_some_and(is),
        "no {method} {event:?} within {EXPECT:?}: {seen:?}; stderr: {}",
        s.stderr()
    );
    seen
}

fn watch(s: &mut Sidecar, params: Value) -> String {
    let r = s.request("files/watch", params);
    ok(&r)["watchId"].as_str().unwrap().to_owned()
}

#[test]
fn adding_a_root_to_the_policy_file_sends_list_changed_and_roots_list_shows_it() {
    let f = Fixture::new();
    let (_dir, file, mut s) = serve(&policy(&[root(&f.root, "project", "[\"*\"]")], "auto", ""));
    assert_eq!(
        roots_of(&mut s),
        json!([{"uri": file_uri(&f.root), "name": "project"}])
    );

    put(
        &file,
        &policy(
            &[
                root(&f.root, "project", "[\"*\"]"),
                root(&f.sibling, "second", "[\"t\"]"),
            ],
            "auto",
            "",
        ),
    );
    let seen = wait_for(&mut s, LIST_CHANGED, None);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        roots_of(&mut s),
        json!([
            {"uri": file_uri(&f.root), "name": "project"},
            {"uri": file_uri(&f.sibling), "name": "second"},
        ])
    );
    let c = s.request("files/consent", json!({"requestedPaths": ["second"]}));
    assert_eq!(ok(&c)["approvedPaths"], json!(["second"]), "{c}");
    let r = s.request("files/read", json!({"path": "second/secret.txt"}));
    assert_eq!(ok(&r)["content"], SECRET);

    // A root added for another server only is no change for this session.
    let reloads = reloads(&s);
    put(
        &file,
        &policy(
            &[
                root(&f.root, "project", "[\"*\"]"),
                root(&f.sibling, "second", "[\"t\"]"),
                root(&f.outside, "theirs", "[\"someone-else\"]"),
            ],
            "auto",
            "",
        ),
    );
    wait_reloads(&s, reloads);
    let seen = s.notifications_until(QUIET, |_| false);
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(roots_of(&mut s).as_array().unwrap().len(), 2);
}

#[test]
fn sighup_reloads_a_policy_changed_in_place_without_its_stamp_changing() {
    let f = Fixture::new();
    let (_dir, file, mut s) = serve(&policy(&[root(&f.root, "alpha", "[\"*\"]")], "auto", ""));
    let before = std::fs::metadata(&file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let changed = text.replace("mount = \"alpha\"", "mount = \"bravo\"");
    assert_eq!(changed.len(), text.len());

    // Same inode, same length, same modification time: the poll cannot see it. The write
    // stamps a new time until it is set back; the broker is stopped meanwhile, so that no
    // poll, however the two steps are spread on a busy machine, sees the time in between.
    let pid = rustix::process::Pid::from_raw(s.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        w.write_all(changed.as_bytes()).unwrap();
        w.set_modified(before.modified().unwrap()).unwrap();
    }
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let after = std::fs::metadata(&file).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (after.ino(), after.len(), after.modified().unwrap()),
        (before.ino(), before.len(), before.modified().unwrap())
    );
    let seen = s.notifications_until(Duration::from_millis(1500), |_| true);
    assert!(seen.is_empty(), "reloaded without a signal: {seen:?}");
    assert_eq!(roots_of(&mut s)[0]["name"], "alpha");

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(s.pid() as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    wait_for(&mut s, LIST_CHANGED, None);
    assert_eq!(
        roots_of(&mut s),
        json!([{"uri": file_uri(&f.root), "name": "bravo"}])
    );
    // The process lives on and serves the new mount.
    ok(&s.request("files/consent", json!({"requestedPaths": ["bravo"]})));
    let r = s.request("files/stat", json!({"path": "alpha"}));
    assert_eq!(err(&r).2, "outside_root", "{r}");
}

#[test]
fn reload_removing_a_root_ends_its_watches_with_root_removed() {
    let f = Fixture::new();
    let both = [
        root(&f.root, "project", "[\"*\"]"),
        root(&f.sibling, "second", "[\"*\"]"),
    ];
    let (_dir, file, mut s) = serve(&policy(&both, "auto", ""));
    ok(&s.request(
        "files/consent",
        json!({"requestedPaths": ["project", "second"]}),
    ));
    let gone = watch(&mut s, json!({"path": "second", "recursive": true}));
    let stays = watch(&mut s, json!({"path": "project"}));

    put(&file, &policy(&both[..1], "auto", ""));
    let seen = wait_for(&mut s, "notifications/files/changed", Some("unwatched"));
    let n = &seen.last().unwrap()["params"];
    assert_eq!(n["watchId"], json!(gone), "{n}");
    assert_eq!(n["path"], "second", "{n}");
    assert_eq!(n["reason"], "root_removed", "{n}");
    assert!(
        n["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{n}"
    );
    let mut all = seen.clone();
    all.extend(s.notifications_until(QUIET, |_| false));
    assert!(all.iter().any(|n| n["method"] == LIST_CHANGED), "{all:?}");
    assert_eq!(
        all.iter()
            .filter(|n| n["params"]["event"] == "unwatched")
            .count(),
        1,
        "only the removed root's watch ends: {all:?}"
    );

    let r = s.request("files/stat", json!({"path": "second/secret.txt"}));
    assert_eq!(err(&r).2, "outside_root", "{r}");
    let r = s.request("files/unwatch", json!({"watchId": gone}));
    assert_eq!(err(&r).0, -32602, "{r}");
    // Nothing more from the removed root; the other watch goes on.
    std::fs::write(f.sibling.join("late.txt"), "x").unwrap();
    f.file("late.txt", "x");
    let seen = s.notifications_until(EXPECT, |n| n["params"]["path"] == "project/late.txt");
    assert!(
        seen.last()
            .is_some_and(|n| n["params"]["watchId"] == json!(stays)),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|n| n["params"]["watchId"] != json!(gone)),
        "{seen:?}"
    );
    std::fs::remove_file(f.sibling.join("late.txt")).unwrap();
}

#[test]
fn reload_removing_a_standing_grant_ends_its_watch_with_revoked() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let roots = [root(&f.root, "project", "[\"*\"]")];
    let grant = "[[grants]]\npath = \"project\"\naccess = \"read\"\n";
    let (_dir, file, mut s) = serve(&policy(&roots, "deny", grant));
    let w = watch(&mut s, json!({"path": "project"}));

    put(&file, &policy(&roots, "deny", ""));
    let seen = wait_for(&mut s, "notifications/files/changed", Some("unwatched"));
    let n = &seen.last().unwrap()["params"];
    assert_eq!(
        (&n["watchId"], &n["path"], &n["reason"]),
        (&json!(w), &json!("project"), &json!("revoked")),
        "{n}"
    );
    assert!(
        seen.iter().all(|n| n["method"] != LIST_CHANGED),
        "the roots did not change: {seen:?}"
    );
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(err(&r).2, "revoked", "{r}");
    let r = s.request("files/watch", json!({"path": "project"}));
    assert_eq!(err(&r).2, "revoked", "{r}");
}

#[test]
fn broken_policy_on_reload_is_refused_and_the_old_policy_stays_in_force() {
    let f = Fixture::new();
    let good = policy(&[root(&f.root, "project", "[\"*\"]")], "auto", "");
    let (_dir, file, mut s) = serve(&good);
    ok(&s.request("files/consent", json!({"requestedPaths": ["project"]})));
    let w = watch(&mut s, json!({"path": "project"}));
    let before = roots_of(&mut s);

    for broken in [
        format!("{good}\n[limits]\nno_such_limit = 1\n"),
        // (A root whose directory is missing is no broken policy: a reload leaves that root
        // out and applies the rest, so that a server cannot hold a reload back by moving a
        // root away; see the library test above.)
        format!("{good}\n[[roots]]\npath = \"/tmp\"\naccess = \"sometimes\"\n"),
        "this is not toml = = =".to_owned(),
    ] {
        let refusals = s.stderr().matches("policy reload refused").count();
        put(&file, &broken);
        let deadline = std::time::Instant::now() + EXPECT;
        while s.stderr().matches("policy reload refused").count() == refusals
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        let stderr = s.stderr();
        assert!(
            stderr.matches("policy reload refused").count() > refusals,
            "no refusal logged for {broken:?}: {stderr}"
        );
        assert!(
            stderr
                .lines()
                .filter(|l| l.contains("policy reload refused"))
                .all(|l| l.contains("ERROR")),
            "{stderr}"
        );
        assert_eq!(roots_of(&mut s), before);
        // The session is untouched: its grant and its watch live on.
        let r = s.request("files/stat", json!({"path": "project"}));
        ok(&r);
    }
    f.file("still.txt", "x");
    let seen = s.notifications_until(EXPECT, |n| n["params"]["path"] == "project/still.txt");
    assert!(
        seen.last()
            .is_some_and(|n| n["params"]["watchId"] == json!(w)),
        "{seen:?}"
    );
    assert!(seen.iter().all(|n| n["method"] != LIST_CHANGED), "{seen:?}");

    // A good policy afterwards is taken.
    put(
        &file,
        &policy(
            &[
                root(&f.root, "project", "[\"*\"]"),
                root(&f.sibling, "second", "[\"*\"]"),
            ],
            "auto",
            "",
        ),
    );
    wait_for(&mut s, LIST_CHANGED, None);
    assert_eq!(roots_of(&mut s).as_array().unwrap().len(), 2);
}

// ---- through the library handle ----

fn library(text: &str) -> (Broker, Notifications) {
    Broker::builder(Policy::parse(text, "test").unwrap())
        .build()
        .unwrap()
}

/// The messages that arrive within `wait`, as (server id, method, params).
async fn drain(rx: &mut Notifications, wait: Duration) -> Vec<(String, String, Value)> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        out.push((
            m.server_id.clone(),
            m.message["method"].as_str().unwrap_or("").to_owned(),
            m.message["params"].clone(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_tells_only_the_sessions_whose_roots_changed_and_ends_watches_of_removed_roots() {
    let f = Fixture::new();
    let shared = root(&f.root, "project", "[\"*\"]");
    let for_b = root(&f.sibling, "extra", "[\"b\"]");
    let (broker, mut rx) = library(&policy(std::slice::from_ref(&shared), "auto", ""));
    for server in ["a", "b"] {
        ok(&call(&broker, server, "roots/list", json!({})).await);
    }

    let report = broker
        .reload(Policy::parse(&policy(&[shared.clone(), for_b.clone()], "auto", ""), "v2").unwrap())
        .unwrap();
    assert_eq!(report.sessions_told, vec!["b".to_owned()]);
    let got = drain(&mut rx, QUIET).await;
    assert_eq!(
        got,
        vec![("b".to_owned(), LIST_CHANGED.to_owned(), Value::Null)],
        "{got:?}"
    );

    // Only limits change: nobody is told.
    let limits = "[limits]\nmax_watches = 7\n";
    let report = broker
        .reload(
            Policy::parse(
                &policy(&[shared.clone(), for_b.clone()], "auto", limits),
                "v3",
            )
            .unwrap(),
        )
        .unwrap();
    assert!(
        report.roots_changed.is_empty() && report.sessions_told.is_empty(),
        "{report:?}"
    );
    assert!(drain(&mut rx, QUIET).await.is_empty());

    // The root goes away: "b" is told, and its watch there ends.
    ok(&call(
        &broker,
        "b",
        "files/consent",
        json!({"requestedPaths": ["extra"]}),
    )
    .await);
    let r = call(&broker, "b", "files/watch", json!({"path": "extra"})).await;
    let w = ok(&r)["watchId"].clone();
    let report = broker
        .reload(Policy::parse(&policy(&[shared], "auto", limits), "v4").unwrap())
        .unwrap();
    assert_eq!(report.sessions_told, vec!["b".to_owned()]);
    assert_eq!(report.watches_ended, 1);
    let got = drain(&mut rx, QUIET).await;
    assert!(got.iter().all(|m| m.0 == "b"), "{got:?}");
    assert!(got.iter().any(|m| m.1 == LIST_CHANGED), "{got:?}");
    assert!(
        got.iter().any(|m| m.2["watchId"] == w
            && m.2["event"] == "unwatched"
            && m.2["reason"] == "root_removed"),
        "{got:?}"
    );

    // A policy whose root cannot be opened any more still applies, without that root: a
    // server that moved a root's directory away cannot hold back a reload that takes access
    // away. Here the new policy drops `project` and names only the missing `doomed`.
    let doomed = f.tmp.path().join("doomed");
    std::fs::create_dir(&doomed).unwrap();
    let bad = Policy::parse(
        &policy(&[root(&doomed, "doomed", "[\"*\"]")], "auto", ""),
        "v5",
    );
    std::fs::remove_dir(&doomed).unwrap();
    let report = broker.reload(bad.unwrap()).unwrap();
    assert_eq!(report.roots_removed, vec!["project".to_owned()]);
    let r = call(&broker, "a", "roots/list", json!({})).await;
    assert_eq!(ok(&r)["roots"], json!([]), "{r}");
    let got = drain(&mut rx, QUIET).await;
    assert!(got.iter().any(|m| m.1 == LIST_CHANGED), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_report_names_the_roots_added_and_removed_whoever_sees_them() {
    let f = Fixture::new();
    let shared = root(&f.root, "project", "[\"*\"]");
    let (broker, _rx) = library(&policy(std::slice::from_ref(&shared), "auto", ""));
    let parse = |roots: &[String]| Policy::parse(&policy(roots, "auto", ""), "v").unwrap();

    let everyone = root(&f.sibling, "extra", "[\"*\"]");
    let report = broker.reload(parse(&[shared.clone(), everyone])).unwrap();
    assert_eq!(report.roots_changed, vec!["extra".to_owned()], "{report:?}");
    assert!(report.roots_removed.is_empty(), "{report:?}");
    let report = broker.reload(parse(std::slice::from_ref(&shared))).unwrap();
    assert_eq!(report.roots_removed, vec!["extra".to_owned()], "{report:?}");

    // A root for one server only is added and removed all the same.
    let one = root(&f.sibling, "extra", "[\"b\"]");
    let report = broker.reload(parse(&[shared.clone(), one])).unwrap();
    assert_eq!(report.roots_changed, vec!["extra".to_owned()], "{report:?}");
    let report = broker.reload(parse(std::slice::from_ref(&shared))).unwrap();
    assert_eq!(report.roots_removed, vec!["extra".to_owned()], "{report:?}");
}
