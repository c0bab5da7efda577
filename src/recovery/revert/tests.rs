//! Restores against races, a full store, another filesystem and a root moved for a link.

use super::super::keep::{Origin, fingerprint};
use super::super::place::{Place, Terms};
use super::RecoveryStore;
use crate::policy::RecoveryPolicy;
use std::time::{Duration, Instant};

/// Two restores of one change at once: exactly one puts it back, and the content stays
/// at its path (the second once moved it out again, and failed).
#[test]
fn two_restores_of_one_change_at_once_put_it_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let store =
        RecoveryStore::open_at(&dir.path().join("store"), RecoveryPolicy::default()).unwrap();
    let handle = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
    for round in 0..40 {
        // An overwrite as `files/write` makes it: the old file kept, then replaced.
        std::fs::write(root.join("a.txt"), "old").unwrap();
        let meta = handle.symlink_metadata("a.txt").unwrap();
        let deadline = crate::deadline::Deadline::at(Instant::now() + Duration::from_secs(60));
        let at = Place {
            parent: &handle,
            name: "a.txt",
        };
        let keep = store
            .keep_replaced(at, &meta, &Terms::now(&store, None, deadline))
            .unwrap();
        std::fs::write(root.join("a.new"), "new").unwrap();
        std::fs::rename(root.join("a.new"), root.join("a.txt")).unwrap();
        let after = fingerprint(&handle.symlink_metadata("a.txt").unwrap());
        let origin = Origin::server(
            "s",
            "s@1#0",
            "files/write",
            "demo/a.txt".into(),
            root.clone(),
        );
        store.record(origin, keep, None, Some(after));
        let id = store
            .history(Some("s"), None)
            .unwrap()
            .last()
            .unwrap()
            .id
            .clone();
        let (one, two) = std::thread::scope(|s| {
            let one = s.spawn(|| store.restore(&id, None));
            let two = s.spawn(|| store.restore(&id, None));
            (one.join().unwrap(), two.join().unwrap())
        });
        assert!(
            one.is_ok() != two.is_ok(),
            "round {round}: {one:?} and {two:?}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).ok().as_deref(),
            Some("old"),
            "round {round}: {one:?} and {two:?}"
        );
    }
}

fn overwrite(store: &RecoveryStore, root: &std::path::Path, name: &str, new: &[u8]) -> String {
    let handle = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority()).unwrap();
    let meta = handle.symlink_metadata(name).unwrap();
    let deadline = crate::deadline::Deadline::at(Instant::now() + Duration::from_secs(60));
    let at = Place {
        parent: &handle,
        name,
    };
    let keep = store
        .keep_replaced(at, &meta, &Terms::now(store, None, deadline))
        .unwrap();
    std::fs::write(root.join("new.tmp"), new).unwrap();
    std::fs::rename(root.join("new.tmp"), root.join(name)).unwrap();
    let after = fingerprint(&handle.symlink_metadata(name).unwrap());
    let origin = Origin::server(
        "s",
        "s@1#0",
        "files/write",
        format!("demo/{name}"),
        root.to_owned(),
    );
    let mut change = super::super::keep::change_of(origin, keep, None, Some(after));
    // Two hours ago: old enough to be pruned for room.
    change.at -= 2 * 3600 * 1000;
    store.append(change).unwrap()
}

/// A restore whose displaced content needs room the store has only by pruning the change
/// being restored: the restore used to prune it, then fail, losing both its content and
/// the file at the place (moved into the store).
#[test]
fn a_restore_never_prunes_the_change_it_restores() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let policy = RecoveryPolicy {
        max_bytes: 1_500_000,
        min_keep_hours: 1,
        ..RecoveryPolicy::default()
    };
    let store = RecoveryStore::open_at(&dir.path().join("store"), policy).unwrap();
    std::fs::write(root.join("a.bin"), vec![1u8; 1_000_000]).unwrap();
    let id = overwrite(&store, &root, "a.bin", b"server's");
    // The user's own later version, as large.
    std::fs::write(root.join("a.bin"), vec![2u8; 1_000_000]).unwrap();
    let done = store.restore(&id, None);
    assert!(done.is_ok(), "{done:?}");
    assert_eq!(
        std::fs::read(root.join("a.bin")).unwrap(),
        vec![1u8; 1_000_000]
    );
    let displaced = &done.unwrap().kept[0];
    assert!(store.restore(displaced, None).is_ok());
    assert_eq!(
        std::fs::read(root.join("a.bin")).unwrap(),
        vec![2u8; 1_000_000]
    );
}

/// On a root on another filesystem than the store, what a restore displaces is kept or
/// the restore is refused, past `copy_max_bytes` too, whatever `unkept` says.
#[test]
fn a_restore_keeps_what_it_displaces_past_copy_max_bytes() {
    let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("skipped: no /dev/shm");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(shm.path()).unwrap().dev() == std::fs::metadata(dir.path()).unwrap().dev()
    {
        eprintln!("skipped: /dev/shm is the temporary directory's filesystem");
        return;
    }
    let root = shm.path().to_owned();
    let policy = RecoveryPolicy {
        copy_max_bytes: 100_000,
        ..RecoveryPolicy::default()
    };
    let store = RecoveryStore::open_at(&dir.path().join("store"), policy).unwrap();
    std::fs::write(root.join("r.bin"), vec![1u8; 10_000]).unwrap();
    let id = overwrite(&store, &root, "r.bin", b"server's");
    std::fs::write(root.join("r.bin"), vec![2u8; 200_000]).unwrap();
    let done = store.restore(&id, None);
    assert!(done.is_err(), "{done:?}");
    assert_eq!(
        std::fs::read(root.join("r.bin")).unwrap(),
        vec![2u8; 200_000]
    );
}

/// Undo of a created directory the user has since put files in leaves it, and says so.
#[test]
fn undo_leaves_a_created_directory_that_holds_entries_made_since() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let store =
        RecoveryStore::open_at(&dir.path().join("store"), RecoveryPolicy::default()).unwrap();
    std::fs::create_dir(root.join("made")).unwrap();
    let handle = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
    let after = fingerprint(&handle.symlink_metadata("made").unwrap());
    let origin = Origin::server(
        "s",
        "s@1#0",
        "files/create",
        "demo/made".into(),
        root.clone(),
    );
    store.record(
        origin,
        super::super::keep::Keep::nothing(),
        None,
        Some(after),
    );
    std::fs::write(root.join("made/users-notes.txt"), "mine").unwrap();
    let undone = store.undo("s", None).unwrap();
    assert_eq!(undone.conflicts.len(), 1, "{undone:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("made/users-notes.txt")).unwrap(),
        "mine"
    );
}

/// A root the journal names, swapped for a link since (a server that can write a root
/// holding it): restore refuses to follow it, and nothing outside is touched.
#[test]
fn a_restore_never_follows_a_link_made_in_place_of_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("outer/docs");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let store =
        RecoveryStore::open_at(&dir.path().join("store"), RecoveryPolicy::default()).unwrap();
    std::fs::write(root.join("a.txt"), "old").unwrap();
    let id = overwrite(&store, &root, "a.txt", b"new");
    std::fs::rename(&root, dir.path().join("outer/docs.old")).unwrap();
    std::os::unix::fs::symlink(&outside, &root).unwrap();
    let done = store.restore(&id, None);
    assert!(done.is_err(), "{done:?}");
    assert!(!outside.join("a.txt").exists());
}
