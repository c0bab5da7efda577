//! The `fsbroker` binary as a sidecar: every method through the process, the command-line
//! options, consent modes, stdout hygiene, shutdown, notifications, batches, `check-policy`
//! and `proxy`.

use crate::common::*;
use crate::sidecar::*;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn consent(s: &mut Sidecar, paths: Value, access: Option<&str>) -> Value {
    let mut params = json!({"requestedPaths": paths});
    if let Some(a) = access {
        params["access"] = json!(a);
    }
    let r = s.request("files/consent", params);
    ok(&r).clone()
}

#[test]
fn roots_list_shows_root_uri_and_name_and_ping_answers_empty_object() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let r = s.request("roots/list", json!({}));
    assert_eq!(
        ok(&r)["roots"],
        json!([{"uri": file_uri(&f.root), "name": "project"}])
    );
    let r = s.request("ping", Value::Null);
    assert_eq!(ok(&r), &json!({}));
}

#[test]
fn consent_read_list_stat_succeed_through_the_process() {
    let f = Fixture::new();
    f.file("hello.txt", "hello sidecar");
    f.file("sub/inner.txt", "x");
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let c = consent(&mut s, json!(["project"]), None);
    assert_eq!(c["granted"], true);
    assert_eq!(c["approvedPaths"], json!(["project"]));
    assert_eq!(c["access"], "read");

    let r = s.request("files/read", json!({"path": "project/hello.txt"}));
    let r = ok(&r);
    assert_eq!(r["content"], "hello sidecar");
    assert_eq!(r["size"], 13);
    assert_eq!(r["eof"], true);

    let r = s.request("files/list", json!({"path": "project"}));
    let names: Vec<&str> = ok(&r)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"hello.txt") && names.contains(&"sub"),
        "{r}"
    );

    let r = s.request("files/stat", json!({"path": "project/hello.txt"}));
    let r = ok(&r);
    assert_eq!(r["type"], "file");
    assert_eq!(r["size"], 13);
    assert_eq!(r["path"], "project/hello.txt");
    assert_eq!(r["readonly"], true);
}

/// A request's own `timeout` is never ignored in silence: the time limit is the policy's
/// (`limits.timeout_ms`), and a request that asks for another is refused naming the key.
#[test]
fn a_request_timeout_param_is_refused_not_ignored() {
    let f = Fixture::new();
    f.file("hello.txt", "hello sidecar");
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    consent(&mut s, json!(["project"]), None);
    let r = s.request(
        "files/read",
        json!({"path": "project/hello.txt", "timeout": 120_000}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("timeout"), "{r}");
}

#[test]
fn consent_deny_mode_refuses_and_reads_fail_with_no_consent() {
    let f = Fixture::new();
    f.file("hello.txt", "hello");
    let mut s = Sidecar::serve(&f.root, "deny", &[]);
    let r = s.request("files/read", json!({"path": "project/hello.txt"}));
    assert_eq!(
        err(&r),
        (-31002, "PERMISSION_DENIED".into(), "no_consent".into())
    );
    let c = consent(&mut s, json!(["project"]), None);
    assert_eq!(c["granted"], false);
    assert_eq!(c["approvedPaths"], json!([]));
    assert_eq!(c["deniedPaths"], json!(["project"]));
    let r = s.request("files/read", json!({"path": "project/hello.txt"}));
    assert_eq!(
        err(&r),
        (-31002, "PERMISSION_DENIED".into(), "no_consent".into())
    );
    let r = s.request("files/stat", json!({"path": "project/hello.txt"}));
    assert_eq!(err(&r).2, "no_consent");
}

#[test]
fn not_found_outside_root_and_unbuilt_methods_through_the_process() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    consent(&mut s, json!(["project"]), None);
    let r = s.request("files/read", json!({"path": "project/missing.txt"}));
    assert_eq!(err(&r).0, -31001);
    assert_eq!(err(&r).1, "FILE_NOT_FOUND");

    let secret = f.outside.join("secret.txt");
    let sibling = f.sibling.join("secret.txt");
    for p in [
        secret.to_str().unwrap(),
        sibling.to_str().unwrap(),
        "project/../outside/secret.txt",
    ] {
        let r = s.request("files/read", json!({"path": p}));
        assert_eq!(
            err(&r),
            (-31002, "PERMISSION_DENIED".into(), "outside_root".into()),
            "{p}"
        );
        assert!(!r.to_string().contains(SECRET));
    }

    let r = s.request(
        "files/write",
        json!({"path": "project/new.txt", "content": "x"}),
    );
    // The root is read-only without --writable.
    assert_eq!(err(&r).2, "read_only");
    assert!(!f.root.join("new.txt").exists());
    f.assert_canary_intact();
}

