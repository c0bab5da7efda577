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
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
mod common;
use base64::Engine;
use common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const INSIDE: &str = "inside";
const MIN_SWAPS: usize = 100;

/// The filesystem error codes of PROTOCOL.md, with their `data.code`.
const DOCUMENTED: &[(i64, &str)] = &[
    (-31001, "FILE_NOT_FOUND"),
    (-31002, "PERMISSION_DENIED"),
    (-31003, "INVALID_PATH"),
    (-31004, "IO_ERROR"),
    (-31005, "TIMEOUT"),
    (-31006, "CONCURRENCY_CONFLICT"),
    (-31007, "QUOTA_EXCEEDED"),
    (-31008, "ALREADY_EXISTS"),
    (-31009, "NOT_A_DIRECTORY"),
    (-31010, "IS_A_DIRECTORY"),
    (-31011, "DIRECTORY_NOT_EMPTY"),
    (-31012, "RATE_LIMITED"),
];

fn iterations() -> usize {
    std::env::var("FSBROKER_RACE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// A consented broker whose rate limit does not get in the way of the loop.
async fn racing_broker(f: &Fixture) -> Broker {
    let b = f.broker_with(
        "read",
        "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n",
    );
    consent_all(&b, "s").await;
    b
}

/// Asserts no canary in the response; returns `Some(error label)` for an error, after checking
/// that it is documented, or `None` for a success.
fn check(r: &Value) -> Option<String> {
    let text = r.to_string();
    assert!(!text.contains(SECRET), "canary leaked: {text}");
    let b64 = base64::engine::general_purpose::STANDARD.encode(SECRET);
    assert!(!text.contains(&b64), "canary leaked as base64: {text}");
    let e = r.get("error")?;
    let (code, data_code, reason) = err(r);
    assert!(
        DOCUMENTED.contains(&(code, data_code.as_str())),
        "undocumented error: {e}"
    );
    Some(format!("{data_code}/{reason}"))
}

/// Counts an outcome, keeping its first response as a sample for the report.
fn tally(outcomes: &mut BTreeMap<String, (usize, Value)>, label: String, r: &Value) {
    outcomes.entry(label).or_insert_with(|| (0, r.clone())).0 += 1;
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

/// Runs `swap(a, b)` on a thread until `stop`; returns the stop flag, the swap count and the
/// thread.
fn swapper(
    a: PathBuf,
    b: PathBuf,
    staging: PathBuf,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let (s, c) = (stop.clone(), count.clone());
    let handle = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            swap(&a, &b, &staging);
            c.fetch_add(1, Ordering::Relaxed);
        }
    });
    (stop, count, handle)
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
    let b = racing_broker(&f).await;
    let (stop, swaps, handle) = swapper(
        f.root.join("d"),
        f.root.join("d_other"),
        f.root.join("d_staging"),
    );
    let mut outcomes: BTreeMap<String, (usize, Value)> = BTreeMap::new();
    let mut round = 0;
    while (round < iterations() || swaps.load(Ordering::Relaxed) < MIN_SWAPS)
        && !handle.is_finished()
    {
        round += 1;
        let r = call(
            &b,
            "s",
            "files/read",
            json!({"path": "project/d/secret.txt"}),
        )
        .await;
        let label = check(&r).unwrap_or_else(|| {
            assert_eq!(r["result"]["content"], INSIDE, "{r}");
            "read ok".to_owned()
        });
        tally(&mut outcomes, label, &r);

        let r = call(
            &b,
            "s",
            "files/stat",
            json!({"path": "project/d/secret.txt"}),
        )
        .await;
        let label = check(&r).unwrap_or_else(|| {
            assert_eq!(
                r["result"]["size"],
                INSIDE.len(),
                "stat reached outside: {r}"
            );
            "stat ok".to_owned()
        });
        tally(&mut outcomes, label, &r);

        let r = call(&b, "s", "files/list", json!({"path": "project/d"})).await;
        let label = check(&r).unwrap_or_else(|| {
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
        tally(&mut outcomes, label, &r);
    }
    stop.store(true, Ordering::Relaxed);
    handle.join().expect("swapper thread");
    eprintln!("{round} rounds, {} swaps:", swaps.load(Ordering::Relaxed));
    for (label, (n, sample)) in &outcomes {
        eprintln!("  {n:6} {label}, e.g. {sample}");
    }
    f.assert_canary_intact();
}

// ---------------------------------------------------------------------------------------------
// A final file swapped with a symlink to the outside canary file
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_swapping_file_and_outside_symlink_never_leaks() {
    let f = Fixture::new();
    f.file("f.txt", INSIDE);
    f.symlink(f.outside.join("secret.txt"), "f_other");
    let b = racing_broker(&f).await;
    let (stop, swaps, handle) = swapper(
        f.root.join("f.txt"),
        f.root.join("f_other"),
        f.root.join("f_staging"),
    );
    let mut outcomes: BTreeMap<String, (usize, Value)> = BTreeMap::new();
    let mut round = 0;
    while (round < iterations() || swaps.load(Ordering::Relaxed) < MIN_SWAPS)
        && !handle.is_finished()
    {
        round += 1;
        let r = call(&b, "s", "files/read", json!({"path": "project/f.txt"})).await;
        let label = check(&r).unwrap_or_else(|| {
            assert_eq!(r["result"]["content"], INSIDE, "{r}");
            "read ok".to_owned()
        });
        tally(&mut outcomes, label, &r);

        let r = call(&b, "s", "files/stat", json!({"path": "project/f.txt"})).await;
        let label = check(&r).unwrap_or_else(|| {
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
        tally(&mut outcomes, label, &r);
    }
    stop.store(true, Ordering::Relaxed);
    handle.join().expect("swapper thread");
    eprintln!("{round} rounds, {} swaps:", swaps.load(Ordering::Relaxed));
    for (label, (n, sample)) in &outcomes {
        eprintln!("  {n:6} {label}, e.g. {sample}");
    }
    f.assert_canary_intact();
}
