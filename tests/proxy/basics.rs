//! `fsbroker proxy` through the real binary, with a scripted stdio server
//! (`tests/proxy/scripted_server.py`, standard-library Python) as the child and this test as
//! the host: relaying, brokered answers, capabilities, session naming, id spaces, batches,
//! exit codes, stderr, and shutdown.

use crate::common::{Fixture, SECRET, assert_error};
use crate::proxy_host::{ask, initialize, proxy_args};
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;

/// `fsbroker proxy --root project OPTS... -- python3 scripted_server.py` (without the
/// `--root` when OPTS name a policy).
fn proxy(f: &Fixture, opts: &[&str], env: &[(&str, &str)]) -> Sidecar {
    let mut args: Vec<OsString> = Vec::new();
    if !opts.contains(&"--policy") {
        args.extend(["--root".into(), f.root.clone().into()]);
    }
    args.extend(opts.iter().map(OsString::from));
    Sidecar::spawn_env(&proxy_args(&args), env)
}

#[test]
fn brokered_requests_are_answered_and_host_traffic_passes_through() {
    let f = Fixture::new();
    f.file("a.txt", "hello from the root");
    let mut p = proxy(&f, &["--consent", "auto", "--writable"], &[]);
    let init = initialize(&mut p, "2025-06-18", json!({"roots": {"custom": 1}}));
    assert_eq!(init["serverInfo"]["name"], "scripted");
    // The server echoes the capabilities it was offered: ours added, the host's kept.
    let offered: Value = serde_json::from_str(init["instructions"].as_str().unwrap()).unwrap();
    assert_eq!(offered["roots"]["listChanged"], true);
    assert_eq!(offered["roots"]["filesystemBrokering"], true);
    assert_eq!(offered["roots"]["custom"], 1);

    let tools = p.request("tools/list", json!({}));
    assert_eq!(tools["result"]["tools"][0]["name"], "ask");

    let outside = f.outside.join("secret.txt");
    let answers = ask(
        &mut p,
        1,
        json!([
            ["roots/list", null],
            ["files/consent", {"requestedPaths": ["project"], "access": "write"}],
            ["files/read", {"path": "project/a.txt"}],
            ["files/write", {"path": "project/new.txt", "content": "written via proxy"}],
            ["files/list", {"path": "project"}],
            ["files/read", {"path": "project/../outside/secret.txt"}],
            ["files/read", {"path": outside.to_str().unwrap()}],
        ]),
    );
    // Our tool call had id 1, and so did the server's first request: two id spaces.
    assert_eq!(answers[0]["id"], 1);
    let roots = &answers[0]["result"]["roots"];
    assert_eq!(roots[0]["name"], "project");
    assert_eq!(
        roots[0]["uri"],
        format!("file://{}", f.root.canonicalize().unwrap().display())
    );
    assert_eq!(answers[1]["result"]["granted"], true, "{}", answers[1]);
    assert_eq!(answers[2]["result"]["content"], "hello from the root");
    assert_eq!(answers[3]["result"]["created"], true, "{}", answers[3]);
    assert_eq!(
        std::fs::read_to_string(f.root.join("new.txt")).unwrap(),
        "written via proxy"
    );
    let names: Vec<&str> = answers[4]["result"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["a.txt", "new.txt"]);
    assert_error(&answers[5], -31002, "PERMISSION_DENIED", "outside_root");
    assert_error(&answers[6], -31002, "PERMISSION_DENIED", "outside_root");
    assert!(!answers.iter().any(|a| a.to_string().contains(SECRET)));
    f.assert_canary_intact();
    let (status, _) = p.finish();
    assert!(status.success(), "{status:?}: {}", p.stderr());
}

#[test]
fn every_protocol_revision_gets_the_capabilities() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let f = Fixture::new();
        let mut p = proxy(&f, &["--consent", "deny"], &[]);
        let init = initialize(
            &mut p,
            version,
            json!({"sampling": {}, "experimental": {"hostThing": {"x": 1}}}),
        );
        assert_eq!(init["protocolVersion"], version);
        let offered: Value = serde_json::from_str(init["instructions"].as_str().unwrap()).unwrap();
        assert_eq!(
            offered,
            json!({
                "roots": {"listChanged": true, "filesystemBrokering": true},
                "experimental": {"hostThing": {"x": 1}, "filesystemBrokering": {}},
                "sampling": {},
            }),
            "{version}"
        );
        let answers = ask(&mut p, 1, json!([["roots/list", null]]));
        assert_eq!(answers[0]["result"]["roots"][0]["name"], "project");
        p.finish();
    }
}

#[test]
fn the_session_is_named_by_the_servers_serverinfo() {
    let f = Fixture::new();
    f.file("a.txt", "granted by name");
    let policy = f.tmp.path().join("policy.toml");
    let grant = "[consent]\nmode = \"deny\"\n\n[[grants]]\npath = \"project\"\naccess = \"read\"\nservers = [\"indexer\"]\n";
    std::fs::write(&policy, f.policy_text("read", grant)).unwrap();
    let policy = policy.to_str().unwrap();
    for (name, expect_ok) in [("indexer", true), ("someone-else", false)] {
        let mut p = proxy(&f, &["--policy", policy], &[("SERVER_NAME", name)]);
        initialize(&mut p, "2025-06-18", json!({}));
        let answers = ask(
            &mut p,
            1,
            json!([["files/read", {"path": "project/a.txt"}]]),
        );
        if expect_ok {
            assert_eq!(answers[0]["result"]["content"], "granted by name", "{name}");
        } else {
            assert_error(&answers[0], -31002, "PERMISSION_DENIED", "no_consent");
        }
        p.finish();
    }
    // --server-id overrides the server's own name.
    let mut p = proxy(
        &f,
        &["--policy", policy, "--server-id", "indexer"],
        &[("SERVER_NAME", "someone-else")],
    );
    initialize(&mut p, "2025-06-18", json!({}));
    let answers = ask(
        &mut p,
        1,
        json!([["files/read", {"path": "project/a.txt"}]]),
    );
    assert_eq!(answers[0]["result"]["content"], "granted by name");
    p.finish();
}

