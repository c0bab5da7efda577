//! Consent through the host: with `--consent elicit` (the proxy's default), a server's
//! `files/consent` becomes an `elicitation/create` request to a host that declared form
//! elicitation; a host without it gets the fallback (no terminal here, so a denial).

mod common;
#[path = "common/proxy_host.rs"]
mod proxy_host;
#[path = "common/sidecar.rs"]
mod sidecar;

use common::{Fixture, assert_error};
use proxy_host::proxy_args;
use serde_json::{Value, json};
use sidecar::Sidecar;
use std::ffi::OsString;

/// The proxy in front of the scripted server, in a new session (`setsid`) so that it has no
/// controlling terminal even when the tests run in one: the fallback is then `deny`.
fn proxy(f: &Fixture, consent: Option<&str>) -> Sidecar {
    let mut args: Vec<OsString> = vec!["--root".into(), f.root.clone().into(), "--writable".into()];
    if let Some(c) = consent {
        args.extend(["--consent".into(), c.into()]);
    }
    Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args))
}

fn initialize(p: &mut Sidecar, capabilities: Value) {
    proxy_host::initialize(p, "2025-06-18", capabilities);
}

/// Starts the `ask` tool (call id 1) without waiting.
fn start_ask(p: &mut Sidecar, requests: Value) {
    proxy_host::start_ask(p, 1, requests);
}

/// The next line, which must be the proxy's `elicitation/create` request.
fn next_elicitation(p: &mut Sidecar) -> Value {
    let m = p.next();
    assert_eq!(m["method"], "elicitation/create", "{m}");
    m
}

fn answers(p: &mut Sidecar) -> Vec<Value> {
    proxy_host::answers(p, 1)
}

fn consent_then_use() -> Value {
    json!([
        ["files/consent", {"requestedPaths": ["project/a.txt"], "access": "write",
                           "message": "to fix a typo"}],
        ["files/read", {"path": "project/a.txt"}],
        ["files/write", {"path": "project/a.txt", "content": "changed"}],
    ])
}

#[test]
fn a_host_that_accepts_read_grants_read_only() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    let mut p = proxy(&f, Some("elicit"));
    initialize(&mut p, json!({"elicitation": {}}));
    start_ask(&mut p, consent_then_use());
    let e = next_elicitation(&mut p);
    // The host is told who asks, for what, and why, in mount form only.
    let text = e["params"]["message"].as_str().unwrap();
    assert!(text.contains("project/a.txt"), "{text}");
    assert!(text.contains("scripted"), "{text}");
    assert!(text.contains("to fix a typo"), "{text}");
    assert!(!text.contains(f.root.to_str().unwrap()), "{text}");
    let schema = &e["params"]["requestedSchema"];
    assert_eq!(
        schema["properties"]["decision"]["enum"],
        json!(["read", "write", "deny"])
    );
    assert_eq!(schema["required"], json!(["decision"]));
    // The proxy's id cannot be mistaken for the server's request ids (small integers).
    assert!(e["id"].is_string(), "{e}");
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    let a = answers(&mut p);
    assert_eq!(a[0]["result"]["granted"], true, "{}", a[0]);
    assert_eq!(a[0]["result"]["access"], "read");
    assert_eq!(a[1]["result"]["content"], "original");
    assert_error(&a[2], -31002, "PERMISSION_DENIED", "read_only");
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "original"
    );
    p.finish();
}

#[test]
fn a_host_that_accepts_write_grants_write() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    // No --consent: elicit is the proxy's default.
    let mut p = proxy(&f, None);
    initialize(&mut p, json!({"elicitation": {"form": {}}}));
    start_ask(&mut p, consent_then_use());
    let e = next_elicitation(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],
        "result":{"action":"accept","content":{"decision":"write"}}}));
    let a = answers(&mut p);
    assert_eq!(a[0]["result"]["access"], "write", "{}", a[0]);
    assert!(a[2]["result"].is_object(), "{}", a[2]);
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "changed"
    );
    p.finish();
}

#[test]
fn a_host_that_declines_or_fails_denies() {
    for answer in [
        json!({"result": {"action": "decline"}}),
        json!({"result": {"action": "cancel"}}),
        json!({"result": {"action": "accept", "content": {"decision": "deny"}}}),
        json!({"error": {"code": -32601, "message": "no elicitation here"}}),
    ] {
        let f = Fixture::new();
        f.file("a.txt", "original");
        let mut p = proxy(&f, Some("elicit"));
        initialize(&mut p, json!({"elicitation": {}}));
        start_ask(&mut p, consent_then_use());
        let e = next_elicitation(&mut p);
        let mut reply = answer.clone();
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = e["id"].clone();
        p.send(&reply);
        let a = answers(&mut p);
        assert_eq!(a[0]["result"]["granted"], false, "{answer}: {}", a[0]);
        assert_error(&a[1], -31002, "PERMISSION_DENIED", "no_consent");
        p.finish();
    }
}

#[test]
fn a_host_without_elicitation_gets_the_fallback_and_is_never_asked() {
    for caps in [json!({}), json!({"elicitation": {"url": {}}})] {
        let f = Fixture::new();
        f.file("a.txt", "original");
        let mut p = proxy(&f, Some("elicit"));
        initialize(&mut p, caps.clone());
        start_ask(&mut p, consent_then_use());
        // The first line the host sees is the tool's result: no elicitation in between.
        let r = p.next();
        assert_eq!(r["id"], 1, "{caps}: {r}");
        let a = r["result"]["structuredContent"]["answers"]
            .as_array()
            .unwrap();
        assert_eq!(a[0]["result"]["granted"], false, "{caps}: {}", a[0]);
        p.finish();
    }
}

#[test]
fn the_host_leaving_mid_question_ends_everything() {
    let f = Fixture::new();
    let mut p = proxy(&f, Some("elicit"));
    initialize(&mut p, json!({"elicitation": {}}));
    start_ask(&mut p, consent_then_use());
    next_elicitation(&mut p);
    // The host goes away without answering: the proxy must still end, and end the server.
    let (status, _) = p.finish();
    assert!(status.code().is_some(), "{status:?}: {}", p.stderr());
}
