//! Watch limits and endings: refused watch requests, `max_watches`, `max_kernel_watches`,
//! the `overflow` event when a host stops consuming notifications (through the process and
//! through the library handle), and watches ended by revocation or by the end of a session.
//! Every wait is bounded.

use crate::common::*;
use crate::sidecar::*;
use mcp_fsbroker::{Broker, Notification, Notifications, Policy};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

/// How long an expected message may take: generous, as it only bounds a wait.
const EXPECT: Duration = Duration::from_secs(60);
const QUIET: Duration = Duration::from_millis(400);

/// The policy file for a writable `project` root with automatic consent and `extra` TOML.
fn policy_file(f: &Fixture, extra: &str) -> OsString {
    let text = f.policy_text("write", &format!("[consent]\nmode = \"auto\"\n\n{extra}"));
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, text).unwrap();
    file.into()
}

fn serve_args(f: &Fixture, extra: &str) -> Vec<OsString> {
    vec![
        "serve".into(),
        "--policy".into(),
        policy_file(f, extra),
        "--server-id".into(),
        "t".into(),
    ]
}

/// A sidecar with read consent on the whole root.
fn start(f: &Fixture, extra: &str) -> Sidecar {
    let mut s = Sidecar::spawn(&serve_args(f, extra), None);
    let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
    assert_eq!(ok(&r)["granted"], true, "{r}");
    s
}

