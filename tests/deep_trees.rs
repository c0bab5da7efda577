//! Trees deeper than any call stack (issue 14, finding 8): a server can build chains of
//! directories thousands of levels deep (`files/create` with parents, then `files/rename` to
//! nest them); removing one must neither overflow the stack nor need a descriptor per level.
//!
//! This file runs as its own process because it raises its soft descriptor limit to the hard
//! one, as hosts under containers and Node commonly run: with a descriptor per level, the old
//! recursive removal then ran out of stack before it ran out of descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking
#[allow(dead_code)] // this file uses a few of the shared helpers
mod common;
use common::write::*;
use common::*;
use rustix::fs::{Mode, OFlags};
use serde_json::json;

/// Builds `depth` nested directories named `d` under `top`, with a file in every hundredth,
/// through descriptors (a path that deep is longer than the kernel takes in one call).
fn build_chain(top: &std::path::Path, depth: usize) {
    std::fs::create_dir(top).unwrap();
    let mut cur =
        rustix::fs::open(top, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
    for level in 0..depth {
        rustix::fs::mkdirat(&cur, "d", Mode::from_raw_mode(0o755)).unwrap();
        if level % 100 == 0 {
            let f = rustix::fs::openat(
                &cur,
                "f.txt",
                OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .unwrap();
            drop(f);
        }
        cur = rustix::fs::openat(
            &cur,
            "d",
            OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
    }
}

fn raise_descriptor_limit() {
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        },
    )
    .unwrap();
}

/// Descriptors this process has open now.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_8_a_recursive_delete_of_a_very_deep_tree_neither_crashes_nor_leaks() {
    raise_descriptor_limit();
    let f = Fixture::new();
    let depth = 15_000;
    build_chain(&f.root.join("deep"), depth);
    let b = writable(&f, "[limits]\ntimeout_ms = 600000\n").await;
    let before = open_descriptors();
    let r = call(
        &b,
        "s",
        "files/delete",
        json!({"path": "project/deep", "recursive": true}),
    )
    .await;
    ok(&r);
    assert!(!f.root.join("deep").exists());
    // Nothing stays open afterwards.
    assert!(open_descriptors() <= before + 2, "descriptors leaked");
    f.assert_canary_intact();
    // The tree is kept in the fixture's recovery store now: removed here without recursion,
    // since the temporary directory's own removal (std's remove_dir_all) recurses once a
    // level and overflows the test thread's stack on it.
    let rm = std::process::Command::new("rm")
        .arg("-rf")
        .arg(f.store())
        .status()
        .unwrap();
    assert!(rm.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recursive_delete_removes_wide_trees_and_links_as_links() {
    let f = Fixture::new();
    for i in 0..3000 {
        f.file(&format!("wide/a/f{i}.txt"), "x");
    }
    f.dir("wide/b/c/d");
    f.file("wide/b/c/d/e.txt", "x");
    // A link to outside and a link to a directory inside: removed, never entered.
    f.symlink(&f.outside, "wide/b/out");
    f.dir("keep");
    f.file("keep/k.txt", "kept");
    f.symlink("../../keep", "wide/b/in");
    let b = writable(&f, "").await;
    let r = call(
        &b,
        "s",
        "files/delete",
        json!({"path": "project/wide", "recursive": true}),
    )
    .await;
    ok(&r);
    assert!(!f.root.join("wide").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join("keep/k.txt")).unwrap(),
        "kept"
    );
    f.assert_canary_intact();
}
