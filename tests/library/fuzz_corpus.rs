//! Replays every committed fuzz corpus file through its oracle on stable Rust.
#![cfg(feature = "fuzzing")]

fn replay(target: &str, oracle: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        oracle(&data);
        n += 1;
    }
    assert!(n >= 10, "corpus {target} has only {n} files");
    println!("{target}: {n} corpus files replayed");
}

#[test]
fn request_path_corpus_replays_clean() {
    replay("request_path", mcp_fsbroker::fuzzing::request_path);
}

#[test]
fn jsonrpc_corpus_replays_clean() {
    replay("jsonrpc", mcp_fsbroker::fuzzing::jsonrpc);
}

#[test]
fn ops_plan_corpus_replays_clean() {
    replay("ops_plan", mcp_fsbroker::fuzzing::ops_plan);
}
