//! Protocol revision 2026-07-28 with the TypeScript SDK 2.x server
//! (`@modelcontextprotocol/server` 2.4.0, dual-era through `serveStdio`), whose tool asks for
//! roots with an `input_required` result, driven by the Python SDK's probing `mcp.Client`
//! (2.3.0) whose own roots handler answers a root no broker offers. Without the proxy the
//! host's roots reach the server; through it, in either era, the broker's do and the host's
//! handler is never called.
//!
//! The SDKs (pinned in `tests/interop/package.json` and `requirements.txt`) are installed on
//! first use; see `tests/common/interop.rs`.

use crate::common::Fixture;
use crate::sidecar::file_uri;
use crate::{common, interop};
use serde_json::json;
use std::ffi::OsString;

fn ts2_server() -> Vec<OsString> {
    vec![
        "node".into(),
        interop::node_dir().join("ts2_server.mjs").into(),
    ]
}

fn through_proxy(f: &Fixture, args: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![common::bin().into(), "proxy".into()];
    command.extend(["--root".into(), f.root.clone().into_os_string()]);
    command.extend(args.iter().map(OsString::from));
    command.push("--".into());
    command.extend(ts2_server());
    command
}

/// The bypass this guards against: the server's roots question, answered by the host.
#[test]
fn without_the_proxy_the_hosts_roots_answer_the_servers_input_request() {
    let out = interop::py_era_host("auto", "roots", &ts2_server());
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(out["hostRootsCalls"], 1, "{out}");
}

#[test]
fn a_modern_session_gets_the_brokers_roots_through_input_required() {
    let f = Fixture::new();
    let out = interop::py_era_host("auto", "roots", &through_proxy(&f, &["--era", "modern"]));
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(
        out["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

#[test]
fn by_default_the_session_stays_legacy_and_gets_the_brokers_roots() {
    let f = Fixture::new();
    let out = interop::py_era_host("auto", "roots", &through_proxy(&f, &[]));
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    assert_eq!(
        out["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

#[test]
fn roots_mixed_with_elicitation_round_trip_through_the_host() {
    let f = Fixture::new();
    let out = interop::py_era_host("auto", "mixed", &through_proxy(&f, &["--era", "modern"]));
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(
        out["result"]["roots"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["result"]["confirm"], json!({"ok": true}), "{out}");
    assert_eq!(out["hostElicitations"], 1, "{out}");
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

/// A legacy-only host (the TypeScript SDK 1.x `Client`, which never probes) in front of the
/// 2.x server: the session is legacy, the server's roots question becomes a `roots/list`
/// request, and the broker answers it.
#[test]
fn a_legacy_only_typescript_host_gets_the_brokers_roots_from_the_2x_server() {
    let f = Fixture::new();
    let args: Vec<OsString> = vec!["--root".into(), f.root.clone().into()];
    let mut h = interop::ts_host_of("ts2_server.mjs", &args, &json!({}), None);
    let r = h.request("roots", json!({}));
    assert_eq!(
        r["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{r}"
    );
    let server = h.request("$server", json!({}));
    assert_eq!(
        server["result"]["serverInfo"]["name"], "ts2-roots-server",
        "{server}"
    );
    h.finish();
}
