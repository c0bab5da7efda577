//! The audit log's hash chain through the real binary: `fsbroker audit verify` finds a served
//! log whole, and names the line of an edit, a removal and a cut; two `serve` processes
//! appending to one file keep one chain; rotation by size keeps the chain across the files.

use crate::common::*;
use crate::sidecar::{Sidecar, run_bounded};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `fsbroker serve --policy POLICY --root ROOT --consent auto --server-id ID`, with read
/// consent on the whole root granted.
fn serve(f: &Fixture, policy: &Path, id: &str) -> Sidecar {
    let args: Vec<OsString> = vec![
        "serve".into(),
        "--policy".into(),
        policy.into(),
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "auto".into(),
        "--server-id".into(),
        id.into(),
    ];
    let mut s = Sidecar::spawn(&args, None);
    let r = s.request(
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "read"}),
    );
    assert_eq!(ok(&r)["granted"], true, "{r}");
    s
}

/// A policy whose `[audit]` section is `file = LOG` and `extra`.
fn policy(f: &Fixture, log: &Path, extra: &str) -> PathBuf {
    let p = f.tmp.path().join("policy.toml");
    std::fs::write(&p, format!("[audit]\nfile = {log:?}\n{extra}")).unwrap();
    p
}

/// Sends `n` reads of `project/a.txt` without waiting, then waits for every answer.
fn reads(s: &mut Sidecar, n: usize) {
    let ids: Vec<Value> = (0..n)
        .map(|i| {
            let id = json!(format!("r{i}"));
            s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "files/read",
                           "params": {"path": "project/a.txt"}}));
            id
        })
        .collect();
    for id in ids {
        ok(&s.wait_id(&id));
    }
}

fn finish(mut s: Sidecar) {
    let (status, _) = s.finish();
    assert!(status.success(), "{status:?}\n{}", s.stderr());
}

/// `fsbroker audit verify FILES...`: its exit code and its output (stdout, then stderr).
fn verify(files: &[&Path]) -> (i32, String) {
    let mut args: Vec<OsString> = vec!["audit".into(), "verify".into()];
    args.extend(files.iter().map(OsString::from));
    let out = run_bounded(&args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A copy of `log` at `name` with its lines changed by `change`, and its text cut by `cut`
/// bytes at the end.
fn copy_with(log: &Path, name: &str, change: impl FnOnce(&mut Vec<String>), cut: usize) -> PathBuf {
    let mut lines: Vec<String> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    change(&mut lines);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = log.with_file_name(name);
    std::fs::write(&path, &text.as_bytes()[..text.len() - cut]).unwrap();
    path
}

#[test]
fn a_served_log_verifies_and_an_edit_a_removal_or_a_cut_is_named_at_its_line() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    let log = f.tmp.path().join("audit.log");
    let mut s = serve(&f, &policy(&f, &log, ""), "t");
    reads(&mut s, 9);
    finish(s);

    let (code, out) = verify(&[&log]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("whole: 10 lines, seq 1 to 10, last hash "),
        "{out}"
    );

    let edited = copy_with(
        &log,
        "edited.log",
        |l| l[4] = l[4].replacen("\"bytes\":5", "\"bytes\":6", 1),
        0,
    );
    let (code, out) = verify(&[&edited]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("line 5: changed (its hash does not match its content)"),
        "{out}"
    );

    let removed = copy_with(&log, "removed.log", |l| drop(l.remove(6)), 0);
    let (code, out) = verify(&[&removed]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("line 7: a line before it is missing (seq 8 follows 6)"),
        "{out}"
    );

    for (name, cut) in [("newline.log", 1), ("cut.log", 30)] {
        let cut_short = copy_with(&log, name, |_| {}, cut);
        let (code, out) = verify(&[&cut_short]);
        assert_eq!(code, 1, "{name}: {out}");
        assert!(out.contains("line 10: cut short"), "{name}: {out}");
    }

    // Without its first line, the file begins mid-chain, and the rest is still checked.
    let headless = copy_with(&log, "headless.log", |l| drop(l.remove(0)), 0);
    let (code, out) = verify(&[&headless]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("begins mid-chain (its head was removed)"),
        "{out}"
    );
    assert!(out.contains("9 lines, seq 2 to 10"), "{out}");

    let (code, out) = verify(&[&f.tmp.path().join("missing.log")]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot read"), "{out}");
}

#[test]
fn two_serve_processes_appending_to_one_file_keep_one_chain() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    let log = f.tmp.path().join("audit.log");
    let p = policy(&f, &log, "");
    let mut a = serve(&f, &p, "a");
    let mut b = serve(&f, &p, "b");
    // Both send their reads before waiting for any answer, so the two write at once.
    let (ra, rb) = std::thread::scope(|scope| {
        let ra = scope.spawn(|| reads(&mut a, 60));
        let rb = scope.spawn(|| reads(&mut b, 60));
        (ra.join(), rb.join())
    });
    ra.unwrap();
    rb.unwrap();
    finish(a);
    finish(b);
    let text = std::fs::read_to_string(&log).unwrap();
    let servers: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["server"].clone())
        .collect();
    assert_eq!(servers.len(), 122);
    // The lines of the two interleave: each process chained from the other's lines.
    assert!(
        servers.windows(2).any(|w| w[0] == "b" && w[1] == "a"),
        "no interleaving"
    );
    let (code, out) = verify(&[&log]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("whole: 122 lines, seq 1 to 122"), "{out}");
}

