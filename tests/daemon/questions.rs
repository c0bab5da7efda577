//! The daemon's consent questions to an attached proxy's host travel beside the session's
//! requests on one connection: a question whose request the server cancels is withdrawn from
//! the host's screen, and the host's answer reaches the daemon even while the server floods
//! the session behind it.

use crate::attach::attached_proxy;
use crate::place::Place;
use crate::proxy_host::{self, emit, finish_raw, host_lines_until, line, padded, start_raw};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn request(id: &str, method: &str, params: Value) -> Value {
    line(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string())
}

fn consent(id: &str) -> Value {
    request(
        id,
        "files/consent",
        json!({"requestedPaths": ["root/a.txt"], "access": "read"}),
    )
}

#[test]
fn a_question_whose_request_the_server_cancels_is_withdrawn_from_the_host() {
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "secret").unwrap();
    let _d = p.start_with(&["--consent-fallback", "deny"]);
    let mut proxy = attached_proxy(&p, "editor");
    proxy_host::initialize(&mut proxy, "2025-06-18", json!({"elicitation": {}}));
    start_raw(
        &mut proxy,
        1,
        json!({"lines": [consent("c1")], "until": "c2", "timeout": 25}),
    );
    let saw = host_lines_until(&mut proxy, WAIT, |v| v["method"] == "elicitation/create");
    let form: Value = serde_json::from_slice(saw.last().unwrap()).unwrap();
    emit(
        &mut proxy,
        &[line(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                   "params":{"requestId":"c1"}})
            .to_string(),
        )],
    );
    // The host is told its form is for nothing now.
    let more = host_lines_until(&mut proxy, WAIT, |v| {
        v["method"] == "notifications/cancelled"
    });
    let cancel: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    assert_eq!(cancel["params"]["requestId"], form["id"], "{cancel}");
    // A late approval grants nothing: the next question is a new one, declined.
    proxy.send(&json!({"jsonrpc":"2.0","id":form["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    emit(&mut proxy, &[consent("c2")]);
    let more = host_lines_until(&mut proxy, WAIT, |v| v["method"] == "elicitation/create");
    let second: Value = serde_json::from_slice(more.last().unwrap()).unwrap();
    proxy.send(&json!({"jsonrpc":"2.0","id":second["id"],"result":{"action":"decline"}}));
    let raw = finish_raw(&mut proxy, 1, WAIT);
    assert!(!raw.timed_out, "{:?}", raw.received);
    assert_eq!(
        raw.until_answer["result"]["granted"], false,
        "{}",
        raw.until_answer
    );
    assert!(
        raw.received.iter().all(|m| m["id"] != "c1"),
        "the cancelled request was answered: {:?}",
        raw.received
    );
}

#[test]
fn the_hosts_answer_reaches_the_daemon_behind_a_flood_of_requests() {
    const COUNT: usize = 200;
    let p = Place::new();
    std::fs::write(p.root.join("a.txt"), "flood target").unwrap();
    let _d = p.start_with(&["--consent-fallback", "deny"]);
    let mut proxy = attached_proxy(&p, "flooder");
    proxy_host::initialize(&mut proxy, "2025-06-18", json!({"elicitation": {}}));
    let read = r#"{"jsonrpc":"2.0","id":"r@N@","method":"files/read","params":{"path":"root/a.txt","_meta":{"pad":"@PAD@"}}}"#;
    // The question holds the session; behind it the server writes far more than the daemon
    // reads ahead, so the host's answer travels behind a full connection.
    start_raw(
        &mut proxy,
        1,
        json!({"lines": [consent("c"), padded(read, 64 << 10, COUNT)],
               "expect": COUNT + 1, "timeout": 60}),
    );
    let saw = host_lines_until(&mut proxy, WAIT, |v| v["method"] == "elicitation/create");
    let form: Value = serde_json::from_slice(saw.last().unwrap()).unwrap();
    proxy.send(&json!({"jsonrpc":"2.0","id":form["id"],
        "result":{"action":"accept","content":{"decision":"read"}}}));
    let raw = finish_raw(&mut proxy, 1, Duration::from_secs(75));
    assert!(
        !raw.timed_out,
        "not every request was answered: the host's answer never reached the daemon"
    );
    let answer = raw.received.iter().find(|m| m["id"] == "c").unwrap();
    assert_eq!(answer["result"]["granted"], true, "{answer}");
    for m in raw.received.iter().filter(|m| m.get("error").is_some()) {
        assert_eq!(m["error"]["data"]["code"], "RATE_LIMITED", "{m}");
    }
}
