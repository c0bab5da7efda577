//! A server against the recovery store, through the real binary: naming the store in a path
//! (its absolute path, a `file://` URI, `..`, a link in the root) is `outside_root` and
//! touches nothing there; a policy with a root that holds the store or lies within it does
//! not start; a directory swapped for a link out of the root while the server deletes it
//! (kept by a move, or by a copy from a tmpfs root) never lets anything outside be moved,
//! deleted or copied into the store; and a server that
//! fills the store cannot push out another session's recent change, while with
//! `min_keep_hours = 0` older changes are pruned for space, and the broker warns.

use crate::common::fs::{present, temporaries};
use crate::common::*;
use crate::recovery::*;
use crate::recovery_other_fs::Tmpfs;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Lifts the violation limit: these servers are refused on purpose, request after request.
const UNSUSPENDED: &str = "\n[limits]\nmax_violations_per_minute = 1000000\n";

const CANARY: &[u8] = b"CANARY: the user's file outside every root";
const INSIDE: &[u8] = b"inside the root";

#[test]
fn a_server_naming_the_store_in_any_spelling_is_outside_root_and_the_store_is_untouched() {
    let r = Rec::with(None, Some(UNSUSPENDED));
    std::fs::write(r.root.join("a.txt"), "a").unwrap();
    let mut s = r.serve("agent");
    write(&mut s, "w/a.txt", b"changed");
    let store = r.store();
    let obj = id(&r.changes()[0]).to_owned();
    // The user's own link in the root, to the store.
    std::os::unix::fs::symlink(&store, r.root.join("to-store")).unwrap();
    let before = snapshot(&store);
    let (st, root) = (store.display().to_string(), r.root.display().to_string());
    let up = "../state/fsbroker/recovery";
    let paths = [
        format!("{st}/journal.jsonl"),
        format!("{st}/objects/{obj}"),
        format!("file://{st}/journal.jsonl"),
        format!("file://localhost{st}/objects/{obj}"),
        format!("w/{up}/journal.jsonl"),
        format!("w/./sub/../../{up}/objects/{obj}"),
        format!("{root}/{up}/journal.jsonl"),
        format!("file://{root}/{up}/objects/{obj}"),
        "w/to-store/journal.jsonl".to_owned(),
        format!("w/to-store/objects/{obj}"),
        "w/to-store/objects".to_owned(),
    ];
    for p in &paths {
        let requests = [
            ("files/read", json!({"path": p})),
            ("files/stat", json!({"path": p})),
            ("files/list", json!({"path": p})),
            ("files/write", json!({"path": p, "content": "x"})),
            (
                "files/write",
                json!({"path": p, "content": "x", "final": false}),
            ),
            (
                "files/create",
                json!({"path": format!("{p}/new"), "type": "file"}),
            ),
            ("files/delete", json!({"path": p, "recursive": true})),
            ("files/rename", json!({"oldPath": p, "newPath": "w/stolen"})),
            (
                "files/rename",
                json!({"oldPath": "w/a.txt", "newPath": p, "overwrite": true}),
            ),
        ];
        for (method, params) in requests {
            let resp = s.request(method, params);
            let (code, data, why) = err(&resp);
            assert_eq!(
                (code, data.as_str(), why.as_str()),
                (-31002, "PERMISSION_DENIED", "outside_root"),
                "{method} {p}: {resp}"
            );
        }
    }
    s.finish();
    assert_same_tree(
        &snapshot(&store),
        &before,
        "nothing in the store read into or changed",
    );
    assert_eq!(std::fs::read(r.root.join("a.txt")).unwrap(), b"changed");
    assert!(!present(&r.root.join("stolen")));
    assert_eq!(r.changes().len(), 1, "no change journaled");
}

