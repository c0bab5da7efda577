//! Revision 2026-07-28 over `proxy --url` with the Python SDK (`mcp` 2.3.0) on both sides:
//! the SDK's Streamable HTTP server (`tests/interop/py_http_server.py`, which serves both
//! eras) behind the proxy, and the SDK's probing client (`mcp.Client`, `mode="auto"`) as the
//! host. In a modern session the proxy forwards the probe with the headers the server
//! requires and speaks the modern transport; in either era the server's roots come from the
//! broker and the host's own roots handler is never called.

use crate::common::Fixture;
use crate::remote::RemoteServer;
use crate::sidecar::file_uri;
use crate::{common, interop};
use serde_json::json;
use std::ffi::OsString;

/// `fsbroker proxy --url URL --root ROOT --consent deny ARGS...`, as a command line for the
/// SDK host.
fn through_proxy(url: &str, f: &Fixture, args: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![common::bin().into(), "proxy".into()];
    command.extend(["--url".into(), url.into()]);
    command.extend(["--root".into(), f.root.clone().into_os_string()]);
    command.extend(["--consent".into(), "deny".into()]);
    command.extend(args.iter().map(OsString::from));
    command
}

#[test]
fn with_era_modern_the_sdk_server_gets_the_brokers_roots_over_the_modern_transport() {
    let f = Fixture::new();
    let mut server = RemoteServer::python("py_http_server.py");
    let command = through_proxy(&server.url(), &f, &["--era", "modern"]);
    let out = interop::py_era_host("auto", "resolved_roots", &command);
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(
        out["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
    server.stop();
}

#[test]
fn with_era_auto_the_session_stays_legacy_and_brokered() {
    let f = Fixture::new();
    let mut server = RemoteServer::python("py_http_server.py");
    let command = through_proxy(&server.url(), &f, &[]);
    let out = interop::py_era_host("auto", "resolved_roots", &command);
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    assert_eq!(
        out["result"],
        json!([{"uri": file_uri(&f.root), "name": "project"}]),
        "{out}"
    );
    assert_eq!(out["hostRootsCalls"], 0, "{out}");
    server.stop();
}
