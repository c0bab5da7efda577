//! Consent the user modifies (issue 16 item 8): per path approve or deny, write lowered to
//! read, a folder narrowed to a place inside it (never outside), on the terminal prompt and
//! in the host's form; and a consent question that times out cancels the host's form.

use crate::common::pty::pty;
use crate::common::*;
use crate::proxy_host;
use crate::proxy_host::{answers, initialize, proxy_args, start_ask};
use crate::sidecar::{Sidecar, WAIT};
use mcp_fsbroker::consent::TtyConsent;
use mcp_fsbroker::{Broker, Policy};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Types `reply` once the first prompt appears, then keeps the terminal open until the
/// prompt has told `verdicts` outcomes (approved or denied); returns what was shown.
fn typist(
    mut master: std::fs::File,
    reply: &'static str,
    verdicts: usize,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        let mut typed = false;
        loop {
            let text = String::from_utf8_lossy(&shown).into_owned();
            if !typed && text.contains("allow?") {
                master.write_all(reply.as_bytes()).unwrap();
                typed = true;
            }
            if text.matches("approved\n").count() + text.matches("denied\n").count() >= verdicts
                || text.matches("approved\r\n").count() + text.matches("denied\r\n").count()
                    >= verdicts
            {
                return text;
            }
            let n = master.read(&mut buf).unwrap();
            assert!(n > 0, "the terminal closed: {text}");
            shown.extend_from_slice(&buf[..n]);
        }
    })
}

/// A broker over the fixture's root (writable) whose consent is asked on the terminal `tty`.
fn tty_broker(f: &Fixture, tty: PathBuf) -> Broker {
    let policy = Policy::parse(&f.policy_text("write", ""), "test").expect("policy");
    let provider = TtyConsent::with_device(tty).with_wait(Duration::from_secs(60));
    Broker::builder(policy)
        .consent_provider(Arc::new(provider))
        .build()
        .expect("broker")
        .0
}

/// The reason of a failed call, or "" when it succeeded.
fn reason(r: &Value) -> String {
    if r.get("error").is_none() {
        return String::new();
    }
    err(r).2
}

async fn read(b: &Broker, path: &str) -> Value {
    call(b, "s", "files/read", json!({"path": path})).await
}

async fn write(b: &Broker, path: &str) -> Value {
    call(b, "s", "files/write", json!({"path": path, "content": "x"})).await
}

#[tokio::test]
async fn tty_each_path_its_own_answer_approve_deny_and_write_lowered_to_read() {
    let f = Fixture::new();
    f.file("a/one.txt", "1");
    f.file("b.txt", "b");
    f.file("c.txt", "c");
    let (master, slave) = pty();
    let shown = typist(master, "e\nw\nn\nr\n", 3);
    let b = tty_broker(&f, slave);
    let params = json!({"requestedPaths": ["project/a", "project/b.txt", "project/c.txt"],
                        "access": "write"});
    let r = call(&b, "s", "files/consent", params).await;
    let res = ok(&r).clone();
    shown.join().unwrap();
    assert_eq!(res["granted"], true, "{res}");
    assert_eq!(
        res["approvedPaths"],
        json!(["project/a", "project/c.txt"]),
        "{res}"
    );
    assert_eq!(res["deniedPaths"], json!(["project/b.txt"]), "{res}");
    assert_eq!(reason(&write(&b, "project/a/one.txt").await), "");
    assert_eq!(reason(&read(&b, "project/b.txt").await), "no_consent");
    assert_eq!(reason(&read(&b, "project/c.txt").await), "");
    assert_eq!(reason(&write(&b, "project/c.txt").await), "read_only");
}

