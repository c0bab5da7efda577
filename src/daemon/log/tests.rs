use super::*;
use crate::policy::{ConsentMode, Policy, RootEntry};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn event(server: &str, path: &str) -> AuditEvent {
    AuditEvent {
        time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        server_id: server.into(),
        identity: None,
        method: "files/read".into(),
        path: Some(path.into()),
        outcome: "ok".into(),
        reason: None,
        bytes: 42,
        cpu: std::time::Duration::ZERO,
        duration: Duration::from_micros(1500),
        consent: None,
    }
}

/// The answer to `log` request `line`.
fn asked(ring: &Ring, line: &[u8]) -> (Value, Option<Follow>) {
    match crate::daemon::protocol::Request::parse(line) {
        Ok(crate::daemon::protocol::Request::Log(log)) => ring.answer(log),
        other => panic!("not a log request: {other:?}"),
    }
}

fn paths(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_ring_keeps_the_newest_events_and_filters_by_server() {
    let ring = Ring::new(3, 8);
    for (i, s) in ["a", "b", "a", "b", "a"].iter().enumerate() {
        ring.push(event(s, &format!("m/{i}")));
    }
    let (a, follow) = asked(&ring, br#"{"op":"log"}"#);
    assert!(follow.is_none());
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(paths(&a["events"]), ["m/2", "m/3", "m/4"]);
    let (a, _) = asked(&ring, br#"{"op":"log","server":"a"}"#);
    assert_eq!(paths(&a["events"]), ["m/2", "m/4"]);
    let e = &a["events"][0];
    assert_eq!(e["time"], "2023-11-14T22:13:20.123Z", "{e}");
    assert_eq!(e["durationMs"], 1.5, "{e}");
    assert_eq!(e["bytes"], 42, "{e}");
    assert!(crate::daemon::protocol::Request::parse(br#"{"op":"log","lines":3}"#).is_err());
}

/// A follower on one end of a pipe, and the client's end, read by lines.
fn follower(
    follow: Follow,
) -> (
    tokio::task::JoinHandle<()>,
    BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
) {
    let (client, daemon) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(async move {
        let (r, mut w) = tokio::io::split(daemon);
        follow.run(&mut BufReader::new(r), &mut w).await;
    });
    let (r, w) = tokio::io::split(client);
    (task, BufReader::new(r), w)
}

async fn next(r: &mut (impl AsyncBufReadExt + Unpin)) -> Value {
    let mut line = String::new();
    let n = tokio::time::timeout(Duration::from_secs(60), r.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    assert!(n > 0, "the stream ended");
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn a_follower_gets_the_kept_events_then_each_new_one_until_it_goes() {
    let ring = Ring::new(10, 8);
    ring.push(event("a", "m/old"));
    ring.push(event("b", "m/other"));
    let (first, follow) = asked(&ring, br#"{"op":"log","server":"a","follow":true}"#);
    assert_eq!(first["following"], true, "{first}");
    assert_eq!(paths(&first["events"]), ["m/old"]);
    let (task, mut r, mut w) = follower(follow.unwrap());
    ring.push(event("b", "m/skipped"));
    ring.push(event("a", "m/new"));
    assert_eq!(next(&mut r).await["event"]["path"], "m/new");
    // A line from the client is no request: the stream goes on.
    w.write_all(b"{\"op\":\"status\"}\n").await.unwrap();
    ring.push(event("a", "m/newer"));
    assert_eq!(next(&mut r).await["event"]["path"], "m/newer");
    w.shutdown().await.unwrap();
    drop(w);
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_follower_that_falls_behind_is_told_how_many_it_missed() {
    let ring = Ring::new(10, 2);
    let (_, follow) = asked(&ring, br#"{"op":"log","follow":true}"#);
    // Five events before the follower reads any: its queue holds the newest two.
    for i in 0..5 {
        ring.push(event("a", &format!("m/{i}")));
    }
    let (_task, mut r, _w) = follower(follow.unwrap());
    assert_eq!(next(&mut r).await, json!({"missed": 3}));
    assert_eq!(next(&mut r).await["event"]["path"], "m/3");
    assert_eq!(next(&mut r).await["event"]["path"], "m/4");
}

#[tokio::test]
async fn the_ring_fills_from_the_brokers_audit_events() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "hello").unwrap();
    let policy = Policy::new()
        .root(RootEntry::new("demo", dir.path()))
        .consent_mode(ConsentMode::Auto);
    let (broker, _n) = Broker::builder(policy).build().unwrap();
    let ring = Ring::start(&broker);
    let consent = json!({"jsonrpc": "2.0", "id": 1, "method": "files/consent",
        "params": {"requestedPaths": ["demo"]}});
    let r = broker.handle_message("s1", consent).await.unwrap();
    assert_eq!(r["result"]["granted"], true, "{r}");
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "files/read",
        "params": {"path": "demo/f"}});
    let r = broker.handle_message("s1", read).await.unwrap();
    assert!(r.get("result").is_some(), "{r}");
    // The ring's task takes the events from the broker's stream: wait for both, bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let events = loop {
        let (a, _) = asked(&ring, br#"{"op":"log","server":"s1"}"#);
        if a["events"].as_array().is_some_and(|e| e.len() >= 2) {
            break a["events"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "{a}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(events[0]["method"], "files/consent", "{events}");
    assert_eq!(events[0]["approved"], json!(["demo"]), "{events}");
    assert_eq!(events[0]["decidedBy"], json!(["auto"]), "{events}");
    assert_eq!(events[1]["method"], "files/read", "{events}");
    assert_eq!(events[1]["path"], "demo/f", "{events}");
    assert_eq!(events[1]["outcome"], "ok", "{events}");
    assert_eq!(events[1]["bytes"], 5, "{events}");
}