#[test]
fn a_root_that_holds_the_store_or_lies_within_it_is_refused_at_start() {
    let r = Rec::new();
    let store = r.state.join("fsbroker/recovery");
    std::fs::create_dir_all(store.join("objects/inner")).unwrap();
    std::os::unix::fs::symlink(&r.state, r.tmp.path().join("state-link")).unwrap();
    let serve = |root: &Path, writable: bool, policy: Option<&Path>| {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(["serve", "--consent", "auto", "--no-audit"])
            .arg(format!("--root=m={}", root.display()))
            .env("XDG_STATE_HOME", &r.state);
        if writable {
            cmd.arg("--writable");
        }
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        run_within(cmd, WAIT)
    };
    let refused = |ran: &Ran, what: &str| {
        assert!(
            ran.status.is_some() && !ran.success(),
            "{what} started\n{}",
            ran.log()
        );
        let e = String::from_utf8_lossy(&ran.stderr);
        assert!(e.contains("recovery store"), "{what}: {e}");
    };
    for (root, what) in [
        (r.tmp.path().to_owned(), "a root above the state directory"),
        (r.state.clone(), "the state directory"),
        (store.clone(), "the store itself"),
        (store.join("objects"), "the store's objects"),
        (store.join("objects/inner"), "a directory within the store"),
        (
            r.tmp.path().join("state-link"),
            "a link to the state directory",
        ),
    ] {
        refused(&serve(&root, true, None), what);
        refused(&serve(&root, false, None), what);
    }
    // The store a policy names, inside the root given with it.
    let inside = r.root.join("kept");
    let policy = r.tmp.path().join("in-root.toml");
    std::fs::write(&policy, format!("[recovery]\ndir = {:?}\n", inside)).unwrap();
    refused(
        &serve(&r.root, true, Some(&policy)),
        "recovery.dir inside the root",
    );
    // The control: the same root with the store elsewhere starts, and serves.
    let ran = serve(&r.root, true, None);
    assert!(ran.success(), "{}", ran.log());
}

/// Swaps `root/p` and `root/p/d` for links out of the root and back, over and over, and puts
/// back `p/d` (with a file of the root's content) when the server deleted it, until `stop`.
fn swapper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (root, outside) = (root.to_owned(), outside.to_owned());
    std::thread::spawn(move || {
        let (p, p_real) = (root.join("p"), root.join("p.real"));
        let (d, d_real) = (p.join("d"), p.join("d.real"));
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            // Only this thread makes `p` a link, and never leaves it one: `p` is real here.
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) && !present(&d) {
                let _ = std::fs::create_dir(&d);
                let _ = std::fs::write(d.join("f"), INSIDE);
            }
            let _ = std::fs::rename(&d, &d_real);
            let _ = std::os::unix::fs::symlink(outside.join("d"), &d);
            let _ = std::fs::remove_file(&d);
            let _ = std::fs::rename(&d_real, &d);
            let _ = std::fs::rename(&p, &p_real);
            let _ = std::os::unix::fs::symlink(&outside, &p);
            let _ = std::fs::remove_file(&p);
            let _ = std::fs::rename(&p_real, &p);
            swaps += 1;
        }
        swaps
    })
}

#[test]
fn a_directory_swapped_for_a_link_out_of_the_root_during_its_delete_moves_nothing_outside() {
    swap_race(&Rec::with(None, Some(UNSUSPENDED)), &[]);
}

#[test]
fn across_filesystems_a_swap_during_a_delete_copies_and_removes_nothing_outside() {
    let r = Rec::with(None, Some(UNSUSPENDED));
    let Some(_fs) = Tmpfs::mount(&r.root, "swap_race_copy") else {
        return;
    };
    // The copy of a directory swapped for a link between its look and its opening fails:
    // the delete is refused, nothing removed.
    swap_race(
        &r,
        &[
            "IO_ERROR  the previous content could not be kept for recovery, so nothing was changed",
            // Copied as what it was, then found to be the other when removed: refused.
            "IS_A_DIRECTORY  is a directory",
            "NOT_A_DIRECTORY  not a directory",
        ],
    );
}

