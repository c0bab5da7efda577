//! The write side through the real `fsbroker serve` process with `--writable --consent auto`:
//! a pipelined upload, each write method's success and main error, read-only roots without
//! `--writable`, and new files' modes under the process's umask.

use crate::common::fs::{mode, names};
use crate::common::*;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn a_pipelined_consent_upload_and_read_produce_the_whole_content() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &["--writable"]);
    let parts: Vec<String> = (0..4)
        .map(|i| format!("{i}").repeat(64 * 1024 + i * 7))
        .collect();
    let whole: String = parts.concat();
    s.send(&rpc(
        1,
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    ));
    let mut offset = 0;
    for (i, part) in parts.iter().enumerate() {
        s.send(&rpc(
            2 + i as i64,
            "files/write",
            json!({"path": "project/up.txt", "content": part, "offset": offset,
                   "final": i == parts.len() - 1}),
        ));
        offset += part.len();
    }
    s.send(&rpc(6, "files/read", json!({"path": "project/up.txt"})));

    assert_eq!(ok(&s.wait_id(&json!(1)))["granted"], true);
    let mut staged = 0;
    for (i, part) in parts.iter().enumerate() {
        let r = s.wait_id(&json!(2 + i as i64));
        staged += part.len();
        let res = ok(&r);
        assert_eq!(res["size"], staged, "{i}");
        if i < parts.len() - 1 {
            assert_eq!(res["final"], false, "{r}");
        } else {
            assert_eq!(res["created"], true);
        }
    }
    let r = s.wait_id(&json!(6));
    let res = ok(&r);
    assert_eq!(res["size"], whole.len());
    assert_eq!(res["content"].as_str().unwrap(), whole);
    assert_eq!(f.text_of("up.txt"), whole);
    let (status, rest) = s.finish();
    assert!(status.success(), "{}", s.stderr());
    assert!(rest.is_empty());
    let left: Vec<_> = std::fs::read_dir(&f.root).unwrap().collect();
    assert_eq!(left.len(), 1, "only up.txt remains");
}

#[test]
fn write_succeeds_and_create_exclusive_on_an_existing_file_is_already_exists() {
    let f = Fixture::new();
    let mut s = Sidecar::serve_writable(&f.root);
    let r = s.request(
        "files/write",
        json!({"path": "project/a.txt", "content": "hello"}),
    );
    let res = ok(&r);
    assert_eq!(res["path"], "project/a.txt");
    assert_eq!(res["size"], 5);
    assert_eq!(res["created"], true);
    let st = s.request("files/stat", json!({"path": "project/a.txt"}));
    assert_eq!(res["etag"], ok(&st)["etag"]);
    let r = s.request(
        "files/write",
        json!({"path": "project/a.txt", "content": "again", "create": true, "overwrite": false}),
    );
    assert_error(&r, -31008, "ALREADY_EXISTS", "");
    assert_eq!(f.text_of("a.txt"), "hello");
}

#[test]
fn create_succeeds_and_an_existing_entry_is_already_exists() {
    let f = Fixture::new();
    let mut s = Sidecar::serve_writable(&f.root);
    let r = s.request(
        "files/create",
        json!({"path": "project/a/b", "type": "directory", "parents": true}),
    );
    assert_eq!(ok(&r), &json!({"path": "project/a/b", "type": "directory"}));
    let r = s.request(
        "files/create",
        json!({"path": "project/a/b/f.txt", "type": "file"}),
    );
    assert_eq!(
        ok(&r),
        &json!({"path": "project/a/b/f.txt", "type": "file"})
    );
    assert_eq!(
        std::fs::metadata(f.root.join("a/b/f.txt")).unwrap().len(),
        0
    );
    let r = s.request("files/create", json!({"path": "project/a", "type": "file"}));
    assert_error(&r, -31008, "ALREADY_EXISTS", "");
}