#[test]
fn root_flag_with_mount_name_sets_the_mount() {
    let f = Fixture::new();
    f.file("a.txt", "mounted");
    let arg = format!("docs={}", f.root.display());
    let args: Vec<OsString> = [
        "serve",
        "--root",
        &arg,
        "--consent",
        "auto",
        "--server-id",
        "t",
    ]
    .map(OsString::from)
    .to_vec();
    let mut s = Sidecar::spawn(&args, None);
    let r = s.request("roots/list", json!({}));
    assert_eq!(
        ok(&r)["roots"],
        json!([{"uri": file_uri(&f.root), "name": "docs"}])
    );
    let c = consent(&mut s, json!(["docs"]), None);
    assert_eq!(c["approvedPaths"], json!(["docs"]));
    let r = s.request("files/read", json!({"path": "docs/a.txt"}));
    assert_eq!(ok(&r)["content"], "mounted");
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(err(&r).2, "outside_root");
}

#[test]
fn writable_flag_lets_write_consent_and_stat_report_writable() {
    let f = Fixture::new();
    f.file("w.txt", "w");
    let mut s = Sidecar::serve(&f.root, "auto", &["--writable"]);
    let c = consent(&mut s, json!(["project"]), Some("write"));
    assert_eq!(c["granted"], true);
    assert_eq!(c["access"], "write");
    let r = s.request("files/stat", json!({"path": "project/w.txt"}));
    assert_eq!(ok(&r)["readonly"], false);
}

#[test]
fn without_writable_flag_write_consent_is_denied() {
    let f = Fixture::new();
    f.file("w.txt", "w");
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    let c = consent(&mut s, json!(["project"]), Some("write"));
    assert_eq!(c["granted"], false);
    assert_eq!(c["approvedPaths"], json!([]));
    let r = s.request("files/stat", json!({"path": "project/w.txt"}));
    assert_eq!(err(&r).2, "no_consent");
}

/// Writes an executable shell script into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn consent_command_granted_true_approves_and_sees_the_request() {
    let f = Fixture::new();
    f.file("a.txt", "via command");
    let tmp = tempfile::tempdir().unwrap();
    let req = tmp.path().join("request.json");
    let prog = script(
        tmp.path(),
        "yes.sh",
        &format!("cat > '{}'\necho '{{\"granted\": true}}'", req.display()),
    );
    let mode = format!("command:{prog}");
    let mut s = Sidecar::serve(&f.root, &mode, &[]);
    let c = consent(&mut s, json!(["project"]), None);
    assert_eq!(c["granted"], true);
    assert_eq!(c["approvedPaths"], json!(["project"]));
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(ok(&r)["content"], "via command");
    let seen: Value = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    assert_eq!(seen["serverId"], "t");
    assert_eq!(seen["paths"], json!(["project"]));
    assert_eq!(seen["access"], "read");
}

#[test]
fn consent_command_empty_approved_paths_denies() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let tmp = tempfile::tempdir().unwrap();
    let prog = script(
        tmp.path(),
        "none.sh",
        "cat > /dev/null\necho '{\"approvedPaths\": []}'",
    );
    let mode = format!("command:{prog}");
    let mut s = Sidecar::serve(&f.root, &mode, &[]);
    let c = consent(&mut s, json!(["project"]), None);
    assert_eq!(c["granted"], false);
    assert_eq!(c["deniedPaths"], json!(["project"]));
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(err(&r).2, "no_consent");
}

#[test]
fn consent_command_failing_exit_denies() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let tmp = tempfile::tempdir().unwrap();
    let prog = script(
        tmp.path(),
        "fail.sh",
        "cat > /dev/null\necho '{\"granted\": true}'\nexit 1",
    );
    let mode = format!("command:{prog}");
    let mut s = Sidecar::serve(&f.root, &mode, &[]);
    let c = consent(&mut s, json!(["project"]), None);
    assert_eq!(c["granted"], false);
    let r = s.request("files/read", json!({"path": "project/a.txt"}));
    assert_eq!(err(&r).2, "no_consent");
}

