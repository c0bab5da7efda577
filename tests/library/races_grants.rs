//! Races against the grant checks of uploads and of `parents: true` (issue 14, findings 4 and
//! 5): while requests run, a separate thread keeps exchanging a granted directory with a link
//! to an ungranted directory of the root and with a link out of the root. Nothing may ever be
//! written, or created, in either.
//!
//! Iterations come from `FSBROKER_RACE_ITERS` (default 2000); the outcome depends on what the
//! broker does in each interleaving, never on timing.

use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

fn iterations() -> usize {
    std::env::var("FSBROKER_RACE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// A thread exchanging `project/up` with `project/tosecret` (a link into the ungranted
/// `secret`) and with `project/toout` (a link out of the root), in turn, until stopped.
struct Mover {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
}

impl Mover {
    fn start(root: &Path) -> Mover {
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (s, n) = (stop.clone(), swaps.clone());
        let up = root.join("up");
        let links = [root.join("tosecret"), root.join("toout")];
        let handle = std::thread::spawn(move || {
            use rustix::fs::{CWD, RenameFlags, renameat_with};
            let mut i = 0usize;
            while !s.load(Ordering::Relaxed) {
                // Two exchanges put everything back: the link takes `up`'s name, then returns.
                let link = &links[(i / 2) % 2];
                if renameat_with(CWD, &up, CWD, link, RenameFlags::EXCHANGE).is_ok() {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
                std::thread::yield_now();
            }
        });
        Mover {
            stop,
            swaps,
            handle,
        }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap();
        self.swaps.load(Ordering::Relaxed)
    }
}

/// Every entry beneath `dir`, links not followed.
fn entries(dir: &Path) -> BTreeMap<PathBuf, bool> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let is_dir = std::fs::symlink_metadata(&p).unwrap().is_dir();
            if is_dir {
                stack.push(p.clone());
            }
            out.insert(p, is_dir);
        }
    }
    out
}

/// A directory outside the root, beside the fixture's canary.
fn elsewhere(f: &Fixture) -> PathBuf {
    f.tmp.path().join("elsewhere")
}

/// The fixture: `project/up` (granted for writing), `project/secret` (no grant) with a
/// directory `up` in it, `elsewhere/up` outside the root, and the two links the mover
/// exchanges with `up`.
async fn setup(f: &Fixture) -> Broker {
    f.dir("up");
    f.dir("secret/up");
    std::fs::create_dir_all(elsewhere(f).join("up")).unwrap();
    f.symlink("secret/up", "tosecret");
    f.symlink(elsewhere(f).join("up"), "toout");
    let b = f.broker_with(
        "write",
        "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n",
    );
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/up"], "access": "write"}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "{r}");
    b
}

fn tally(outcomes: &mut BTreeMap<String, usize>, r: &Value) {
    let label = match r.get("error") {
        Some(_) => {
            let (_, code, reason) = err(r);
            format!("{code}/{reason}")
        }
        None => "ok".into(),
    };
    *outcomes.entry(label).or_default() += 1;
}

/// Runs `round` for every iteration while the mover exchanges `up` with the links, tallying
/// the answers; then checks that nothing in `secret` or outside the root changed.
async fn race(what: &str, round: impl AsyncFn(&Broker, usize) -> Vec<Value>) {
    let f = Fixture::new();
    let b = setup(&f).await;
    let secret_before = entries(&f.root.join("secret"));
    let outside_before = entries(&elsewhere(&f));
    let mover = Mover::start(&f.root);
    let mut outcomes = BTreeMap::new();
    for i in 0..iterations() {
        for r in round(&b, i).await {
            tally(&mut outcomes, &r);
        }
    }
    let swaps = mover.stop();
    eprintln!("{what}: {outcomes:?}, {swaps} exchanges");
    assert_eq!(entries(&f.root.join("secret")), secret_before);
    assert_eq!(entries(&elsewhere(&f)), outside_before);
    assert!(swaps > 0);
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_racing_their_directory_exchanged_with_links_never_write_elsewhere() {
    race("uploads", async |b, i| {
        let path = format!("project/up/f{i}.txt");
        let first = call(
            b,
            "s",
            "files/write",
            json!({"path": path, "content": "first ", "final": false}),
        )
        .await;
        if first.get("error").is_some() {
            return vec![first];
        }
        let last = call(
            b,
            "s",
            "files/write",
            json!({"path": path, "content": "last", "offset": 6, "final": true}),
        )
        .await;
        vec![first, last]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_5_create_parents_racing_its_directory_exchanged_with_links_creates_only_there() {
    race("create", async |b, i| {
        let path = format!("project/up/n{i}/m/f.txt");
        vec![
            call(
                b,
                "s",
                "files/create",
                json!({"path": path, "type": "file", "parents": true}),
            )
            .await,
        ]
    })
    .await;
}
