//! `files/write`, chunked uploads: staging, commit, offsets, restarts, the size limit across
//! chunks, the upload count limit, idle timeout, end of session, and preconditions decided at
//! commit. Nothing appears at the path before the final chunk, and a failed chunk leaves no
//! `.fsbroker-*.tmp` temporary behind.

use crate::common::fs::*;
use crate::common::write::*;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

async fn write(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/write", params).await
}

/// One utf-8 chunk of an upload to `path`.
async fn chunk(b: &Broker, path: &str, offset: usize, content: &str, last: bool) -> Value {
    write(
        b,
        json!({"path": path, "content": content, "offset": offset, "final": last}),
    )
    .await
}

/// Asserts that `dir` holds exactly `expected` plus one hidden broker temporary.
fn assert_staged(dir: &Path, expected: &[&str]) {
    let t = temporaries(dir);
    assert_eq!(t.len(), 1, "expected one temporary: {:?}", names(dir));
    assert!(t[0].ends_with(".tmp"), "{t:?}");
    let rest: Vec<String> = names(dir).into_iter().filter(|n| *n != t[0]).collect();
    assert_eq!(rest, expected, "directory while staging");
}

fn assert_upload_offset(r: &Value) {
    assert_error(r, -31006, "CONCURRENCY_CONFLICT", "upload_offset");
}

fn assert_pending(r: &Value, path: &str, staged: usize) {
    assert_eq!(
        ok(r),
        &json!({"path": path, "size": staged, "etag": null, "created": false, "final": false}),
    );
}

#[tokio::test]
async fn three_chunks_commit_their_concatenation_and_nothing_appears_before() {
    let f = Fixture::new();
    f.file("other.txt", "o");
    let b = writable(&f, "").await;
    let r = chunk(&b, "project/up.txt", 0, "alpha-", false).await;
    assert_pending(&r, "project/up.txt", 6);
    assert_staged(&f.root, &["other.txt"]);
    let r = chunk(&b, "project/up.txt", 6, "beta-", false).await;
    assert_pending(&r, "project/up.txt", 11);
    assert_staged(&f.root, &["other.txt"]);
    let r = call(&b, "s", "files/stat", json!({"path": "project/up.txt"})).await;
    assert_error(&r, -31001, "FILE_NOT_FOUND", "");
    let r = chunk(&b, "project/up.txt", 11, "gamma", true).await;
    let res = ok(&r);
    assert_eq!(res["path"], "project/up.txt");
    assert_eq!(res["size"], 16);
    assert_eq!(res["created"], true);
    assert_ne!(res["final"], false);
    assert_eq!(f.text_of("up.txt"), "alpha-beta-gamma");
    let st = call(&b, "s", "files/stat", json!({"path": "project/up.txt"})).await;
    assert_eq!(res["etag"], ok(&st)["etag"]);
    assert_eq!(names(&f.root), ["other.txt", "up.txt"]);
}

#[tokio::test]
async fn an_upload_over_an_existing_file_keeps_the_old_content_until_commit() {
    let f = Fixture::new();
    f.file("a.txt", "old");
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/a.txt", 0, "new-", false).await);
    assert_eq!(f.text_of("a.txt"), "old");
    assert_staged(&f.root, &["a.txt"]);
    let r = chunk(&b, "project/a.txt", 4, "content", true).await;
    assert_eq!(ok(&r)["created"], false);
    assert_eq!(f.text_of("a.txt"), "new-content");
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn binary_chunks_in_base64_commit_the_exact_bytes() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let bytes: Vec<u8> = (0..=255u8).rev().chain(0..=255u8).collect();
    let parts = [&bytes[..100], &bytes[100..300], &bytes[300..]];
    let mut offset = 0;
    for (i, part) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        let r = write(
            &b,
            json!({"path": "project/bin.dat", "content": STANDARD.encode(part),
                   "encoding": "base64", "offset": offset, "final": last}),
        )
        .await;
        offset += part.len();
        assert_eq!(ok(&r)["size"], offset);
    }
    assert_eq!(std::fs::read(f.root.join("bin.dat")).unwrap(), bytes);
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn a_chunk_at_the_wrong_offset_is_upload_offset_and_ends_the_upload() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/up.txt", 0, "12345", false).await);
    for wrong in [4, 6, 100] {
        ok(&chunk(&b, "project/up.txt", 0, "12345", false).await);
        assert_upload_offset(&chunk(&b, "project/up.txt", wrong, "x", false).await);
        assert_no_temporaries(&f.root);
        // The upload ended with the failed chunk: the right offset no longer continues it.
        assert_upload_offset(&chunk(&b, "project/up.txt", 5, "6", true).await);
        assert!(!f.root.join("up.txt").exists());
        assert_no_temporaries(&f.root);
    }
}