#[test]
fn stdout_carries_only_json_rpc_lines() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let args: Vec<OsString> = [
        "serve",
        "--root",
        f.root.to_str().unwrap(),
        "--consent",
        "auto",
    ]
    .map(OsString::from)
    .to_vec();
    let mut cmd_env = Sidecar::spawn_env(&args, &[("FSBROKER_LOG", "debug")]);
    let s = &mut cmd_env;
    let sent = [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"files/read","params":{"path":"project/a.txt"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"files/consent","params":{"requestedPaths":["project"]}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"files/read","params":{"path":"project/a.txt"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"files/read","params":{"path":"/etc/passwd"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{broken"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"nope"}"#,
    ];
    for l in sent {
        s.send_raw(l.as_bytes());
    }
    let (status, lines) = s.finish();
    assert!(status.success());
    assert_eq!(lines.len(), 7, "one line per request and per bad line");
    for l in &lines {
        let v: Value = serde_json::from_slice(l)
            .unwrap_or_else(|_| panic!("not JSON: {:?}", String::from_utf8_lossy(l)));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert!(v.get("result").is_some() != v.get("error").is_some(), "{v}");
    }
    // The logs and the audit log exist; they went to stderr.
    assert!(s.stderr().contains("files/read"), "stderr: {}", s.stderr());
}

#[test]
fn end_of_input_exits_with_status_zero() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    assert_eq!(ok(&s.request("ping", json!({}))), &json!({}));
    s.close_stdin();
    let status = s.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0));
}

#[test]
fn sigterm_while_idle_exits_with_status_zero() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    // A round trip proves the process is up and serving (signal handlers installed).
    assert_eq!(ok(&s.request("ping", json!({}))), &json!({}));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = s.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn notifications_get_no_response() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    s.send_raw(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    s.send_raw(br#"{"jsonrpc":"2.0","method":"files/read","params":{"path":"project/a.txt"}}"#);
    s.send_raw(br#"{"jsonrpc":"2.0","method":"no/such/method"}"#);
    s.send_raw(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    let first = s.next();
    assert_eq!(first["id"], "p", "{first}");
    assert_eq!(first["result"], json!({}));
    let (status, rest) = s.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "notifications were answered: {rest:?}");
}

#[test]
fn batch_of_ping_junk_and_notification_gets_two_responses() {
    let f = Fixture::new();
    let mut s = Sidecar::serve(&f.root, "auto", &[]);
    s.send_raw(
        br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},42,{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    );
    let r = s.next();
    let arr = r.as_array().unwrap_or_else(|| panic!("not an array: {r}"));
    assert_eq!(arr.len(), 2, "{r}");
    let ping = arr.iter().find(|v| v["id"] == 1).expect("ping answered");
    assert_eq!(ping["result"], json!({}));
    let junk = arr.iter().find(|v| v.get("error").is_some()).unwrap();
    assert_eq!(junk["error"]["code"], -32600);
    assert_eq!(junk["id"], Value::Null);
}

#[test]
fn check_policy_prints_roots_of_a_valid_file() {
    let f = Fixture::new();
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, f.policy_text("read", "")).unwrap();
    let out = run_bounded(&["check-policy".into(), file.clone().into()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let canon = std::fs::canonicalize(&f.root).unwrap();
    assert!(stdout.contains(canon.to_str().unwrap()), "{stdout}");
    assert!(stdout.contains("mount = \"project\""), "{stdout}");
}

#[test]
fn check_policy_names_file_line_and_unknown_key() {
    let f = Fixture::new();
    let file = f.tmp.path().join("bad.toml");
    let text = format!(
        "[[roots]]\npath = {:?}\n\n[limits]\nburst = 10\nbogus_limit = 3\n",
        f.root
    );
    std::fs::write(&file, text).unwrap();
    let out = run_bounded(&["check-policy".into(), file.clone().into()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("{}:6", file.display())),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("bogus_limit"), "stderr: {stderr}");
}

#[test]
fn proxy_exits_with_its_servers_code_and_writes_nothing_of_its_own() {
    for (server, code) in [("true", 0), ("false", 1)] {
        let out = run_bounded(&["proxy".into(), "--".into(), server.into()]);
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }
}

#[test]
fn without_root_or_policy_serves_current_directory_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("here");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::write(cwd.join("c.txt"), "cwd").unwrap();
    let args: Vec<OsString> = ["serve", "--consent", "auto", "--server-id", "t"]
        .map(OsString::from)
        .to_vec();
    let mut s = Sidecar::spawn(&args, Some(&cwd));
    let r = s.request("roots/list", json!({}));
    assert_eq!(
        ok(&r)["roots"],
        json!([{"uri": file_uri(&cwd), "name": "here"}])
    );
    let c = consent(&mut s, json!(["here"]), Some("write"));
    assert_eq!(c["granted"], false, "the default root is read-only");
    let c = consent(&mut s, json!(["here"]), None);
    assert_eq!(c["access"], "read");
    let r = s.request("files/read", json!({"path": "here/c.txt"}));
    assert_eq!(ok(&r)["content"], "cwd");
    let r = s.request("files/stat", json!({"path": "here/c.txt"}));
    assert_eq!(ok(&r)["readonly"], true);
}

#[test]
fn pipelined_consent_is_a_barrier_for_the_reads_after_it() {
    let f = Fixture::new();
    f.file("a.txt", "after consent");
    let tmp = tempfile::tempdir().unwrap();
    // A slow consent provider: without the barrier, the pipelined read would overtake it.
    let slow = script(
        tmp.path(),
        "slow.sh",
        "cat >/dev/null; sleep 0.3; echo '{\"granted\": true}'",
    );
    let mut s = Sidecar::serve(&f.root, &format!("command:{slow}"), &[]);
    let consent = json!({"jsonrpc": "2.0", "id": "c", "method": "files/consent",
        "params": {"requestedPaths": ["project"]}});
    let read = json!({"jsonrpc": "2.0", "id": "r", "method": "files/read",
        "params": {"path": "project/a.txt"}});
    let mut lines = serde_json::to_vec(&consent).unwrap();
    lines.push(b'\n');
    lines.extend(serde_json::to_vec(&read).unwrap());
    lines.push(b'\n');
    s.send_raw(&lines);
    let r = s.wait_id(&json!("r"));
    assert_eq!(ok(&r)["content"], "after consent");
    assert_eq!(s.wait_id(&json!("c"))["result"]["granted"], true);
}

/// The server's `notifications/cancelled` withdraws its consent while the consent program is
/// still deciding: no answer comes for it, the next request is answered, and the audit line
/// says `cancelled`. (Before, `serve` ignored the notification and the consent held the
/// session until the program answered.)
#[test]
fn a_cancelled_consent_gets_no_answer_and_is_audited_as_cancelled() {
    let f = Fixture::new();
    let (mut s, asked) = never_answering(&f);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "files/consent",
        "params": {"requestedPaths": ["project"]}}),
    );
    // Cancelled once the question is open: the program has been started.
    asked.wait();
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "c"}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    assert_eq!(s.next()["id"], "p", "the ping is the next answer");
    s.close_stdin();
    let (status, rest) = s.finish();
    assert!(status.success());
    assert!(
        rest.is_empty(),
        "no answer for the cancelled consent: {rest:?}"
    );
    let audit = s.stderr();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"method\":\"files/consent\"")
                && l.contains("\"outcome\":\"cancelled\"")),
        "{audit}"
    );
}

