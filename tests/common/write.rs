//! Write-side helpers over the library handle: write consent and a writable broker.

use super::{Fixture, call, ok};
use mcp_fsbroker::Broker;
use serde_json::{Value, json};

/// Asks for write consent on the whole `project` root for `server`, asserts that it is granted
/// with `write` access, and returns the result.
pub async fn consent_write(b: &Broker, server: &str) -> Value {
    let r = call(
        b,
        server,
        "files/consent",
        json!({"requestedPaths": ["project"], "access": "write"}),
    )
    .await;
    assert_eq!(ok(&r)["granted"], true, "consent refused: {r}");
    assert_eq!(ok(&r)["access"], "write", "{r}");
    ok(&r).clone()
}

/// A broker over a writable root (policy `extra` appended) with write consent on the whole
/// root for session `s`.
pub async fn writable(f: &Fixture, extra: &str) -> Broker {
    let b = f.broker_with("write", extra);
    consent_write(&b, "s").await;
    b
}