#[tokio::test]
async fn a_chunk_past_zero_without_a_started_upload_is_upload_offset() {
    let f = Fixture::new();
    f.file("a.txt", "exists");
    let b = writable(&f, "").await;
    for (path, last) in [("project/new.txt", false), ("project/new.txt", true)] {
        assert_upload_offset(&chunk(&b, path, 3, "abc", last).await);
    }
    // An upload to another path is not continued by a chunk for this one.
    ok(&chunk(&b, "project/other.txt", 0, "abc", false).await);
    assert_upload_offset(&chunk(&b, "project/a.txt", 3, "def", true).await);
    assert!(!f.root.join("new.txt").exists());
    assert_eq!(f.text_of("a.txt"), "exists");
    assert_eq!(
        temporaries(&f.root).len(),
        1,
        "only other.txt's upload is staged"
    );
}

#[tokio::test]
async fn a_chunk_at_offset_zero_restarts_and_discards_the_staged_bytes() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/up.txt", 0, "AAAAAAAA", false).await);
    let r = chunk(&b, "project/up.txt", 0, "BB", false).await;
    assert_pending(&r, "project/up.txt", 2);
    assert_staged(&f.root, &[]);
    // The old upload's 8 bytes are gone: offset 8 no longer fits, offset 2 does.
    ok(&chunk(&b, "project/up.txt", 0, "BB", false).await);
    let r = chunk(&b, "project/up.txt", 2, "CC", true).await;
    assert_eq!(ok(&r)["size"], 4);
    assert_eq!(f.text_of("up.txt"), "BBCC");
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn max_write_bytes_counts_the_sum_of_the_chunks() {
    let f = Fixture::new();
    let b = writable(&f, "[limits]\nmax_write_bytes = 1000\n").await;
    let part = "y".repeat(400);
    ok(&chunk(&b, "project/big.txt", 0, &part, false).await);
    ok(&chunk(&b, "project/big.txt", 400, &part, false).await);
    let r = chunk(&b, "project/big.txt", 800, &part, true).await;
    assert_error(&r, -31007, "QUOTA_EXCEEDED", "");
    assert_eq!(r["error"]["data"]["limit"], 1000, "{r}");
    assert!(!f.root.join("big.txt").exists());
    assert_no_temporaries(&f.root);
    // The failed chunk ended the upload.
    assert_upload_offset(&chunk(&b, "project/big.txt", 800, "z", true).await);
    assert!(!f.root.join("big.txt").exists());
    // Up to the limit exactly is allowed.
    ok(&chunk(&b, "project/big.txt", 0, &"y".repeat(600), false).await);
    let r = chunk(&b, "project/big.txt", 600, &part, true).await;
    assert_eq!(ok(&r)["size"], 1000);
}

