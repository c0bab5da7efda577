//! A recursive watch holds a few descriptors whatever the breadth of its tree, and where it
//! cannot watch a directory it says so: never a silent miss (from the review of issue 14's
//! fixes, which found changes lost without an `overflow` under a 1024-descriptor limit).
//!
//! This file runs as its own process: it lowers its own descriptor limit, as GUI and service
//! hosts commonly run with.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
#[allow(dead_code)] // this file uses a few of the shared helpers
mod common;
use common::*;
use mcp_fsbroker::{Broker, Notifications, Policy};
use serde_json::{Value, json};
use std::time::Duration;

/// Long enough for any machine; the test waits for a marker, not for this.
const EXPECT: Duration = Duration::from_secs(60);
const DIRS: usize = 1500;

fn lower_descriptor_limit(to: u64) {
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(to),
            maximum: lim.maximum,
        },
    )
    .unwrap();
}

fn library(f: &Fixture) -> (Broker, Notifications) {
    let text = f.policy_text(
        "write",
        "[consent]\nmode = \"auto\"\n\n[limits]\nrequests_per_second = 1000000\n\
         burst = 1000000\nwatch_queue = 60000\nmax_kernel_watches = 10000\n",
    );
    Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap()
}

/// Change notifications until `done` says so or `EXPECT` passes.
async fn until(rx: &mut Notifications, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + EXPECT;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        let p = m.message["params"].clone();
        drop(m);
        let stop = done(&p);
        out.push(p);
        if stop {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recursive_watch_of_a_wide_tree_under_a_low_descriptor_limit_misses_nothing() {
    let f = Fixture::new();
    for i in 0..DIRS {
        f.dir(&format!("w/d{i:04}"));
    }
    lower_descriptor_limit(256);
    let (b, mut rx) = library(&f);
    consent_all(&b, "s").await;
    let r = call(
        &b,
        "s",
        "files/watch",
        json!({"path": "project/w", "recursive": true}),
    )
    .await;
    // Either the watch is refused outright, or it sees everything (or says it may not have).
    let Some(id) = r["result"]["watchId"].as_str().map(str::to_owned) else {
        let (_, code, _) = err(&r);
        assert!(code == "IO_ERROR" || code == "QUOTA_EXCEEDED", "{r}");
        panic!("a {DIRS}-directory tree could not be watched with 256 descriptors: {r}");
    };
    for i in 0..DIRS {
        std::fs::write(f.root.join(format!("w/d{i:04}/f.txt")), "x").unwrap();
    }
    std::fs::write(f.root.join("w/marker.txt"), "x").unwrap();
    let seen = until(&mut rx, |p| {
        p["watchId"] == id.as_str()
            && (p["path"] == "project/w/marker.txt" || p["event"] == "overflow")
    })
    .await;
    assert!(
        seen.last().is_some_and(|p| p["watchId"] == id.as_str()),
        "neither the marker nor an overflow within {EXPECT:?}"
    );
    if seen.iter().any(|p| p["event"] == "overflow") {
        return;
    }
    let missing: Vec<usize> = (0..DIRS)
        .filter(|i| {
            let path = format!("project/w/d{i:04}/f.txt");
            !seen.iter().any(|p| p["path"] == path.as_str())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {DIRS} files never reported and no overflow",
        missing.len()
    );
}
