//! The example host `rmcp_host` launches the example server and reads a file for it, only
//! with consent, and never past the root.
#![cfg(feature = "rmcp")]

use crate::common::{Fixture, SECRET};
use crate::rmcp_common;
use crate::rmcp_common::host;

#[test]
fn the_example_host_reads_a_file_only_with_consent() {
    let f = Fixture::new();
    f.file("hello.txt", "hello from the example host");
    let root = format!("project={}", f.root.display());
    let read_args = r#"{"path": "project/hello.txt"}"#;

    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "auto",
        "--tool",
        "read_file",
        "--arguments",
        read_args,
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("server: rmcp-files-server"), "{out}");
    assert!(out.contains("  read_file: "), "{out}");
    assert!(
        out.contains(r#""content": "hello from the example host""#),
        "{out}"
    );

    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "deny",
        "--tool",
        "read_file",
        "--arguments",
        read_args,
    ]);
    assert!(!ok, "a refused read is a failed tool call: {out}");
    assert!(out.contains(r#""reason": "no_consent""#), "{out}");
    assert!(!out.contains("hello from the example host"), "{out}");

    let escape = r#"{"method": "files/read", "params": {"path": "project/../outside/secret.txt"}}"#;
    let (ok, out) = host(&[
        "--root",
        &root,
        "--consent",
        "auto",
        "--tool",
        "request",
        "--arguments",
        escape,
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains(r#""code": "PERMISSION_DENIED""#), "{out}");
    assert!(!out.contains(SECRET), "{out}");
}

#[test]
fn the_example_host_prints_no_terminal_escapes_from_the_server() {
    let f = Fixture::new();
    let root = format!("project={}", f.root.display());
    let name = "evil\u{1b}]0;owned\u{7}\u{1b}[2Jserver";
    let (ok, out) = rmcp_common::host_with_env(
        &["--root", &root, "--consent", "deny"],
        &[("RMCP_FILES_SERVER_NAME", name)],
    );
    assert!(ok, "{out}");
    assert!(out.contains("server: evil]0;owned[2Jserver 0.1.0"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out}");
}
