//! Recovery through the embedding API: what a change destroys is kept and can be put back
//! with [`Broker::recovery`], changes that fail keep and journal nothing, and the store's
//! bounds hold (pruning what is old enough, refusing a change when nothing is). The real
//! binary's `history`, `restore` and `undo` are tested in `tests/serve/recovery.rs`.

use crate::common::*;
use mcp_fsbroker::Broker;
use mcp_fsbroker::recovery::RecoveryStore;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// A writable fixture's broker with consent on the whole root, and its store.
async fn writable(fx: &Fixture, extra: &str) -> Broker {
    let b = fx.broker_with("write", extra);
    consent_all(&b, "agent").await;
    b
}

fn store(b: &Broker) -> &RecoveryStore {
    b.recovery().expect("recovery is on by default")
}

/// The names in the store's `objects/`.
/// Every name in the store's `objects/`.
fn in_objects(fx: &Fixture) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fx.store().join("objects"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The kept objects, by change id. Pruned content is first renamed `trash.…` and then
/// removed by the store's own thread, whenever that thread gets to it: it is no longer an
/// object, and `changes_past_their_age_are_pruned_as_new_ones_come` waits for its removal.
fn objects(fx: &Fixture) -> Vec<String> {
    let mut names = in_objects(fx);
    names.retain(|n| !n.starts_with("trash."));
    names
}

#[tokio::test]
async fn an_overwrite_is_kept_and_a_restore_is_itself_undoable() {
    let fx = Fixture::new();
    let f = fx.file("notes.txt", "the user's words");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let b = writable(&fx, "").await;
    let w =
        json!({"path": "project/notes.txt", "content": "an agent's mistake", "overwrite": true});
    ok(&call(&b, "agent", "files/write", w).await);
    let changes = store(&b).history(None, None).unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let c = &changes[0];
    assert_eq!(
        (c.method.as_str(), c.path.as_str()),
        ("files/write", "project/notes.txt")
    );
    assert_eq!(c.server, "agent");
    assert_eq!(c.kept.as_ref().map(|k| k.how.as_str()), Some("link"));
    assert!(c.etag_before.is_some() && c.etag_after.is_some() && c.etag_before != c.etag_after);
    let place = store(&b).place(c).unwrap();
    assert_eq!(std::fs::read_to_string(&place).unwrap(), "the user's words");

    let r = store(&b).restore(&c.id, None).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "the user's words");
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o640
    );
    // What the restore replaced is kept in turn, and restoring that brings it back.
    assert_eq!(r.kept.len(), 1, "{r:?}");
    store(&b).restore(&r.kept[0], None).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "an agent's mistake");
    // A change is restored once.
    let again = store(&b).restore(&c.id, None).unwrap_err();
    assert!(again.message().contains("already restored"), "{again}");
    fx.assert_canary_intact();
}

#[tokio::test]
async fn a_recursive_delete_is_one_move_and_comes_back_whole() {
    let fx = Fixture::new();
    for i in 0..50 {
        fx.file(&format!("tree/d{}/f{i}.txt", i % 5), format!("content {i}"));
    }
    fx.symlink("../outside/secret.txt", "tree/link");
    let b = writable(&fx, "").await;
    let before = std::fs::metadata(fx.root.join("tree")).unwrap();
    let r = call(
        &b,
        "agent",
        "files/delete",
        json!({"path": "project/tree", "recursive": true}),
    )
    .await;
    ok(&r);
    assert!(!fx.root.join("tree").exists());
    // The whole tree is the one object, the same directory (moved, not copied).
    let kept = objects(&fx);
    assert_eq!(kept.len(), 1);
    let moved = std::fs::symlink_metadata(fx.store().join("objects").join(&kept[0])).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(moved.ino(), before.ino());
    let c = store(&b)
        .history(Some("agent"), None)
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(
        c.kept.as_ref().map(|k| (k.how.as_str(), k.kind.as_str())),
        Some(("move", "directory"))
    );
    store(&b).restore(&c.id, None).unwrap();
    for i in 0..50 {
        let p = fx.root.join(format!("tree/d{}/f{i}.txt", i % 5));
        assert_eq!(std::fs::read_to_string(p).unwrap(), format!("content {i}"));
    }
    // The link came back as a link, never followed.
    let link = fx.root.join("tree/link");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    fx.assert_canary_intact();
}

