//! Races against the write side and against walks: while requests run, other threads rename a
//! directory the request path walks through, replace a write's target with a symlink to the
//! outside, or exchange a directory with a symlink to the outside (`renameat2(RENAME_EXCHANGE)`)
//! under recursive listing, create-with-parents and recursive delete. Every answer is the
//! right content or a documented error; the outside never changes.
//!
//! (tests/library/confinement_race.rs covers read/list/stat against swapped entries.)
//!
//! Rounds: `FSBROKER_RACE_ITERS` (default 300 per test).

use crate::common;
use crate::common::confinement::assert_no_canary;
use crate::common::wire::DOCUMENTED;
use crate::common::write::writable;
use crate::common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const UNTHROTTLED: &str = "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n";

fn iterations() -> usize {
    std::env::var("FSBROKER_RACE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

/// Counts outcomes by label; errors must be documented and no answer may carry the canary.
#[derive(Default)]
struct Tally(BTreeMap<String, (usize, String)>);

impl Tally {
    /// Records `r`; for a success, `on_ok` checks it and names it.
    fn record(&mut self, r: &Value, on_ok: impl FnOnce(&Value) -> String) {
        assert_no_canary(r);
        let label = if r.get("error").is_some() {
            let (code, dc, reason) = err(r);
            assert!(
                DOCUMENTED.contains(&(code, dc.as_str())),
                "undocumented: {r}"
            );
            format!("{dc}/{reason}")
        } else {
            on_ok(&r["result"])
        };
        self.0.entry(label).or_insert_with(|| (0, r.to_string())).0 += 1;
    }

    fn report(&self, what: &str) {
        eprintln!("{what}:");
        for (l, (n, sample)) in &self.0 {
            eprintln!("  {n:6} {l}, e.g. {sample:.200}");
        }
    }
}

/// A thread running `step` until stopped (or until it returns false), counting its steps.
struct Mover {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
}

impl Mover {
    fn start(mut step: impl FnMut() -> bool + Send + 'static) -> Mover {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let (s, c) = (stop.clone(), count.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) && step() {
                c.fetch_add(1, Ordering::Relaxed);
            }
        });
        Mover {
            stop,
            count,
            handle,
        }
    }

    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("mover thread");
        self.count.load(Ordering::Relaxed)
    }
}

/// Exchanges `a` and `b` atomically.
fn exchange(a: &Path, b: &Path) -> bool {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok()
}

