//! `files/write`, one-shot: every `create`/`overwrite` combination, encodings, `ifMatch`, result
//! fields, permission bits, special targets, grants and the size limit. After every failed
//! write the directory holds no `.fsbroker-*.tmp` temporary. Chunked uploads are in
//! `write_upload.rs`.

use crate::common::fs::*;
use crate::common::write::*;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

async fn write(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/write", params).await
}

async fn stat_etag(b: &Broker, path: &str) -> String {
    let r = call(b, "s", "files/stat", json!({ "path": path })).await;
    ok(&r)["etag"].as_str().expect("etag").to_owned()
}

/// A write of `content` to `path` on condition that the file's etag is `tag`.
async fn write_if_match(b: &Broker, path: &str, content: &str, tag: impl Into<Value>) -> Value {
    write(
        b,
        json!({"path": path, "content": content, "ifMatch": tag.into()}),
    )
    .await
}

/// Asserts the error triple of `r`, and that no temporary is left in `dir`.
fn assert_failed(r: &Value, code: i64, data_code: &str, reason: &str, dir: &Path) {
    assert_error(r, code, data_code, reason);
    assert_no_temporaries(dir);
}

#[tokio::test]
async fn write_creates_a_new_file_and_result_fields_match_stat() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let r = write(&b, json!({"path": "project/new.txt", "content": "hello"})).await;
    let res = ok(&r);
    assert_eq!(res["path"], "project/new.txt");
    assert_eq!(res["size"], 5);
    assert_eq!(res["created"], true);
    assert_ne!(
        res["final"], false,
        "a committed write is not a pending chunk: {r}"
    );
    assert_eq!(std::fs::read(f.root.join("new.txt")).unwrap(), b"hello");
    let etag = res["etag"].as_str().expect("etag is a string");
    assert_eq!(etag, stat_etag(&b, "project/new.txt").await);
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn write_overwrites_an_existing_file_with_created_false_and_a_new_etag() {
    let f = Fixture::new();
    f.file("a.txt", "old content");
    let b = writable(&f, "").await;
    let before = stat_etag(&b, "project/a.txt").await;
    let r = write(&b, json!({"path": "project/a.txt", "content": "new"})).await;
    let res = ok(&r);
    assert_eq!(res["created"], false);
    assert_eq!(res["size"], 3);
    assert_eq!(f.text_of("a.txt"), "new");
    let after = stat_etag(&b, "project/a.txt").await;
    assert_eq!(res["etag"], after.as_str());
    assert_ne!(before, after);
    assert_no_temporaries(&f.root);
}

#[tokio::test]
async fn every_create_overwrite_combination_on_existing_and_missing_files() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    // (create, overwrite, exists) -> Ok(created) or Err(data.code)
    let cases: [(bool, bool, bool, Result<bool, &str>); 8] = [
        (true, true, true, Ok(false)),
        (true, true, false, Ok(true)),
        (true, false, true, Err("ALREADY_EXISTS")),
        (true, false, false, Ok(true)),
        (false, true, true, Ok(false)),
        (false, true, false, Err("FILE_NOT_FOUND")),
        (false, false, true, Err("ALREADY_EXISTS")),
        (false, false, false, Err("FILE_NOT_FOUND")),
    ];
    for (i, (create, overwrite, exists, want)) in cases.into_iter().enumerate() {
        let name = format!("f{i}.txt");
        let host = f.root.join(&name);
        if exists {
            std::fs::write(&host, "original").unwrap();
        }
        let r = write(
            &b,
            json!({"path": format!("project/{name}"), "content": "written",
                   "create": create, "overwrite": overwrite}),
        )
        .await;
        let case = format!("create={create} overwrite={overwrite} exists={exists}: {r}");
        match want {
            Ok(created) => {
                assert_eq!(ok(&r)["created"], created, "{case}");
                assert_eq!(std::fs::read_to_string(&host).unwrap(), "written", "{case}");
            }
            Err(code) => {
                let (c, d, _) = err(&r);
                let num = if code == "ALREADY_EXISTS" {
                    -31008
                } else {
                    -31001
                };
                assert_eq!((c, d.as_str()), (num, code), "{case}");
                if exists {
                    assert_eq!(
                        std::fs::read_to_string(&host).unwrap(),
                        "original",
                        "{case}"
                    );
                } else {
                    assert!(!host.exists(), "{case}");
                }
            }
        }
        assert_no_temporaries(&f.root);
    }
}