fn watch_id(r: &Value) -> String {
    ok(r)["watchId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned()
}

/// Asserts `QUOTA_EXCEEDED` with `data.limit`.
fn assert_quota(r: &Value, limit: u64) {
    assert_eq!(err(r).0, -31007, "{r}");
    assert_eq!(err(r).1, "QUOTA_EXCEEDED", "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!(limit), "{r}");
}

#[test]
fn watch_requests_are_checked_before_anything_is_watched() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    f.symlink(&f.outside, "out");
    let mut s = start(&f, "");
    for events in [
        json!([]),
        json!(["bogus"]),
        json!("deleted"),
        json!(["overflow"]),
    ] {
        let r = s.request("files/watch", json!({"path": "project", "events": events}));
        assert_eq!(err(&r).0, -32602, "events {events}: {r}");
    }
    let r = s.request("files/watch", json!({"recursive": true}));
    assert_eq!(err(&r).0, -32602, "{r}");
    let outside = f.outside.to_str().unwrap().to_owned();
    let sibling = f.sibling.to_str().unwrap().to_owned();
    for p in [
        "project/../outside",
        outside.as_str(),
        sibling.as_str(),
        "project/out",
    ] {
        let r = s.request("files/watch", json!({"path": p, "recursive": true}));
        assert_eq!(
            err(&r),
            (-31002, "PERMISSION_DENIED".into(), "outside_root".into()),
            "{p}: {r}"
        );
        assert!(!r.to_string().contains(f.tmp.path().to_str().unwrap()));
    }
    let r = s.request("files/watch", json!({"path": "project/missing"}));
    assert_eq!(err(&r).1, "FILE_NOT_FOUND", "{r}");

    // Without consent nothing can be watched.
    let mut denied = Sidecar::serve(&f.root, "deny", &[]);
    let r = denied.request("files/watch", json!({"path": "project"}));
    assert_eq!(
        err(&r),
        (-31002, "PERMISSION_DENIED".into(), "no_consent".into()),
        "{r}"
    );
    f.assert_canary_intact();
}

#[test]
fn third_watch_past_max_watches_is_quota_exceeded_until_one_is_unwatched() {
    let f = Fixture::new();
    f.dir("a");
    let mut s = start(&f, "[limits]\nmax_watches = 2\n");
    let w1 = watch_id(&s.request("files/watch", json!({"path": "project"})));
    let _w2 = watch_id(&s.request("files/watch", json!({"path": "project/a"})));
    let r = s.request(
        "files/watch",
        json!({"path": "project/a", "recursive": true}),
    );
    assert_quota(&r, 2);
    let r = s.request("files/unwatch", json!({"watchId": w1}));
    assert_eq!(ok(&r), &json!({}));
    let r = s.request(
        "files/watch",
        json!({"path": "project/a", "recursive": true}),
    );
    watch_id(&r);
    let r = s.request("files/watch", json!({"path": "project"}));
    assert_quota(&r, 2);
}

#[test]
fn recursive_watch_needing_more_kernel_watches_than_the_limit_is_quota_exceeded() {
    let f = Fixture::new();
    for i in 0..20 {
        f.dir(&format!("tree/d{i:02}"));
    }
    for i in 0..8 {
        f.dir(&format!("small/s{i}"));
    }
    let mut s = start(&f, "[limits]\nmax_kernel_watches = 10\n");
    let r = s.request(
        "files/watch",
        json!({"path": "project/tree", "recursive": true}),
    );
    assert_quota(&r, 10);

    // The same directory watched flat needs one kernel watch, and works.
    let flat = watch_id(&s.request("files/watch", json!({"path": "project/tree"})));
    // The refused watch took nothing: 1 + 9 kernel watches fit exactly.
    let small = watch_id(&s.request(
        "files/watch",
        json!({"path": "project/small", "recursive": true}),
    ));
    let r = s.request("files/watch", json!({"path": "project"}));
    assert_quota(&r, 10);

    f.file("tree/new.txt", "x");
    f.file("small/s3/deep.txt", "x");
    let mut seen = Vec::new();
    for (id, path) in [
        (&flat, "project/tree/new.txt"),
        (&small, "project/small/s3/deep.txt"),
    ] {
        let got = s.notifications_until(EXPECT, |n| {
            n["params"]["watchId"] == json!(id) && n["params"]["path"] == path
        });
        assert!(
            got.last()
                .is_some_and(|n| n["params"]["path"] == path && n["params"]["event"] == "created"),
            "{path}: {got:?} {seen:?}"
        );
        seen.extend(got);
    }

    // Unwatching gives the kernel watches back.
    let r = s.request("files/unwatch", json!({"watchId": small}));
    ok(&r);
    watch_id(&s.request("files/watch", json!({"path": "project"})));
}

/// A `fsbroker serve` whose stdout is read by a thread through a channel of one line: when
/// the test stops receiving, the process's stdout pipe fills up.
struct Paused {
    child: Child,
    /// The read side of the process's stdout, to see how full the pipe is.
    out: std::os::fd::OwnedFd,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    next_id: i64,
}

impl Paused {
    fn spawn(args: &[OsString]) -> Paused {
        let mut child = Command::new(bin())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let out = std::os::fd::AsFd::as_fd(&stdout)
            .try_clone_to_owned()
            .unwrap();
        let (tx, lines) = sync_channel(1);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx
                    .send(serde_json::from_str::<Value>(&line).unwrap())
                    .is_err()
                {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = stderr.read_to_end(&mut sink);
        });
        let stdin = child.stdin.take().unwrap();
        Paused {
            child,
            out,
            stdin,
            lines,
            next_id: 0,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        self.stdin
            .write_all(&rpc_line(self.next_id, method, params))
            .unwrap();
        self.stdin.flush().unwrap();
        let deadline = Instant::now() + EXPECT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no response to {method}: {e}"));
            if v["id"] == json!(self.next_id) {
                return v;
            }
        }
    }

    /// Notifications until one matches `want` or `wait` passes.
    fn until(&mut self, wait: Duration, want: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while let Ok(v) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            let done = want(&v);
            out.push(v);
            if done {
                break;
            }
        }
        out
    }

    /// CPU time (user + system, in clock ticks) the process has used.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split(' ').collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }

    /// Waits (at most `max`) until the process is held up on its output, its stdout pipe
    /// full, and has then used no CPU for a second: it has taken in every change and is
    /// waiting for the host. A busy machine makes this take longer, not end early: a process
    /// with work left is not kept off the CPU for a whole second.
    fn settle(&self, max: Duration) {
        let deadline = Instant::now() + max;
        while rustix::io::ioctl_fionread(&self.out).unwrap_or(0) < 48 << 10 {
            assert!(Instant::now() < deadline, "the output pipe never filled");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut last = self.cpu_ticks();
        let mut still = 0;
        while still < 10 {
            assert!(Instant::now() < deadline, "the process never settled");
            std::thread::sleep(Duration::from_millis(100));
            let now = self.cpu_ticks();
            still = if now == last { still + 1 } else { 0 };
            last = now;
        }
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn host_that_stops_reading_stdout_is_owed_one_overflow_and_the_watch_goes_on() {
    let f = Fixture::new();
    f.dir("flood");
    let mut p = Paused::spawn(&serve_args(&f, "[limits]\nwatch_queue = 64\n"));
    let r = p.request("files/consent", json!({"requestedPaths": ["project"]}));
    assert_eq!(ok(&r)["granted"], true, "{r}");
    let w = watch_id(&p.request("files/watch", json!({"path": "project/flood"})));
    let long = "x".repeat(240);
    let create = |i: usize| {
        std::fs::File::create(f.root.join(format!("flood/{i:05}-{long}"))).unwrap();
    };
    let event = |v: &Value| v["params"]["event"].as_str().unwrap_or("").to_owned();

    // While the host reads, rounds of 20 changes (fewer than the 64 slots) all arrive, and
    // no overflow is due.
    for round in 0..10 {
        for i in round * 20..round * 20 + 20 {
            create(i);
        }
        let last = format!("project/flood/{:05}-{long}", round * 20 + 19);
        let seen = p.until(EXPECT, |v| v["params"]["path"] == json!(last));
        assert!(seen.iter().all(|v| event(v) == "created"), "{seen:?}");
        assert_eq!(seen.len(), 20, "round {round}: {seen:?}");
    }

    // The host stops reading: the same rounds, but some 200 KB of notifications cannot fit
    // the 64 KiB pipe and the 64 slots.
    for round in 10..35 {
        for i in round * 20..round * 20 + 20 {
            create(i);
        }
        std::thread::sleep(Duration::from_millis(60));
    }
    p.settle(Duration::from_secs(120));

    // Reading again: the backlog, then one overflow for the watched path.
    let seen = p.until(EXPECT, |v| event(v) == "overflow");
    let last = seen
        .last()
        .unwrap_or_else(|| panic!("nothing after the flood"));
    assert_eq!(last["method"], "notifications/files/changed", "{last}");
    assert_eq!(
        (
            &last["params"]["watchId"],
            &last["params"]["path"],
            event(last)
        ),
        (&json!(w), &json!("project/flood"), "overflow".to_owned()),
        "no overflow after {} notifications",
        seen.len()
    );
    let created = seen.iter().filter(|v| event(v) == "created").count();
    assert!(
        created < 500,
        "every change was delivered: no overflow was due"
    );
    // The watch still reports.
    f.file("flood/after.txt", "x");
    let seen = p.until(EXPECT, |v| v["params"]["path"] == "project/flood/after.txt");
    assert!(
        seen.last()
            .is_some_and(|v| v["params"]["path"] == "project/flood/after.txt"
                && v["params"]["watchId"] == json!(w)),
        "the watch stopped after its overflow: {seen:?}"
    );
}

// ---- through the library handle ----

fn library(f: &Fixture, extra: &str) -> (Broker, Notifications) {
    let text = f.policy_text("read", &format!("[consent]\nmode = \"auto\"\n\n{extra}"));
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

async fn watch(b: &Broker, server: &str, params: Value) -> String {
    watch_id(&call(b, server, "files/watch", params).await)
}

/// The next outbound message within `wait`.
async fn next(rx: &mut Notifications, wait: Duration) -> Option<Notification> {
    tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
}

/// Messages until one matches `want` (returned last) or `wait` passes.
async fn until(
    rx: &mut Notifications,
    wait: Duration,
    want: impl Fn(&Notification) -> bool,
) -> Vec<Notification> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        let done = want(&m);
        out.push(m);
        if done {
            break;
        }
    }
    out
}

fn is(m: &Notification, id: &str, path: &str, event: &str) -> bool {
    let p = &m.message["params"];
    p["watchId"] == id && p["path"] == path && p["event"] == event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_notifications_fill_watch_queue_and_the_watch_owes_one_overflow() {
    let f = Fixture::new();
    f.file("barrier.txt", "0");
    let (b, mut rx) = library(&f, "[limits]\nwatch_queue = 4\n");
    consent_all(&b, "s").await;
    consent_all(&b, "other").await;
    let ws = watch(&b, "s", json!({"path": "project"})).await;
    let wb = watch(&b, "other", json!({"path": "project/barrier.txt"})).await;

    // Empty files: each is one kernel event (a creation), so no window can split one into a
    // creation and a later modification on a slow machine.
    for i in 0..10 {
        std::fs::File::create(f.root.join(format!("f{i}.txt"))).unwrap();
    }
    // A change after them, reported to another session: once it arrives, every change
    // before it has been offered to "s".
    std::fs::write(f.root.join("barrier.txt"), "1").unwrap();
    let mut held: Vec<Notification> = Vec::new();
    let deadline = Instant::now() + EXPECT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = next(&mut rx, left)
            .await
            .unwrap_or_else(|| panic!("no barrier; held {held:?}"));
        if m.server_id == "s" {
            held.push(m);
        } else if m.message["params"]["watchId"] == json!(wb) {
            break;
        }
    }
    assert_eq!(held.len(), 4, "slots of the session: {held:?}");
    assert!(
        held.iter()
            .all(|m| m.message["params"]["event"] == "created"),
        "{held:?}"
    );

    // While the host holds them, nothing more is sent to "s".
    let more = until(&mut rx, QUIET, |_| false).await;
    assert!(more.iter().all(|m| m.server_id != "s"), "{more:?}");

    // Consumed: the watch's overflow comes next.
    drop(held);
    let got = until(&mut rx, EXPECT, |m| m.server_id == "s").await;
    let m = got.last().unwrap_or_else(|| panic!("no overflow"));
    assert_eq!(m.server_id, "s");
    assert_eq!(m.message["method"], "notifications/files/changed");
    assert!(is(m, &ws, "project", "overflow"), "{:?}", m.message);

    // And the watch still reports.
    std::fs::write(f.root.join("after.txt"), "x").unwrap();
    let got = until(&mut rx, EXPECT, |m| {
        is(m, &ws, "project/after.txt", "created")
    })
    .await;
    assert!(
        got.last()
            .is_some_and(|m| is(m, &ws, "project/after.txt", "created"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_ends_watches_with_unwatched_revoked_and_nothing_follows() {
    let f = Fixture::new();
    f.dir("sub");
    let (b, mut rx) = library(&f, "");
    consent_all(&b, "s").await;
    consent_all(&b, "witness").await;
    let w1 = watch(&b, "s", json!({"path": "project", "recursive": true})).await;
    let w2 = watch(&b, "s", json!({"path": "project/sub"})).await;
    let wit = watch(&b, "witness", json!({"path": "project"})).await;

    b.revoke_session("s").unwrap();
    let mut ended = Vec::new();
    for _ in 0..2 {
        let m = next(&mut rx, EXPECT)
            .await
            .expect("an unwatched notification");
        assert_eq!(m.server_id, "s");
        assert_eq!(m.message["method"], "notifications/files/changed");
        let p = m.message["params"].clone();
        assert_eq!(p["event"], "unwatched", "{p}");
        assert_eq!(p["reason"], "revoked", "{p}");
        assert!(
            p["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{p}"
        );
        ended.push((
            p["watchId"].as_str().unwrap().to_owned(),
            p["path"].as_str().unwrap().to_owned(),
        ));
    }
    ended.sort();
    let mut want = vec![
        (w1.clone(), "project".to_owned()),
        (w2.clone(), "project/sub".to_owned()),
    ];
    want.sort();
    assert_eq!(ended, want);

    // Nothing more for "s": the witness session sees the change, "s" does not.
    std::fs::write(f.root.join("sub/after.txt"), "x").unwrap();
    std::fs::write(f.root.join("before-sentinel.txt"), "x").unwrap();
    tokio::time::sleep(QUIET).await;
    std::fs::write(f.root.join("sentinel.txt"), "x").unwrap();
    let got = until(&mut rx, EXPECT, |m| {
        is(m, &wit, "project/sentinel.txt", "created")
    })
    .await;
    assert!(
        got.iter()
            .any(|m| is(m, &wit, "project/sentinel.txt", "created")),
        "{got:?}"
    );
    assert!(got.iter().all(|m| m.server_id != "s"), "{got:?}");

    // The ended watches are gone for unwatch too.
    for id in [&w1, &w2] {
        let r = call(&b, "s", "files/unwatch", json!({"watchId": id})).await;
        assert_eq!(err(&r).0, -32602, "{r}");
    }
    let r = call(&b, "s", "files/watch", json!({"path": "project"})).await;
    assert_eq!(err(&r).2, "revoked", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_subpath_ends_the_watches_beneath_it_and_hides_its_changes() {
    let f = Fixture::new();
    f.dir("private");
    let (b, mut rx) = library(&f, "");
    consent_all(&b, "s").await;
    let top = watch(&b, "s", json!({"path": "project", "recursive": true})).await;
    let inner = watch(&b, "s", json!({"path": "project/private"})).await;

    b.revoke("s", &"project/private".parse().unwrap()).unwrap();
    let m = next(&mut rx, EXPECT)
        .await
        .expect("an unwatched notification");
    let p = &m.message["params"];
    assert_eq!(
        (&p["watchId"], &p["path"], &p["event"], &p["reason"]),
        (
            &json!(inner),
            &json!("project/private"),
            &json!("unwatched"),
            &json!("revoked")
        ),
        "{p}"
    );

    std::fs::write(f.root.join("private/hidden-now.txt"), "x").unwrap();
    tokio::time::sleep(QUIET).await;
    std::fs::write(f.root.join("public.txt"), "x").unwrap();
    let got = until(&mut rx, EXPECT, |m| {
        is(m, &top, "project/public.txt", "created")
    })
    .await;
    assert!(
        got.last()
            .is_some_and(|m| is(m, &top, "project/public.txt", "created")),
        "{got:?}"
    );
    assert!(
        got.iter().all(|m| {
            let path = m.message["params"]["path"].as_str().unwrap_or("");
            !path.starts_with("project/private/")
        }),
        "a change under a revoked path was reported: {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_session_drops_its_watches() {
    let f = Fixture::new();
    let (b, mut rx) = library(&f, "");
    consent_all(&b, "s").await;
    consent_all(&b, "witness").await;
    let ws = watch(&b, "s", json!({"path": "project"})).await;
    let wit = watch(&b, "witness", json!({"path": "project"})).await;
    assert!(b.end_session("s"));

    std::fs::write(f.root.join("after.txt"), "x").unwrap();
    let got = until(&mut rx, EXPECT, |m| {
        is(m, &wit, "project/after.txt", "created")
    })
    .await;
    assert!(
        got.last()
            .is_some_and(|m| is(m, &wit, "project/after.txt", "created")),
        "{got:?}"
    );
    assert!(got.iter().all(|m| m.server_id != "s"), "{got:?}");
    let more = until(&mut rx, QUIET, |_| false).await;
    assert!(more.iter().all(|m| m.server_id != "s"), "{more:?}");
    // A new session of the same server does not inherit the watch.
    let r = call(&b, "s", "files/unwatch", json!({"watchId": ws})).await;
    assert_eq!(err(&r).0, -32602, "{r}");
}
