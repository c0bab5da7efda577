//! Assertions of the confinement suites: exact error triples, no canary in a response (plain
//! or base64), no host path in an error, and the canary files untouched.

use super::{Fixture, SECRET, call, err, ok};
use base64::Engine;
use mcp_fsbroker::Broker;
use serde_json::{Value, json};
use std::path::Path;

/// An error as (code, data.code, data.reason).
pub type Triple = (i64, &'static str, &'static str);
pub const OUTSIDE_ROOT: Triple = (-31002, "PERMISSION_DENIED", "outside_root");
pub const NOT_FOUND: Triple = (-31001, "FILE_NOT_FOUND", "");

/// Asserts that the response carries no canary, plain or base64.
pub fn assert_no_canary(r: &Value) {
    let text = r.to_string();
    assert!(!text.contains(SECRET), "canary leaked: {text}");
    let b64 = base64::engine::general_purpose::STANDARD.encode(SECRET);
    assert!(!text.contains(&b64), "canary leaked as base64: {text}");
}

/// Asserts that the response carries no canary (plain or base64) and the canary is intact.
pub fn assert_no_leak(f: &Fixture, r: &Value) {
    assert_no_canary(r);
    f.assert_canary_intact();
}

/// Asserts the exact error triple, no leak, and no host path in the error.
pub fn assert_refused(f: &Fixture, r: &Value, want: Triple) {
    assert_no_leak(f, r);
    let (code, data_code, reason) = err(r);
    assert_eq!(
        (code, data_code.as_str(), reason.as_str()),
        want,
        "response: {r}"
    );
    // A host absolute path would start a JSON string or follow a space in the message.
    let host = f.tmp.path().to_string_lossy().into_owned();
    let error = r["error"].to_string();
    assert!(
        !error.contains(&format!("\"{host}")) && !error.contains(&format!(" {host}")),
        "host path in error: {r}"
    );
}

/// Asserts a successful read with exactly `content`, and no leak.
pub fn assert_read(f: &Fixture, r: &Value, content: &str) {
    assert_no_leak(f, r);
    assert_eq!(ok(r)["content"], content, "response: {r}");
}

/// `files/read` of `path` by server `s`.
pub async fn read(b: &Broker, path: &str) -> Value {
    call(b, "s", "files/read", json!({ "path": path })).await
}

/// The host path `p` as a request path string.
pub fn abs(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