/// A cancellation still reaches a consent in progress when other lines came before it: the
/// lines read while the consent holds the session wait in order, and reading goes on.
/// (Review: one line read ahead stopped the reading, so the cancel came too late.)
#[test]
fn a_consent_is_withdrawn_by_a_cancel_sent_after_the_read_that_waits_for_it() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let (mut s, asked) = never_answering(&f);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "files/consent",
        "params": {"requestedPaths": ["project"]}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": "r", "method": "files/read",
        "params": {"path": "project/a.txt"}}));
    asked.wait();
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "c"}}),
    );
    let r = s.next();
    assert_eq!(r["id"], "r", "{r}");
    assert_error(&r, -31002, "PERMISSION_DENIED", "no_consent");
    s.close_stdin();
    let (status, rest) = s.finish();
    assert!(status.success());
    assert!(
        rest.is_empty(),
        "no answer for the cancelled consent: {rest:?}"
    );
}

/// A sidecar whose consent program never answers, and the mark it leaves once it was asked.
fn never_answering(f: &Fixture) -> (Sidecar, Asked) {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("asked");
    let never = script(
        tmp.path(),
        "never.sh",
        &format!("touch {}; cat >/dev/null; exec sleep 1000", mark.display()),
    );
    let s = Sidecar::serve(&f.root, &format!("command:{never}"), &[]);
    (s, Asked { mark, _dir: tmp })
}

/// The mark a consent program leaves when it is asked.
struct Asked {
    mark: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Asked {
    /// Waits until the program was asked (a generous deadline, for a loaded machine).
    fn wait(&self) {
        let deadline = std::time::Instant::now() + WAIT;
        while !self.mark.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the consent program never ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
