//! `files/watch` through the real `fsbroker serve` process: each event kind for files and
//! directories, recursive and flat watches, event filters, coalescing, unwatch, watching one
//! file, the broker's own writes and renames, and what is never reported (symlinks leading
//! outside, hidden names, changes outside the root).
//!
//! Every wait is bounded. A "nothing is reported" check waits [`QUIET`] (8x the default
//! coalescing window) and then makes a visible change (a sentinel) and waits for it: events
//! are reported in order, so anything wrongly reported would arrive before the sentinel.
//!
//! No outcome depends on the machine's speed. A file written by another program is two
//! kernel events (its creation, then its content), which a slow machine may split across two
//! coalescing windows; so a file whose notifications a test counts exactly, and every
//! sentinel, is brought in whole by renaming a hidden temporary over its name (one event).
//! Coalescing is checked on the notifications' own timestamps: two notifications of one
//! (path, event) are at least one window apart, however fast the changes came.

use crate::common::wire::is_rfc3339_utc;
use crate::common::*;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;

/// How long an expected notification may take: generous, as it only bounds a wait.
const EXPECT: Duration = Duration::from_secs(60);
/// How long to wait when no notification is expected (8x the default 50 ms window).
const QUIET: Duration = Duration::from_millis(400);

/// One `notifications/files/changed`: (watchId, path, event).
type Change = (String, String, String);

/// `fsbroker serve --policy FILE` over a writable `project` root with automatic consent and
/// `extra` TOML appended; write consent on the whole root is granted.
fn start(f: &Fixture, extra: &str) -> Sidecar {
    let text = f.policy_text("write", &format!("[consent]\nmode = \"auto\"\n\n{extra}"));
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, text).unwrap();
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--policy".into(),
        file.into(),
        "--server-id".into(),
        "t".into(),
    ];
    let mut s = Sidecar::spawn(&args, None);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    );
    assert_eq!(ok(&r)["granted"], true, "{r}");
    s
}

/// Starts a watch and returns its id.
fn watch(s: &mut Sidecar, params: Value) -> String {
    let r = s.request("files/watch", params);
    let id = ok(&r)["watchId"].as_str().unwrap_or_else(|| panic!("{r}"));
    id.to_owned()
}

/// Checks a change notification's shape and returns (watchId, path, event).
fn change_of(n: &Value) -> Change {
    assert_eq!(n["method"], "notifications/files/changed", "{n}");
    let p = &n["params"];
    let ts = p["timestamp"].as_str().unwrap_or_else(|| panic!("{n}"));
    assert!(is_rfc3339_utc(ts), "timestamp not RFC 3339 UTC: {n}");
    let field = |k: &str| p[k].as_str().unwrap_or_else(|| panic!("{n}")).to_owned();
    (field("watchId"), field("path"), field("event"))
}

/// The changes that arrive until one matches (`want`) or [`EXPECT`] passes; fails if none
/// matches.
fn until(s: &mut Sidecar, what: &str, want: impl Fn(&Change) -> bool) -> Vec<Change> {
    let seen: Vec<Change> = s
        .notifications_until(EXPECT, |n| want(&change_of(n)))
        .iter()
        .map(change_of)
        .collect();
    assert!(
        seen.last().is_some_and(&want),
        "no notification for {what} within {EXPECT:?}; got {seen:?}; stderr: {}",
        s.stderr()
    );
    seen
}

/// Waits for (id, path, event).
fn expect(s: &mut Sidecar, id: &str, path: &str, event: &str) -> Vec<Change> {
    until(s, &format!("{id} {path} {event}"), |c| {
        (c.0.as_str(), c.1.as_str(), c.2.as_str()) == (id, path, event)
    })
}

/// The changes that arrive within `wait`.
fn during(s: &mut Sidecar, wait: Duration) -> Vec<Change> {
    s.notifications_until(wait, |_| false)
        .iter()
        .map(change_of)
        .collect()
}