#[tokio::test]
async fn tty_a_folder_narrowed_to_a_sub_folder_grants_only_the_sub_folder() {
    let f = Fixture::new();
    f.file("src/lib/x.rs", "x");
    f.file("src/other/y.rs", "y");
    f.file("src/top.rs", "t");
    let (master, slave) = pty();
    let shown = typist(master, "r lib\n", 1);
    let b = tty_broker(&f, slave);
    let params = json!({"requestedPaths": ["project/src"], "access": "write"});
    let r = call(&b, "s", "files/consent", params).await;
    let res = ok(&r).clone();
    let shown = shown.join().unwrap();
    assert!(shown.contains("narrowed to project/src/lib"), "{shown}");
    assert_eq!(res["granted"], true, "{res}");
    assert_eq!(res["approvedPaths"], json!([]), "{res}");
    assert_eq!(res["deniedPaths"], json!(["project/src"]), "{res}");
    assert_eq!(
        res["narrowedPaths"],
        json!({"project/src": "project/src/lib"}),
        "{res}"
    );
    assert_eq!(res["access"], "read", "{res}");
    assert_eq!(reason(&read(&b, "project/src/lib/x.rs").await), "");
    assert_eq!(
        reason(&write(&b, "project/src/lib/x.rs").await),
        "read_only"
    );
    assert_eq!(
        reason(&read(&b, "project/src/other/y.rs").await),
        "no_consent"
    );
    assert_eq!(reason(&read(&b, "project/src/top.rs").await), "no_consent");
}

#[tokio::test]
async fn tty_a_narrowing_that_leads_outside_the_folder_is_not_granted() {
    let f = Fixture::new();
    f.file("src/lib/x.rs", "x");
    f.file("docs/d.md", "d");
    f.file("x.txt", "x");
    let (master, slave) = pty();
    let shown = typist(master, "e\nr ../x.txt\nr /etc\n", 2);
    let b = tty_broker(&f, slave);
    let params = json!({"requestedPaths": ["project/src", "project/docs"], "access": "read"});
    let r = call(&b, "s", "files/consent", params).await;
    let res = ok(&r).clone();
    shown.join().unwrap();
    assert_eq!(res["granted"], false, "{res}");
    assert!(res.get("narrowedPaths").is_none(), "{res}");
    assert_eq!(reason(&read(&b, "project/x.txt").await), "no_consent");
    assert_eq!(
        reason(&read(&b, "project/src/lib/x.rs").await),
        "no_consent"
    );
    assert_eq!(reason(&read(&b, "project/docs/d.md").await), "no_consent");
}

// ---- The host's form (`fsbroker proxy --consent elicit`). ----

/// The proxy (writable root, consent through the host) in a session of its own, so that it
/// has no controlling terminal.
fn proxy(f: &Fixture, extra: &[&str]) -> Sidecar {
    let mut args: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--writable".into(),
        "--consent".into(),
        "elicit".into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    let mut p = Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args));
    initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));
    p
}

fn elicitation(p: &mut Sidecar) -> Value {
    let m = p.next();
    assert_eq!(m["method"], "elicitation/create", "{m}");
    m
}

