//! What resolving a path costs grows with the path, not with its square (issue 14, finding 9,
//! and the review after it): one `files/stat` through a chain of links, each leading a
//! thousand levels further down, once walked again from the root for every `..` and then
//! copied its whole real path at every step. Cost is measured in bytes allocated, which does
//! not depend on how fast the machine is: doubling the walk must not quadruple them.
//!
//! This file runs as its own process: the counting allocator is global.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
#[allow(dead_code)] // this file uses a few of the shared helpers
mod common;
use common::*;
use rustix::fs::{Mode, OFlags};
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Levels between two links of a chain.
const LEVELS: usize = 400;

/// Under `top`, `hops` stretches of `LEVELS` directories named `a`; at the top of each
/// stretch a link `n` leads to the next stretch's `n` (`a/a/.../a/n`), and the last one to
/// `end.txt`. Resolving `top/n` walks `hops * LEVELS` directories.
fn chain(top: &std::path::Path, hops: usize) {
    std::fs::create_dir(top).unwrap();
    let down = "a/".repeat(LEVELS);
    let mut cur =
        rustix::fs::open(top, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
    for hop in 0..hops {
        let target = if hop + 1 == hops {
            format!("{down}end.txt")
        } else {
            format!("{down}n")
        };
        rustix::fs::symlinkat(target.as_str(), &cur, "n").unwrap();
        for _ in 0..LEVELS {
            rustix::fs::mkdirat(&cur, "a", Mode::from_raw_mode(0o755)).unwrap();
            cur = rustix::fs::openat(
                &cur,
                "a",
                OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap();
        }
    }
    let f = rustix::fs::openat(
        &cur,
        "end.txt",
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::io::write(&f, b"end").unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn finding_9_resolving_a_path_costs_linear_allocation_in_its_length() {
    let f = Fixture::new();
    chain(&f.root.join("short"), 4);
    chain(&f.root.join("long"), 8);
    let b = f.broker_with(
        "read",
        "[limits]\ntimeout_ms = 600000\nrequests_per_second = 100000\nburst = 100000\n",
    );
    consent_all(&b, "s").await;
    let mut cost = Vec::new();
    for path in ["project/short/n", "project/long/n"] {
        // Once to warm up whatever is allocated once per process, then measured.
        ok(&call(&b, "s", "files/stat", json!({"path": path})).await);
        let region = Region::new(GLOBAL);
        let r = call(&b, "s", "files/stat", json!({"path": path})).await;
        let bytes = region.change().bytes_allocated;
        assert_eq!(ok(&r)["size"], 3, "{r}");
        cost.push(bytes);
    }
    // Twice the walk: about twice the bytes. The square would be four times.
    assert!(
        cost[1] < cost[0] * 3,
        "bytes allocated: {} for {} levels, {} for {}",
        cost[0],
        4 * LEVELS,
        cost[1],
        8 * LEVELS
    );
}
