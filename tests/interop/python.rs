//! The official Python SDK on both sides of `fsbroker proxy`: a server whose tool calls the
//! SDK's `list_roots()`, driven by an SDK client that itself knows nothing of roots.
//!
//! The SDK (pinned in `tests/interop/requirements.txt`) is installed on first use; see
//! `tests/common/interop.rs`.

use crate::common::Fixture;
use crate::sidecar::file_uri;
use crate::{common, interop};
use serde_json::json;
use std::ffi::OsString;

/// `fsbroker proxy ARGS... -- python py_server.py`, as a command line for the SDK host.
fn through_proxy(args: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![common::bin().into(), "proxy".into()];
    command.extend(args.iter().map(OsString::from));
    command.push("--".into());
    command.extend(interop::py_server());
    command
}

#[test]
fn list_roots_from_a_python_sdk_server_is_answered_by_the_proxy() {
    let f = Fixture::new();
    let second = f.tmp.path().join("docs");
    std::fs::create_dir(&second).unwrap();
    let root = f.root.to_str().unwrap();
    let docs = format!("manuals={}", second.to_str().unwrap());
    let out = interop::py_host(
        "roots",
        &through_proxy(&["--root", root, "--root", &docs, "--consent", "deny"]),
    );
    assert_eq!(out["serverInfo"]["name"], "py-roots-server");
    assert_eq!(out["protocolVersion"], "2025-11-25");
    assert_eq!(
        out["result"],
        json!([
            {"uri": file_uri(&f.root), "name": "project"},
            {"uri": file_uri(&second), "name": "manuals"},
        ]),
        "{out}"
    );
}

#[test]
fn the_python_sdk_server_sees_the_capabilities_the_proxy_added() {
    let f = Fixture::new();
    let out = interop::py_host(
        "client",
        &through_proxy(&["--root", f.root.to_str().unwrap()]),
    );
    let caps = &out["result"];
    assert_eq!(caps["roots"]["listChanged"], true, "{out}");
    assert!(
        caps["experimental"]["filesystemBrokering"].is_object(),
        "{out}"
    );
}

/// The control for the tests above: the same SDK client launching the server directly
/// cannot answer `roots/list`, so the roots they see came from the proxy.
#[test]
fn without_the_proxy_the_sdk_client_has_no_roots_to_give() {
    let out = interop::py_host("roots", &interop::py_server());
    assert_eq!(out["result"]["error"]["code"], -32600, "{out}");
    let caps = interop::py_host("client", &interop::py_server());
    assert!(caps["result"].get("roots").is_none(), "{caps}");
}