#[tokio::test]
async fn utf8_content_is_written_as_its_bytes_and_size_counts_bytes() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let text = "héllo wörld ✓ 🦀\n";
    let r = write(
        &b,
        json!({"path": "project/u.txt", "content": text, "encoding": "utf-8"}),
    )
    .await;
    assert_eq!(ok(&r)["size"], text.len());
    assert_eq!(f.text_of("u.txt"), text);
}

#[tokio::test]
async fn base64_content_writes_arbitrary_bytes() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let bytes: Vec<u8> = (0..=255u8).chain([0, 0xff, 0xc3]).collect();
    let r = write(
        &b,
        json!({"path": "project/bin.dat", "content": STANDARD.encode(&bytes), "encoding": "base64"}),
    )
    .await;
    assert_eq!(ok(&r)["size"], bytes.len());
    assert_eq!(std::fs::read(f.root.join("bin.dat")).unwrap(), bytes);
}

#[tokio::test]
async fn invalid_base64_or_bad_params_are_invalid_params_and_write_nothing() {
    let f = Fixture::new();
    f.file("keep.txt", "kept");
    let b = writable(&f, "").await;
    for params in [
        json!({"path": "project/x.bin", "content": "not base64!!", "encoding": "base64"}),
        json!({"path": "project/keep.txt", "content": "@@@", "encoding": "base64"}),
        json!({"path": "project/x.bin", "content": "x", "encoding": "latin-1"}),
        json!({"path": "project/x.bin"}),
        json!({"path": "project/x.bin", "content": 5}),
        json!({"path": "project/x.bin", "content": "x", "create": "yes"}),
        json!({"path": "project/x.bin", "content": "x", "offset": -1}),
    ] {
        let r = write(&b, params.clone()).await;
        assert_eq!(err(&r).0, -32602, "{params}: {r}");
        assert!(!f.root.join("x.bin").exists());
        assert_eq!(f.text_of("keep.txt"), "kept");
        assert_no_temporaries(&f.root);
    }
}

/// A misspelt option is refused, naming it, rather than ignored: `ifmatch` for `ifMatch`
/// would otherwise be an unconditional overwrite. Every method's params refuse a key they do
/// not know; `_meta`, which any MCP request may carry, is taken.
#[tokio::test]
async fn an_unknown_param_is_refused_naming_it_and_meta_is_allowed() {
    let f = Fixture::new();
    f.file("keep.txt", "kept");
    let b = writable(&f, "").await;
    let r = write(
        &b,
        json!({"path": "project/keep.txt", "content": "lost", "ifmatch": "\"stale\""}),
    )
    .await;
    assert_eq!(err(&r).0, -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("ifmatch"), "the key is named: {r}");
    assert_eq!(f.text_of("keep.txt"), "kept");
    for (method, params) in [
        (
            "files/read",
            json!({"path": "project/keep.txt", "offest": 1}),
        ),
        ("files/list", json!({"path": "project", "recurse": true})),
        (
            "files/stat",
            json!({"path": "project/keep.txt", "follow": true}),
        ),
        (
            "files/delete",
            json!({"path": "project/keep.txt", "force": true}),
        ),
    ] {
        let r = call(&b, "s", method, params.clone()).await;
        assert_eq!(err(&r).0, -32602, "{method} {params}: {r}");
    }
    assert_eq!(f.text_of("keep.txt"), "kept");
    let meta = json!({"path": "project/keep.txt", "_meta": {"progressToken": 1}});
    let r = call(&b, "s", "files/read", meta).await;
    assert_eq!(ok(&r)["content"], "kept");
}