#[test]
fn a_mixed_batch_from_the_server_is_split_between_broker_and_host() {
    let f = Fixture::new();
    f.file("b.txt", "batched");
    let mut p = proxy(&f, &["--consent", "auto"], &[]);
    initialize(&mut p, "2025-03-26", json!({}));
    p.send(
        &json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask",
        "arguments":{"requests":[["files/consent",{"requestedPaths":["project"]}]],
                     "batch":[["files/read",{"path":"project/b.txt"}],["ping",{}]]}}}),
    );
    // The host sees a batch holding only the server's ping, and answers it.
    let batch = p.next();
    assert!(
        batch.is_array(),
        "unexpected line before the batch: {batch}"
    );
    let items = batch.as_array().unwrap();
    assert_eq!(items.len(), 1, "{batch}");
    assert_eq!(items[0]["method"], "ping");
    p.send(&json!([{"jsonrpc":"2.0","id":items[0]["id"],"result":{}}]));
    let r = p.wait_id(&json!(5));
    let answers = r["result"]["structuredContent"]["answers"]
        .as_array()
        .unwrap();
    assert_eq!(answers.len(), 3, "{r}");
    assert!(
        answers.iter().any(|a| a["result"]["content"] == "batched"),
        "{r}"
    );
    assert!(answers.iter().any(|a| a["result"] == json!({})), "{r}");
    p.finish();
}

#[test]
fn the_hosts_roots_list_changed_is_dropped_and_other_notifications_pass() {
    let f = Fixture::new();
    let notes = f.tmp.path().join("notes.jsonl");
    let mut p = proxy(
        &f,
        &["--consent", "deny"],
        &[("NOTES", notes.to_str().unwrap())],
    );
    initialize(
        &mut p,
        "2025-06-18",
        json!({"roots": {"listChanged": true}}),
    );
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}));
    p.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}));
    // A request after them is answered only once they have been read by the server.
    p.request("tools/list", json!({}));
    let seen = std::fs::read_to_string(&notes).unwrap_or_default();
    assert!(seen.contains("notifications/initialized"), "{seen}");
    assert!(seen.contains("notifications/cancelled"), "{seen}");
    assert!(!seen.contains("roots/list_changed"), "{seen}");
    p.finish();
}

#[test]
fn the_servers_exit_code_and_stderr_reach_the_host() {
    let f = Fixture::new();
    let mut p = proxy(&f, &["--consent", "deny"], &[]);
    initialize(&mut p, "2025-06-18", json!({}));
    let r = p.request(
        "tools/call",
        json!({"name":"stderr","arguments":{"text":"server log line 42"}}),
    );
    assert!(r["result"].is_object(), "{r}");
    p.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"exit","arguments":{"code":7}}}));
    let status = p.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(7), "{}", p.stderr());
    let (_, _) = p.finish();
    assert!(p.stderr().contains("server log line 42"), "{}", p.stderr());
}

#[test]
fn a_server_that_ignores_the_end_of_its_input_is_terminated_then_killed() {
    for (mode, signal) in [("yes", 15), ("term", 9)] {
        let f = Fixture::new();
        let mut p = proxy(
            &f,
            &["--consent", "deny", "--shutdown-grace", "0.3"],
            &[("IGNORE_STDIN_EOF", mode)],
        );
        initialize(&mut p, "2025-06-18", json!({}));
        let (status, _) = p.finish();
        assert_eq!(status.code(), Some(128 + signal), "{mode}: {}", p.stderr());
    }
}

#[test]
fn a_missing_server_program_or_command_is_a_clear_error() {
    let f = Fixture::new();
    let mut args: Vec<OsString> = vec!["proxy".into(), "--root".into(), f.root.clone().into()];
    args.extend(["--", "/nonexistent/mcp-server"].map(OsString::from));
    let mut p = Sidecar::spawn(&args, None);
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(127));
    assert!(
        p.stderr().contains("cannot start /nonexistent/mcp-server"),
        "{}",
        p.stderr()
    );

    let args: Vec<OsString> = vec!["proxy".into(), "--root".into(), f.root.clone().into()];
    let mut p = Sidecar::spawn(&args, None);
    let (status, _) = p.finish();
    assert_eq!(status.code(), Some(2));
    assert!(
        p.stderr().contains("needs the server command"),
        "{}",
        p.stderr()
    );
}

#[test]
fn a_server_that_exits_while_its_output_stays_open_still_ends_the_proxy() {
    let f = Fixture::new();
    // The background sleep inherits the server's stdout and keeps it open after the server
    // exits; the host keeps its input open too. It outlives the generous bound by far, so only
    // waiting for it fails, not a slow machine.
    let args: Vec<OsString> = [
        "proxy",
        "--root",
        f.root.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 90 & exit 3",
    ]
    .map(OsString::from)
    .to_vec();
    let mut p = Sidecar::spawn(&args, None);
    let status = p.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(3), "{}", p.stderr());
}