#[tokio::test]
async fn a_non_final_chunk_over_max_write_bytes_is_refused_at_once() {
    let f = Fixture::new();
    let b = writable(&f, "[limits]\nmax_write_bytes = 1000\n").await;
    let r = chunk(&b, "project/big.txt", 0, &"y".repeat(1001), false).await;
    assert_error(&r, -31007, "QUOTA_EXCEEDED", "");
    assert_eq!(r["error"]["data"]["limit"], 1000, "{r}");
    assert!(!f.root.join("big.txt").exists());
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn max_uploads_refuses_a_third_concurrent_upload() {
    let f = Fixture::new();
    let b = writable(&f, "[limits]\nmax_uploads = 2\n").await;
    ok(&chunk(&b, "project/a.txt", 0, "a", false).await);
    ok(&chunk(&b, "project/b.txt", 0, "b", false).await);
    let r = chunk(&b, "project/c.txt", 0, "c", false).await;
    assert_error(&r, -31007, "QUOTA_EXCEEDED", "");
    assert_eq!(r["error"]["data"]["limit"], 2, "{r}");
    assert_eq!(temporaries(&f.root).len(), 2);
    // Restarting an open upload does not count as another one.
    ok(&chunk(&b, "project/a.txt", 0, "A", false).await);
    // A committed upload frees its place; one-shot writes never count.
    ok(&write(&b, json!({"path": "project/d.txt", "content": "one shot"})).await);
    ok(&chunk(&b, "project/a.txt", 1, "!", true).await);
    ok(&chunk(&b, "project/c.txt", 0, "c", false).await);
    ok(&chunk(&b, "project/c.txt", 1, "!", true).await);
    assert_eq!(f.text_of("a.txt"), "A!");
    assert_eq!(f.text_of("c.txt"), "c!");
}

#[tokio::test]
async fn ending_the_session_removes_staged_uploads() {
    let f = Fixture::new();
    f.dir("sub");
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/a.txt", 0, "aaa", false).await);
    ok(&chunk(&b, "project/sub/b.txt", 0, "bbb", false).await);
    assert_eq!(temporaries(&f.root).len(), 1);
    assert_eq!(temporaries(&f.root.join("sub")).len(), 1);
    assert!(b.end_session("s"));
    assert_no_temporaries(&f.root);
    assert_no_temporaries(&f.root.join("sub"));
    // A new session does not continue the old upload.
    consent_write(&b, "s").await;
    assert_upload_offset(&chunk(&b, "project/a.txt", 3, "x", true).await);
    assert!(!f.root.join("a.txt").exists());
}

#[tokio::test]
async fn an_idle_upload_expires_and_its_temporary_is_removed() {
    let f = Fixture::new();
    let b = writable(&f, "[limits]\nupload_idle_secs = 1\n").await;
    ok(&chunk(&b, "project/a.txt", 0, "aaa", false).await);
    assert_eq!(temporaries(&f.root).len(), 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_upload_offset(&chunk(&b, "project/a.txt", 3, "x", true).await);
    assert_no_temporaries(&f.root);
    assert!(!f.root.join("a.txt").exists());
}

#[tokio::test]
async fn an_idle_upload_of_another_path_is_removed_by_the_next_write() {
    let f = Fixture::new();
    let b = writable(&f, "[limits]\nupload_idle_secs = 1\n").await;
    ok(&chunk(&b, "project/a.txt", 0, "aaa", false).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ok(&chunk(&b, "project/b.txt", 0, "b", true).await);
    assert_no_temporaries(&f.root);
    assert_upload_offset(&chunk(&b, "project/a.txt", 3, "x", true).await);
}

#[tokio::test]
async fn a_one_shot_write_discards_an_upload_staged_for_the_same_path() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/a.txt", 0, "staged", false).await);
    let r = write(&b, json!({"path": "project/a.txt", "content": "direct"})).await;
    assert_eq!(ok(&r)["created"], true);
    assert_no_temporaries(&f.root);
    assert_upload_offset(&chunk(&b, "project/a.txt", 6, "more", true).await);
    assert_eq!(f.text_of("a.txt"), "direct");
}

#[tokio::test]
async fn if_match_is_checked_again_at_the_final_chunk() {
    let f = Fixture::new();
    f.file("a.txt", "v1");
    let b = writable(&f, "").await;
    let st = call(&b, "s", "files/stat", json!({"path": "project/a.txt"})).await;
    let etag = ok(&st)["etag"].clone();
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "upload-", "offset": 0, "final": false,
               "ifMatch": etag}),
    )
    .await;
    ok(&r);
    std::fs::write(f.root.join("a.txt"), "changed by someone else").unwrap();
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "end", "offset": 7, "final": true,
               "ifMatch": etag}),
    )
    .await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "etag_mismatch");
    assert_eq!(f.text_of("a.txt"), "changed by someone else");
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn a_stale_if_match_fails_the_first_chunk() {
    let f = Fixture::new();
    f.file("a.txt", "v1");
    let b = writable(&f, "").await;
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "x", "offset": 0, "final": false,
               "ifMatch": "\"stale\""}),
    )
    .await;
    assert_error(&r, -31006, "CONCURRENCY_CONFLICT", "etag_mismatch");
    assert_no_temporaries(&f.root);
    assert_eq!(f.text_of("a.txt"), "v1");
}

#[tokio::test]
async fn create_exclusive_upload_fails_at_commit_when_the_file_appeared() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "mine", "offset": 0, "final": false,
               "create": true, "overwrite": false}),
    )
    .await;
    ok(&r);
    std::fs::write(f.root.join("a.txt"), "theirs").unwrap();
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "!", "offset": 4, "final": true,
               "create": true, "overwrite": false}),
    )
    .await;
    assert_error(&r, -31008, "ALREADY_EXISTS", "");
    assert_eq!(f.text_of("a.txt"), "theirs");
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn a_revoked_grant_fails_the_next_chunk_and_ends_the_upload() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/a.txt", 0, "aaa", false).await);
    b.revoke_session("s").unwrap();
    let r = chunk(&b, "project/a.txt", 3, "bbb", true).await;
    assert_error(&r, -31002, "PERMISSION_DENIED", "revoked");
    assert!(!f.root.join("a.txt").exists());
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn a_chunk_with_bad_base64_fails_and_ends_the_upload() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&chunk(&b, "project/a.txt", 0, "aaa", false).await);
    let r = write(
        &b,
        json!({"path": "project/a.txt", "content": "!!!", "encoding": "base64",
               "offset": 3, "final": true}),
    )
    .await;
    assert_eq!(err(&r).0, -32602, "{r}");
    assert!(!f.root.join("a.txt").exists());
    assert_no_temporaries(&f.root);
}