#[tokio::test]
async fn failed_changes_keep_and_journal_nothing() {
    let fx = Fixture::new();
    fx.file("a.txt", "a");
    fx.file("full/x", "x");
    let b = writable(&fx, "").await;
    // A write whose precondition fails at commit, a delete of a directory that is not
    // empty without `recursive`, a rename onto an existing entry without `overwrite`.
    let r = call(
        &b,
        "agent",
        "files/write",
        json!({"path": "project/a.txt", "content": "b", "ifMatch": "\"nope\""}),
    )
    .await;
    assert_eq!(err(&r).1, "CONCURRENCY_CONFLICT");
    let r = call(&b, "agent", "files/delete", json!({"path": "project/full"})).await;
    assert_eq!(err(&r).1, "DIRECTORY_NOT_EMPTY");
    let r = call(
        &b,
        "agent",
        "files/rename",
        json!({"oldPath": "project/full/x", "newPath": "project/a.txt"}),
    )
    .await;
    assert_eq!(err(&r).1, "ALREADY_EXISTS");
    assert_eq!(objects(&fx), Vec::<String>::new());
    assert!(store(&b).history(None, None).unwrap().is_empty());
    assert_eq!(std::fs::read_to_string(fx.root.join("a.txt")).unwrap(), "a");
    assert!(fx.root.join("full/x").exists());
}

#[tokio::test]
async fn undo_takes_a_session_back_newest_first_and_leaves_what_changed_since() {
    let fx = Fixture::new();
    fx.file("keep.txt", "original");
    fx.file("mine.txt", "original too");
    let b = writable(&fx, "").await;
    let w = |p: &str, c: &str| json!({"path": p, "content": c, "overwrite": true, "create": true});
    ok(&call(&b, "agent", "files/write", w("project/keep.txt", "v2")).await);
    ok(&call(&b, "agent", "files/write", w("project/keep.txt", "v3")).await);
    ok(&call(&b, "agent", "files/write", w("project/mine.txt", "agent's")).await);
    ok(&call(&b, "agent", "files/write", w("project/new.txt", "made")).await);
    // The user edits mine.txt after the agent: undo must not guess over that.
    std::fs::write(fx.root.join("mine.txt"), "the user's later edit").unwrap();
    let undone = store(&b).undo("agent", None).unwrap();
    let order: Vec<&str> = undone.restored.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        order,
        ["project/new.txt", "project/keep.txt", "project/keep.txt"]
    );
    assert_eq!(undone.conflicts.len(), 1, "{undone:?}");
    assert_eq!(undone.conflicts[0].path, "project/mine.txt");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("keep.txt")).unwrap(),
        "original"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("mine.txt")).unwrap(),
        "the user's later edit"
    );
    assert!(!fx.root.join("new.txt").exists());
}

#[tokio::test]
async fn a_full_store_prunes_what_is_old_enough_and_refuses_when_nothing_is() {
    let fx = Fixture::new();
    fx.file("big1", vec![1u8; 40_000]);
    fx.file("big2", vec![2u8; 40_000]);
    // Room for one kept file of 40 KB, not two; nothing is old enough to prune.
    let bounds = |hours: u32| {
        format!(
            "[recovery]\ndir = {:?}\nmax_bytes = 60000\nmin_keep_hours = {hours}\n",
            fx.store()
        )
    };
    let b = writable(&fx, &bounds(24)).await;
    ok(&call(&b, "agent", "files/delete", json!({"path": "project/big1"})).await);
    let r = call(&b, "agent", "files/delete", json!({"path": "project/big2"})).await;
    assert_error(&r, -31007, "QUOTA_EXCEEDED", "not_recoverable");
    assert_eq!(
        std::fs::read(fx.root.join("big2")).unwrap(),
        vec![2u8; 40_000]
    );
    assert_eq!(objects(&fx).len(), 1);
    drop(b);
    // With no protection for young changes, the oldest is pruned to make room.
    let b = writable(&fx, &bounds(0)).await;
    ok(&call(&b, "agent", "files/delete", json!({"path": "project/big2"})).await);
    let changes = store(&b).history(None, None).unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].pruned.as_deref(), Some("space"));
    assert!(changes[1].pruned.is_none());
    assert_eq!(objects(&fx), [changes[1].id.clone()]);
    let gone = store(&b).restore(&changes[0].id, None).unwrap_err();
    assert!(gone.message().contains("pruned"), "{gone}");
}

