//! Recovery where the root is on another filesystem than the store (a tmpfs mounted over the
//! root for the test): what a change destroys is kept by a copy, restored byte for byte with
//! its modes, and bounded by `recovery.copy_max_bytes`: past it the change proceeds marked
//! not recoverable (`unkept = "proceed"`), or is refused `QUOTA_EXCEEDED` `not_recoverable`
//! with nothing changed (`unkept = "refuse"`).
//!
//! Mounting needs root (`CAP_SYS_ADMIN`): where `mount` fails, each test says why and returns
//! early, the only case in which it checks nothing.

use crate::common::fs::{assert_no_temporaries, mode, present};
use crate::common::*;
use crate::recovery::*;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted over a directory for one test; unmounted when dropped (before the
/// temporary directory holding it is removed: declare it after the [`Rec`]).
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs over `dir`, or says why it cannot and answers `None`.
    pub(crate) fn mount(dir: &Path, test: &str) -> Option<Tmpfs> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=128m,mode=0755", "fsbroker-test"])
            .arg(dir)
            .output();
        let why = match out {
            Ok(o) if o.status.success() => return Some(Tmpfs(dir.to_owned())),
            Ok(o) => format!(
                "mount exited {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => format!("cannot run mount: {e}"),
        };
        println!(
            "{test}: SKIPPED, no tmpfs could be mounted at {dir:?} ({why}); mounting needs root"
        );
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A test's places with its root on a tmpfs of its own, the store on the filesystem of the
/// temporary directory; `None` (said why) where no tmpfs can be mounted.
fn on_tmpfs(recovery: Option<&str>, test: &str) -> Option<(Tmpfs, Rec)> {
    let r = Rec::with(None, recovery);
    let fs = Tmpfs::mount(&r.root, test)?;
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(
        dev(&r.root),
        dev(&r.state),
        "the root is on a filesystem of its own"
    );
    Some((fs, r))
}

#[test]
fn across_filesystems_content_is_kept_by_a_copy_and_restored_byte_for_byte() {
    let Some((_fs, r)) = on_tmpfs(None, "copy_restore") else {
        return;
    };
    let a = r.root.join("a.bin");
    let old = bytes(30, 300_000);
    put(&a, &old, 0o640);
    let tree = r.root.join("tree");
    make_tree(&tree, 40);
    let before = snapshot(&tree);
    let mut s = r.serve("agent");
    write(&mut s, "w/a.bin", &bytes(31, 1000));
    ok(&s.request("files/delete", json!({"path": "w/tree", "recursive": true})));
    s.finish();
    assert!(!present(&tree));
    let changes = r.changes();
    let (w, d) = (
        change(&changes, "files/write", "w/a.bin"),
        change(&changes, "files/delete", "w/tree"),
    );
    assert_eq!(
        (&w["kept"]["how"], &w["kept"]["kind"]),
        (&json!("copy"), &json!("file"))
    );
    assert_eq!(
        (&d["kept"]["how"], &d["kept"]["kind"]),
        (&json!("copy"), &json!("directory"))
    );
    let place = |c: &Value| PathBuf::from(c["place"].as_str().unwrap());
    assert_eq!(std::fs::read(place(w)).unwrap(), old);
    let content: u64 = before.values().map(|e| e.2.len() as u64).sum();
    assert!(d["kept"]["bytes"].as_u64().unwrap() >= content, "{d}");
    r.restore(id(w));
    r.restore(id(d));
    assert_eq!(std::fs::read(&a).unwrap(), old);
    assert_eq!(mode(&a), 0o640);
    assert_same_tree(
        &snapshot(&tree),
        &before,
        "the tree, byte for byte with its modes and links",
    );
    assert!(
        !present(&place(w)) && !present(&place(d)),
        "copied back, then out of the store"
    );
}

#[test]
fn past_copy_max_bytes_the_change_proceeds_marked_not_recoverable() {
    let Some((_fs, r)) = on_tmpfs(Some("copy_max_bytes = 4096"), "copy_max_proceed") else {
        return;
    };
    put(&r.root.join("big.bin"), &bytes(32, 64 * 1024), 0o644);
    put(&r.root.join("small.txt"), b"small enough to copy", 0o644);
    std::fs::create_dir(r.root.join("d")).unwrap();
    put(&r.root.join("d/x.bin"), &bytes(33, 10_000), 0o644);
    let mut s = r.serve("agent");
    write(&mut s, "w/big.bin", b"new big");
    write(&mut s, "w/small.txt", b"new small");
    ok(&s.request("files/delete", json!({"path": "w/d", "recursive": true})));
    s.finish();
    assert_eq!(std::fs::read(r.root.join("big.bin")).unwrap(), b"new big");
    assert!(!present(&r.root.join("d")));
    let changes = r.changes();
    for (method, path) in [("files/write", "w/big.bin"), ("files/delete", "w/d")] {
        let c = change(&changes, method, path);
        assert_eq!(c["kept"], Value::Null, "{c}");
        assert!(
            c["notKept"].as_str().unwrap().contains("copy_max_bytes"),
            "{c}"
        );
        assert!(c.get("place").is_none(), "{c}");
        let ran = r.run(&["restore", id(c)]);
        assert_eq!(ran.status.unwrap().code(), Some(1), "{}", ran.log());
        assert!(
            String::from_utf8_lossy(&ran.stderr).contains("not kept"),
            "{}",
            ran.log()
        );
    }
    let small = change(&changes, "files/write", "w/small.txt");
    assert_eq!(small["kept"]["how"], "copy", "{small}");
    assert!(small.get("notKept").is_none(), "{small}");
    let text = r.run_ok(&["history"]);
    assert_eq!(text.matches("NOT RECOVERABLE").count(), 2, "{text}");
    r.restore(id(small));
    assert_eq!(
        std::fs::read(r.root.join("small.txt")).unwrap(),
        b"small enough to copy"
    );
}

/// Asserts that `resp` is the refusal of a change whose content cannot be kept.
fn assert_not_recoverable(resp: &Value, limit: u64) {
    assert_error(resp, -31007, "QUOTA_EXCEEDED", "not_recoverable");
    assert_eq!(resp["error"]["data"]["limit"], limit, "{resp}");
}

#[test]
fn past_copy_max_bytes_with_unkept_refuse_the_change_is_refused_and_nothing_changes() {
    let policy = "copy_max_bytes = 4096\nunkept = \"refuse\"";
    let Some((_fs, r)) = on_tmpfs(Some(policy), "copy_max_refuse") else {
        return;
    };
    let big = r.root.join("big.bin");
    put(&big, &bytes(34, 64 * 1024), 0o644);
    put(&r.root.join("small.txt"), b"small", 0o644);
    std::fs::create_dir(r.root.join("d")).unwrap();
    put(&r.root.join("d/x.bin"), &bytes(35, 10_000), 0o600);
    let before = snapshot(&r.root);
    let big_ino = ino(&big);
    let mut s: Sidecar = r.serve("agent");
    let b64 = |c: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, c);
    let refused = [
        ("files/write", json!({"path": "w/big.bin", "content": "x"})),
        ("files/delete", json!({"path": "w/big.bin"})),
        ("files/delete", json!({"path": "w/d", "recursive": true})),
        (
            "files/rename",
            json!({"oldPath": "w/small.txt", "newPath": "w/big.bin", "overwrite": true}),
        ),
    ];
    for (method, params) in refused {
        let resp = s.request(method, params.clone());
        assert_not_recoverable(&resp, 4096);
    }
    // An upload is refused at its commit.
    let chunk =
        json!({"path": "w/big.bin", "content": b64(b"part"), "encoding": "base64", "final": false});
    ok(&s.request("files/write", chunk));
    let last =
        json!({"path": "w/big.bin", "content": b64(b"end"), "encoding": "base64", "offset": 4});
    assert_not_recoverable(&s.request("files/write", last), 4096);
    assert_same_tree(&snapshot(&r.root), &before, "nothing changed");
    assert_eq!(ino(&big), big_ino);
    assert_no_temporaries(&r.root);
    // What can be kept is still changed, and kept.
    write(&mut s, "w/small.txt", b"changed");
    s.finish();
    let changes = r.changes();
    assert_eq!(
        changes.len(),
        1,
        "only the change made is journaled: {changes:#?}"
    );
    assert_eq!(changes[0]["kept"]["how"], "copy");
}

#[test]
fn across_filesystems_a_tree_whose_removal_stops_midway_is_kept_and_journaled() {
    let Some((_fs, r)) = on_tmpfs(None, "partial_delete") else {
        return;
    };
    let tree = r.root.join("tree");
    std::fs::create_dir_all(tree.join("m")).unwrap();
    for i in 0..20 {
        put(&tree.join(format!("f{i}")), &bytes(50 + i, 3000), 0o640);
    }
    // A mount point in the tree: its removal fails (EBUSY) once what is on it is removed.
    let Some(inner) = Tmpfs::mount(&tree.join("m"), "partial_delete") else {
        return;
    };
    put(
        &tree.join("m/inner.txt"),
        b"on the mount inside the tree",
        0o600,
    );
    let before = snapshot(&tree);
    let mut s = r.serve("agent");
    let resp = s.request("files/delete", json!({"path": "w/tree", "recursive": true}));
    assert!(resp.get("error").is_some(), "the delete stopped: {resp}");
    s.finish();
    assert!(
        !present(&tree.join("m/inner.txt")),
        "removed before the removal stopped"
    );
    let changes = r.changes();
    let c = change(&changes, "files/delete", "w/tree");
    assert_eq!(c["kept"]["how"], "copy", "{c}");
    drop(inner);
    r.restore(id(c));
    assert_same_tree(&snapshot(&tree), &before, "the whole tree, from the copy");
}