#[tokio::test]
async fn if_match_with_the_current_etag_succeeds() {
    let f = Fixture::new();
    f.file("a.txt", "v1");
    let b = writable(&f, "").await;
    let etag = stat_etag(&b, "project/a.txt").await;
    let r = write_if_match(&b, "project/a.txt", "v2", etag).await;
    assert_eq!(ok(&r)["created"], false);
    assert_eq!(f.text_of("a.txt"), "v2");
    // The etag a write returns is good for the next conditional write.
    let next = ok(&r)["etag"].clone();
    let r = write_if_match(&b, "project/a.txt", "v3", next).await;
    ok(&r);
    assert_eq!(f.text_of("a.txt"), "v3");
}

#[tokio::test]
async fn if_match_with_a_stale_etag_is_etag_mismatch_and_keeps_the_old_content() {
    let f = Fixture::new();
    f.file("a.txt", "v1");
    let b = writable(&f, "").await;
    let stale = stat_etag(&b, "project/a.txt").await;
    ok(&write(&b, json!({"path": "project/a.txt", "content": "second"})).await);
    for tag in [stale.as_str(), "\"0000000000000000\"", ""] {
        let r = write_if_match(&b, "project/a.txt", "lost", tag).await;
        assert_failed(&r, -31006, "CONCURRENCY_CONFLICT", "etag_mismatch", &f.root);
        assert_eq!(f.text_of("a.txt"), "second");
    }
}

#[tokio::test]
async fn if_match_on_a_missing_file_is_etag_mismatch_and_creates_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "v1");
    let b = writable(&f, "").await;
    let etag = stat_etag(&b, "project/a.txt").await;
    let r = write_if_match(&b, "project/missing.txt", "x", etag).await;
    assert_failed(&r, -31006, "CONCURRENCY_CONFLICT", "etag_mismatch", &f.root);
    assert!(!f.root.join("missing.txt").exists());
}

#[tokio::test]
async fn result_path_is_in_mount_form_for_absolute_uri_and_dotted_paths() {
    let f = Fixture::new();
    f.dir("sub");
    let b = writable(&f, "").await;
    let abs = f.root.join("sub/abs.txt");
    let uri = format!("file://{}", f.root.join("sub/uri.txt").display());
    for (path, shown) in [
        (abs.to_str().unwrap().to_owned(), "project/sub/abs.txt"),
        (uri, "project/sub/uri.txt"),
        (
            "project/./sub/../sub//dot.txt".to_owned(),
            "project/sub/dot.txt",
        ),
    ] {
        let r = write(&b, json!({"path": path, "content": "x"})).await;
        assert_eq!(ok(&r)["path"], shown, "{r}");
        assert!(!r.to_string().contains(f.tmp.path().to_str().unwrap()));
    }
    for name in ["abs.txt", "uri.txt", "dot.txt"] {
        assert_eq!(std::fs::read(f.root.join("sub").join(name)).unwrap(), b"x");
    }
}

#[tokio::test]
async fn overwriting_keeps_the_permission_bits_of_the_existing_file() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    for (name, bits) in [("a.txt", 0o640), ("run.sh", 0o755), ("private", 0o600)] {
        let p = f.file(name, "old");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(bits)).unwrap();
        let r = write(
            &b,
            json!({"path": format!("project/{name}"), "content": "new"}),
        )
        .await;
        ok(&r);
        assert_eq!(mode(&p), bits, "{name}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }
}

#[tokio::test]
async fn a_new_file_gets_mode_0644_less_the_umask() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    ok(&write(&b, json!({"path": "project/new.txt", "content": "x"})).await);
    assert_eq!(mode(&f.root.join("new.txt")), 0o644 & !umask());
}

#[tokio::test]
async fn writing_a_directory_or_the_root_is_is_a_directory() {
    let f = Fixture::new();
    f.file("dir/inner.txt", "inner");
    let b = writable(&f, "").await;
    for path in ["project/dir", "project"] {
        let r = write(&b, json!({"path": path, "content": "x"})).await;
        assert_failed(&r, -31010, "IS_A_DIRECTORY", "", &f.root);
    }
    assert!(f.root.join("dir").is_dir());
    assert_eq!(f.text_of("dir/inner.txt"), "inner");
    assert_no_temporaries(&f.root.join("dir"));
}

