//! A remote session is held to the same rules as a local one: the policy's rate limit, sizes
//! and operation deadline apply to it, the audit log names it by the remote server's
//! `serverInfo.name` (or `--server-id`), and a message from the server over the line limit
//! costs only the request it answered.

use crate::common::Fixture;
use crate::remote::{RemoteServer, ask, connected, error_of, initialize, ok, proxy};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::path::Path;

/// The proxy over `f` with a policy whose `[limits]` are `limits`, auditing to `audit`.
fn limited(
    f: &Fixture,
    server: &RemoteServer,
    limits: &str,
    audit: &Path,
    extra: &[&str],
) -> Sidecar {
    let policy = f.tmp.path().join("policy.toml");
    let text = format!(
        "[[roots]]\npath = {:?}\nmount = \"project\"\naccess = \"write\"\n\n[consent]\nmode = \"auto\"\n\n[limits]\n{limits}\n\n[audit]\nenabled = true\nfile = {:?}\n",
        f.root, audit
    );
    std::fs::write(&policy, text).unwrap();
    let mut args = vec!["--policy", policy.to_str().unwrap()];
    args.extend_from_slice(extra);
    proxy(&server.url(), f, &args, &[])
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_rate_limit_applies_to_the_remote_session() {
    let f = Fixture::new();
    let server = RemoteServer::start(&[]);
    let audit = f.tmp.path().join("audit.jsonl");
    let mut p = limited(
        &f,
        &server,
        "requests_per_second = 1\nburst = 2",
        &audit,
        &[],
    );
    initialize(&mut p, json!({}));
    let a = ask(
        &mut p,
        1,
        json!([["roots/list", {}], ["roots/list", {}], ["roots/list", {}]]),
    );
    ok(&a[0]);
    ok(&a[1]);
    let (code, data_code, _) = error_of(&a[2]);
    assert_eq!(
        (code, data_code.as_str()),
        (-31012, "RATE_LIMITED"),
        "{a:?}"
    );
    assert!(a[2]["error"]["data"]["retryAfterMs"].as_u64().unwrap() > 0);
    p.finish();
}

#[test]
fn sizes_and_the_operation_deadline_apply_and_the_audit_names_the_remote_server() {
    let f = Fixture::new();
    f.file("big.txt", "x".repeat(4096));
    for i in 0..30 {
        for j in 0..100 {
            f.dir(&format!("d{i:02}/e{j:03}"));
        }
    }
    let server = RemoteServer::start(&[]);
    let audit = f.tmp.path().join("audit.jsonl");
    // A standing grant, not a consent request: with a 1 ms deadline, consent's own walk may
    // time out too on a busy machine, and the test is about the limits of what follows.
    let limits = "max_chunk_bytes = 1024\nchunk_bytes = 1024\nmax_write_bytes = 16\ntimeout_ms = 1\n\n\
                  [[grants]]\npath = \"project\"\naccess = \"write\"";
    let mut p = limited(&f, &server, limits, &audit, &[]);
    initialize(&mut p, json!({}));
    let a = ask(
        &mut p,
        1,
        json!([
            ["files/read", {"path": "project/big.txt", "length": 2048}],
            ["files/write", {"path": "project/w.txt", "content": "more than sixteen bytes"}],
            ["files/list", {"path": "project", "recursive": true, "limit": 10000}],
        ]),
    );
    assert_eq!(error_of(&a[0]).1, "QUOTA_EXCEEDED", "{a:?}");
    assert_eq!(a[0]["error"]["data"]["limit"], 1024);
    assert_eq!(error_of(&a[1]).1, "QUOTA_EXCEEDED", "{a:?}");
    assert_eq!(error_of(&a[2]).1, "TIMEOUT", "{a:?}");
    assert!(!f.root.join("w.txt").exists());
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
    let lines = audit_lines(&audit);
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["files/read", "files/write", "files/list"],
        "{lines:#?}"
    );
    for l in &lines {
        assert_eq!(l["server"], "remote-test", "{l}");
    }
    assert_eq!(lines[0]["outcome"], "QUOTA_EXCEEDED");
    assert_eq!(lines[2]["outcome"], "TIMEOUT");
}

#[test]
fn server_id_names_the_remote_session_in_the_audit() {
    let f = Fixture::new();
    let server = RemoteServer::start(&[]);
    let audit = f.tmp.path().join("audit.jsonl");
    let mut p = limited(&f, &server, "", &audit, &["--server-id", "hosted"]);
    initialize(&mut p, json!({}));
    ask(&mut p, 1, json!([["roots/list", {}]]));
    p.finish();
    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["server"], "hosted");
    assert_eq!(lines[0]["method"], "roots/list");
}

#[test]
fn a_message_over_the_line_limit_costs_only_its_request() {
    let f = Fixture::new();
    let server = RemoteServer::start(&[]);
    let audit = f.tmp.path().join("audit.jsonl");
    let mut p = limited(&f, &server, "max_line_bytes = 65536", &audit, &[]);
    initialize(&mut p, json!({}));
    let r = p.request(
        "tools/call",
        json!({"name": "big", "arguments": {"bytes": 200000}}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "too_large", "{r}");
    // The session goes on.
    let r = p.request(
        "tools/call",
        json!({"name": "big", "arguments": {"bytes": 1000}}),
    );
    assert!(r["result"]["content"].is_array(), "{r}");
    let (status, _) = p.finish();
    assert!(status.success(), "{}", p.stderr());
}

#[test]
fn a_json_body_whose_length_is_over_the_limit_is_refused_before_it_is_read() {
    let f = Fixture::new();
    // tools/list is answered with `Content-Length: 1073741824` and no body at all: waiting
    // for it would take the request timeout.
    let server = RemoteServer::evil("big-length", "");
    let mut p = connected(&server, &f, &[]);
    let r = p.request("tools/list", json!({}));
    assert_eq!(r["error"]["data"]["reason"], "too_large", "{r}");
    let r = p.request("ping", json!({}));
    assert!(r["result"].is_object(), "{r}");
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}
