//! A server that cancels a request the proxy answers itself: the request stops where it
//! stands. Its consent question is withdrawn from the host (`notifications/cancelled` for the
//! form), a late approval grants nothing, the server gets no answer for the cancelled id, and
//! the host never hears of an id it never saw.

use crate::common::{Fixture, assert_error};
use crate::proxy_host::{emit, finish_raw, host_lines_until, line, proxy_args, start_raw};
use crate::remote::RemoteServer;
use crate::sidecar::Sidecar;
use crate::{interop, proxy_host, remote};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn request(id: &str, method: &str, params: Value) -> Value {
    line(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string())
}

#[test]
fn a_cancelled_consent_withdraws_the_form_grants_nothing_and_is_not_answered() {
    let f = Fixture::new();
    f.file("a.txt", "secret");
    let args: Vec<OsString> = vec!["--root".into(), f.root.clone().into()];
    let mut p = Sidecar::spawn_wrapped(&["setsid", "-w"], &proxy_args(&args));
    proxy_host::initialize(&mut p, "2025-06-18", json!({"elicitation": {}}));

    // The server asks for consent, then (through the host's emit) cancels it.
    start_raw(
        &mut p,
        1,
        json!({"lines": [request("c1", "files/consent",
                json!({"requestedPaths": ["project/a.txt"], "access": "read"}))],
               "until": "c2", "timeout": 25}),
    );
    let mut host_saw = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let form: Value = serde_json::from_slice(host_saw.last().unwrap()).unwrap();
    emit(
        &mut p,
        &[line(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                   "params":{"requestId":"c1","reason":"user gave up"}})
            .to_string(),
        )],
    );
    // The host's form is cancelled.
    let more = host_lines_until(&mut p, WAIT, |v| v["method"] == "notifications/cancelled");
    let cancel: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    assert_eq!(cancel["params"]["requestId"], form["id"], "{cancel}");
    host_saw.extend(more);
    // The user approves anyway, late.
    p.send(&json!({"jsonrpc":"2.0","id":form["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    // A read after it finds no grant; a second consent (ordered after the read) is declined
    // and ends the script.
    emit(
        &mut p,
        &[
            request("r1", "files/read", json!({"path": "project/a.txt"})),
            request(
                "c2",
                "files/consent",
                json!({"requestedPaths": ["project/a.txt"], "access": "read"}),
            ),
        ],
    );
    let more = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let second: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    host_saw.extend(more);
    p.send(&json!({"jsonrpc":"2.0","id":second["id"],"result":{"action":"decline"}}));
    let raw = finish_raw(&mut p, 1, WAIT);
    host_saw.extend(raw.host_lines);

    assert!(!raw.timed_out, "{:?}", raw.received);
    assert_eq!(
        raw.until_answer["result"]["granted"], false,
        "{}",
        raw.until_answer
    );
    let answers: Vec<&Value> = raw
        .received
        .iter()
        .filter(|m| m.get("method").is_none())
        .collect();
    assert!(
        answers.iter().all(|m| m["id"] != "c1"),
        "the cancelled request was answered: {answers:?}"
    );
    let read = answers
        .iter()
        .find(|m| m["id"] == "r1")
        .unwrap_or_else(|| panic!("no answer to the read: {answers:?}"));
    assert_error(read, -31002, "PERMISSION_DENIED", "no_consent");
    for l in &host_saw {
        let v: Value = serde_json::from_slice(l).unwrap_or_default();
        assert!(
            v["params"]["requestId"] != "c1",
            "the host heard of the server's brokered id: {v}"
        );
    }
    p.finish();
}

/// The same through `proxy --url`, with the official TypeScript SDK as the remote server: its
/// request timeout cancels the consent question while the host holds the form, and the host
/// answers late.
#[test]
fn a_remote_sdk_server_that_gives_up_on_consent_gets_no_grant() {
    let f = Fixture::new();
    f.file("a.txt", "secret");
    let server = RemoteServer::start(&[]);
    let mut p = remote::proxy(&server.url(), &f, &["--consent", "elicit"], &[]);
    remote::initialize(&mut p, json!({"elicitation": {}}));
    remote::start_tool(
        &mut p,
        1,
        "ask",
        json!({"requests": [
            ["files/consent", {"requestedPaths": ["project/a.txt"], "access": "read"}],
            ["files/read", {"path": "project/a.txt"}],
        ], "timeoutMs": 5000}),
    );
    let mut host_saw = host_lines_until(&mut p, WAIT, |v| v["method"] == "elicitation/create");
    let form: Value = serde_json::from_slice(host_saw.last().unwrap()).unwrap();
    // The SDK gives up and cancels; the host's form is cancelled in turn.
    let more = host_lines_until(&mut p, WAIT, |v| v["method"] == "notifications/cancelled");
    let cancel: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    assert_eq!(cancel["params"]["requestId"], form["id"], "{cancel}");
    host_saw.extend(more);
    p.send(&json!({"jsonrpc":"2.0","id":form["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    let more = host_lines_until(&mut p, WAIT, |v| v["id"] == 1);
    let r: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    host_saw.extend(more);
    let answers: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    // The consent timed out on the server's side; the read found no grant.
    assert!(answers[0].get("error").is_some(), "{answers}");
    assert_eq!(remote::error_of(&answers[1]).2, "no_consent", "{answers}");
    assert!(!answers.to_string().contains("secret"), "{answers}");
    for l in &host_saw {
        let v: Value = serde_json::from_slice(l).unwrap_or_default();
        if v["method"] == "notifications/cancelled" {
            assert_eq!(v["params"]["requestId"], form["id"], "{v}");
        }
    }
    p.finish();
}

/// With the official TypeScript SDK on both sides: the SDK server gives up on its consent
/// question and cancels it; the SDK host's dialog is cancelled (its handler's signal aborts),
/// its user answers late, and the server's next read finds no grant.
#[test]
fn sdk_peers_a_cancelled_consent_cancels_the_hosts_dialog_and_grants_nothing() {
    let f = Fixture::new();
    f.file("a.txt", "secret");
    let args: Vec<OsString> = vec![
        "--root".into(),
        f.root.clone().into(),
        "--consent".into(),
        "elicit".into(),
    ];
    let accept = json!({"action": "accept", "content": {"decision": "read"}});
    let mut h = interop::ts_host_with(
        &args,
        &json!({"elicitation": {}}),
        Some(&accept),
        &[("HOST_ELICIT_LATE", "1")],
    );
    let r = h.request(
        "request",
        json!({"method": "files/consent", "timeoutMs": 5000,
               "params": {"requestedPaths": ["project/a.txt"], "access": "read"}}),
    );
    assert!(r["result"].get("error").is_some(), "{r}");
    let r = h.request(
        "request",
        json!({"method": "files/read", "params": {"path": "project/a.txt"}}),
    );
    assert_eq!(r["result"]["error"]["data"]["reason"], "no_consent", "{r}");
    let e = h.request("$elicitations", json!({}));
    let e = e["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0]["cancelled"], true, "{e:?}");
    h.finish();
}