/// Brings `rel` (under the root) into being whole, as one kernel event: its content goes to a
/// hidden temporary beside it (hidden names are never reported), which is renamed over it.
/// A plain write is a creation and a modification, which a slow machine may report in two
/// windows, the second after the test has moved on.
fn whole_file(f: &Fixture, rel: &str, content: &str) {
    let target = f.root.join(rel);
    let name = target.file_name().unwrap().to_str().unwrap().to_owned();
    let temp = target.with_file_name(format!(".{name}.incoming"));
    std::fs::write(&temp, content).unwrap();
    std::fs::rename(&temp, &target).unwrap();
}

/// Waits [`QUIET`], then creates `rel` in the root (whole, see [`whole_file`]) and waits until
/// watch `id` reports it: returns everything reported before and with it. Everything changed
/// before it is reported before it, so nothing is left to arrive after it.
fn quiet_then_sentinel(s: &mut Sidecar, f: &Fixture, id: &str, rel: &str) -> Vec<Change> {
    let mut seen = during(s, QUIET);
    whole_file(f, rel, "sentinel");
    seen.extend(expect(s, id, &format!("project/{rel}"), "created"));
    seen
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp.
fn epoch_secs(ts: &str) -> f64 {
    let n = |r: std::ops::Range<usize>| ts[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19);
    let frac: f64 = ts[19..ts.len() - 1].parse().unwrap_or(0.0);
    secs as f64 + frac
}

fn of<'a>(seen: &'a [Change], id: &str) -> Vec<&'a Change> {
    seen.iter().filter(|c| c.0 == id).collect()
}

#[test]
fn file_created_modified_and_deleted_are_reported_in_mount_form_with_utc_timestamps() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project"}));

    let file = f.root.join("a.txt");
    std::fs::write(&file, "one").unwrap();
    let seen = expect(&mut s, &w, "project/a.txt", "created");
    assert!(seen.iter().all(|c| c.1 == "project/a.txt"), "{seen:?}");
    let late = during(&mut s, QUIET);
    assert!(
        late.iter().all(|c| c.2 == "modified"),
        "only the write's own modification may follow: {late:?}"
    );

    std::fs::write(&file, "two, longer").unwrap();
    let seen = expect(&mut s, &w, "project/a.txt", "modified");
    assert!(seen.iter().all(|c| c.2 == "modified"), "{seen:?}");
    during(&mut s, QUIET);

    std::fs::remove_file(&file).unwrap();
    let seen = expect(&mut s, &w, "project/a.txt", "deleted");
    assert!(seen.iter().all(|c| c.2 != "created"), "{seen:?}");
    // Nothing carries a host path.
    let root = f.root.to_str().unwrap().to_owned();
    assert!(seen.iter().all(|c| !c.1.contains(&root)), "{seen:?}");
}

#[test]
fn directory_created_and_deleted_are_reported() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project"}));

    std::fs::create_dir(f.root.join("sub")).unwrap();
    let seen = expect(&mut s, &w, "project/sub", "created");
    assert!(seen.iter().all(|c| c.1 == "project/sub"), "{seen:?}");
    during(&mut s, QUIET);

    std::fs::remove_dir(f.root.join("sub")).unwrap();
    let seen = expect(&mut s, &w, "project/sub", "deleted");
    assert!(seen.iter().all(|c| c.2 != "created"), "{seen:?}");
}

