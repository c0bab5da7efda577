//! One ordering for every face: a change (`files/write`) that a server sends right after other
//! requests, and the read it sends right after the change, without waiting for either answer,
//! run in the order sent: the read always sees the write. Once through `fsbroker serve`, once
//! through `fsbroker proxy` (the scripted server pipelines the lines), and once through the
//! rmcp adapter (this test is the server, on an in-memory transport).
//!
//! Each round writes a new content and reads it back, so a read that overtook its write, or a
//! write that overtook the read before it, shows as a wrong content: nothing here waits for
//! time to pass.

use crate::common::Fixture;
use crate::sidecar;
use crate::sidecar::Sidecar;
use serde_json::{Value, json};
use std::collections::HashMap;

/// Rounds of write-then-read per face: their requests stay under the default burst of the
/// rate limit (50,000) and, for the proxy, fit the lane's queue (64 lines) all at once.
const ROUNDS: usize = 20;

/// The file every round writes and reads.
const PATH: &str = "project/ordered.txt";

/// The content round `i` writes.
fn content(i: usize) -> String {
    format!("round {i}")
}

/// Round `i`'s requests: a read of the last round's content, the write, and a read of it.
fn round(i: usize) -> [Value; 3] {
    [
        json!({"jsonrpc": "2.0", "id": format!("before-{i}"), "method": "files/read",
            "params": {"path": PATH}}),
        json!({"jsonrpc": "2.0", "id": format!("write-{i}"), "method": "files/write",
            "params": {"path": PATH, "content": content(i)}}),
        json!({"jsonrpc": "2.0", "id": format!("after-{i}"), "method": "files/read",
            "params": {"path": PATH}}),
    ]
}

/// All rounds' requests, in the order they are sent.
fn all_rounds() -> Vec<Value> {
    (0..ROUNDS).flat_map(round).collect()
}

/// Asserts that every answer is what the order sent implies: each read before a round's write
/// sees the last round's content, each write succeeds, each read after it sees it.
fn assert_in_order(answers: &HashMap<String, Value>) {
    for i in 0..ROUNDS {
        let before = &answers[&format!("before-{i}")];
        if i == 0 {
            assert_eq!(before["result"]["content"], "start", "{before}");
        } else {
            assert_eq!(before["result"]["content"], content(i - 1), "{before}");
        }
        let write = &answers[&format!("write-{i}")];
        assert!(write.get("result").is_some(), "{write}");
        let after = &answers[&format!("after-{i}")];
        assert_eq!(after["result"]["content"], content(i), "{after}");
    }
}

/// The answers among `messages`, by their (string) id.
fn by_id(messages: impl IntoIterator<Item = Value>) -> HashMap<String, Value> {
    messages
        .into_iter()
        .filter(|m| m.get("method").is_none())
        .filter_map(|m| Some((m["id"].as_str()?.to_owned(), m)))
        .collect()
}

#[test]
fn serve_runs_a_change_and_the_reads_around_it_in_order() {
    let f = Fixture::new();
    f.file("ordered.txt", "start");
    let mut s = Sidecar::serve_writable(&f.root);
    let lines: Vec<String> = all_rounds().iter().map(Value::to_string).collect();
    // One write of every line: none waits for an answer.
    s.send_raw(lines.join("\n").as_bytes());
    let answers: Vec<Value> = all_rounds().iter().map(|r| s.wait_id(&r["id"])).collect();
    assert_in_order(&by_id(answers));
}

#[test]
fn proxy_runs_a_change_and_the_reads_around_it_in_order() {
    use crate::proxy_host::{ask, finish_raw, initialize, line, spawn_proxy, start_raw};
    let f = Fixture::new();
    f.file("ordered.txt", "start");
    let mut p = spawn_proxy(&f.root, &["--consent", "auto", "--writable"], &[]);
    initialize(&mut p, "2025-06-18", json!({}));
    let consent = ask(
        &mut p,
        1,
        json!([["files/consent", {"requestedPaths": ["project"], "access": "write"}]]),
    );
    assert_eq!(consent[0]["result"]["granted"], true, "{consent:?}");
    // The server writes every line at once, then reads the answers.
    let lines: Vec<Value> = all_rounds().iter().map(|r| line(r.to_string())).collect();
    start_raw(
        &mut p,
        2,
        json!({"lines": lines, "expect": 3 * ROUNDS, "timeout": 60}),
    );
    let raw = finish_raw(&mut p, 2, std::time::Duration::from_secs(70));
    assert!(!raw.timed_out, "{:?}", raw.received);
    assert_in_order(&by_id(raw.received));
}

/// The next message the rmcp client sends, within the sidecar tests' wait.
#[cfg(feature = "rmcp")]
async fn next_message(
    lines: &mut tokio::io::Lines<
        tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    >,
) -> Value {
    let line = tokio::time::timeout(sidecar::WAIT, lines.next_line())
        .await
        .expect("the client answers in time")
        .unwrap()
        .expect("the client is still there");
    serde_json::from_str(&line).unwrap()
}

#[cfg(feature = "rmcp")]
#[tokio::test]
async fn rmcp_runs_a_change_and_the_reads_around_it_in_order() {
    use mcp_fsbroker::rmcp_adapter::{BrokerClientHandler, NotificationRouter};
    use mcp_fsbroker::{Broker, Policy};
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let f = Fixture::new();
    f.file("ordered.txt", "start");
    let text = f.policy_text("write", "[consent]\nmode = \"auto\"\n");
    let (broker, outbound) = Broker::builder(Policy::parse(&text, "test").unwrap())
        .build()
        .unwrap();
    let router = NotificationRouter::new(broker);
    tokio::spawn(router.clone().run(outbound));
    let handler = BrokerClientHandler::new(&router);

    // This test is the server, on the other end of an in-memory pipe.
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let client = tokio::spawn(handler.clone().serve(tokio::io::split(ours)));
    let (from_client, mut to_client) = tokio::io::split(theirs);
    let mut from_client = BufReader::new(from_client).lines();
    let init = next_message(&mut from_client).await;
    assert_eq!(init["method"], "initialize", "{init}");
    let answer = json!({"jsonrpc": "2.0", "id": init["id"], "result": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "serverInfo": {"name": "ordering", "version": "1"}}});
    let mut send = Vec::new();
    send.extend(answer.to_string().bytes().chain([b'\n']));
    let consent = json!({"jsonrpc": "2.0", "id": "consent", "method": "files/consent",
        "params": {"requestedPaths": ["project"], "access": "write"}});
    send.extend(consent.to_string().bytes().chain([b'\n']));
    to_client.write_all(&send).await.unwrap();
    let client = client.await.unwrap().expect("the handshake succeeds");
    let granted = loop {
        let m = next_message(&mut from_client).await;
        if m["id"] == "consent" {
            break m;
        }
    };
    assert_eq!(granted["result"]["granted"], true, "{granted}");

    // Every round in one write: the client reads them one after another, as a server that
    // pipelines sends them.
    let mut send = Vec::new();
    for r in all_rounds() {
        send.extend(r.to_string().bytes().chain([b'\n']));
    }
    to_client.write_all(&send).await.unwrap();
    let mut answers = Vec::new();
    while answers.len() < 3 * ROUNDS {
        let m = next_message(&mut from_client).await;
        if m.get("method").is_none() {
            answers.push(m);
        }
    }
    assert_in_order(&by_id(answers));
    drop(client);
}
