//! `files/read`: whole files, chunking, the UTF-8 boundary rule, encodings, limits and errors.

use crate::common::wire::is_rfc3339_utc;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

async fn read(b: &Broker, params: Value) -> Value {
    call(b, "s", "files/read", params).await
}

/// The file bytes a read result carries, whatever its encoding.
fn bytes_of(r: &Value) -> Vec<u8> {
    let content = r["content"].as_str().expect("content is a string");
    match r["encoding"].as_str() {
        Some("utf-8") => content.as_bytes().to_vec(),
        Some("base64") => STANDARD.decode(content).expect("valid base64"),
        other => panic!("unexpected encoding {other:?} in {r}"),
    }
}

/// Reads `path` from start to end in chunks of `length`, checking offsets, and returns the
/// concatenated bytes and the number of chunks.
async fn read_all(b: &Broker, path: &str, length: u64) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut offset = 0u64;
    let mut chunks = 0;
    loop {
        let r = read(b, json!({"path": path, "offset": offset, "length": length})).await;
        let r = ok(&r);
        assert_eq!(r["offset"], offset);
        let bytes = bytes_of(r);
        let len = r["length"].as_u64().unwrap();
        assert_eq!(len, bytes.len() as u64, "length counts the bytes consumed");
        assert!(len <= length + 3, "chunk of {len} for a length of {length}");
        out.extend_from_slice(&bytes);
        offset += len;
        chunks += 1;
        assert!(chunks < 100_000, "read does not advance");
        if r["eof"] == true {
            assert_eq!(offset, r["size"].as_u64().unwrap());
            return (out, chunks);
        }
        assert!(len > 0, "a chunk before eof consumed nothing: {r}");
    }
}

#[tokio::test]
async fn whole_small_file_is_utf8_with_size_mime_etag_and_mtime() {
    let f = Fixture::new();
    let text = "{\"name\": \"caf\u{e9}\"}";
    f.file("data.json", text);
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/data.json"})).await;
    let r = ok(&r);
    assert_eq!(r["content"], text);
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["size"], text.len() as u64);
    assert_eq!(r["offset"], 0);
    assert_eq!(r["length"], text.len() as u64);
    assert_eq!(r["eof"], true);
    assert_eq!(r["mimeType"], "application/json");
    assert!(!r["etag"].as_str().unwrap().is_empty(), "etag: {r}");
    let mtime = r["mtime"].as_str().expect("mtime string");
    assert!(is_rfc3339_utc(mtime), "not RFC 3339 UTC: {mtime}");
}

#[tokio::test]
async fn mime_type_follows_the_extension_as_mime_guess_gives_it() {
    let f = Fixture::new();
    f.file("pic.png", [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
    f.file("notes.txt", "plain");
    f.file("blob.unknownext", "x");
    let b = consented_unthrottled(&f).await;
    for (name, mime) in [
        ("pic.png", "image/png"),
        ("notes.txt", "text/plain"),
        ("blob.unknownext", "application/octet-stream"),
    ] {
        let expected = mime_guess::from_path(name).first_or_octet_stream();
        assert_eq!(expected.essence_str(), mime);
        let r = read(&b, json!({"path": format!("project/{name}")})).await;
        assert_eq!(ok(&r)["mimeType"], mime, "{name}");
    }
}

#[tokio::test]
async fn chunked_reads_of_text_concatenate_to_the_original() {
    let f = Fixture::new();
    let text: String = (0..100)
        .map(|i| format!("line {i}: caf\u{e9} \u{2026} \u{1f600}\n"))
        .collect();
    f.file("big.txt", &text);
    let b = consented_unthrottled(&f).await;
    for length in [1u64, 7, 1000, 4096] {
        let (bytes, chunks) = read_all(&b, "project/big.txt", length).await;
        assert_eq!(bytes, text.as_bytes(), "length {length}");
        assert!(chunks > 1 || length as usize >= text.len());
    }
}

#[tokio::test]
async fn chunked_reads_of_binary_concatenate_to_the_original() {
    let f = Fixture::new();
    let data: Vec<u8> = (0..6_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    f.file("blob.bin", &data);
    let b = consented_unthrottled(&f).await;
    for length in [1u64, 777, 4096] {
        let (bytes, _) = read_all(&b, "project/blob.bin", length).await;
        assert_eq!(bytes, data, "length {length}");
    }
}

#[tokio::test]
async fn utf8_chunk_never_ends_inside_a_character() {
    let f = Fixture::new();
    // 'a' (1 byte), 'é' (2 bytes), '…' (3 bytes): 6 bytes.
    f.file("t.txt", "a\u{e9}\u{2026}");
    let b = consented_unthrottled(&f).await;
    // Length 2 cuts inside 'é': only "a" comes back, and length says 1 byte was consumed.
    let r = read(&b, json!({"path": "project/t.txt", "length": 2})).await;
    let r = ok(&r);
    assert_eq!(r["content"], "a");
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["length"], 1);
    assert_eq!(r["eof"], false);
    // The next chunk at offset+length continues with 'é'.
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 1, "length": 2}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["content"], "\u{e9}");
    assert_eq!(r["length"], 2);
    // Length 4 from the start cuts inside '…': "aé", 3 bytes; then '…' from offset 3.
    let r = read(&b, json!({"path": "project/t.txt", "length": 4})).await;
    let r = ok(&r);
    assert_eq!(r["content"], "a\u{e9}");
    assert_eq!(r["length"], 3);
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 3, "length": 4}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["content"], "\u{2026}");
    assert_eq!(r["length"], 3);
    assert_eq!(r["eof"], true);
    // Walking with length 2 yields every character once.
    let (bytes, chunks) = read_all(&b, "project/t.txt", 2).await;
    assert_eq!(bytes, "a\u{e9}\u{2026}".as_bytes());
    assert_eq!(chunks, 3);
}

