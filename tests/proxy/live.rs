//! The proxy over time: the broker's notifications reach the server (changes under a watch,
//! roots changed by a policy reload), and neither side stopping to read loses or wedges
//! anything.

use crate::common::Fixture;
use crate::proxy_host::{ask, initialize, proxy_args};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

fn proxy(opts: &[OsString], notes: &Path) -> Sidecar {
    Sidecar::spawn_env(&proxy_args(opts), &[("NOTES", notes.to_str().unwrap())])
}

/// The notifications the server has received, by method.
fn notes(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Polls the server's notes (nudging it with a request so it reads its input) until `want`
/// holds, for at most a minute (a generous bound: it only bounds the wait).
fn wait_for_note(p: &mut Sidecar, path: &Path, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        p.request("tools/list", json!({}));
        if let Some(n) = notes(path).into_iter().find(|n| want(n)) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the server never got the notification; notes: {:?}",
        notes(path)
    );
}

#[test]
fn changes_under_a_watch_reach_the_server() {
    let f = Fixture::new();
    f.file("w/a.txt", "one");
    let note_file = f.tmp.path().join("notes.jsonl");
    let opts: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "auto".into(),
    ];
    let mut p = proxy(&opts, &note_file);
    initialize(&mut p, "2025-06-18", json!({}));
    let a = ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project/w"]}],
            ["files/watch", {"path": "project/w"}],
        ]),
    );
    let watch_id = a[1]["result"]["watchId"].clone();
    assert!(watch_id.is_string(), "{}", a[1]);
    std::fs::write(f.root.join("w/b.txt"), "new").unwrap();
    let n = wait_for_note(&mut p, &note_file, |n| {
        n["method"] == "notifications/files/changed" && n["params"]["path"] == "project/w/b.txt"
    });
    assert_eq!(n["params"]["watchId"], watch_id);
    assert_eq!(n["params"]["event"], "created");
    p.finish();
}

#[test]
fn a_reload_that_adds_a_root_tells_the_server() {
    let f = Fixture::new();
    let extra = f.tmp.path().join("extra");
    std::fs::create_dir(&extra).unwrap();
    let policy = f.tmp.path().join("policy.toml");
    std::fs::write(&policy, f.policy_text("read", "")).unwrap();
    let note_file = f.tmp.path().join("notes.jsonl");
    let opts: Vec<OsString> = vec![
        "--policy".into(),
        policy.clone().into(),
        "--consent".into(),
        "deny".into(),
    ];
    let mut p = proxy(&opts, &note_file);
    initialize(&mut p, "2025-06-18", json!({}));
    let a = ask(&mut p, 1, json!([["roots/list", null]]));
    assert_eq!(a[0]["result"]["roots"].as_array().unwrap().len(), 1);

    let added = format!(
        "{}\n[[roots]]\npath = {:?}\nmount = \"extra\"\n",
        f.policy_text("read", ""),
        extra
    );
    std::fs::write(&policy, added).unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(p.pid() as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    wait_for_note(&mut p, &note_file, |n| {
        n["method"] == "notifications/roots/list_changed"
    });
    let a = ask(&mut p, 2, json!([["roots/list", null]]));
    let names: Vec<&str> = a[0]["result"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["project", "extra"]);
    p.finish();
}

#[test]
fn a_host_that_stops_reading_gets_everything_in_order_later() {
    let f = Fixture::new();
    let note_file = f.tmp.path().join("notes.jsonl");
    let opts: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "deny".into(),
    ];
    let mut p = proxy(&opts, &note_file);
    initialize(&mut p, "2025-06-18", json!({}));
    // 8 MiB of host-bound notifications, far beyond the pipes and queues, while this host
    // reads nothing; then it reads them all.
    let count = 128;
    p.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":"flood","arguments":{"count":count,"size":65536}}}));
    std::thread::sleep(Duration::from_secs(1));
    // Meanwhile the other direction still flows: a notification reaches the server.
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/while-stalled"}));
    for seq in 0..count {
        let m = p.next();
        assert_eq!(m["method"], "notifications/message", "{seq}");
        assert_eq!(m["params"]["data"]["seq"], seq);
    }
    assert_eq!(p.next()["id"], 1);
    wait_for_note(&mut p, &note_file, |n| {
        n["method"] == "notifications/while-stalled"
    });
    p.finish();
}

#[test]
fn a_server_that_stops_reading_gets_everything_in_order_later() {
    let f = Fixture::new();
    let note_file = f.tmp.path().join("notes.jsonl");
    let opts: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "deny".into(),
    ];
    let mut p = proxy(&opts, &note_file);
    initialize(&mut p, "2025-06-18", json!({}));
    p.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":"sleep","arguments":{"seconds":1.5}}}));
    // 8 MiB towards a server that is not reading: this host's writes block until it reads
    // again (a writer thread, so the test can still read the answer).
    let mut stdin = p.take_stdin();
    let pad = "y".repeat(65536);
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for i in 0..128 {
            let line =
                json!({"jsonrpc":"2.0","method":"notifications/bulk","params":{"i":i,"pad":pad}});
            stdin.write_all(line.to_string().as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin
    });
    assert_eq!(p.next_within(Duration::from_secs(20))["id"], 1);
    let stdin = writer.join().unwrap();
    drop(stdin);
    let (status, _) = p.finish();
    assert!(status.success(), "{status:?}");
    let seen: Vec<i64> = notes(&note_file)
        .iter()
        .filter(|n| n["method"] == "notifications/bulk")
        .filter_map(|n| n["params"]["i"].as_i64())
        .collect();
    assert_eq!(seen, (0..128).collect::<Vec<_>>());
}
