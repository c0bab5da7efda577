//! Watches stay on the inodes they verified: a new directory swapped for a symlink to the
//! outside never gets a kernel watch (finding 1), a watched directory that leaves its place
//! stops reporting and its watch ends with `unwatched`/`moved_out` (finding 2), and the files
//! of a directory created under a recursive watch are all reported, or an `overflow` comes
//! (finding 12).
//!
//! Everything runs through the library handle, so that notifications can be drained while
//! another thread races the broker. Every wait is bounded, and "nothing was reported" is
//! decided by a sentinel change made afterwards: notifications of one watch arrive in order.
//! Rounds: `FSBROKER_RACE_ITERS` (default 4000 for the thread race, a tenth of that for the
//! race through broker methods).

use crate::common::*;
use mcp_fsbroker::{Broker, Notifications, Policy};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// How long an expected notification may take (generous: the machine may be busy).
const EXPECT: Duration = Duration::from_secs(30);

fn iterations() -> usize {
    std::env::var("FSBROKER_RACE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000)
}

/// A broker over a writable `project` root with automatic consent and `extra` TOML.
fn library(f: &Fixture, extra: &str) -> (Broker, Notifications) {
    let text = f.policy_text(
        "write",
        &format!(
            "[consent]\nmode = \"auto\"\n\n[limits]\nrequests_per_second = 1000000\n\
             burst = 1000000\nwatch_queue = 60000\n{extra}"
        ),
    );
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

async fn consent(b: &Broker, server: &str, paths: &[&str], access: &str) {
    let r = call(
        b,
        server,
        "files/consent",
        json!({"requestedPaths": paths, "access": access}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "{r}");
}

async fn watch(b: &Broker, server: &str, params: Value) -> String {
    let r = call(b, server, "files/watch", params).await;
    ok(&r)["watchId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned()
}

/// The `params` of change notifications until one matches `want` (returned last) or `wait`
/// passes. Each message is dropped at once, so its notification slot is freed.
async fn until(
    rx: &mut Notifications,
    wait: Duration,
    want: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        assert_eq!(m.message["method"], "notifications/files/changed", "{m:?}");
        let p = m.message["params"].clone();
        drop(m);
        let done = want(&p);
        out.push(p);
        if done {
            break;
        }
    }
    out
}

fn is(p: &Value, id: &str, path: &str, event: &str) -> bool {
    p["watchId"] == id && p["path"] == path && p["event"] == event
}

/// Waits for (id, path, event); returns everything seen up to it.
async fn expect(rx: &mut Notifications, id: &str, path: &str, event: &str) -> Vec<Value> {
    let seen = until(rx, EXPECT, |p| is(p, id, path, event)).await;
    assert!(
        seen.last().is_some_and(|p| is(p, id, path, event)),
        "no {event} for {path} (watch {id}) within {EXPECT:?}; got {seen:?}"
    );
    seen
}

/// Exchanges two names atomically.
fn exchange(a: &Path, b: &Path) {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).expect("renameat2(RENAME_EXCHANGE)");
}

/// A directory outside the root, holding `docs/`, where canary files appear.
fn outside_tree(f: &Fixture) -> std::path::PathBuf {
    let out = f.tmp.path().join("elsewhere");
    std::fs::create_dir_all(out.join("docs")).unwrap();
    std::fs::write(out.join("docs/canary-start.txt"), SECRET).unwrap();
    out
}

/// Asserts that no notification names a canary or anything below a direct child of
/// `project/w` (everything the race makes there is reached through a link, or empty).
fn assert_nothing_through_links(seen: &[Value]) {
    for p in seen {
        let path = p["path"].as_str().unwrap_or("");
        assert!(
            !path.contains("canary"),
            "a name outside the root was reported: {p}"
        );
        let below = path.strip_prefix("project/w/").unwrap_or("");
        assert!(
            !below.contains('/'),
            "a path reached through a link was reported: {p}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_1_new_directory_exchanged_with_a_link_to_outside_never_reports_outside_names() {
    let f = Fixture::new();
    let out = outside_tree(&f);
    let w = f.dir("w");
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project"], "read").await;
    let id = watch(&b, "s", json!({"path": "project/w", "recursive": true})).await;

    let rounds = iterations();
    let racer = {
        let (w, out) = (w.clone(), out.clone());
        std::thread::spawn(move || {
            for i in 0..rounds {
                let dir = w.join(format!("d{i}"));
                let link = w.join(format!("l{i}"));
                std::fs::create_dir(&dir).unwrap();
                std::os::unix::fs::symlink(&out, &link).unwrap();
                exchange(&dir, &link);
                std::fs::write(out.join(format!("docs/canary-{i}.txt")), "x").unwrap();
                std::fs::write(out.join(format!("canary-top-{i}.txt")), "x").unwrap();
            }
        })
    };
    let mut seen = Vec::new();
    while !racer.is_finished() {
        seen.extend(until(&mut rx, Duration::from_millis(100), |_| false).await);
    }
    racer.join().unwrap();
    // Changes made outside after the race, under the names the links give them.
    for i in 0..rounds.min(50) {
        std::fs::write(out.join(format!("docs/canary-after-{i}.txt")), "x").unwrap();
    }
    std::fs::write(w.join("marker.txt"), "x").unwrap();
    seen.extend(expect(&mut rx, &id, "project/w/marker.txt", "created").await);
    assert_nothing_through_links(&seen);
    eprintln!("{} notifications in {rounds} rounds", seen.len());
    assert!(
        seen.iter()
            .any(|p| p["path"] == "project/w/d0" || p["event"] == "overflow"),
        "the race itself was not reported: {}",
        seen.len()
    );
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_1_directory_replaced_by_a_link_through_broker_methods_never_reports_outside_names()
{
    let f = Fixture::new();
    let out = outside_tree(&f);
    let w = f.dir("w");
    f.symlink(&out, "lnk");
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project"], "write").await;
    let id = watch(&b, "s", json!({"path": "project/w", "recursive": true})).await;

    let rounds = (iterations() / 10).max(20);
    // Changes inside keep the watcher busy, so that the broker's requests can overtake its
    // handling of a new directory; changes outside give it canary names to report.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (out, w, stop) = (out.clone(), w.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(w.join("noise.txt"), "x").unwrap();
                if i % 16 == 0 {
                    std::fs::write(out.join(format!("docs/canary-{i}.txt")), "x").unwrap();
                }
                i += 1;
            }
        })
    };
    let mut seen = Vec::new();
    for i in 0..rounds {
        let dir = format!("project/w/d{i}");
        let r = call(
            &b,
            "s",
            "files/create",
            json!({"path": dir, "type": "directory"}),
        )
        .await;
        ok(&r);
        let r = call(&b, "s", "files/delete", json!({"path": dir})).await;
        ok(&r);
        let r = call(
            &b,
            "s",
            "files/rename",
            json!({"oldPath": "project/lnk", "newPath": dir}),
        )
        .await;
        ok(&r);
        std::fs::write(out.join(format!("docs/canary-round-{i}.txt")), "x").unwrap();
        let r = call(
            &b,
            "s",
            "files/rename",
            json!({"oldPath": dir, "newPath": "project/lnk"}),
        )
        .await;
        ok(&r);
        seen.extend(until(&mut rx, Duration::from_millis(1), |_| false).await);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    std::fs::write(w.join("marker.txt"), "x").unwrap();
    seen.extend(expect(&mut rx, &id, "project/w/marker.txt", "created").await);
    assert_nothing_through_links(&seen);
    f.assert_canary_intact();
}

/// Waits for the `unwatched` notification of `id` with reason `moved_out`.
async fn expect_moved_out(rx: &mut Notifications, id: &str, path: &str) -> Vec<Value> {
    let seen = until(rx, EXPECT, |p| {
        p["watchId"] == id && p["event"] == "unwatched"
    })
    .await;
    let last = seen
        .last()
        .unwrap_or_else(|| panic!("watch {id} did not end within {EXPECT:?}; got {seen:?}"));
    assert_eq!(last["reason"], "moved_out", "{last}");
    assert_eq!(last["path"], path, "{last}");
    assert!(
        last["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{last}"
    );
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_watched_directory_renamed_outside_the_root_stops_reporting_and_ends() {
    let f = Fixture::new();
    f.dir("w/sub");
    f.dir("pub");
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project"], "read").await;
    let id = watch(&b, "s", json!({"path": "project/w", "recursive": true})).await;
    let flat = watch(&b, "s", json!({"path": "project/w/sub"})).await;
    let wit = watch(&b, "s", json!({"path": "project/pub"})).await;
    f.file("w/before.txt", "x");
    expect(&mut rx, &id, "project/w/before.txt", "created").await;

    let moved = f.tmp.path().join("moved-out");
    std::fs::rename(f.root.join("w"), &moved).unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let got = until(&mut rx, EXPECT, |p| p["event"] == "unwatched").await;
        let last = got.last().cloned().unwrap_or_else(|| panic!("{got:?}"));
        seen.extend(got);
        assert_eq!(last["reason"], "moved_out", "{last}");
    }
    let ended: Vec<&Value> = seen.iter().filter(|p| p["event"] == "unwatched").collect();
    let mut ids: Vec<&str> = ended
        .iter()
        .map(|p| p["watchId"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![id.as_str(), flat.as_str()];
    want.sort();
    assert_eq!(ids, want, "{ended:?}");

    // Changes in the moved tree are never reported, under any name.
    std::fs::write(moved.join("late.txt"), "x").unwrap();
    std::fs::write(moved.join("sub/late.txt"), "x").unwrap();
    std::fs::write(moved.join("before.txt"), "changed").unwrap();
    std::fs::create_dir(moved.join("newdir")).unwrap();
    std::fs::write(moved.join("newdir/late.txt"), "x").unwrap();
    f.file("pub/sentinel.txt", "x");
    seen.extend(expect(&mut rx, &wit, "project/pub/sentinel.txt", "created").await);
    let after: Vec<&Value> = seen
        .iter()
        .filter(|p| p["event"] != "unwatched" && p["path"] != "project/w/before.txt")
        .filter(|p| p["path"] != "project/pub/sentinel.txt")
        .collect();
    assert!(
        after
            .iter()
            .all(|p| p["path"] == "project/w" && p["event"] == "deleted"),
        "a change after the move was reported: {after:?}"
    );
    // The ended watches are gone.
    for w in [&id, &flat] {
        let r = call(&b, "s", "files/unwatch", json!({"watchId": w})).await;
        assert_eq!(err(&r).0, -32602, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_watched_directory_renamed_into_an_ungranted_sibling_stops_reporting_and_ends() {
    let f = Fixture::new();
    f.dir("w");
    f.dir("secret");
    f.dir("pub");
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project/w", "project/pub"], "read").await;
    let id = watch(&b, "s", json!({"path": "project/w", "recursive": true})).await;
    let wit = watch(&b, "s", json!({"path": "project/pub"})).await;

    std::fs::rename(f.root.join("w"), f.root.join("secret/w")).unwrap();
    let mut seen = expect_moved_out(&mut rx, &id, "project/w").await;
    f.file("secret/w/late.txt", "x");
    f.file("secret/w/deeper/late.txt", "x");
    f.file("pub/sentinel.txt", "x");
    seen.extend(expect(&mut rx, &wit, "project/pub/sentinel.txt", "created").await);
    assert!(
        seen.iter().all(|p| {
            let path = p["path"].as_str().unwrap_or("");
            p["event"] == "unwatched"
                || path == "project/pub/sentinel.txt"
                || (path == "project/w" && p["event"] == "deleted")
        }),
        "a change in the ungranted directory was reported: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_2_watched_file_stops_reporting_when_its_directory_moves_out() {
    let f = Fixture::new();
    f.file("d/f.txt", "one");
    f.dir("pub");
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project"], "read").await;
    let id = watch(&b, "s", json!({"path": "project/d/f.txt"})).await;
    let wit = watch(&b, "s", json!({"path": "project/pub"})).await;
    std::fs::write(f.root.join("d/f.txt"), "two").unwrap();
    expect(&mut rx, &id, "project/d/f.txt", "modified").await;

    let moved = f.tmp.path().join("moved-out");
    std::fs::rename(f.root.join("d"), &moved).unwrap();
    let mut seen = expect_moved_out(&mut rx, &id, "project/d/f.txt").await;
    std::fs::write(moved.join("f.txt"), "three, after the move").unwrap();
    std::fs::remove_file(moved.join("f.txt")).unwrap();
    std::fs::write(moved.join("f.txt"), "four").unwrap();
    f.file("pub/sentinel.txt", "x");
    seen.extend(expect(&mut rx, &wit, "project/pub/sentinel.txt", "created").await);
    assert!(
        seen.iter()
            .all(|p| p["event"] == "unwatched" || p["path"] == "project/pub/sentinel.txt"),
        "the file was reported after its directory moved out: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_12_files_created_right_after_mkdir_are_all_reported_or_overflow_comes() {
    const FILES: usize = 5000;
    let f = Fixture::new();
    let (b, mut rx) = library(&f, "");
    consent(&b, "s", &["project"], "read").await;
    let id = watch(&b, "s", json!({"path": "project", "recursive": true})).await;

    for round in 0..3 {
        let dir = f.root.join(format!("burst{round}"));
        std::fs::create_dir(&dir).unwrap();
        for i in 0..FILES {
            std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
        }
        let marker = format!("marker{round}.txt");
        std::fs::write(f.root.join(&marker), "x").unwrap();
        // The marker's own event may be among what an overflow stands for.
        let marker = format!("project/{marker}");
        let seen = until(&mut rx, EXPECT, |p| {
            is(p, &id, &marker, "created") || (p["watchId"] == id && p["event"] == "overflow")
        })
        .await;
        assert!(
            seen.last().is_some_and(|p| p["watchId"] == id),
            "neither {marker} nor an overflow within {EXPECT:?}: {} notifications",
            seen.len()
        );
        if seen
            .iter()
            .any(|p| p["watchId"] == id && p["event"] == "overflow")
        {
            eprintln!("round {round}: overflow");
            continue;
        }
        let prefix = format!("project/burst{round}/");
        let mut created: Vec<usize> = seen
            .iter()
            .filter(|p| p["event"] == "created")
            .filter_map(|p| p["path"].as_str()?.strip_prefix(&prefix)?.strip_prefix('f'))
            .filter_map(|n| n.strip_suffix(".txt")?.parse().ok())
            .collect();
        created.sort_unstable();
        let n = created.len();
        created.dedup();
        assert_eq!(n, created.len(), "a creation was reported twice");
        let missing: Vec<usize> = (0..FILES)
            .filter(|i| created.binary_search(i).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} of {FILES} files never reported and no overflow: {:?}",
            missing.len(),
            &missing[..missing.len().min(20)]
        );
    }
}