#[tokio::test]
async fn length_one_at_a_three_byte_character_returns_the_whole_character() {
    let f = Fixture::new();
    f.file("t.txt", "a\u{e9}\u{2026}z");
    let b = consented_unthrottled(&f).await;
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 3, "length": 1}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["content"], "\u{2026}");
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["length"], 3);
    assert_eq!(r["eof"], false);
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 6, "length": 1}),
    )
    .await;
    assert_eq!(ok(&r)["content"], "z");
}

#[tokio::test]
async fn length_one_at_a_two_or_four_byte_character_returns_exactly_that_character() {
    let f = Fixture::new();
    // 'é' (2 bytes) then "ab"; '😀' (4 bytes) then "cd".
    f.file("t.txt", "\u{e9}ab\u{1f600}cd");
    let b = consented_unthrottled(&f).await;
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 0, "length": 1}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["content"], "\u{e9}");
    assert_eq!(r["length"], 2);
    let r = read(
        &b,
        json!({"path": "project/t.txt", "offset": 4, "length": 1}),
    )
    .await;
    let r = ok(&r);
    assert_eq!(r["content"], "\u{1f600}");
    assert_eq!(r["length"], 4);
}

#[tokio::test]
async fn binary_content_is_sent_as_base64_when_encoding_is_omitted() {
    let f = Fixture::new();
    let data = [0xffu8, 0xfe, 0x00, 0x80, b'a', 0xc3];
    f.file("b.dat", data);
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/b.dat"})).await;
    let r = ok(&r);
    assert_eq!(r["encoding"], "base64");
    assert_eq!(
        STANDARD.decode(r["content"].as_str().unwrap()).unwrap(),
        data
    );
    assert_eq!(r["length"], data.len() as u64);
    assert_eq!(r["eof"], true);
}

#[tokio::test]
async fn explicit_base64_encodes_text() {
    let f = Fixture::new();
    f.file("h.txt", "hello");
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/h.txt", "encoding": "base64"})).await;
    let r = ok(&r);
    assert_eq!(r["encoding"], "base64");
    assert_eq!(r["content"], "aGVsbG8=");
    assert_eq!(r["length"], 5);
}

#[tokio::test]
async fn explicit_utf8_on_invalid_bytes_is_io_error_not_utf8() {
    let f = Fixture::new();
    f.file("b.dat", [b'o', b'k', 0xff, 0xfe]);
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/b.dat", "encoding": "utf-8"})).await;
    assert_eq!(err(&r), (-31004, "IO_ERROR".into(), "not_utf8".into()));
}

#[tokio::test]
async fn unknown_encoding_is_invalid_params() {
    let f = Fixture::new();
    f.file("h.txt", "hello");
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/h.txt", "encoding": "latin-1"})).await;
    assert_eq!(err(&r).0, -32602);
}

#[tokio::test]
async fn offset_at_or_past_end_gives_empty_content_and_eof() {
    let f = Fixture::new();
    f.file("h.txt", "hello");
    let b = consented_unthrottled(&f).await;
    // Offsets far past the end too: past what a file system lets a file reach (2^44 on
    // ext4), past what a seek takes (i64::MAX), and the largest u64. Nothing is read for an
    // empty chunk, so nothing the kernel would refuse is asked of it.
    let far = [1u64 << 44, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX];
    for offset in [5u64, 6, 1_000_000].into_iter().chain(far) {
        for extra in [json!({}), json!({"length": 1 << 20, "encoding": "base64"})] {
            let mut p = json!({"path": "project/h.txt", "offset": offset});
            p.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let r = read(&b, p).await;
            let r = ok(&r);
            assert_eq!(r["content"], "", "offset {offset}");
            assert_eq!(r["length"], 0);
            assert_eq!(r["eof"], true);
            assert_eq!(r["size"], 5);
            assert_eq!(r["offset"], offset);
        }
    }
}

