//! The store's bound holds for trees of any depth (issue 45, finding 2), through the real
//! binary and the broker alone: a server that makes a file 135 levels down (`files/create`
//! with parents, `files/write`) and deletes it again and again is bounded by `max_bytes` as
//! the same file at the top is. Measuring used to stop at 128 levels, so that each delete cost
//! the store only what the first 128 held: three deletes of a 3 MiB file left 9 MiB in a
//! store of 4 MiB. What pruning removes goes from the disk at any depth, read-only too.

use crate::common::*;
use crate::recovery::*;
use crate::sidecar::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The store's bound in these tests.
const MAX: u64 = 4 << 20;
/// The deep file: more than half the bound, so that two cannot both be kept.
const FILE: usize = 3 << 20;
/// Levels of directories above it, past the 128 that measuring used to stop at.
const LEVELS: usize = 135;

/// The tree's path in mount form, and the deep file's.
fn deep_paths() -> (String, String) {
    let dirs = vec!["d"; LEVELS - 1].join("/");
    let top = "w/t".to_owned();
    let file = format!("{top}/{dirs}/big");
    (top, file)
}

/// Makes the deep file through the broker: its directories with `parents`, then a write.
fn make_deep(s: &mut Sidecar, seed: u64) {
    let (_, file) = deep_paths();
    let dir = file.trim_end_matches("/big");
    ok(&s.request(
        "files/create",
        json!({"path": dir, "type": "directory", "parents": true}),
    ));
    write(s, &file, &bytes(seed, FILE));
}