#[test]
fn change_two_levels_down_is_reported_only_by_a_recursive_watch() {
    let f = Fixture::new();
    f.dir("a/b");
    let mut s = start(&f, "");
    let flat = watch(&mut s, json!({"path": "project", "recursive": false}));

    // A flat watch alone: its direct children only.
    f.file("a/b/deep1.txt", "x");
    f.file("a/mid1.txt", "x");
    let seen = quiet_then_sentinel(&mut s, &f, &flat, "top1.txt");
    assert!(
        seen.iter().all(|c| c.1 == "project/top1.txt"),
        "a flat watch reported a deeper change: {seen:?}"
    );

    // A recursive watch of the same directory next to it: it sees the deep changes, the
    // flat one still does not.
    let rec = watch(&mut s, json!({"path": "project", "recursive": true}));
    f.file("a/b/deep2.txt", "x");
    f.file("a/mid2.txt", "x");
    let mut seen = expect(&mut s, &rec, "project/a/b/deep2.txt", "created");
    seen.extend(quiet_then_sentinel(&mut s, &f, &flat, "top2.txt"));
    let rec_paths: Vec<&str> = of(&seen, &rec).iter().map(|c| c.1.as_str()).collect();
    assert!(rec_paths.contains(&"project/a/mid2.txt"), "{seen:?}");
    assert!(
        of(&seen, &flat).iter().all(|c| c.1 == "project/top2.txt"),
        "a flat watch reported a deeper change: {seen:?}"
    );
}

#[test]
fn recursive_watch_reports_changes_in_a_directory_created_after_it() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project", "recursive": true}));
    std::fs::create_dir(f.root.join("fresh")).unwrap();
    expect(&mut s, &w, "project/fresh", "created");
    f.file("fresh/inner.txt", "x");
    expect(&mut s, &w, "project/fresh/inner.txt", "created");
}

#[test]
fn events_filter_deleted_reports_only_deletions() {
    let f = Fixture::new();
    f.file("old.txt", "x");
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project", "events": ["deleted"]}));

    f.file("new.txt", "created");
    f.file("old.txt", "modified");
    std::fs::create_dir(f.root.join("d")).unwrap();
    let mut seen = during(&mut s, QUIET);
    std::fs::remove_file(f.root.join("old.txt")).unwrap();
    seen.extend(expect(&mut s, &w, "project/old.txt", "deleted"));
    seen.extend(during(&mut s, QUIET));
    assert!(
        seen.iter().all(|c| c.2 == "deleted"),
        "a deletions-only watch reported another kind: {seen:?}"
    );
}

/// Waits [`QUIET`], then creates `rel` whole and returns the raw notifications (with their
/// timestamps) that arrive until watch `id` reports it, the sentinel's own left out.
fn raw_until_sentinel(s: &mut Sidecar, f: &Fixture, id: &str, rel: &str) -> Vec<Value> {
    let mut raw = s.notifications_until(QUIET, |_| false);
    whole_file(f, rel, "sentinel");
    let shown = format!("project/{rel}");
    let is_sentinel = |c: &Change| c.0 == id && c.1 == shown && c.2 == "created";
    raw.extend(s.notifications_until(EXPECT, |n| is_sentinel(&change_of(n))));
    assert!(
        raw.last().is_some_and(|n| is_sentinel(&change_of(n))),
        "no notification for the sentinel {rel} within {EXPECT:?}; got {raw:?}"
    );
    raw.retain(|n| !is_sentinel(&change_of(n)));
    raw
}

/// When a notification was emitted, in seconds since the epoch.
fn stamp(n: &Value) -> f64 {
    epoch_secs(n["params"]["timestamp"].as_str().unwrap())
}

/// The least time between two notifications of one (watch, path, event) with a 300 ms window,
/// less a little for clock rounding: a window's notifications are stamped after it closes, and
/// the next window opens only after that, on its first change.
const APART: f64 = 0.29;

