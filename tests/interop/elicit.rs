//! Consent through the host with real SDK peers: an official TypeScript SDK `Client` that
//! declares elicitation answers the proxy's `elicitation/create` (accept read, accept write,
//! decline), and one without the capability is never asked, so the fallback decides (no
//! terminal: the proxy runs in a new session, so it denies).

use crate::common::Fixture;
use crate::interop;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;

/// A host and proxy over `f`'s writable root in consent mode `elicit`.
fn host(f: &Fixture, capabilities: Value, answer: Option<Value>) -> Sidecar {
    let args: Vec<OsString> = ["--root".into(), f.root.clone().into()]
        .into_iter()
        .chain(["--writable", "--consent", "elicit"].map(OsString::from))
        .collect();
    interop::ts_host(&args, &capabilities, answer.as_ref())
}

fn ask(h: &mut Sidecar, method: &str, params: Value) -> Value {
    let r = h.request("request", json!({"method": method, "params": params}));
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("the host failed: {r}"))
}

/// The server asks for write access to `project/a.txt`, to fix a typo.
fn consent(h: &mut Sidecar) -> Value {
    let c = ask(
        h,
        "files/consent",
        json!({"requestedPaths": ["project/a.txt"], "access": "write",
               "message": "to fix a typo"}),
    );
    c.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("consent failed: {c}"))
}

fn elicitations(h: &mut Sidecar) -> Vec<Value> {
    let r = h.request("$elicitations", json!({}));
    r["result"].as_array().cloned().unwrap_or_default()
}

fn accept(decision: &str) -> Option<Value> {
    Some(json!({"action": "accept", "content": {"decision": decision}}))
}

#[test]
fn a_host_that_accepts_read_grants_read_and_the_write_is_refused() {
    let f = Fixture::new();
    f.file("a.txt", "teh original");
    let mut h = host(&f, json!({"elicitation": {}}), accept("read"));
    let c = consent(&mut h);
    assert_eq!(c["granted"], true, "{c}");
    assert_eq!(c["access"], "read", "{c}");
    assert_eq!(c["approvedPaths"], json!(["project/a.txt"]));

    // The user saw who asks, for what, and why, in mount form, in the SDK's form request.
    let asked = elicitations(&mut h);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let message = asked[0]["message"].as_str().unwrap();
    for part in ["ts-files-server", "project/a.txt", "to fix a typo"] {
        assert!(message.contains(part), "{part} missing from {message}");
    }
    assert!(!message.contains(f.root.to_str().unwrap()), "{message}");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["read", "write", "deny"])
    );

    let r = ask(&mut h, "files/read", json!({"path": "project/a.txt"}));
    assert_eq!(r["result"]["content"], "teh original", "{r}");
    let w = ask(
        &mut h,
        "files/write",
        json!({"path": "project/a.txt", "content": "the original"}),
    );
    assert_eq!(w["error"]["code"], -31002, "{w}");
    assert_eq!(w["error"]["data"]["code"], "PERMISSION_DENIED", "{w}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "teh original"
    );
}

#[test]
fn a_host_that_accepts_write_lets_the_server_write() {
    let f = Fixture::new();
    f.file("a.txt", "teh original");
    let mut h = host(&f, json!({"elicitation": {"form": {}}}), accept("write"));
    let c = consent(&mut h);
    assert_eq!(c["granted"], true, "{c}");
    assert_eq!(c["access"], "write", "{c}");
    let w = ask(
        &mut h,
        "files/write",
        json!({"path": "project/a.txt", "content": "the original"}),
    );
    assert_eq!(w["result"]["path"], "project/a.txt", "{w}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "the original"
    );
    assert_eq!(elicitations(&mut h).len(), 1);
}

#[test]
fn a_host_that_declines_refuses_and_nothing_is_read() {
    let f = Fixture::new();
    f.file("a.txt", "private");
    let mut h = host(
        &f,
        json!({"elicitation": {}}),
        Some(json!({"action": "decline"})),
    );
    let c = consent(&mut h);
    assert_eq!(c["granted"], false, "{c}");
    assert_eq!(c["approvedPaths"], json!([]));
    assert_eq!(c["deniedPaths"], json!(["project/a.txt"]));
    assert_eq!(elicitations(&mut h).len(), 1);
    let r = ask(&mut h, "files/read", json!({"path": "project/a.txt"}));
    assert_eq!(r["error"]["data"]["code"], "PERMISSION_DENIED", "{r}");
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
    assert!(!r.to_string().contains("private"));
}

#[test]
fn a_host_without_elicitation_is_never_asked_and_the_fallback_denies() {
    let f = Fixture::new();
    f.file("a.txt", "private");
    // The handler would accept, but the client does not declare the capability.
    let mut h = host(&f, json!({}), accept("write"));
    let c = consent(&mut h);
    assert_eq!(c["granted"], false, "{c}");
    assert_eq!(c["deniedPaths"], json!(["project/a.txt"]));
    assert!(elicitations(&mut h).is_empty());
    let r = ask(&mut h, "files/read", json!({"path": "project/a.txt"}));
    assert_eq!(r["error"]["data"]["reason"], "no_consent", "{r}");
}