#[test]
fn the_form_asks_per_path_and_per_folder_and_obeys_each_answer() {
    let f = Fixture::new();
    f.file("src/lib/x.rs", "x");
    f.file("src/other/y.rs", "y");
    f.file("b.txt", "b");
    f.file("c.txt", "c");
    let mut p = proxy(&f, &[]);
    start_ask(
        &mut p,
        1,
        json!([
            ["files/consent", {"requestedPaths": ["project/src", "project/b.txt", "project/c.txt"],
                               "access": "write"}],
            ["files/read", {"path": "project/src/lib/x.rs"}],
            ["files/read", {"path": "project/src/other/y.rs"}],
            ["files/read", {"path": "project/b.txt"}],
            ["files/write", {"path": "project/c.txt", "content": "changed"}],
            ["files/read", {"path": "project/c.txt"}],
        ]),
    );
    let e = elicitation(&mut p);
    let props = &e["params"]["requestedSchema"]["properties"];
    assert_eq!(
        props["path_2"]["enum"],
        json!(["read", "write", "deny"]),
        "{e}"
    );
    assert_eq!(props["narrow_1"]["type"], "string", "{e}");
    assert!(
        props.get("narrow_2").is_none(),
        "a file is not narrowed: {e}"
    );
    for (_, v) in props.as_object().unwrap() {
        assert!(
            ["string", "number", "integer", "boolean"].contains(&v["type"].as_str().unwrap()),
            "{e}"
        );
    }
    p.send(
        &json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"accept","content":{
        "decision": "write", "path_2": "deny", "path_3": "read", "narrow_1": "lib"}}}),
    );
    let a = answers(&mut p, 1);
    let res = &a[0]["result"];
    assert_eq!(res["granted"], true, "{res}");
    assert_eq!(res["approvedPaths"], json!(["project/c.txt"]), "{res}");
    assert_eq!(
        res["narrowedPaths"],
        json!({"project/src": "project/src/lib"}),
        "{res}"
    );
    assert_eq!(a[1]["result"]["content"], "x", "{}", a[1]);
    assert_error(&a[2], -31002, "PERMISSION_DENIED", "no_consent");
    assert_error(&a[3], -31002, "PERMISSION_DENIED", "no_consent");
    assert_error(&a[4], -31002, "PERMISSION_DENIED", "read_only");
    assert_eq!(a[5]["result"]["content"], "c", "{}", a[5]);
    p.finish();
}

#[test]
fn the_form_s_narrowing_outside_the_folder_is_not_granted() {
    let f = Fixture::new();
    f.file("src/lib/x.rs", "x");
    f.file("x.txt", "x");
    let mut p = proxy(&f, &[]);
    for (id, narrow) in [(1, "../x.txt"), (2, "/etc"), (3, "file:///etc")] {
        start_ask(
            &mut p,
            id,
            json!([
                ["files/consent", {"requestedPaths": ["project/src"], "access": "read"}],
                ["files/read", {"path": "project/x.txt"}],
                ["files/read", {"path": "project/src/lib/x.rs"}],
            ]),
        );
        let e = elicitation(&mut p);
        p.send(
            &json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"accept","content":{
            "decision": "read", "narrow_1": narrow}}}),
        );
        let a = answers(&mut p, id);
        assert_eq!(a[0]["result"]["granted"], false, "{narrow}: {}", a[0]);
        assert_error(&a[1], -31002, "PERMISSION_DENIED", "no_consent");
        assert_error(&a[2], -31002, "PERMISSION_DENIED", "no_consent");
    }
    p.finish();
}

#[test]
fn a_consent_question_that_times_out_cancels_the_host_s_form() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(
        &file,
        format!(
            "[[roots]]\npath = {:?}\naccess = \"write\"\n\n[consent]\nmode = \"elicit\"\n\
             timeout_secs = 1\n\n[audit]\nenabled = false\n",
            f.root.to_str().unwrap()
        ),
    )
    .unwrap();
    let args: Vec<OsString> = vec!["--policy".into(), file.into()];
    let mut p = Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args));
    initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));
    start_ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": ["project/a.txt"]}]]),
    );
    let e = elicitation(&mut p);
    // The host never answers; the broker's time limit passes and the host is told.
    let lines =
        proxy_host::host_lines_until(&mut p, WAIT, |v| v["method"] == "notifications/cancelled");
    let cancel: Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    assert_eq!(cancel["params"]["requestId"], e["id"], "{cancel}");
    assert!(cancel.get("id").is_none(), "{cancel}");
    let a = answers(&mut p, 1);
    assert_eq!(a[0]["result"]["granted"], false, "{}", a[0]);
    // A late answer to the cancelled form is swallowed, never relayed to the server.
    p.send(
        &json!({"jsonrpc":"2.0","id":e["id"],"result":{"action":"accept",
        "content":{"decision":"read"}}}),
    );
    let a = proxy_host::ask(
        &mut p,
        2,
        json!([["files/read", {"path": "project/a.txt"}]]),
    );
    assert_error(&a[0], -31002, "PERMISSION_DENIED", "no_consent");
    p.finish();
}