#[test]
fn fifty_quick_writes_to_one_file_coalesce_into_few_notifications_without_duplicates() {
    let f = Fixture::new();
    f.file("hot.txt", "start");
    let mut s = start(&f, "[limits]\nwatch_coalesce_ms = 300\n");
    let w = watch(&mut s, json!({"path": "project"}));
    for i in 0..50 {
        std::fs::write(f.root.join("hot.txt"), format!("write {i}")).unwrap();
    }
    // Everything the writes caused is reported before the sentinel made after them.
    let mut raw = raw_until_sentinel(&mut s, &f, &w, "after.txt");
    let seen: Vec<Change> = raw.iter().map(change_of).collect();
    assert!(!seen.is_empty(), "no notification for 50 writes");
    assert!(
        seen.iter()
            .all(|c| c.0 == w && c.1 == "project/hot.txt" && c.2 == "modified"),
        "{seen:?}"
    );
    // However fast the writes came, each window reports the file once: two notifications are
    // a window apart. (Fifty writes within one window, as on any machine not starved for
    // seconds, are one notification; without coalescing they would be stamped together.)
    raw.sort_by(|a, b| stamp(a).total_cmp(&stamp(b)));
    for pair in raw.windows(2) {
        let gap = stamp(&pair[1]) - stamp(&pair[0]);
        assert!(
            gap >= APART,
            "two notifications of one (path, event) {gap:.3} s apart, within one 300 ms \
             window: {seen:?}"
        );
    }
}

#[test]
fn new_file_written_within_one_window_reports_created_and_no_modified() {
    let f = Fixture::new();
    let mut s = start(&f, "[limits]\nwatch_coalesce_ms = 300\n");
    let w = watch(&mut s, json!({"path": "project"}));
    std::fs::write(f.root.join("fresh.txt"), "created then written").unwrap();
    let raw = raw_until_sentinel(&mut s, &f, &w, "after.txt");
    let seen: Vec<Change> = raw.iter().map(change_of).collect();
    assert_eq!(
        seen.first(),
        Some(&(w.clone(), "project/fresh.txt".into(), "created".into())),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .all(|c| c.0 == w && c.1 == "project/fresh.txt" && c.2 != "deleted"),
        "{seen:?}"
    );
    // The creation and the content are two kernel events. In one window (as on any machine
    // that is not starved between two system calls) the modification is dropped; a
    // modification is reported only from a later window, a window after the creation.
    let created = stamp(&raw[0]);
    for n in &raw[1..] {
        let gap = stamp(n) - created;
        assert!(
            gap >= APART,
            "a modification {gap:.3} s after the creation, in its window, must be dropped: \
             {seen:?}"
        );
    }
    assert!(seen.len() <= 2, "{seen:?}");
}

#[test]
fn unwatch_stops_notifications_and_unknown_ids_are_invalid_params() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let w1 = watch(&mut s, json!({"path": "project"}));
    let w2 = watch(&mut s, json!({"path": "project"}));
    assert_ne!(w1, w2);
    // Whole, so that no later window reports its content to the watch about to end.
    whole_file(&f, "one.txt", "1");
    expect(&mut s, &w1, "project/one.txt", "created");
    during(&mut s, QUIET);

    let r = s.request("files/unwatch", json!({"watchId": w1}));
    assert_eq!(ok(&r), &json!({}));
    f.file("two.txt", "2");
    let seen = quiet_then_sentinel(&mut s, &f, &w2, "three.txt");
    assert!(
        of(&seen, &w1).is_empty(),
        "an ended watch reported: {seen:?}"
    );
    assert!(
        of(&seen, &w2).iter().any(|c| c.1 == "project/two.txt"),
        "the other watch must still report: {seen:?}"
    );

    for id in [w1.as_str(), "w999999", ""] {
        let r = s.request("files/unwatch", json!({"watchId": id}));
        assert_eq!(err(&r).0, -32602, "{id}: {r}");
    }
    let r = s.request("files/unwatch", json!({"watchId": w2}));
    assert_eq!(ok(&r), &json!({}));
    f.file("four.txt", "4");
    std::fs::remove_file(f.root.join("one.txt")).unwrap();
    let seen = during(&mut s, QUIET);
    assert!(seen.is_empty(), "no watch is left: {seen:?}");
}

