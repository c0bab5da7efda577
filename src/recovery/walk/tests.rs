//! Measuring and removing kept trees deeper than any bound on descriptors: every byte counts
//! at any depth, a read-only tree goes whole, and a tree moved mid-walk stops the walk.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Levels of the deep trees here: past the 128 that measuring used to stop at.
const DEPTH: usize = 300;

/// Makes `DEPTH` nested directories `d` under `top`, with `bytes` bytes in a file at the
/// bottom; answers the bottom directory.
fn chain(top: &Path, bytes: usize) -> PathBuf {
    let mut deep = top.to_owned();
    for _ in 0..DEPTH {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f"), vec![7u8; bytes]).unwrap();
    deep
}

fn open(p: &Path) -> Dir {
    Dir::open_ambient_dir(p, cap_std::ambient_authority()).unwrap()
}

/// The file at the bottom of a tree 300 levels deep costs what it holds: measuring used to
/// stop at 128 levels, and the tree cost the same with it and without it.
#[test]
fn a_tree_deeper_than_128_levels_is_measured_whole() {
    let dir = tempfile::tempdir().unwrap();
    let bottom = chain(&dir.path().join("t"), 100_000);
    let d = open(dir.path());
    let with = measure(&d, OsStr::new("t"), u64::MAX, None).unwrap();
    std::fs::remove_file(bottom.join("f")).unwrap();
    let without = measure(&d, OsStr::new("t"), u64::MAX, None).unwrap();
    assert_eq!(
        with - without,
        100_000 + ENTRY_COST,
        "measured {with} bytes with the file, {without} without"
    );
    assert!(without >= (DEPTH as u64 + 1) * ENTRY_COST, "{without}");
}

#[test]
fn measuring_stops_past_its_limit_with_more_than_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    chain(&dir.path().join("t"), 100_000);
    let total = measure(&open(dir.path()), OsStr::new("t"), 50_000, None).unwrap();
    assert!(total > 50_000, "measured {total} bytes");
}

#[test]
fn a_deep_tree_with_read_only_directories_is_removed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let bottom = chain(&dir.path().join("t"), 10);
    // Read-only from level 200 down, as a module cache is.
    let mut p = bottom.clone();
    let mut ro = Vec::new();
    for _ in 0..(DEPTH - 200) {
        ro.push(p.clone());
        p.pop();
    }
    for p in &ro {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    remove(&open(dir.path()), OsStr::new("t")).unwrap();
    assert!(!dir.path().join("t").exists(), "the tree is still there");
}

#[test]
fn a_file_or_a_link_is_removed_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    std::fs::create_dir(dir.path().join("kept")).unwrap();
    std::os::unix::fs::symlink("kept", dir.path().join("l")).unwrap();
    let d = open(dir.path());
    remove(&d, OsStr::new("f")).unwrap();
    remove(&d, OsStr::new("l")).unwrap();
    assert!(!dir.path().join("f").exists() && !dir.path().join("l").exists());
    assert!(dir.path().join("kept").is_dir(), "the link was followed");
}

/// A directory moved elsewhere while the walk is below it: stepping back up finds another
/// parent than the one it came down from, and stops rather than go on there.
#[test]
fn a_tree_moved_while_it_is_walked_stops_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("t/a/b")).unwrap();
    std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
    let mut walk = Cursor::open(&open(dir.path()), OsStr::new("t")).unwrap();
    walk.down(OsStr::new("a")).unwrap();
    walk.down(OsStr::new("b")).unwrap();
    std::fs::rename(dir.path().join("t/a"), dir.path().join("elsewhere/a")).unwrap();
    assert_eq!(walk.up().unwrap().as_deref(), Some(OsStr::new("b")));
    let e = walk.up().unwrap_err();
    assert!(e.to_string().contains("moved"), "{e}");
}
