//! Adversarial path payloads: a table of public path-traversal shapes (encodings, overlong
//! UTF-8, backslashes, trailing dots, Unicode forms, UNC and drive forms, `file:` variants,
//! absolute paths to the outside and to the prefix-colliding sibling), each bare and behind
//! `project/`, replayed against every method on a writable root with write consent granted.
//!
//! Oracle per case: the answer is a documented filesystem error, or a success that stays a
//! literal name inside the root (a created entry's host path is beneath the root); the tree
//! outside the root is byte-for-byte unchanged; no answer carries the canary.
//!
//! Then one named regression test per escape class seen in peer projects.

use crate::common::confinement::{OUTSIDE_ROOT, assert_no_canary, assert_refused};
use crate::common::fs::present;
use crate::common::wire::DOCUMENTED;
use crate::common::write::writable;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const UNTHROTTLED: &str = "[limits]\nrequests_per_second = 1000000\nburst = 1000000\n";

/// One entry of a snapshot: kind and content (file bytes or link target).
type Snapshot = BTreeMap<PathBuf, (char, Vec<u8>)>;

/// Everything under `dir` (not following links), skipping `skip` (the root) at the top level.
fn snapshot(dir: &Path, skip: &Path) -> Snapshot {
    fn walk(base: &Path, dir: &Path, skip: &Path, out: &mut Snapshot) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p == skip {
                continue;
            }
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, ('l', t.into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                out.insert(rel, ('d', Vec::new()));
                walk(base, &p, skip, out);
            } else {
                out.insert(rel, ('f', std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Snapshot::new();
    walk(dir, dir, skip, &mut out);
    out
}

/// The payload shapes; each is replayed bare and behind `project/`.
fn shapes(f: &Fixture) -> Vec<String> {
    let tmp = f.tmp.path().to_str().unwrap().to_owned();
    let out = f.outside.to_str().unwrap().to_owned();
    let sib = f.sibling.to_str().unwrap().to_owned();
    let mut v: Vec<String> = [
        "../outside/secret.txt",
        "%2e%2e%2f%2e%2e%2foutside%2fsecret.txt",
        "%2e%2e/%2e%2e/outside/secret.txt",
        "%252e%252e%252f%252e%252e%252foutside%252fsecret.txt",
        "%c0%ae%c0%ae/%c0%ae%c0%ae/outside/secret.txt",
        "%e0%80%ae%e0%80%ae/outside/secret.txt",
        "%c0%af..%c0%afoutside",
        "\u{ff0e}\u{ff0e}/\u{ff0e}\u{ff0e}/outside/secret.txt",
        "\u{2024}\u{2024}/outside/secret.txt",
        "..\\..\\outside\\secret.txt",
        "..\\/..\\/outside",
        "..;/..;/outside/secret.txt",
        "....//....//outside/secret.txt",
        "..././..././outside/secret.txt",
        ".. /.. /outside/secret.txt",
        "... ",
        "..",
        "../",
        "./../.",
        "caf\u{e9}.txt",
        "cafe\u{301}.txt",
        "\\\\server\\share\\secret.txt",
        "//server/share/secret.txt",
        "C:\\outside\\secret.txt",
        "C:/outside/secret.txt",
        "c:",
        "file:/etc/passwd",
        "file:../outside/secret.txt",
        "FILE:///etc/passwd",
        "file://localhost/etc/passwd",
        "file://server/etc/passwd",
        "/etc/passwd",
        "~/../../etc/passwd",
        "project\0/../outside",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend([
        format!("file://{out}/secret.txt"),
        format!("FILE://{out}/secret.txt"),
        format!("file://localhost{out}/secret.txt"),
        format!("file://{tmp}/project/../outside/secret.txt"),
        format!("file://{tmp}/project/%2e%2e/outside/secret.txt"),
        format!("file://{tmp}/project%2f..%2foutside/secret.txt"),
        format!("file://{sib}/secret.txt"),
        format!("file://{sib}"),
        format!("{out}/secret.txt"),
        out.clone(),
        format!("{sib}/secret.txt"),
        sib.clone(),
        format!("{tmp}/project/../outside/secret.txt"),
        format!("{tmp}/project/../project2/secret.txt"),
        format!("{tmp}/project/./../outside"),
        format!("{tmp}/project2/../outside/secret.txt"),
    ]);
    v
}

/// The requests of every method for one payload: (label, method, params).
fn requests(p: &str) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("read", "files/read", json!({"path": p})),
        ("stat", "files/stat", json!({"path": p})),
        ("list", "files/list", json!({"path": p, "recursive": true})),
        (
            "write",
            "files/write",
            json!({"path": p, "content": "adversarial"}),
        ),
        ("create", "files/create", json!({"path": p, "type": "file"})),
        (
            "create-dir",
            "files/create",
            json!({"path": p, "type": "directory", "parents": true}),
        ),
        (
            "delete",
            "files/delete",
            json!({"path": p, "recursive": true}),
        ),
        (
            "rename-old",
            "files/rename",
            json!({"oldPath": p, "newPath": "project/renamed", "overwrite": true}),
        ),
        (
            "rename-new",
            "files/rename",
            json!({"oldPath": "project/victim.txt", "newPath": p, "overwrite": true}),
        ),
        (
            "watch",
            "files/watch",
            json!({"path": p, "recursive": true}),
        ),
        (
            "consent",
            "files/consent",
            json!({"requestedPaths": [p], "access": "write"}),
        ),
    ]
}

/// Asserts that the form-1 path `wire` names an existing entry beneath the root.
fn assert_beneath_root(f: &Fixture, wire: &str, resp: &Value) {
    let rel = wire
        .strip_prefix("project/")
        .unwrap_or_else(|| panic!("not a path inside the root: {wire:?}: {resp}"));
    let host = f.root.join(rel);
    assert!(present(&host), "created entry missing at {host:?}: {resp}");
    let real = std::fs::canonicalize(&host).unwrap();
    let root = std::fs::canonicalize(&f.root).unwrap();
    assert!(
        real.starts_with(&root) && real != root,
        "entry escaped: {real:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_traversal_shape_against_every_method_stays_in_the_root() {
    let f = Fixture::new();
    f.file("caf\u{e9}.txt", "nfc");
    f.file("inside.txt", "inside");
    let b = writable(&f, &format!("{UNTHROTTLED}max_watches = 10000\n")).await;
    let before = snapshot(f.tmp.path(), &f.root);
    let tmp = f.tmp.path().to_str().unwrap().to_owned();

    let mut payloads = Vec::new();
    for s in shapes(&f) {
        payloads.push(format!("project/{s}"));
        payloads.push(s);
    }
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut cases = 0;
    for p in &payloads {
        for (label, method, params) in requests(p) {
            if !present(&f.root.join("victim.txt")) {
                std::fs::write(f.root.join("victim.txt"), "victim").unwrap();
            }
            cases += 1;
            let r = call(&b, "s", method, params).await;
            let ctx = format!("{label} {p:?}: {r}");
            assert_no_canary(&r);
            // Host paths never leave the broker (except echoing the caller's own string).
            if !p.contains(&tmp) {
                assert!(!r.to_string().contains(&tmp), "host path in {ctx}");
            }
            assert_eq!(
                snapshot(f.tmp.path(), &f.root),
                before,
                "outside changed: {ctx}"
            );
            f.assert_canary_intact();
            let outcome = if r.get("error").is_some() {
                let (code, data_code, reason) = err(&r);
                assert!(
                    DOCUMENTED.contains(&(code, data_code.as_str())),
                    "undocumented error: {ctx}"
                );
                format!("{data_code}/{reason}")
            } else {
                let res = ok(&r);
                match label {
                    "write" | "create" | "create-dir" => {
                        assert_beneath_root(&f, res["path"].as_str().unwrap(), &r);
                    }
                    "rename-new" => {
                        assert_beneath_root(&f, res["newPath"].as_str().unwrap(), &r);
                    }
                    "consent" => {
                        // Approved paths are echoed as sent; their mount forms say where.
                        for a in res["approvedPaths"].as_array().unwrap() {
                            let a = res["mountPaths"][a.as_str().unwrap()].as_str().unwrap();
                            assert!(
                                a == "project" || a.starts_with("project/"),
                                "approved outside a root: {ctx}"
                            );
                        }
                    }
                    "read" => assert!(
                        ["nfc", "inside", "victim"].contains(&res["content"].as_str().unwrap()),
                        "{ctx}"
                    ),
                    _ => {}
                }
                format!("ok ({label})")
            };
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    eprintln!(
        "{cases} adversarial cases ({} payloads x {} requests):",
        payloads.len(),
        requests("x").len()
    );
    for (o, n) in &outcomes {
        eprintln!("  {n:5} {o}");
    }
    assert!(cases >= 500, "only {cases} cases");
}

// ---------------------------------------------------------------------------------------------
// Named regressions, one per escape class
// ---------------------------------------------------------------------------------------------

/// Every path-taking request on `p`, answered `PERMISSION_DENIED` `outside_root`.
async fn assert_all_outside_root(f: &Fixture, b: &Broker, p: &str) {
    for (label, method, params) in requests(p) {
        if label == "consent" {
            let r = call(b, "s", method, params).await;
            assert_no_canary(&r);
            assert_eq!(ok(&r)["granted"], false, "{p:?}: {r}");
            continue;
        }
        if label == "rename-new" && !present(&f.root.join("victim.txt")) {
            std::fs::write(f.root.join("victim.txt"), "victim").unwrap();
        }
        let r = call(b, "s", method, params).await;
        assert_refused(f, &r, OUTSIDE_ROOT);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_prefix_collision_sibling_is_outside_root() {
    let f = Fixture::new();
    let b = writable(&f, UNTHROTTLED).await;
    let sib = f.sibling.to_str().unwrap().to_owned();
    for p in [
        sib.clone(),
        format!("{sib}/secret.txt"),
        format!("{sib}/new.txt"),
        format!("file://{sib}/secret.txt"),
        format!("file://{sib}/new.txt"),
        "project/../project2/secret.txt".to_owned(),
        "project/../project2/new.txt".to_owned(),
    ] {
        assert_all_outside_root(&f, &b, &p).await;
    }
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_symlink_to_outside_is_never_followed() {
    let f = Fixture::new();
    f.symlink(&f.outside, "out");
    f.symlink(f.outside.join("secret.txt"), "secret-link");
    f.symlink("../outside", "rel-out");
    let b = writable(&f, UNTHROTTLED).await;
    for p in [
        "project/out/secret.txt",
        "project/out/new.txt",
        "project/out/sub/new.txt",
        "project/rel-out/secret.txt",
        "project/rel-out/new.txt",
    ] {
        assert_all_outside_root(&f, &b, p).await;
    }
    for p in ["project/secret-link", "project/out", "project/rel-out"] {
        for (method, params) in [
            ("files/read", json!({"path": p})),
            ("files/write", json!({"path": p, "content": "x"})),
            ("files/list", json!({"path": p, "recursive": true})),
        ] {
            let r = call(&b, "s", method, params).await;
            assert_refused(&f, &r, OUTSIDE_ROOT);
        }
    }
    // Deleting the link removes the link, not what it points at.
    let r = call(
        &b,
        "s",
        "files/delete",
        json!({"path": "project/out", "recursive": true}),
    )
    .await;
    assert_no_canary(&r);
    ok(&r);
    assert!(!present(&f.root.join("out")));
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_write_through_dangling_symlink_never_creates_the_target_outside() {
    let f = Fixture::new();
    let abs_target = f.outside.join("created-abs.txt");
    let rel_target = f.outside.join("created-rel.txt");
    f.symlink(&abs_target, "dangle-abs");
    f.symlink("../outside/created-rel.txt", "dangle-rel");
    f.symlink(f.outside.join("newdir/f.txt"), "dangle-deep");
    let b = writable(&f, UNTHROTTLED).await;
    for name in ["dangle-abs", "dangle-rel", "dangle-deep"] {
        let p = format!("project/{name}");
        for params in [
            json!({"path": p, "content": "escaped"}),
            json!({"path": p, "content": "escaped", "overwrite": false}),
            json!({"path": p, "content": "escaped", "final": false}),
        ] {
            let staged = params["final"] == json!(false);
            let r = call(&b, "s", "files/write", params).await;
            assert_no_canary(&r);
            if r.get("error").is_none() && !staged {
                // Replacing the link itself with a file inside the root is acceptable.
                let m = std::fs::symlink_metadata(f.root.join(name)).unwrap();
                assert!(m.is_file(), "{p}: {r}");
            } else {
                let (code, dc, _) = err(&r);
                assert!(DOCUMENTED.contains(&(code, dc.as_str())), "{r}");
            }
            assert!(!present(&abs_target) && !present(&rel_target), "{p}: {r}");
            f.assert_canary_intact();
        }
        for (method, params) in [
            ("files/create", json!({"path": p, "type": "file"})),
            ("files/create", json!({"path": p, "type": "directory"})),
            (
                "files/create",
                json!({"path": format!("{p}/x"), "type": "file", "parents": true}),
            ),
        ] {
            let r = call(&b, "s", method, params).await;
            assert_no_canary(&r);
            assert!(r.get("error").is_some(), "{p}: {r}");
            f.assert_canary_intact();
        }
    }
    assert!(!present(&abs_target) && !present(&rel_target));
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_parent_directory_swapped_for_symlink_is_outside_root() {
    let f = Fixture::new();
    f.file("p/secret.txt", "inside");
    let b = f.broker_with("write", UNTHROTTLED);
    // A grant on the directory only, then the directory becomes a link to the outside.
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project/p"], "access": "write"}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "{r}");
    std::fs::remove_dir_all(f.root.join("p")).unwrap();
    f.symlink(&f.outside, "p");
    for (method, params) in [
        ("files/read", json!({"path": "project/p/secret.txt"})),
        ("files/stat", json!({"path": "project/p/secret.txt"})),
        ("files/list", json!({"path": "project/p"})),
        (
            "files/write",
            json!({"path": "project/p/secret.txt", "content": "overwritten"}),
        ),
        (
            "files/write",
            json!({"path": "project/p/new.txt", "content": "new"}),
        ),
        (
            "files/create",
            json!({"path": "project/p/new", "type": "directory"}),
        ),
        ("files/delete", json!({"path": "project/p/secret.txt"})),
        (
            "files/rename",
            json!({"oldPath": "project/p/secret.txt", "newPath": "project/p/moved.txt"}),
        ),
        ("files/watch", json!({"path": "project/p"})),
    ] {
        let r = call(&b, "s", method, params).await;
        assert_no_canary(&r);
        let (code, dc, _) = err(&r);
        assert_eq!((code, dc.as_str()), (-31002, "PERMISSION_DENIED"), "{r}");
        f.assert_canary_intact();
    }
}

/// Exchanges `a` and `b` atomically; false where that fails (one is gone).
fn exchange(a: &Path, b: &Path) -> bool {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_recursive_delete_racing_a_subdir_swapped_for_symlink_keeps_outside() {
    let f = Fixture::new();
    // The outside tree a confused recursive delete would destroy.
    let trap = f.tmp.path().join("trap");
    std::fs::create_dir_all(trap.join("sub/deep")).unwrap();
    std::fs::write(trap.join("sub/deep/keep.txt"), "keep").unwrap();
    std::fs::write(trap.join("keep.txt"), "keep").unwrap();
    let before = snapshot(f.tmp.path(), &f.root);
    let b = writable(&f, UNTHROTTLED).await;
    let rounds = 60;
    let mut deleted = 0;
    for _ in 0..rounds {
        let tree = f.root.join("tree");
        for i in 0..8 {
            std::fs::create_dir_all(tree.join(format!("sub/d{i}/e"))).unwrap();
            std::fs::write(tree.join(format!("sub/d{i}/e/f.txt")), "x").unwrap();
        }
        std::os::unix::fs::symlink(&trap, tree.join("link")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let (a, l) = (tree.join("sub"), tree.join("link"));
        let swapper = std::thread::spawn(move || {
            let mut n = 0usize;
            while !s.load(Ordering::Relaxed) && exchange(&a, &l) {
                n += 1;
            }
            n
        });
        let r = call(
            &b,
            "s",
            "files/delete",
            json!({"path": "project/tree", "recursive": true}),
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_no_canary(&r);
        if r.get("error").is_none() {
            deleted += 1;
        } else {
            let (code, dc, _) = err(&r);
            assert!(DOCUMENTED.contains(&(code, dc.as_str())), "{r}");
        }
        assert_eq!(snapshot(f.tmp.path(), &f.root), before, "outside changed");
        f.assert_canary_intact();
        let _ = std::fs::remove_dir_all(&tree);
    }
    eprintln!("{rounds} racing recursive deletes, {deleted} succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_dotdot_on_the_root_is_outside_root() {
    let f = Fixture::new();
    let b = writable(&f, UNTHROTTLED).await;
    let tmp = f.tmp.path().to_str().unwrap().to_owned();
    for p in [
        "project/..".to_owned(),
        "project/../".to_owned(),
        "project/./..".to_owned(),
        "project/../project".to_owned(),
        "project/../outside".to_owned(),
        format!("file://{tmp}/project/.."),
        format!("file://{tmp}/project/../"),
        format!("file://{tmp}/project/%2e%2e"),
        format!("{tmp}/project/.."),
    ] {
        assert_all_outside_root(&f, &b, &p).await;
    }
    assert!(present(&f.root));
    f.assert_canary_intact();
}