#[tokio::test]
async fn length_zero_returns_nothing_and_is_not_eof() {
    let f = Fixture::new();
    f.file("h.txt", "hello");
    let b = consented_unthrottled(&f).await;
    let r = read(&b, json!({"path": "project/h.txt", "length": 0})).await;
    let r = ok(&r);
    assert_eq!(r["content"], "");
    assert_eq!(r["length"], 0);
    assert_eq!(r["eof"], false);
    assert_eq!(r["size"], 5);
}

#[tokio::test]
async fn length_above_the_max_chunk_is_quota_exceeded_with_the_limit() {
    let f = Fixture::new();
    f.file("h.txt", "hello");
    let b = consented_unthrottled(&f).await;
    let r = read(
        &b,
        json!({"path": "project/h.txt", "length": 16_777_217u64}),
    )
    .await;
    assert_eq!(err(&r).0, -31007);
    assert_eq!(err(&r).1, "QUOTA_EXCEEDED");
    assert_eq!(r["error"]["data"]["limit"], 16_777_216u64);
    // The maximum itself is accepted.
    let r = read(
        &b,
        json!({"path": "project/h.txt", "length": 16_777_216u64}),
    )
    .await;
    assert_eq!(ok(&r)["content"], "hello");
}

#[tokio::test]
async fn reading_a_directory_is_is_a_directory() {
    let f = Fixture::new();
    f.dir("sub");
    let b = consented_unthrottled(&f).await;
    for path in ["project/sub", "project"] {
        let r = read(&b, json!({"path": path})).await;
        let (code, data_code, _) = err(&r);
        assert_eq!(
            (code, data_code.as_str()),
            (-31010, "IS_A_DIRECTORY"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn missing_file_is_file_not_found_with_the_mount_form_path() {
    let f = Fixture::new();
    let b = consented_unthrottled(&f).await;
    let abs = f.root.join("nope.txt").display().to_string();
    for path in ["project/nope.txt", "project/./x/../nope.txt", abs.as_str()] {
        let r = read(&b, json!({"path": path})).await;
        let (code, data_code, _) = err(&r);
        assert_eq!(
            (code, data_code.as_str()),
            (-31001, "FILE_NOT_FOUND"),
            "{path}"
        );
        assert_eq!(r["error"]["data"]["path"], "project/nope.txt", "{path}");
    }
}

#[tokio::test]
async fn etag_is_stable_while_unchanged_and_changes_when_modified() {
    let f = Fixture::new();
    let p = f.file("e.txt", "first");
    let b = consented_unthrottled(&f).await;
    let etag = |r: &Value| ok(r)["etag"].as_str().unwrap().to_owned();
    let e1 = etag(&read(&b, json!({"path": "project/e.txt"})).await);
    let e2 = etag(&read(&b, json!({"path": "project/e.txt"})).await);
    assert_eq!(e1, e2, "unchanged file, same etag");
    std::fs::write(&p, "second, longer content").unwrap();
    let r = read(&b, json!({"path": "project/e.txt"})).await;
    assert_eq!(ok(&r)["content"], "second, longer content");
    assert_ne!(etag(&r), e1, "modified file, new etag");
}

#[tokio::test]
async fn large_file_is_read_in_default_chunks_with_eof_only_at_the_end() {
    let f = Fixture::new();
    const SIZE: usize = 20_000_000;
    const CHUNK: u64 = 1_048_576;
    let line = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?\n";
    let data: Vec<u8> = line.iter().copied().cycle().take(SIZE).collect();
    f.file("big.log", &data);
    let b = consented_unthrottled(&f).await;
    let mut offset = 0u64;
    let mut got = Vec::with_capacity(SIZE);
    loop {
        let r = read(&b, json!({"path": "project/big.log", "offset": offset})).await;
        let r = ok(&r);
        let len = r["length"].as_u64().unwrap();
        assert!(len <= CHUNK + 3, "chunk of {len} bytes exceeds the default");
        assert_eq!(r["size"], SIZE as u64);
        got.extend_from_slice(&bytes_of(r));
        offset += len;
        if offset < SIZE as u64 {
            assert_eq!(len, CHUNK, "a full default chunk before the end");
            assert_eq!(r["eof"], false, "eof before the end at {offset}");
        } else {
            assert_eq!(len, SIZE as u64 % CHUNK);
            assert_eq!(r["eof"], true);
            break;
        }
    }
    assert!(got == data, "concatenated chunks differ from the file");
}
