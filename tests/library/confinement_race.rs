//! Confinement suite, part 3: races. A thread keeps swapping a path inside the root between a
//! real entry and a symlink to the outside canary while requests run against it. No response
//! may ever carry the canary (content, or its size through stat/list), and every error must be
//! one of the documented filesystem errors.
//!
//! The swap uses `renameat2(RENAME_EXCHANGE)` (atomic: the path is always one or the other);
//! where the filesystem refuses it, it falls back to two plain renames through a staging name
//! (the path is then briefly missing, which is a documented `FILE_NOT_FOUND`).
//!
//! Rounds: `FSBROKER_RACE_ITERS` (default 2000), and at least 100 swaps must have happened
//! before the main loop stops, so the race is real however the threads are scheduled.

use crate::common::confinement::assert_no_canary;
use crate::common::wire::DOCUMENTED;
use crate::common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const INSIDE: &str = "inside";
const MIN_SWAPS: usize = 100;

fn iterations() -> usize {
    std::env::var("FSBROKER_RACE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// Asserts no canary in the response; returns `Some(error label)` for an error, after checking
/// that it is documented, or `None` for a success.
fn check(r: &Value) -> Option<String> {
    assert_no_canary(r);
    let e = r.get("error")?;
    let (code, data_code, reason) = err(r);
    assert!(
        DOCUMENTED.contains(&(code, data_code.as_str())),
        "undocumented error: {e}"
    );
    Some(format!("{data_code}/{reason}"))
}

/// Swaps `a` and `b` (one of them a symlink), atomically where the filesystem allows it.
fn swap(a: &Path, b: &Path, staging: &Path) {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    if renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok() {
        return;
    }
    std::fs::rename(a, staging).expect("rename to staging");
    std::fs::rename(b, a).expect("rename into place");
    std::fs::rename(staging, b).expect("rename back");
}

/// A thread running `swap(a, b)` until stopped, and the outcomes of the requests sent
/// meanwhile, each counted with its first response as a sample for the report.
struct Race {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
    outcomes: BTreeMap<String, (usize, Value)>,
    round: usize,
}

impl Race {
    fn start(a: PathBuf, b: PathBuf, staging: PathBuf) -> Race {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let (s, c) = (stop.clone(), swaps.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                swap(&a, &b, &staging);
                c.fetch_add(1, Ordering::Relaxed);
            }
        });
        Race {
            stop,
            swaps,
            handle,
            outcomes: BTreeMap::new(),
            round: 0,
        }
    }

    /// Starts the next round while rounds or swaps are still short (and the swapper runs).
    fn next_round(&mut self) -> bool {
        let more = (self.round < iterations() || self.swaps.load(Ordering::Relaxed) < MIN_SWAPS)
            && !self.handle.is_finished();
        if more {
            self.round += 1;
        }
        more
    }

    /// Counts `r` under its error label (after [`check`]), or for a success under the label
    /// `on_ok` returns after checking it.
    fn record(&mut self, r: &Value, on_ok: impl FnOnce() -> String) {
        let label = check(r).unwrap_or_else(on_ok);
        self.outcomes
            .entry(label)
            .or_insert_with(|| (0, r.clone()))
            .0 += 1;
    }

    /// Stops the swapper, reports the outcomes and checks the canary.
    fn finish(self, f: &Fixture) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("swapper thread");
        let (round, swaps) = (self.round, self.swaps.load(Ordering::Relaxed));
        eprintln!("{round} rounds, {swaps} swaps:");
        for (label, (n, sample)) in &self.outcomes {
            eprintln!("  {n:6} {label}, e.g. {sample}");
        }
        f.assert_canary_intact();
    }
}

// ---------------------------------------------------------------------------------------------
// A middle directory swapped with a symlink to the outside directory
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_swapping_dir_and_outside_symlink_never_leaks() {
    let f = Fixture::new();
    f.file("d/secret.txt", INSIDE);
    f.file("d/inside-marker", "");
    f.symlink(&f.outside, "d_other");
    let b = consented_unthrottled(&f).await;
    let mut race = Race::start(
        f.root.join("d"),
        f.root.join("d_other"),
        f.root.join("d_staging"),
    );
    while race.next_round() {
        let r = call(
            &b,
            "s",
            "files/read",
            json!({"path": "project/d/secret.txt"}),
        )
        .await;
        race.record(&r, || {
            assert_eq!(r["result"]["content"], INSIDE, "{r}");
            "read ok".to_owned()
        });

        let r = call(
            &b,
            "s",
            "files/stat",
            json!({"path": "project/d/secret.txt"}),
        )
        .await;
        race.record(&r, || {
            assert_eq!(
                r["result"]["size"],
                INSIDE.len(),
                "stat reached outside: {r}"
            );
            "stat ok".to_owned()
        });

        let r = call(&b, "s", "files/list", json!({"path": "project/d"})).await;
        race.record(&r, || {
            let entries = r["result"]["entries"].as_array().expect("entries");
            let names: Vec<&str> = entries.iter().filter_map(|e| e["name"].as_str()).collect();
            assert_eq!(
                names,
                ["inside-marker", "secret.txt"],
                "listed outside: {r}"
            );
            assert_eq!(entries[1]["size"], INSIDE.len(), "listed outside: {r}");
            "list ok".to_owned()
        });
    }
    race.finish(&f);
}

// ---------------------------------------------------------------------------------------------
// A final file swapped with a symlink to the outside canary file
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_swapping_file_and_outside_symlink_never_leaks() {
    let f = Fixture::new();
    f.file("f.txt", INSIDE);
    f.symlink(f.outside.join("secret.txt"), "f_other");
    let b = consented_unthrottled(&f).await;
    let mut race = Race::start(
        f.root.join("f.txt"),
        f.root.join("f_other"),
        f.root.join("f_staging"),
    );
    while race.next_round() {
        let r = call(&b, "s", "files/read", json!({"path": "project/f.txt"})).await;
        race.record(&r, || {
            assert_eq!(r["result"]["content"], INSIDE, "{r}");
            "read ok".to_owned()
        });

        let r = call(&b, "s", "files/stat", json!({"path": "project/f.txt"})).await;
        race.record(&r, || {
            // Swapped between resolution and the final lstat, stat may describe the link
            // itself (type `symlink`, its own size): never the target's metadata.
            match r["result"]["type"].as_str() {
                Some("symlink") => "stat ok: the link itself".to_owned(),
                _ => {
                    assert_eq!(r["result"]["type"], "file", "{r}");
                    assert_eq!(
                        r["result"]["size"],
                        INSIDE.len(),
                        "stat reached outside: {r}"
                    );
                    "stat ok".to_owned()
                }
            }
        });
    }
    race.finish(&f);
}
