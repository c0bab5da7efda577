//! Replays every committed fuzz corpus file through its oracle on stable Rust.

#[test]
fn request_path_corpus_replays_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/request_path");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        mcp_fsbroker::fuzzing::request_path(&data);
        n += 1;
    }
    assert!(n >= 10, "corpus has only {n} files");
}
