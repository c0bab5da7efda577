//! Protocol revision 2026-07-28 and the Python SDK (`mcp` 2.3.0) on both sides of
//! `fsbroker proxy`: the SDK's default client (`mcp.Client`, `mode="auto"`) probes
//! `server/discover` first. Through the proxy the session stays legacy, the server's roots
//! come from the broker, and the host's own roots handler is never called; a client pinned
//! to 2026-07-28, which does not probe, gets a modern session.
//!
//! The SDK (pinned in `tests/interop/requirements.txt`) is installed on first use; see
//! `tests/common/interop.rs`.

use crate::common::Fixture;
use crate::sidecar::file_uri;
use crate::{common, interop};
use serde_json::json;
use std::ffi::OsString;

/// `fsbroker proxy --root ROOT ARGS... -- python py_server.py`, as a command line for the
/// SDK host.
fn through_proxy(f: &Fixture, args: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![common::bin().into(), "proxy".into()];
    command.extend(["--root".into(), f.root.clone().into_os_string()]);
    command.extend(args.iter().map(OsString::from));
    command.push("--".into());
    command.extend(interop::py_server());
    command
}

#[test]
fn a_probing_python_client_stays_legacy_and_the_server_gets_the_brokers_roots() {
    let f = Fixture::new();
    let out = interop::py_era_host("auto", "roots", &through_proxy(&f, &["--consent", "deny"]));
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    assert_eq!(
        out["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

/// A client pinned to 2026-07-28 sends its requests in that revision without probing: in
/// the default `--era auto` it gets the modern session, as with `--era modern`, and is
/// never asked for roots. (This server asks for roots with a request of its own, which that
/// revision has no channel for: its call fails in the server, with or without the proxy.)
#[test]
fn a_pinned_modern_python_client_gets_a_modern_session_in_era_auto() {
    let f = Fixture::new();
    let out = interop::py_era_host("2026-07-28", "roots", &through_proxy(&f, &[]));
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

#[test]
fn with_era_modern_the_host_never_answers_roots() {
    let f = Fixture::new();
    let out = interop::py_era_host("auto", "roots", &through_proxy(&f, &["--era", "modern"]));
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
}

/// The control: the same client launching the server directly settles on 2026-07-28, with
/// no `initialize`, so nothing would have been brokered.
#[test]
fn without_the_proxy_the_probing_client_goes_modern() {
    let out = interop::py_era_host("auto", "roots", &interop::py_server());
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
}
