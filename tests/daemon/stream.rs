//! `fsbroker log` and `fsbroker reload` against a running daemon: the audit ring (filled by
//! the sessions attached to it), a follower's stream, and a reload of the policy file.

use crate::place::Place;
use crate::sidecar::WAIT;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

#[test]
fn the_log_of_a_fresh_daemon_is_empty() {
    let p = Place::new();
    let _d = p.start();
    let ran = p.verb(&["log"]);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(ran.out(), "no events\n");
    let ran = p.verb(&["log", "--json", "--server", "s1"]);
    assert!(ran.success(), "{}", ran.log());
    assert_eq!(ran.out(), "");
    let socket = p.tmp.path().join("none.sock");
    let ran = p.verb(&["log", "--follow", "--daemon", socket.to_str().unwrap()]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(ran.err().contains("no daemon answers"), "{}", ran.log());
}

/// A connection that has said hello.
fn connect(p: &Place) -> (BufReader<UnixStream>, UnixStream) {
    let stream = UnixStream::connect(p.socket()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let key = std::fs::read_to_string(p.key()).unwrap();
    writeln!(writer, "{}", json!({"hello": key.trim()})).unwrap();
    assert_eq!(line(&mut reader)["ok"], true);
    (reader, writer)
}

fn line(r: &mut impl BufRead) -> Value {
    let mut l = String::new();
    assert!(r.read_line(&mut l).unwrap() > 0, "the connection ended");
    serde_json::from_str(&l).unwrap()
}

#[test]
fn a_follower_is_streamed_to_until_the_daemon_stops() {
    let p = Place::new();
    let mut d = p.start();
    let (mut r, mut w) = connect(&p);
    writeln!(w, r#"{{"op":"log","follow":true}}"#).unwrap();
    assert_eq!(
        line(&mut r),
        json!({"ok": true, "following": true, "events": []})
    );
    // A following connection answers no more requests.
    writeln!(w, r#"{{"op":"status"}}"#).unwrap();
    // Another connection is served meanwhile.
    let ran = p.verb(&["log", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    assert!(d.terminate().success(), "{}", d.stderr());
    let mut rest = String::new();
    assert_eq!(r.read_line(&mut rest).unwrap(), 0, "{rest}");
}

#[test]
fn reload_without_a_policy_file_says_there_is_none() {
    let p = Place::new();
    let _d = p.start();
    let ran = p.verb(&["reload"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(
        ran.err().contains("no policy file to reload"),
        "{}",
        ran.log()
    );
}

#[test]
fn reload_puts_the_changed_policy_in_force_or_keeps_the_old() {
    let p = Place::new();
    let two = p.tmp.path().join("two");
    std::fs::create_dir(&two).unwrap();
    let file = p.tmp.path().join("policy.toml");
    let root = |mount: &str, dir: &std::path::Path| {
        format!(
            "[[roots]]\npath = \"{}\"\nmount = \"{mount}\"\n",
            dir.display()
        )
    };
    std::fs::write(&file, root("one", &p.root)).unwrap();
    let mut cmd = p.command(&["daemon", "--foreground", "--policy"]);
    cmd.arg(&file);
    let _d = p.start_command(cmd);
    std::fs::write(&file, root("one", &p.root) + &root("two", &two)).unwrap();
    let ran = p.verb(&["reload", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    let v: Value = serde_json::from_slice(&ran.stdout).unwrap();
    // The daemon also reloads a saved file by itself: which reload saw the change first is
    // not known, what is in force after this one is.
    assert_eq!(v["roots"], json!(["one", "two"]), "{v}");
    assert_eq!(v["policy"], json!(file), "{v}");
    std::fs::write(&file, "[[roots]]\npath = 7\n").unwrap();
    let ran = p.verb(&["reload"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(
        ran.err().contains("old one stays in force"),
        "{}",
        ran.log()
    );
    std::fs::write(&file, root("two", &two)).unwrap();
    let ran = p.verb(&["reload"]);
    assert!(ran.success(), "{}", ran.log());
    assert!(ran.out().contains("roots          two\n"), "{}", ran.log());
}

#[test]
fn the_log_shows_each_attached_sessions_requests_and_a_follower_sees_new_ones() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "hello").unwrap();
    let _d = p.start_with(&["--consent", "auto"]);
    let daemon = format!("--daemon={}", p.socket().display());
    let serve = |id: &str| {
        let args: Vec<std::ffi::OsString> = ["serve", daemon.as_str(), "--server-id", id]
            .iter()
            .map(Into::into)
            .collect();
        crate::sidecar::Sidecar::spawn(&args, None)
    };
    let (mut a, mut b) = (serve("alpha"), serve("beta"));
    for s in [&mut a, &mut b] {
        let r = s.request("files/consent", json!({"requestedPaths": ["root"]}));
        assert_eq!(r["result"]["granted"], true, "{r}");
    }
    let r = a.request("files/read", json!({"path": "root/a.txt"}));
    assert_eq!(r["result"]["content"], "hello", "{r}");
    let ran = p.verb(&["log", "--json", "--server", "alpha"]);
    assert!(ran.success(), "{}", ran.log());
    let events: Vec<Value> = ran
        .out()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let methods: Vec<&str> = events
        .iter()
        .map(|e| e["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["files/consent", "files/read"], "{events:?}");
    assert!(events.iter().all(|e| e["server"] == "alpha"), "{events:?}");
    assert_eq!(events[1]["path"], "root/a.txt", "{events:?}");
    assert_eq!(events[1]["bytes"], 5, "{events:?}");

    // A follower of beta: its recent events, then a new one as it happens.
    let (mut reader, mut writer) = connect(&p);
    writer
        .write_all(b"{\"op\":\"log\",\"server\":\"beta\",\"follow\":true}\n")
        .unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let first: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(first["ok"], true, "{first}");
    let r = b.request("files/stat", json!({"path": "root/a.txt"}));
    assert!(r["result"]["etag"].is_string(), "{r}");
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &Value| e["event"]["method"] == "files/stat")
    {
        line.clear();
        reader.read_line(&mut line).unwrap();
        seen.push(serde_json::from_str(&line).unwrap());
    }
    assert!(
        seen.iter().all(|e| e["event"]["server"] == "beta"),
        "{seen:?}"
    );
}

#[test]
fn a_reload_that_adds_a_root_holding_the_socket_directory_is_refused() {
    let p = Place::new();
    let file = p.tmp.path().join("policy.toml");
    let root = |mount: &str, dir: &std::path::Path| {
        format!("[[roots]]\npath = {dir:?}\nmount = \"{mount}\"\n")
    };
    std::fs::write(&file, root("one", &p.root)).unwrap();
    let mut cmd = p.command(&["daemon", "--foreground", "--policy"]);
    cmd.arg(&file);
    let _d = p.start_command(cmd);
    // The place's own directory holds `run/`, the socket's.
    std::fs::write(&file, root("one", &p.root) + &root("all", p.tmp.path())).unwrap();
    let ran = p.verb(&["reload"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    assert!(
        ran.err().contains("holds the daemon's socket directory"),
        "{}",
        ran.log()
    );
    // Whichever reload saw the file first (the daemon reloads a saved file by itself), the
    // old roots are those in force.
    let (mut r, mut w) = connect(&p);
    writeln!(w, r#"{{"op":"describe"}}"#).unwrap();
    let d = line(&mut r);
    let mounts: Vec<&str> = d["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mount"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["one"], "{d}");
    let ran = p.verb(&["reload", "--json"]);
    assert_eq!(ran.code(), Some(1), "{}", ran.log());
    std::fs::write(&file, root("one", &p.root)).unwrap();
    let ran = p.verb(&["reload", "--json"]);
    assert!(ran.success(), "{}", ran.log());
    let v: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(v["roots"], json!(["one"]), "{v}");
}