/// Bytes of file content under `top` on disk, at any depth (and whether any name in
/// `top` itself starts with `trash.`: taken by a prune, not yet removed). What goes while it
/// is looked at (the store's thread removing it) is passed over.
fn on_disk(top: &Path) -> (u64, bool) {
    let mut total = 0u64;
    let trash = std::fs::read_dir(top)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("trash."));
    let mut todo = vec![top.to_owned()];
    while let Some(d) = todo.pop() {
        let Ok(listed) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in listed.flatten() {
            let Ok(m) = e.metadata() else {
                continue;
            };
            if m.is_dir() {
                todo.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    (total, trash)
}

#[test]
fn finding_2_a_deep_file_deleted_again_and_again_is_refused_once_the_store_is_full() {
    let r = Rec::with(
        None,
        Some(&format!("max_bytes = {MAX}\nmin_keep_hours = 1")),
    );
    let (top, _) = deep_paths();
    let mut s = r.serve("deep");
    make_deep(&mut s, 1);
    ok(&s.request("files/delete", json!({"path": top, "recursive": true})));
    let mut refused = 0;
    for round in 2..=3 {
        make_deep(&mut s, round);
        let before = snapshot(&r.root.join("t"));
        let resp = s.request("files/delete", json!({"path": top, "recursive": true}));
        if resp.get("error").is_none() {
            continue;
        }
        refused += 1;
        assert_error(&resp, -31007, "QUOTA_EXCEEDED", "not_recoverable");
        assert_same_tree(
            &snapshot(&r.root.join("t")),
            &before,
            "a refused delete is put back",
        );
        // The next round makes the tree anew, so that its write keeps nothing.
        std::fs::remove_dir_all(r.root.join("t")).unwrap();
    }
    s.finish();
    assert_eq!(refused, 2, "deletes past the store's bound were kept");
    let (held, _) = on_disk(&r.store().join("objects"));
    assert!(held <= MAX, "the store holds {held} bytes, past its {MAX}");
}

/// Waits for the clock to pass `at` (milliseconds since the epoch), so that a change made
/// next is younger than the one made at `at`, which `min_keep_hours = 0` then lets go.
fn after(at: u64) {
    while (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64)
        <= at
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Milliseconds since the epoch, now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waits (as a hang guard only) until nothing taken out of the way by a prune is left in
/// `objects`: the store's own thread removes it while the session lives.
fn swept(objects: &Path) {
    let t0 = std::time::Instant::now();
    while on_disk(objects).1 {
        assert!(
            t0.elapsed() < WAIT,
            "pruned content is still in the store: {:?}",
            std::fs::read_dir(objects).unwrap().collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn finding_2_deep_trees_pruned_for_space_leave_the_disk_within_the_bound() {
    let r = Rec::with(
        None,
        Some(&format!("max_bytes = {MAX}\nmin_keep_hours = 0")),
    );
    let (top, file) = deep_paths();
    let mut s = r.serve("deep");
    for round in 1..=3 {
        make_deep(&mut s, round);
        // The server's own process makes the deepest levels read-only, as a module cache
        // is: pruning must still remove them (root ignores the modes; others do not).
        let mut p = r.root.join(file.trim_start_matches("w/"));
        for _ in 0..8 {
            p.pop();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        let at = now_ms();
        ok(&s.request("files/delete", json!({"path": top, "recursive": true})));
        after(at.max(now_ms()));
    }
    let objects = r.store().join("objects");
    swept(&objects);
    s.finish();
    let (held, _) = on_disk(&objects);
    assert!(held <= MAX, "the store holds {held} bytes, past its {MAX}");
    let changes = r.changes();
    let deletes: Vec<_> = changes
        .iter()
        .filter(|c| c["method"] == "files/delete")
        .collect();
    assert_eq!(deletes.len(), 3, "{changes:#?}");
    assert!(
        deletes[..2].iter().all(|c| c["pruned"] == "space"),
        "{deletes:#?}"
    );
    // The last one is whole, and comes back byte for byte.
    r.restore(id(deletes[2]));
    let back = std::fs::read(r.root.join(file.trim_start_matches("w/"))).unwrap();
    assert!(back == bytes(3, FILE), "the restored file differs");
}

/// A tree larger than the whole store, deep or not, is refused before anything is pruned for
/// it: the refusal used to come only after every change past `min_keep_hours` was pruned to
/// make room that could never be enough.
#[test]
fn a_tree_larger_than_the_store_is_refused_without_pruning_older_changes() {
    let r = Rec::with(
        None,
        Some(&format!("max_bytes = {MAX}\nmin_keep_hours = 0")),
    );
    std::fs::write(r.root.join("small.txt"), "the user's notes").unwrap();
    let mut s = r.serve("deep");
    ok(&s.request("files/delete", json!({"path": "w/small.txt"})));
    // The next change comes in a later millisecond, so that the first is older than it.
    after(r.changes()[0]["at"].as_u64().unwrap());
    make_deep(&mut s, 1);
    write(&mut s, "w/t/more", &bytes(2, FILE));
    let (top, _) = deep_paths();
    let resp = s.request("files/delete", json!({"path": top, "recursive": true}));
    assert_error(&resp, -31007, "QUOTA_EXCEEDED", "not_recoverable");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than"),
        "{resp}"
    );
    assert!(
        r.root.join("t/more").exists(),
        "the refused delete moved the tree"
    );
    s.finish();
    let first = r.changes()[0].clone();
    assert!(first.get("pruned").is_none(), "pruned for nothing: {first}");
    r.restore(id(&first));
    assert_eq!(
        std::fs::read_to_string(r.root.join("small.txt")).unwrap(),
        "the user's notes"
    );
}

/// A process that held a descriptor inside a deleted tree makes a deep directory of it
/// unreadable once it is in the store (after it was measured): pruning still removes it
/// from the disk. The broker runs as an unprivileged user (root reads whatever the mode).
#[test]
fn finding_2_a_kept_tree_made_unreadable_after_it_was_kept_is_still_pruned() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let (root, state) = (base.join("w"), base.join("state"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[recovery]\nmax_bytes = {MAX}\nmin_keep_hours = 0\n"),
    )
    .unwrap();
    let copy = base.join("fsbroker");
    std::fs::copy(bin(), &copy).unwrap();
    let mut cmd = if rustix::process::geteuid().is_root() {
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        for p in [&root, &state] {
            std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        }
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&copy);
        cmd
    } else {
        std::process::Command::new(&copy)
    };
    cmd.args(["serve", "--consent", "auto", "--writable", "--no-audit"])
        .args(["--server-id", "deep", "--policy"])
        .arg(&policy)
        .arg(format!("--root=w={}", root.display()))
        .env("XDG_STATE_HOME", &state);
    let mut s = Sidecar::start(cmd);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["w"], "access": "write"}),
    );
    assert_eq!(ok(&r)["granted"], true, "consent refused: {r}");
    let (top, _) = deep_paths();
    make_deep(&mut s, 1);
    // The descriptor is taken before the delete, 131 levels down.
    let mut held = root.join("t");
    for _ in 0..130 {
        held.push("d");
    }
    let held = std::fs::File::open(&held).unwrap();
    let at = now_ms();
    ok(&s.request("files/delete", json!({"path": top, "recursive": true})));
    rustix::fs::fchmod(&held, rustix::fs::Mode::empty()).unwrap();
    drop(held);
    after(at.max(now_ms()));
    // The next delete needs the room: the first tree is pruned, unreadable level and all.
    make_deep(&mut s, 2);
    ok(&s.request("files/delete", json!({"path": top, "recursive": true})));
    let objects = state.join("fsbroker/recovery/objects");
    swept(&objects);
    s.finish();
    let (held, _) = on_disk(&objects);
    assert!(held <= MAX, "the store holds {held} bytes, past its {MAX}");
}