#[test]
fn watch_on_a_single_file_reports_only_that_file_and_survives_atomic_replacement() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    f.file("b.txt", "b");
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project/a.txt"}));
    let only_a = |seen: &[Change]| {
        assert!(
            seen.iter().all(|c| c.0 == w && c.1 == "project/a.txt"),
            "a file watch reported another path: {seen:?}"
        );
    };

    f.file("b.txt", "b2");
    f.file("c.txt", "c");
    std::fs::write(f.root.join("a.txt"), "a2").unwrap();
    let seen = expect(&mut s, &w, "project/a.txt", "modified");
    only_a(&seen);
    only_a(&during(&mut s, QUIET));

    // Replaced by another program the usual way: a new file renamed over it. The new name
    // of a rename is a creation.
    std::fs::write(f.root.join("a.txt.new"), "a3").unwrap();
    std::fs::rename(f.root.join("a.txt.new"), f.root.join("a.txt")).unwrap();
    let seen = expect(&mut s, &w, "project/a.txt", "created");
    only_a(&seen);
    only_a(&during(&mut s, QUIET));

    // The watch follows the name, not the old inode.
    std::fs::write(f.root.join("a.txt"), "a4").unwrap();
    only_a(&expect(&mut s, &w, "project/a.txt", "modified"));
    only_a(&during(&mut s, QUIET));
    std::fs::remove_file(f.root.join("a.txt")).unwrap();
    only_a(&expect(&mut s, &w, "project/a.txt", "deleted"));
}

#[test]
fn broker_write_over_an_existing_file_reports_exactly_one_modified() {
    let f = Fixture::new();
    f.file("doc.txt", "old");
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project"}));
    let r = s.request(
        "files/write",
        json!({"path": "project/doc.txt", "content": "new content"}),
    );
    assert_eq!(ok(&r)["created"], false, "{r}");
    let mut seen = expect(&mut s, &w, "project/doc.txt", "modified");
    seen.extend(during(&mut s, QUIET));
    assert_eq!(
        seen,
        vec![(w.clone(), "project/doc.txt".into(), "modified".into())],
        "the broker's atomic replace is one modification (its temporary is never shown)"
    );
}

#[test]
fn broker_write_of_a_new_file_reports_exactly_one_created() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project"}));
    let r = s.request(
        "files/write",
        json!({"path": "project/born.txt", "content": "hello"}),
    );
    assert_eq!(ok(&r)["created"], true, "{r}");
    let mut seen = until(&mut s, "project/born.txt", |c| c.1 == "project/born.txt");
    seen.extend(during(&mut s, QUIET));
    assert_eq!(
        seen,
        vec![(w.clone(), "project/born.txt".into(), "created".into())],
        "a file the broker's write brought into being was created, not modified"
    );
}

#[test]
fn renames_are_reported_as_deleted_old_and_created_new() {
    let f = Fixture::new();
    f.file("a.txt", "x");
    let mut s = start(&f, "");
    let w = watch(&mut s, json!({"path": "project"}));

    // By another program.
    std::fs::rename(f.root.join("a.txt"), f.root.join("b.txt")).unwrap();
    let mut seen = until(&mut s, "the rename a -> b", |c| {
        c.1 == "project/b.txt" && c.2 == "created"
    });
    seen.extend(during(&mut s, QUIET));
    let mut kinds: Vec<(&str, &str)> = seen.iter().map(|c| (c.1.as_str(), c.2.as_str())).collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        vec![("project/a.txt", "deleted"), ("project/b.txt", "created")],
        "{seen:?}"
    );

    // Through the broker.
    let r = s.request(
        "files/rename",
        json!({"oldPath": "project/b.txt", "newPath": "project/c.txt"}),
    );
    ok(&r);
    let mut seen = until(&mut s, "the rename b -> c", |c| {
        c.1 == "project/c.txt" && c.2 == "created"
    });
    seen.extend(during(&mut s, QUIET));
    let mut kinds: Vec<(&str, &str)> = seen.iter().map(|c| (c.1.as_str(), c.2.as_str())).collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        vec![("project/b.txt", "deleted"), ("project/c.txt", "created")],
        "{seen:?}"
    );
    assert!(seen.iter().all(|c| c.0 == w));
}