#[tokio::test]
async fn the_store_is_never_a_root_nor_reachable_by_a_path() {
    let fx = Fixture::new();
    fx.file("a.txt", "a");
    let b = writable(&fx, "").await;
    ok(&call(
        &b,
        "agent",
        "files/write",
        json!({"path": "project/a.txt", "content": "b", "overwrite": true}),
    )
    .await);
    let store_dir = fx.store();
    assert_eq!(
        std::fs::metadata(&store_dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for p in [
        store_dir.join("journal.jsonl").display().to_string(),
        format!("file://{}", store_dir.join("objects").display()),
        "project/../store/journal.jsonl".to_owned(),
    ] {
        let r = call(&b, "agent", "files/read", json!({"path": p})).await;
        assert_eq!(err(&r).1, "PERMISSION_DENIED", "{p}: {r}");
    }
    // A policy whose root holds the store, or lies within it, is refused.
    for (root, dir) in [
        (fx.kept.path().to_owned(), store_dir.clone()),
        (store_dir.join("objects"), store_dir.clone()),
    ] {
        let text =
            format!("[[roots]]\npath = {root:?}\nmount = \"m\"\n[recovery]\ndir = {dir:?}\n");
        let e = try_broker(&text).unwrap_err();
        assert!(e.contains("recovery store"), "{e}");
    }
}

#[tokio::test]
async fn recovery_off_keeps_nothing() {
    let fx = Fixture::new();
    fx.file("a.txt", "a");
    let off = format!("[recovery]\nenabled = false\ndir = {:?}\n", fx.store());
    let b = writable(&fx, &off).await;
    assert!(b.recovery().is_none());
    ok(&call(
        &b,
        "agent",
        "files/delete",
        json!({"path": "project/a.txt"}),
    )
    .await);
    assert!(!fx.root.join("a.txt").exists());
    assert!(!fx.store().exists());
}

#[tokio::test]
async fn changes_past_their_age_are_pruned_as_new_ones_come() {
    let fx = Fixture::new();
    fx.file("a.txt", "a");
    // A change made long ago (1970), whose kept content is still in the store.
    let objects_dir = fx.store().join("objects");
    std::fs::create_dir_all(&objects_dir).unwrap();
    std::fs::write(objects_dir.join("0ld0ld0ld0ld"), "old content").unwrap();
    let line = json!({"id": "0ld0ld0ld0ld", "time": "1970-01-01T00:00:01Z", "at": 1000,
        "server": "agent", "session": "agent@1#0", "method": "files/delete", "path": "project/x",
        "root": fx.root, "kept": {"how": "move", "kind": "file", "bytes": 523},
        "etagBefore": null, "etagAfter": null});
    std::fs::write(fx.store().join("journal.jsonl"), format!("{line}\n")).unwrap();
    let b = writable(&fx, "").await;
    assert_eq!(store(&b).history(None, None).unwrap().len(), 1);
    let w = json!({"path": "project/a.txt", "content": "b", "overwrite": true});
    ok(&call(&b, "agent", "files/write", w).await);
    let left = store(&b).history(None, None).unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].path, "project/a.txt");
    assert!(!objects_dir.join("0ld0ld0ld0ld").exists());
    // Pruned content is removed off the request's path, by a thread of the store's own.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while in_objects(&fx).iter().any(|n| n.starts_with("trash.")) {
        assert!(std::time::Instant::now() < deadline, "pruned content stays");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
