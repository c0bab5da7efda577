//! What the `proxy --sandbox` tests share: the real Python interpreter to start servers
//! with, and the one report a probing server sends.
#![allow(dead_code)]

use crate::sidecar::Sidecar;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Generous: the servers are Python or Node, started on a shared machine.
pub const LONG: Duration = Duration::from_secs(60);

/// The real Python interpreter (not a shim), so the profile names its installation.
pub fn python() -> PathBuf {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The probing server's report: the `data` of its one `notifications/message`.
pub fn report(p: &mut Sidecar) -> Value {
    let n = p.next_within(LONG);
    assert_eq!(n["method"], "notifications/message", "{n}\n{}", p.stderr());
    n["params"]["data"].clone()
}