#[test]
fn changes_behind_a_symlink_to_an_outside_directory_are_never_reported() {
    let f = Fixture::new();
    let elsewhere = f.tmp.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("deep")).unwrap();
    std::fs::write(elsewhere.join("old.txt"), "x").unwrap();
    f.symlink(&elsewhere, "link");
    f.symlink("../elsewhere/deep", "rel-link");
    f.dir("real");
    f.symlink("real", "alias");
    let mut s = start(&f, "");
    let rec = watch(&mut s, json!({"path": "project", "recursive": true}));
    let flat = watch(&mut s, json!({"path": "project"}));

    // The symlink itself cannot be watched: it leads outside.
    for p in ["project/link", "project/rel-link", "project/link/deep"] {
        let r = s.request("files/watch", json!({"path": p, "recursive": true}));
        assert_eq!(err(&r).2, "outside_root", "{p}: {r}");
    }

    std::fs::write(elsewhere.join("new.txt"), "x").unwrap();
    std::fs::write(elsewhere.join("old.txt"), "changed").unwrap();
    std::fs::write(elsewhere.join("deep/inner.txt"), "x").unwrap();
    std::fs::create_dir(elsewhere.join("made")).unwrap();
    std::fs::remove_file(elsewhere.join("old.txt")).unwrap();
    // Inside the root, through a symlink to a directory inside: only the real path shows.
    f.file("real/via.txt", "x");
    let mut seen = expect(&mut s, &rec, "project/real/via.txt", "created");
    seen.extend(quiet_then_sentinel(&mut s, &f, &flat, "sentinel.txt"));
    assert!(
        seen.iter().all(|c| !c.1.starts_with("project/link")
            && !c.1.starts_with("project/rel-link")
            && !c.1.starts_with("project/alias")),
        "a change reached through a symlink was reported: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|c| c.1 == "project/real/via.txt" || c.1 == "project/sentinel.txt"),
        "{seen:?}"
    );
}

#[test]
fn hidden_names_below_the_watched_path_are_not_reported() {
    let f = Fixture::new();
    f.dir(".git");
    f.dir("sub");
    f.dir(".cfg");
    let mut s = start(&f, "");
    let rec = watch(&mut s, json!({"path": "project", "recursive": true}));

    f.file(".env", "SECRET=1");
    f.file(".git/config", "x");
    f.file("sub/.hidden", "x");
    f.dir(".cache/deeper");
    f.file(".cache/deeper/blob", "x");
    f.file(".cfg/visible-name.txt", "x");
    std::fs::remove_file(f.root.join(".env")).unwrap();
    let seen = quiet_then_sentinel(&mut s, &f, &rec, "sub/shown.txt");
    assert!(
        seen.iter().all(|c| c.1 == "project/sub/shown.txt"),
        "a hidden name was reported: {seen:?}"
    );

    // A hidden directory watched itself reports its children: only names below the watched
    // path are filtered.
    let hidden = watch(&mut s, json!({"path": "project/.cfg"}));
    f.file(".cfg/settings.json", "{}");
    let seen = expect(&mut s, &hidden, "project/.cfg/settings.json", "created");
    assert!(of(&seen, &rec).is_empty(), "{seen:?}");
}

#[test]
fn changes_outside_the_root_and_in_its_prefix_sibling_are_not_reported() {
    let f = Fixture::new();
    let mut s = start(&f, "");
    let rec = watch(&mut s, json!({"path": "project", "recursive": true}));

    for dir in [&f.sibling, &f.outside, &f.tmp.path().to_path_buf()] {
        let p = dir.join("stray.txt");
        std::fs::write(&p, "x").unwrap();
        std::fs::write(&p, "y").unwrap();
        std::fs::remove_file(&p).unwrap();
    }
    std::fs::write(f.outside.join("secret.txt"), SECRET).unwrap();
    let seen = quiet_then_sentinel(&mut s, &f, &rec, "inside.txt");
    assert!(
        seen.iter().all(|c| c.1 == "project/inside.txt"),
        "a change outside the root was reported: {seen:?}"
    );
    f.assert_canary_intact();
}