/// Kind and content of everything under `dir` (links not followed).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let v = if m.is_dir() {
                stack.push(p.clone());
                b"<dir>".to_vec()
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(p, v);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_walked_directory_back_and_forth_gives_right_content_or_documented_error() {
    let f = Fixture::new();
    f.file("d1/x", "CONTENT-X");
    let b = writable(&f, UNTHROTTLED).await;
    let (d1, d2) = (f.root.join("d1"), f.root.join("d2"));
    let mover = Mover::start(move || {
        let _ = std::fs::rename(&d1, &d2);
        let _ = std::fs::rename(&d2, &d1);
        true
    });
    let mut t = Tally::default();
    for i in 0..iterations() {
        let r = call(&b, "s", "files/read", json!({"path": "project/d1/x"})).await;
        t.record(&r, |res| {
            assert_eq!(res["content"], "CONTENT-X", "{r}");
            "read ok".into()
        });
        let r = call(&b, "s", "files/stat", json!({"path": "project/d1/x"})).await;
        t.record(&r, |res| {
            assert_eq!(res["size"], 9, "{r}");
            assert_eq!(res["type"], "file", "{r}");
            "stat ok".into()
        });
        let r = call(&b, "s", "files/list", json!({"path": "project/d1"})).await;
        t.record(&r, |res| {
            let names: Vec<&str> = res["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["x"], "{r}");
            "list ok".into()
        });
        let r = call(
            &b,
            "s",
            "files/write",
            json!({"path": "project/d1/x", "content": "CONTENT-X"}),
        )
        .await;
        t.record(&r, |res| {
            assert_eq!(res["path"], "project/d1/x", "{r}");
            "write ok".into()
        });
        if i % 50 == 0 {
            f.assert_canary_intact();
        }
    }
    let moves = mover.finish();
    t.report(&format!("d1 <-> d2 renames ({moves} moves)"));
    f.assert_canary_intact();
    // The directory ended whole under one of its names, holding only x.
    let d = [f.root.join("d1"), f.root.join("d2")]
        .into_iter()
        .find(|d| d.exists())
        .unwrap();
    let names = common::fs::names(&d);
    assert_eq!(names, ["x"], "stray entries: {names:?}");
    assert_eq!(std::fs::read_to_string(d.join("x")).unwrap(), "CONTENT-X");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_writes_racing_a_target_replaced_by_outside_symlink_never_touch_outside() {
    let f = Fixture::new();
    f.file("t.txt", "start");
    let b = writable(&f, UNTHROTTLED).await;
    let (target, staging) = (f.root.join("t.txt"), f.root.join("link-staging"));
    let secret = f.outside.join("secret.txt");
    // Alternates a regular file and the link at the target, so writes meet both.
    let mover = Mover::start(move || {
        let _ = std::fs::remove_file(&staging);
        // create_new: never writes through a link left at the staging name.
        let regular = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)
            .and_then(|mut file| std::io::Write::write_all(&mut file, b"regular"))
            .is_ok()
            && std::fs::rename(&staging, &target).is_ok();
        std::thread::yield_now();
        let link = std::os::unix::fs::symlink(&secret, &staging).is_ok()
            && std::fs::rename(&staging, &target).is_ok();
        std::thread::yield_now();
        regular && link
    });
    let mut t = Tally::default();
    for i in 0..iterations() {
        let content = format!("inside-{i}");
        let r = call(
            &b,
            "s",
            "files/write",
            json!({"path": "project/t.txt", "content": content}),
        )
        .await;
        f.assert_canary_intact();
        t.record(&r, |res| {
            assert_eq!(res["path"], "project/t.txt", "{r}");
            // The result describes the file this write committed, not whatever the name
            // holds after the commit (the racing file, or the link's own size).
            assert_eq!(res["size"], content.len(), "result of another file: {r}");
            "write ok".into()
        });
        f.assert_canary_intact();
    }
    let moves = mover.finish();
    t.report(&format!(
        "target replaced by an outside symlink ({moves} moves)"
    ));
    f.assert_canary_intact();
    let stray: Vec<String> = common::fs::names(&f.root)
        .into_iter()
        .filter(|n| n != "t.txt" && n != "link-staging")
        .collect();
    assert_eq!(stray, Vec::<String>::new(), "stray entries in the root");
}

/// The directory `project/d` (with content) and `project/l` (a link to the trap dir outside)
/// exchanged over and over while `body` runs requests; the trap never changes.
async fn with_exchanged_dir(what: &str, body: impl AsyncFnOnce(&Fixture, &mcp_fsbroker::Broker)) {
    let f = Fixture::new();
    let trap = f.tmp.path().join("trap");
    for p in ["secret.txt", "sub/deep/secret.txt", "sub/secret.txt"] {
        let p = trap.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, SECRET).unwrap();
    }
    let trap_before = snapshot(&trap);
    f.file("d/sub/deep/inside.txt", "in");
    f.file("d/inside.txt", "in");
    f.symlink(&trap, "l");
    let b = writable(&f, UNTHROTTLED).await;
    let (d, l) = (f.root.join("d"), f.root.join("l"));
    let mover = Mover::start(move || exchange(&d, &l));
    body(&f, &b).await;
    let moves = mover.finish();
    eprintln!("{what}: {moves} exchanges");
    assert!(moves > 0, "renameat2(RENAME_EXCHANGE) never succeeded");
    assert_eq!(snapshot(&trap), trap_before, "the outside trap changed");
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_list_racing_dir_exchanged_with_outside_symlink_lists_only_inside() {
    with_exchanged_dir("list", async |f, b| {
        let mut t = Tally::default();
        for _ in 0..iterations() {
            let r = call(
                b,
                "s",
                "files/list",
                json!({"path": "project/d", "recursive": true}),
            )
            .await;
            t.record(&r, |res| {
                for e in res["entries"].as_array().unwrap() {
                    assert_ne!(e["name"], "secret.txt", "listed the outside: {r}");
                    assert_ne!(e["size"], SECRET.len(), "listed the outside: {r}");
                }
                "list ok".into()
            });
        }
        t.report("recursive list");
        f.assert_canary_intact();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_parents_racing_dir_exchanged_with_outside_symlink_creates_only_inside() {
    with_exchanged_dir("create", async |f, b| {
        let mut t = Tally::default();
        for i in 0..iterations() {
            for (p, ty) in [
                (format!("project/d/sub/deep/n{i}/m"), "directory"),
                (format!("project/d/new{i}/f.txt"), "file"),
                (format!("project/d/sub/f{i}.txt"), "file"),
            ] {
                let r = call(
                    b,
                    "s",
                    "files/create",
                    json!({"path": p, "type": ty, "parents": true}),
                )
                .await;
                t.record(&r, |res| {
                    assert_eq!(res["path"], p.as_str(), "{r}");
                    "create ok".into()
                });
            }
        }
        t.report("create with parents");
        f.assert_canary_intact();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_delete_racing_dir_exchanged_with_outside_symlink_deletes_only_inside() {
    with_exchanged_dir("delete", async |f, b| {
        let mut t = Tally::default();
        for _ in 0..iterations() {
            // Recreate the inside content through the broker, then delete it.
            let r = call(
                b,
                "s",
                "files/create",
                json!({"path": "project/d/sub/deep", "type": "directory", "parents": true}),
            )
            .await;
            t.record(&r, |_| "create ok".into());
            let r = call(
                b,
                "s",
                "files/write",
                json!({"path": "project/d/secret.txt", "content": "in"}),
            )
            .await;
            t.record(&r, |_| "write ok".into());
            for (p, recursive) in [
                ("project/d/sub", true),
                ("project/d/secret.txt", false),
                ("project/d/sub/deep", true),
            ] {
                let r = call(
                    b,
                    "s",
                    "files/delete",
                    json!({"path": p, "recursive": recursive}),
                )
                .await;
                t.record(&r, |_| "delete ok".into());
            }
        }
        t.report("recursive delete");
        f.assert_canary_intact();
    })
    .await;
}