#[tokio::test]
async fn writing_a_fifo_is_not_regular_file_at_once() {
    let f = Fixture::new();
    let fifo = f.root.join("pipe");
    mkfifo(&fifo);
    f.symlink("pipe", "to-pipe");
    let b = writable(&f, "").await;
    for path in ["project/pipe", "project/to-pipe"] {
        // Bounded so that a broker that opens the FIFO fails the test instead of hanging it.
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            write(&b, json!({"path": path, "content": "x"})),
        )
        .await
        .expect("a write to a FIFO must not block");
        assert_failed(&r, -31003, "INVALID_PATH", "not_regular_file", &f.root);
    }
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[tokio::test]
async fn writing_into_a_missing_parent_is_file_not_found() {
    let f = Fixture::new();
    let b = writable(&f, "").await;
    let r = write(&b, json!({"path": "project/nodir/x.txt", "content": "x"})).await;
    assert_failed(&r, -31001, "FILE_NOT_FOUND", "", &f.root);
    assert!(!f.root.join("nodir").exists());
}

#[tokio::test]
async fn a_read_only_root_refuses_writes_with_read_only() {
    let f = Fixture::new();
    f.file("a.txt", "old");
    let b = f.broker();
    consent_all(&b, "s").await;
    for path in ["project/a.txt", "project/new.txt"] {
        let r = write(&b, json!({"path": path, "content": "x"})).await;
        assert_failed(&r, -31002, "PERMISSION_DENIED", "read_only", &f.root);
    }
    assert_eq!(f.text_of("a.txt"), "old");
    assert!(!f.root.join("new.txt").exists());
}

#[tokio::test]
async fn a_read_grant_on_a_writable_root_refuses_writes_with_read_only() {
    let f = Fixture::new();
    f.file("a.txt", "old");
    let b = f.broker_with("write", "");
    let r = call(
        &b,
        "s",
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "read"}),
    )
    .await;
    assert_eq!(ok(&r)["access"], "read");
    let r = write(&b, json!({"path": "project/a.txt", "content": "x"})).await;
    assert_failed(&r, -31002, "PERMISSION_DENIED", "read_only", &f.root);
    assert_eq!(f.text_of("a.txt"), "old");
}

#[tokio::test]
async fn without_consent_a_write_is_no_consent() {
    let f = Fixture::new();
    let b = f.broker_with("write", "");
    let r = write(&b, json!({"path": "project/new.txt", "content": "x"})).await;
    assert_failed(&r, -31002, "PERMISSION_DENIED", "no_consent", &f.root);
    assert!(!f.root.join("new.txt").exists());
}

#[tokio::test]
async fn after_revocation_a_write_is_revoked() {
    let f = Fixture::new();
    f.file("a.txt", "old");
    let b = writable(&f, "").await;
    ok(&write(&b, json!({"path": "project/a.txt", "content": "mid"})).await);
    assert!(!b.revoke_session("s").unwrap().is_empty());
    let r = write(&b, json!({"path": "project/a.txt", "content": "late"})).await;
    assert_failed(&r, -31002, "PERMISSION_DENIED", "revoked", &f.root);
    assert_eq!(f.text_of("a.txt"), "mid");
}

#[tokio::test]
async fn max_write_bytes_refuses_a_larger_one_shot_write_and_writes_nothing() {
    let f = Fixture::new();
    f.file("keep.txt", "kept");
    let b = writable(&f, "[limits]\nmax_write_bytes = 1000\n").await;
    for path in ["project/big.txt", "project/keep.txt"] {
        let r = write(&b, json!({"path": path, "content": "x".repeat(1001)})).await;
        assert_failed(&r, -31007, "QUOTA_EXCEEDED", "", &f.root);
        assert_eq!(r["error"]["data"]["limit"], 1000, "{r}");
    }
    assert!(!f.root.join("big.txt").exists());
    assert_eq!(f.text_of("keep.txt"), "kept");
    // Exactly the limit is allowed.
    let r = write(
        &b,
        json!({"path": "project/big.txt", "content": "x".repeat(1000)}),
    )
    .await;
    assert_eq!(ok(&r)["size"], 1000);
}
