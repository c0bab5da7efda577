//! The host's side of `fsbroker proxy` tests: the scripted server, `initialize`, and the
//! server's `ask` tool, which sends requests to the proxy and returns the answers it got.
#![allow(dead_code)]

use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `tests/proxy/scripted_server.py`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/scripted_server.py")
}

/// `proxy ARGS... -- python3 scripted_server.py`, as argument list for the binary.
pub fn proxy_args(args: &[OsString]) -> Vec<OsString> {
    let mut all: Vec<OsString> = vec!["proxy".into()];
    all.extend(args.iter().cloned());
    all.extend(["--".into(), "python3".into(), script().into()]);
    all
}

/// The host's `initialize` at `version` with `capabilities`, then `initialized`; returns the
/// server's result.
pub fn initialize(p: &mut Sidecar, version: &str, capabilities: Value) -> Value {
    p.send(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion": version, "capabilities": capabilities,
        "clientInfo": {"name": "test-host", "version": "1"}}}),
    );
    let r = p.wait_id(&json!("init"));
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    r["result"].clone()
}

/// Starts the server's `ask` tool (tool call id `id`) without waiting for its result.
pub fn start_ask(p: &mut Sidecar, id: i64, requests: Value) {
    p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"ask","arguments":{"requests":requests}}}));
}

/// The answers of the `ask` call `id`.
pub fn answers(p: &mut Sidecar, id: i64) -> Vec<Value> {
    let r = p.wait_id(&json!(id));
    r["result"]["structuredContent"]["answers"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no answers: {r}"))
}

/// Calls `ask` and returns the answers.
pub fn ask(p: &mut Sidecar, id: i64, requests: Value) -> Vec<Value> {
    start_ask(p, id, requests);
    answers(p, id)
}
