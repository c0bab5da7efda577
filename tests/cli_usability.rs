//! What a new user trips over on the command line: an empty `FSBROKER_LOG`, a proxy command
//! without `--`, roots whose directory names are not mount names.
mod common;
#[path = "common/proxy_host.rs"]
mod proxy_host;
#[path = "common/sidecar.rs"]
mod sidecar;

use common::*;
use serde_json::json;
use sidecar::*;
use std::ffi::OsString;

/// `FSBROKER_LOG=` (set but empty, as host configuration templates often produce) behaves
/// as unset: warnings still reach stderr.
#[test]
fn an_empty_fsbroker_log_still_logs_warnings() {
    let f = Fixture::new();
    let args: Vec<OsString> = [
        "serve",
        "--root",
        f.root.to_str().unwrap(),
        "--consent",
        "command:/nonexistent/fsbroker-consent-program",
    ]
    .map(OsString::from)
    .to_vec();
    for value in ["", " "] {
        let mut s = Sidecar::spawn_env(&args, &[("FSBROKER_LOG", value)]);
        let r = s.request("files/consent", json!({"requestedPaths": ["project"]}));
        assert_eq!(r["result"]["granted"], false, "{r}");
        let (status, _) = s.finish();
        assert!(status.success(), "{}", s.stderr());
        assert!(
            s.stderr().contains("consent command failed"),
            "FSBROKER_LOG={value:?} silenced the warning: {}",
            s.stderr()
        );
    }
}