/// The log of 40 requests rotated at 1,500 bytes, keeping 3 files: `audit.log` and
/// `audit.log.1` to `.3`.
fn rotated_log(f: &Fixture) -> PathBuf {
    f.file("a.txt", "hello");
    let log = f.tmp.path().join("audit.log");
    let p = policy(f, &log, "rotate_bytes = 1500\nkeep = 3\n");
    let mut s = serve(f, &p, "t");
    reads(&mut s, 39);
    finish(s);
    log
}

#[test]
fn rotation_by_size_keeps_the_chain_across_the_files() {
    let f = Fixture::new();
    let log = rotated_log(&f);
    let rotated = |n: u32| log.with_file_name(format!("audit.log.{n}"));
    for n in 1..=3 {
        assert!(rotated(n).exists(), "no audit.log.{n}");
        let size = std::fs::metadata(rotated(n)).unwrap().len();
        assert!(size <= 1500, "audit.log.{n} is {size} bytes");
    }
    assert!(!rotated(4).exists(), "more than keep = 3 rotated files");

    let (r3, r2, r1) = (rotated(3), rotated(2), rotated(1));
    let (code, out) = verify(&[&r3, &r2, &r1, &log]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches(": whole: ").count(), 4, "{out}");
    assert!(out.contains(" to 40, last hash "), "{out}");
    // Alone, the current file still checks its lines: it begins with `prev`.
    let (code, out) = verify(&[&log]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("whole: "), "{out}");
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(
        first["prev"].as_str().is_some_and(|p| p != "0".repeat(64)),
        "{first}"
    );
    // Out of order, a file's `prev` does not name the last hash of the one given before it.
    let (code, out) = verify(&[&r1, &r3, &log]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("is not the last hash of the file before"),
        "{out}"
    );
}

#[test]
fn an_emptied_rotated_file_is_named() {
    let f = Fixture::new();
    let log = rotated_log(&f);
    let rotated = |n: u32| log.with_file_name(format!("audit.log.{n}"));
    let (r3, r2, r1) = (rotated(3), rotated(2), rotated(1));
    // Its lines taken, audit.log.2 is empty, and audit.log.1 must still follow audit.log.3.
    std::fs::write(&r2, "").unwrap();
    let (code, out) = verify(&[&r3, &r2, &r1, &log]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.log.2: empty"), "{out}");
    assert!(
        out.contains("audit.log.1: line 1: its prev"),
        "the file after the emptied one is checked against the one before it: {out}"
    );
}

/// A consent request naming 64 long paths, each made of characters JSON escapes: its audit
/// line is half a megabyte, more than the file's end first read to find the last line.
fn long_line(s: &mut Sidecar) {
    // Names of 200 quotes (a name may be 255 bytes), 15 deep.
    let deep = format!("{}/", "\"".repeat(200)).repeat(15);
    let paths: Vec<String> = (0..64).map(|i| format!("project/{deep}{i}")).collect();
    let r = s.request("files/consent", json!({"requestedPaths": paths}));
    assert!(r.get("result").is_some(), "{r}");
}

#[test]
fn a_line_longer_than_the_first_read_of_the_end_keeps_the_chain_at_restart_and_rotation() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    // Restart: the next process finds the chain's end after the long line.
    let log = f.tmp.path().join("restart.log");
    let p = policy(&f, &log, "");
    let mut s = serve(&f, &p, "t");
    long_line(&mut s);
    finish(s);
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size > 256 << 10, "the long line is {size} bytes");
    let mut s = serve(&f, &p, "t");
    reads(&mut s, 3);
    finish(s);
    let (code, out) = verify(&[&log]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(", seq 1 to 6,"), "{out}");
    // Rotation: the file after the long line continues the chain.
    let log = f.tmp.path().join("rotated.log");
    let p = policy(&f, &log, "rotate_bytes = 100000\nkeep = 5\n");
    let mut s = serve(&f, &p, "t");
    reads(&mut s, 2);
    long_line(&mut s);
    reads(&mut s, 2);
    finish(s);
    let mut files: Vec<PathBuf> = (1..=5)
        .rev()
        .map(|n| log.with_file_name(format!("rotated.log.{n}")))
        .filter(|p| p.exists())
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    files.push(log.clone());
    let all: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, out) = verify(&all);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn verify_goes_on_past_a_fault_and_names_a_later_edit_too() {
    let f = Fixture::new();
    f.file("a.txt", "hello");
    let log = f.tmp.path().join("audit.log");
    let p = policy(&f, &log, "");
    let mut s = serve(&f, &p, "t");
    reads(&mut s, 11);
    finish(s);
    let both = copy_with(
        &log,
        "both.log",
        |l| {
            l.insert(
                2,
                "2026-11-26T00:00:00Z  WARN a warning among the lines".into(),
            );
            l[8] = l[8].replace("files/read", "files/list");
        },
        0,
    );
    let (code, out) = verify(&[&both]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("both.log: line 3: not a JSON line"), "{out}");
    assert!(out.contains("both.log: also line 9: changed"), "{out}");
    assert_eq!(out.lines().count(), 2, "each fault once: {out}");
}
