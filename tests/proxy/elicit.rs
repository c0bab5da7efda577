//! Consent through the host: with `--consent elicit` (the proxy's default), a server's
//! `files/consent` becomes an `elicitation/create` request to a host that declared form
//! elicitation; a host without it gets the fallback (no terminal here, so a denial).

use crate::common::{Fixture, assert_error};
use crate::proxy_host::proxy_args;
use crate::sidecar::Sidecar;
use crate::{proxy_host, sidecar};
use serde_json::{Value, json};
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

/// A consent program that records each question in `log` and approves it.
fn approving_program(f: &Fixture, log: &std::path::Path) -> std::path::PathBuf {
    let prog = f.tmp.path().join("approve.sh");
    std::fs::write(
        &prog,
        format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\necho '{{\"granted\": true}}'\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    prog
}

#[test]
fn a_host_without_elicitation_gets_the_configured_fallback() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    let log = f.tmp.path().join("asked.log");
    let prog = approving_program(&f, &log);
    let fallback = format!("command:{}", prog.display());
    let args: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--writable".into(),
        "--consent-fallback".into(),
        fallback.into(),
    ];
    let mut p = Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args));
    initialize(&mut p, json!({}));
    start_ask(&mut p, consent_then_use());
    let a = answers(&mut p);
    assert_eq!(a[0]["result"]["granted"], true, "{}", a[0]);
    assert_eq!(a[1]["result"]["content"], "original", "{}", a[1]);
    let asked = std::fs::read_to_string(&log).unwrap();
    assert!(asked.contains("project/a.txt"), "{asked}");
    p.finish();
}

#[test]
fn elicit_is_refused_as_a_fallback_and_in_serve() {
    let f = Fixture::new();
    let root: OsString = f.root.clone().into();
    let out = sidecar::run_bounded(&[
        "proxy".into(),
        "--consent-fallback".into(),
        "elicit".into(),
        "--".into(),
        "true".into(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = sidecar::run_bounded(&[
        "serve".into(),
        "--root".into(),
        root,
        "--consent".into(),
        "elicit".into(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("proxy"));
}

#[test]
fn a_policy_reload_changes_the_consent_mode_of_a_running_proxy() {
    let f = Fixture::new();
    f.file("a.txt", "original");
    let file = f.tmp.path().join("policy.toml");
    let policy = |mode: &str| {
        format!(
            "[[roots]]\npath = {:?}\naccess = \"write\"\n\n[consent]\nmode = {mode:?}\n\n\
             [audit]\nenabled = false\n",
            f.root.to_str().unwrap()
        )
    };
    std::fs::write(&file, policy("elicit")).unwrap();
    let args: Vec<OsString> = vec!["--policy".into(), file.clone().into()];
    let mut p = Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args));
    initialize(&mut p, json!({"elicitation": {}}));
    let consent = json!([["files/consent", {"requestedPaths": ["project/a.txt"]}]]);
    start_ask(&mut p, consent.clone());
    let e = next_elicitation(&mut p);
    p.send(&json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"decline"}}));
    assert_eq!(answers(&mut p)[0]["result"]["granted"], false);

    let tmp = f.tmp.path().join("policy.toml.new");
    std::fs::write(&tmp, policy("auto")).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(p.pid() as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    // Until the reload is in force the host is still asked (and declines); after it, the
    // new mode answers without asking.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut id = 10;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the reload never took effect"
        );
        id += 1;
        proxy_host::start_ask(&mut p, id, consent.clone());
        let m = p.next();
        if m["method"] == "elicitation/create" {
            p.send(&json!({"jsonrpc":"2.0","id":m["id"],"result":{"action":"decline"}}));
            proxy_host::answers(&mut p, id);
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        assert_eq!(m["id"], id, "{m}");
        let a = &m["result"]["structuredContent"]["answers"][0];
        assert_eq!(a["result"]["granted"], true, "{a}");
        break;
    }
    p.finish();
}