#[test]
fn delete_succeeds_and_a_non_empty_directory_is_directory_not_empty() {
    let f = Fixture::new();
    f.file("d/x.txt", "x");
    f.file("e/y.txt", "y");
    let mut s = Sidecar::serve_writable(&f.root);
    let r = s.request("files/delete", json!({"path": "project/d"}));
    assert_error(&r, -31011, "DIRECTORY_NOT_EMPTY", "");
    assert!(f.root.join("d/x.txt").exists());
    let r = s.request(
        "files/delete",
        json!({"path": "project/d", "recursive": true}),
    );
    assert_eq!(ok(&r), &json!({"path": "project/d"}));
    assert!(!f.root.join("d").exists());
    let r = s.request("files/delete", json!({"path": "project/e/y.txt"}));
    ok(&r);
    assert!(!f.root.join("e/y.txt").exists());
}

#[test]
fn rename_succeeds_and_a_move_into_itself_is_into_itself() {
    let f = Fixture::new();
    f.file("d/x.txt", "x");
    let mut s = Sidecar::serve_writable(&f.root);
    let r = s.request(
        "files/rename",
        json!({"oldPath": "project/d", "newPath": "project/d/sub"}),
    );
    assert_error(&r, -31003, "INVALID_PATH", "into_itself");
    let r = s.request(
        "files/rename",
        json!({"oldPath": "project/d", "newPath": "project/e"}),
    );
    assert_eq!(
        ok(&r),
        &json!({"oldPath": "project/d", "newPath": "project/e"})
    );
    assert_eq!(f.text_of("e/x.txt"), "x");
}

#[test]
fn without_writable_the_root_is_read_only_for_every_write_method() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    f.dir("d");
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    );
    assert_eq!(ok(&r)["granted"], false, "{r}");
    let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
    assert_eq!(ok(&r)["access"], "read", "{r}");
    for (method, params) in [
        (
            "files/write",
            json!({"path": "project/a.txt", "content": "x"}),
        ),
        (
            "files/write",
            json!({"path": "project/n.txt", "content": "x", "final": false}),
        ),
        (
            "files/create",
            json!({"path": "project/n.txt", "type": "file"}),
        ),
        ("files/delete", json!({"path": "project/a.txt"})),
        (
            "files/delete",
            json!({"path": "project/d", "recursive": true}),
        ),
        (
            "files/rename",
            json!({"oldPath": "project/a.txt", "newPath": "project/b.txt"}),
        ),
    ] {
        let r = s.request(method, params);
        assert_error(&r, -31002, "PERMISSION_DENIED", "read_only");
    }
    assert_eq!(f.text_of("a.txt"), "a");
    assert_eq!(names(&f.root), ["a.txt", "d"]);
}

/// Runs `fsbroker serve` under `umask MASK` (through `sh`), sends `lines`, closes stdin and
/// returns the response lines, every wait bounded by [`WAIT`].
fn serve_with_umask(mask: &str, root: &std::path::Path, lines: &[Value]) -> Vec<Value> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask {mask} && exec \"$0\" serve --root \"$1\" --writable --consent auto"
        ))
        .arg(bin())
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
            .collect::<Vec<_>>()
    });
    wait_child(&mut child, WAIT, "fsbroker");
    reader.join().unwrap()
}

#[test]
fn new_files_get_mode_0644_less_the_broker_umask() {
    let f = Fixture::new();
    let lines = [
        rpc(
            1,
            "files/consent",
            json!({"requestedPaths": ["project"], "access": "write"}),
        ),
        rpc(
            2,
            "files/write",
            json!({"path": "project/w.txt", "content": "x"}),
        ),
        rpc(
            3,
            "files/create",
            json!({"path": "project/c.txt", "type": "file"}),
        ),
    ];
    let out = serve_with_umask("077", &f.root, &lines);
    assert_eq!(out.len(), 3, "{out:?}");
    for r in &out {
        ok(r);
    }
    assert_eq!(
        mode(&f.root.join("c.txt")),
        0o600,
        "files/create under umask 077"
    );
    assert_eq!(
        mode(&f.root.join("w.txt")),
        0o600,
        "files/write under umask 077"
    );
}