/// A server's recursive deletes of `w/p/d` racing [`swapper`]: whatever each answers (one of
/// the usual ones, or `also`), nothing outside the root is changed, and the store holds no
/// content from outside.
fn swap_race(r: &Rec, also: &[&str]) {
    let outside = r.tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("d")).unwrap();
    std::fs::write(outside.join("canary.txt"), CANARY).unwrap();
    std::fs::write(outside.join("d/canary.txt"), CANARY).unwrap();
    let outside_before = snapshot(&outside);
    let top_before = crate::common::fs::names(r.tmp.path());
    std::fs::create_dir_all(r.root.join("p/d")).unwrap();
    std::fs::write(r.root.join("p/d/f"), INSIDE).unwrap();
    let mut s = r.serve("agent");
    let delete = json!({"path": "w/p/d", "recursive": true});
    ok(&s.request("files/delete", delete.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let thread = swapper(&r.root, &outside, stop.clone());
    let mut answers = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..400 {
        let resp = s.request("files/delete", delete.clone());
        let answer = match resp.get("error") {
            None => "ok".to_owned(),
            Some(_) => {
                let (_, data, why) = err(&resp);
                format!(
                    "{data} {why} {}",
                    resp["error"]["message"].as_str().unwrap()
                )
            }
        };
        // A link swapped back for a directory between the resolver's lstat and its readlink
        // is an I/O error (EINVAL): refused, nothing done.
        let known = [
            "ok",
            "FILE_NOT_FOUND  no such file or directory",
            "PERMISSION_DENIED outside_root path is outside every root",
            "IO_ERROR  i/o error",
        ];
        if !known.contains(&answer.as_str()) && !also.contains(&answer.as_str()) {
            stop.store(true, Ordering::Relaxed);
            panic!("unexpected answer to a delete: {resp}\n{}", s.stderr());
        }
        *answers.entry(answer).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = thread.join().unwrap();
    println!("{swaps} swaps; answers: {answers:?}");
    // The swaps are over (each round puts `p` back real): a delete after them still deletes.
    let p = r.root.join("p");
    assert!(
        std::fs::symlink_metadata(&p).unwrap().is_dir(),
        "p is left a link"
    );
    if present(&p.join("d.real")) {
        std::fs::rename(p.join("d.real"), p.join("d")).unwrap();
    }
    std::fs::create_dir_all(r.root.join("p/d")).unwrap();
    std::fs::write(r.root.join("p/d/f"), INSIDE).unwrap();
    ok(&s.request("files/delete", delete));
    s.finish();
    assert_same_tree(
        &snapshot(&outside),
        &outside_before,
        "nothing outside the root changed",
    );
    assert_eq!(crate::common::fs::names(r.tmp.path()), top_before);
    // Whatever the store holds came from the root: links are kept as links, never followed.
    let objects = r.store().join("objects");
    let held = snapshot(&objects);
    for (path, (kind, _, content)) in &held {
        // (The swapper may not have written all of `f` yet when it was kept.)
        if *kind == 'f' {
            let from_root = INSIDE.starts_with(content);
            assert!(
                from_root,
                "{path} in the store holds {:?}",
                String::from_utf8_lossy(content)
            );
        }
    }
    assert!(
        held.values().filter(|e| e.0 == 'f').count() >= 2,
        "{held:?}"
    );
}

/// `count` files `NAME0..` of `size` bytes each in the root.
fn files(root: &Path, name: &str, count: usize, size: usize) {
    for i in 0..count {
        std::fs::write(root.join(format!("{name}{i}")), bytes(i as u64, size)).unwrap();
    }
}

/// A victim's session that creates a file and overwrites `v.txt` (10 KiB): answers the
/// overwrite's change.
fn victim(r: &Rec) -> Value {
    std::fs::write(r.root.join("v.txt"), bytes(99, 10 * 1024)).unwrap();
    let mut s = r.serve("victim");
    ok(&s.request(
        "files/create",
        json!({"path": "w/v-new.txt", "type": "file"}),
    ));
    write(&mut s, "w/v.txt", b"the victim's new content");
    s.finish();
    change(&r.changes(), "files/write", "w/v.txt").clone()
}

#[test]
fn a_server_filling_the_store_cannot_push_out_another_sessions_recent_change() {
    let r = Rec::with(None, Some("max_bytes = 65536\nmin_keep_hours = 1"));
    let v = victim(&r);
    files(&r.root, "a", 6, 16 * 1024);
    std::fs::create_dir(r.root.join("big")).unwrap();
    files(&r.root.join("big"), "b", 4, 10 * 1024);
    let big_before = snapshot(&r.root.join("big"));
    let mut s = r.serve("attacker");
    let mut refused = 0;
    for i in 0..6 {
        let path = format!("w/a{i}");
        let resp = s.request("files/write", json!({"path": path, "content": "attacker"}));
        if resp.get("error").is_none() {
            assert_eq!(refused, 0, "a write after a refusal succeeded: {resp}");
            continue;
        }
        refused += 1;
        assert_error(&resp, -31007, "QUOTA_EXCEEDED", "not_recoverable");
        assert_eq!(resp["error"]["data"]["limit"], 65536);
        let now = std::fs::read(r.root.join(format!("a{i}"))).unwrap();
        assert_eq!(
            now,
            bytes(i as u64, 16 * 1024),
            "{path} was changed though refused"
        );
    }
    assert!((1..6).contains(&refused), "{refused} of 6 writes refused");
    let resp = s.request("files/delete", json!({"path": "w/big", "recursive": true}));
    assert_error(&resp, -31007, "QUOTA_EXCEEDED", "not_recoverable");
    assert_same_tree(
        &snapshot(&r.root.join("big")),
        &big_before,
        "a refused delete is put back",
    );
    assert_eq!(temporaries(&r.root), Vec::<String>::new());
    s.finish();
    let changes = r.changes();
    let kept = changes.iter().find(|c| c["id"] == v["id"]).unwrap();
    assert!(kept.get("pruned").is_none(), "{kept}");
    r.restore(id(&v));
    assert_eq!(
        std::fs::read(r.root.join("v.txt")).unwrap(),
        bytes(99, 10 * 1024)
    );
}

#[test]
fn with_min_keep_hours_0_older_changes_are_pruned_for_space_and_the_broker_warns() {
    let r = Rec::with(None, Some("max_bytes = 65536\nmin_keep_hours = 0"));
    let v = victim(&r);
    // The attacker's changes come in a later millisecond than the victim's: younger.
    let at = v["at"].as_u64().unwrap();
    while (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64)
        <= at
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Five files of 12 KiB: with the victim's 10 KiB, the fifth fits only once the victim's
    // change is pruned, and then without pruning any of the attacker's own.
    files(&r.root, "a", 5, 12 * 1024);
    let mut s = r.serve("attacker");
    for i in 0..5 {
        write(&mut s, &format!("w/a{i}"), b"attacker");
    }
    s.finish();
    assert!(
        s.stderr().contains("pruned early"),
        "no warning: {}",
        s.stderr()
    );
    let changes = r.changes();
    let pruned = changes.iter().find(|c| c["id"] == v["id"]).unwrap();
    assert_eq!(pruned["pruned"], "space", "{pruned}");
    let ran = r.run(&["restore", id(&v)]);
    assert_eq!(ran.status.unwrap().code(), Some(1), "{}", ran.log());
    assert!(
        String::from_utf8_lossy(&ran.stderr).contains("pruned"),
        "{}",
        ran.log()
    );
    let attacks: Vec<&Value> = changes
        .iter()
        .filter(|c| c["server"] == "attacker")
        .collect();
    assert_eq!(attacks.len(), 5);
    assert!(
        attacks.iter().all(|c| c.get("pruned").is_none()),
        "{attacks:#?}"
    );
    let held: u64 = snapshot(&r.store().join("objects"))
        .values()
        .map(|e| e.2.len() as u64)
        .sum();
    assert!(held <= 65536, "the store holds {held} bytes");
    r.restore(id(attacks[0]));
    assert_eq!(
        std::fs::read(r.root.join("a0")).unwrap(),
        bytes(0, 12 * 1024)
    );
}
