//! Concurrent writes through the library handle: readers racing writers see whole versions
//! only, writers racing with one `ifMatch` etag have exactly one winner, renames, deletes and
//! writes of one path racing each other answer only documented errors, and an advisory lock
//! held elsewhere makes a write fail with `locked` until it is released. A file cut shorter
//! by another program while it is read in chunks gives only bytes it held.

use crate::common::fs::assert_no_temporaries;
use crate::common::write::consent_write;
use crate::common::*;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const LIMITS: &str = "[limits]\nrequests_per_second = 100000\nburst = 100000\nmax_in_flight = 64\n";
const BODY: usize = 64 << 10;

/// Version `i` of writer `t`: `BODY + 3i` copies of the writer's letter, then `#t:i#`.
fn version(t: usize, i: usize) -> String {
    let letter = char::from(b'A' + t as u8);
    format!("{}#{t}:{i}#", letter.to_string().repeat(BODY + 3 * i))
}

/// The (writer, index) of a whole version, or a panic describing the mix.
fn parse_version(content: &str) -> (usize, usize) {
    let hash = content
        .find('#')
        .unwrap_or_else(|| panic!("no version tag in {} bytes", content.len()));
    let (body, tag) = content.split_at(hash);
    let tag = tag
        .strip_prefix('#')
        .and_then(|t| t.strip_suffix('#'))
        .unwrap_or_else(|| panic!("bad version tag {tag:?}"));
    let (t, i) = tag.split_once(':').unwrap();
    let (t, i): (usize, usize) = (t.parse().unwrap(), i.parse().unwrap());
    let letter = b'A' + t as u8;
    assert_eq!(body.len(), BODY + 3 * i, "body length of version {t}:{i}");
    assert!(
        body.bytes().all(|b| b == letter),
        "version {t}:{i} holds bytes of another version"
    );
    (t, i)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_whole_file_readers_always_see_one_whole_version() {
    let f = Fixture::new();
    let b = f.broker_with("write", LIMITS);
    const WRITERS: usize = 8;
    const WRITES: usize = 25;
    const INITIAL: usize = 25; // writer 25 ('Z') never writes: the initial version
    f.file("v.txt", version(INITIAL, 0));
    for t in 0..WRITERS {
        consent_write(&b, &format!("w{t}")).await;
    }
    consent_write(&b, "r").await;
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (b, done, reads) = (b.clone(), done.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            while !done.load(Ordering::Acquire) {
                let r = call(
                    &b,
                    "r",
                    "files/read",
                    json!({"path": "project/v.txt", "length": 1 << 20}),
                )
                .await;
                let res = ok(&r);
                let content = res["content"].as_str().unwrap();
                assert_eq!(res["eof"], true);
                assert_eq!(res["size"].as_u64().unwrap() as usize, content.len());
                assert_eq!(res["length"].as_u64().unwrap() as usize, content.len());
                parse_version(content);
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut writers = Vec::new();
    for t in 0..WRITERS {
        let b = b.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..WRITES {
                let r = call(
                    &b,
                    &format!("w{t}"),
                    "files/write",
                    json!({"path": "project/v.txt", "content": version(t, i)}),
                )
                .await;
                let res = ok(&r);
                assert_eq!(res["size"].as_u64().unwrap() as usize, version(t, i).len());
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.await.unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    // The last commit is the last write of whichever writer finished last.
    let last = f.text_of("v.txt");
    let (t, i) = parse_version(&last);
    assert!(t < WRITERS && i == WRITES - 1, "final version {t}:{i}");
    assert_no_temporaries(&f.root);
    f.assert_canary_intact();
}

/// The etag of `project/race.txt`, as `racer0` stats it.
async fn race_etag(b: &Broker) -> Value {
    let stat = call(
        b,
        "racer0",
        "files/stat",
        json!({"path": "project/race.txt"}),
    )
    .await;
    ok(&stat)["etag"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_racing_with_one_if_match_etag_have_exactly_one_winner() {
    let f = Fixture::new();
    let b = f.broker_with("write", LIMITS);
    const RACERS: usize = 16;
    const ROUNDS: usize = 20;
    f.file("race.txt", "round zero");
    for k in 0..RACERS {
        consent_write(&b, &format!("racer{k}")).await;
    }
    for round in 0..ROUNDS {
        let etag = race_etag(&b).await.as_str().unwrap().to_owned();
        let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
        let mut tasks = Vec::new();
        for k in 0..RACERS {
            let (b, etag, barrier) = (b.clone(), etag.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let content = format!("round {round} won by racer {k} {}", "x".repeat(k * 100));
                barrier.wait().await;
                let r = call(
                    &b,
                    &format!("racer{k}"),
                    "files/write",
                    json!({"path": "project/race.txt", "content": content, "ifMatch": etag}),
                )
                .await;
                (k, content, r)
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (k, content, r) = t.await.unwrap();
            if r.get("error").is_none() {
                winners.push((k, content, ok(&r)["etag"].clone()));
            } else {
                assert_eq!(
                    err(&r),
                    (
                        -31006,
                        "CONCURRENCY_CONFLICT".into(),
                        "etag_mismatch".into()
                    ),
                    "round {round} racer {k}: {r}"
                );
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: winners {:?}",
            winners.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        let (_, content, new_etag) = &winners[0];
        assert_eq!(&f.text_of("race.txt"), content);
        assert_eq!(&race_etag(&b).await, new_etag);
        assert_ne!(new_etag.as_str().unwrap(), etag);
    }
    assert_no_temporaries(&f.root);
}

/// Every response either succeeds or carries one of `allowed` as `data.code`; never an
/// internal error.
fn only_documented(method: &str, r: &Value, allowed: &[&str]) -> bool {
    if r.get("error").is_none() {
        ok(r);
        return true;
    }
    let (code, data_code, _) = err(r);
    assert!(
        allowed.contains(&data_code.as_str()),
        "{method} answered {code} {data_code}, outside {allowed:?}: {r}"
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_renames_deletes_and_writes_of_one_path_answer_only_documented_errors() {
    let f = Fixture::new();
    let b = f.broker_with("write", LIMITS);
    const TASKS: usize = 8;
    const OPS: usize = 40;
    for t in 0..TASKS {
        consent_write(&b, &format!("m{t}")).await;
    }
    let successes = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (b, successes) = (b.clone(), successes.clone());
        tasks.push(tokio::spawn(async move {
            let server = format!("m{t}");
            for i in 0..OPS {
                let (method, params, allowed): (&str, Value, &[&str]) = match (t + i) % 6 {
                    0 => (
                        "files/write",
                        json!({"path": "project/a.txt", "content": format!("a from {t}:{i}")}),
                        &[],
                    ),
                    1 => (
                        "files/rename",
                        json!({"oldPath": "project/a.txt", "newPath": "project/b.txt"}),
                        &["FILE_NOT_FOUND", "ALREADY_EXISTS"],
                    ),
                    2 => (
                        "files/rename",
                        json!({"oldPath": "project/b.txt", "newPath": "project/a.txt", "overwrite": true}),
                        &["FILE_NOT_FOUND"],
                    ),
                    3 => (
                        "files/delete",
                        json!({"path": "project/a.txt"}),
                        &["FILE_NOT_FOUND"],
                    ),
                    4 => (
                        "files/create",
                        json!({"path": "project/a.txt", "type": "file"}),
                        &["ALREADY_EXISTS"],
                    ),
                    _ => (
                        "files/write",
                        json!({"path": "project/b.txt", "content": format!("b from {t}:{i}")}),
                        &[],
                    ),
                };
                let r = call(&b, &server, method, params).await;
                if only_documented(method, &r, allowed) {
                    successes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(successes.load(Ordering::Relaxed) > 0);
    // Whatever is left is a.txt or b.txt holding a whole version some call wrote (or empty).
    for entry in std::fs::read_dir(&f.root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        assert!(
            name == "a.txt" || name == "b.txt",
            "unexpected entry {name}"
        );
        let content = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            content.is_empty() || content.starts_with("a from ") || content.starts_with("b from "),
            "{name} holds {content:?}"
        );
    }
    // The broker still answers normally afterwards.
    let r = call(
        &b,
        "m0",
        "files/write",
        json!({"path": "project/a.txt", "content": "end"}),
    )
    .await;
    ok(&r);
    assert_eq!(f.text_of("a.txt"), "end");
    f.assert_canary_intact();
}

/// `files/write` by session `s`.
async fn write(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/write", params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn advisory_lock_held_elsewhere_makes_write_fail_locked_until_released() {
    let f = Fixture::new();
    // Each refusal below waits the whole lock wait first: a short one.
    let b = f.broker_with("write", &format!("{LIMITS}lock_wait_ms = 100\n"));
    consent_write(&b, "s").await;
    let target = f.file("locked.txt", "old content");
    // A separate open file description: flock conflicts with the broker's own lock exactly as
    // it would with another process's.
    let holder = std::fs::File::open(&target).unwrap();
    holder.try_lock().expect("take the advisory lock");

    let r = write(&b, json!({"path": "project/locked.txt", "content": "new"})).await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "locked");
    // The writer is told when to try again, and who holds the file.
    let retry = r["error"]["data"]["retryAfterMs"].as_u64();
    assert!(retry.is_some_and(|ms| ms > 0), "no retry hint: {r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another process")),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old content");
    assert_no_temporaries(&f.root);

    // The final chunk of an upload commits the same way: refused while the lock is held.
    let r = write(
        &b,
        json!({"path": "project/locked.txt", "content": "up", "final": false}),
    )
    .await;
    ok(&r);
    let r = write(
        &b,
        json!({"path": "project/locked.txt", "content": "load", "offset": 2, "final": true}),
    )
    .await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "locked");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old content");

    // Delete and rename honour the same lock: the file is neither removed, moved, nor
    // replaced from under the process that holds it.
    let r = call(
        &b,
        "s",
        "files/delete",
        json!({"path": "project/locked.txt"}),
    )
    .await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "locked");
    let moved = json!({"oldPath": "project/locked.txt", "newPath": "project/moved.txt"});
    let r = call(&b, "s", "files/rename", moved).await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "locked");
    f.file("other.txt", "other");
    let over = json!({"oldPath": "project/other.txt", "newPath": "project/locked.txt",
                      "overwrite": true});
    let r = call(&b, "s", "files/rename", over).await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "locked");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old content");
    assert!(!f.root.join("moved.txt").exists());

    holder.unlock().unwrap();
    let r = write(&b, json!({"path": "project/locked.txt", "content": "new"})).await;
    ok(&r);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    drop(holder);
    // Staged uploads end with their session: nothing is left behind.
    b.end_session("s");
    assert_no_temporaries(&f.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_cut_shorter_while_it_is_read_in_chunks_gives_only_bytes_it_held() {
    use std::os::unix::fs::FileExt;
    const FULL: u64 = 64 << 10;
    let f = Fixture::new();
    let b = f.broker_with("write", LIMITS);
    f.file("t.txt", "A".repeat(FULL as usize));
    consent_write(&b, "r").await;
    // Another program cuts the file shorter in place and writes it back to its length with
    // more `A`s, again and again: the file never holds anything but `A`s, but a chunk may
    // find it shorter than it was when the read began.
    let done = Arc::new(AtomicBool::new(false));
    let cutter = {
        let (done, path) = (done.clone(), f.root.join("t.txt"));
        std::thread::spawn(move || {
            let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            let fill = vec![b'A'; FULL as usize];
            let mut round = 0usize;
            while !done.load(Ordering::Acquire) {
                let short = [0u64, 1000, 30_000][round % 3];
                file.set_len(short).unwrap();
                file.write_all_at(&fill[short as usize..], short).unwrap();
                round += 1;
            }
        })
    };
    // Chunks read in place, at the start and further in.
    for round in 0..2000u64 {
        let length = [(64 << 10) - 1, 4096, 40_000][(round % 3) as usize];
        let offset = [0u64, 1000, 20_000][(round / 3 % 3) as usize];
        let r = call(
            &b,
            "r",
            "files/read",
            json!({"path": "project/t.txt", "offset": offset, "length": length}),
        )
        .await;
        let res = ok(&r);
        let content = res["content"].as_str().unwrap();
        assert!(
            content.len() <= length,
            "{} bytes for {length}",
            content.len()
        );
        assert_eq!(res["length"].as_u64().unwrap() as usize, content.len());
        assert_eq!(res["offset"].as_u64().unwrap(), offset);
        assert!(
            content.bytes().all(|c| c == b'A'),
            "a chunk at {offset} holds bytes the file never held"
        );
    }
    done.store(true, Ordering::Release);
    cutter.join().unwrap();
}
