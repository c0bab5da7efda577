//! Per-session limits: rate, operation timeout, operations in flight, page and chunk sizes.

use crate::common::*;
use serde_json::json;

/// Calls `method` until it is refused (at most 1000 times); returns how many passed and the
/// refusal.
async fn until_refused(
    b: &mcp_fsbroker::Broker,
    server: &str,
    method: &str,
    params: serde_json::Value,
) -> (u64, serde_json::Value) {
    let mut passed = 0;
    for _ in 0..1000 {
        let r = call(b, server, method, params.clone()).await;
        if r.get("error").is_some() {
            return (passed, r);
        }
        passed += 1;
    }
    panic!("{passed} calls of {method} and none was refused");
}

// At one request a second, the n-th request past the burst is allowed no sooner than n
// seconds after the first: the tests allow what the time they took refilled, so a slow
// machine cannot fail them, and on any machine that runs them within a second they are exact.

#[tokio::test]
async fn the_request_after_the_burst_is_rate_limited_for_that_session_only() {
    let f = Fixture::new();
    let b = f.broker_with("read", "[limits]\nrequests_per_second = 1\nburst = 3\n");
    let start = std::time::Instant::now();
    let (passed, r) = until_refused(&b, "s", "ping", json!({})).await;
    let refilled = start.elapsed().as_secs();
    assert!(
        passed >= 3 && passed <= 3 + refilled,
        "{passed} pings passed with a burst of 3 in {:?}",
        start.elapsed()
    );
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31012, "RATE_LIMITED"));
    let retry = r["error"]["data"]["retryAfterMs"]
        .as_u64()
        .expect("retryAfterMs");
    assert!(retry > 0 && retry <= 1000, "retryAfterMs {retry}");
    // Another server id has its own allowance.
    let r = call(&b, "t", "ping", json!({})).await;
    assert_eq!(ok(&r), &json!({}));
}

#[tokio::test]
async fn every_method_counts_against_the_rate_limit() {
    let f = Fixture::new();
    f.file("a.txt", "a");
    let b = f.broker_with("read", "[limits]\nrequests_per_second = 1\nburst = 3\n");
    let start = std::time::Instant::now();
    consent_all(&b, "s").await;
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["content"], "a");
    let r = call(&b, "s", "roots/list", json!({})).await;
    ok(&r);
    // Consent, read and roots/list took the burst: a stat passes only on what time refilled.
    let (passed, r) = until_refused(&b, "s", "files/stat", json!({"path": "project/a.txt"})).await;
    let refilled = start.elapsed().as_secs();
    assert!(
        passed <= refilled,
        "{passed} stats passed after a burst of 3 in {:?}",
        start.elapsed()
    );
    assert_eq!(err(&r).0, -31012);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_past_its_deadline_is_timeout_and_the_session_still_answers() {
    let f = Fixture::new();
    for i in 0..30 {
        for j in 0..100 {
            f.dir(&format!("d{i:02}/e{j:03}"));
        }
    }
    // A standing grant, not a consent request: with a 1 ms deadline, consent's own walk may
    // time out too on a busy machine, and the test is about the listing.
    let b = f.broker_with(
        "read",
        "[limits]\ntimeout_ms = 1\n[[grants]]\npath = \"project\"\n",
    );
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "recursive": true, "limit": 10000}),
    )
    .await;
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31005, "TIMEOUT"), "{r}");
    assert_eq!(r["error"]["data"]["path"], "project");
    let r = call(&b, "s", "ping", json!({})).await;
    assert_eq!(ok(&r), &json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_operation_in_flight_still_serves_many_concurrent_reads() {
    let f = Fixture::new();
    for i in 0..20 {
        f.file(&format!("f{i}.txt"), format!("content of file {i}"));
    }
    let b = f.broker_with("read", "[limits]\nmax_in_flight = 1\n");
    consent_all(&b, "s").await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let b = b.clone();
            tokio::spawn(async move {
                let path = format!("project/f{i}.txt");
                (i, call(&b, "s", "files/read", json!({"path": path})).await)
            })
        })
        .collect();
    for t in tasks {
        let (i, r) = t.await.expect("task");
        assert_eq!(ok(&r)["content"], format!("content of file {i}"));
    }
    // Every permit came back: another read still goes through.
    let r = call(&b, "s", "files/read", json!({"path": "project/f0.txt"})).await;
    assert_eq!(ok(&r)["content"], "content of file 0");
}

#[tokio::test]
async fn a_list_limit_above_the_configured_maximum_page_is_quota_exceeded() {
    let f = Fixture::new();
    for i in 0..8 {
        f.file(&format!("f{i}.txt"), "x");
    }
    let b = f.broker_with("read", "[limits]\nlist_page = 3\nmax_list_page = 5\n");
    consent_all(&b, "s").await;
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "limit": 6}),
    )
    .await;
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31007, "QUOTA_EXCEEDED"));
    assert_eq!(r["error"]["data"]["limit"], 5);
    let r = call(
        &b,
        "s",
        "files/list",
        json!({"path": "project", "limit": 5}),
    )
    .await;
    assert_eq!(ok(&r)["entries"].as_array().unwrap().len(), 5);
    // Without a limit the configured default page applies.
    let r = call(&b, "s", "files/list", json!({"path": "project"})).await;
    assert_eq!(ok(&r)["entries"].as_array().unwrap().len(), 3);
    assert!(ok(&r)["nextCursor"].is_string());
}

#[tokio::test]
async fn configured_chunk_sizes_apply_to_reads() {
    let f = Fixture::new();
    f.file("a.txt", "x".repeat(3000));
    let b = f.broker_with(
        "read",
        "[limits]\nchunk_bytes = 512\nmax_chunk_bytes = 1024\n",
    );
    consent_all(&b, "s").await;
    let r = call(&b, "s", "files/read", json!({"path": "project/a.txt"})).await;
    assert_eq!(ok(&r)["length"], 512);
    let r = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/a.txt", "length": 1025}),
    )
    .await;
    assert_eq!(err(&r).0, -31007);
    assert_eq!(r["error"]["data"]["limit"], 1024);
    let r = call(
        &b,
        "s",
        "files/read",
        json!({"path": "project/a.txt", "length": 1024}),
    )
    .await;
    assert_eq!(ok(&r)["length"], 1024);
}
