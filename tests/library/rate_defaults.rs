//! The default rate limits (issue 16 item 2): a developer's workload at the default policy is
//! never `RATE_LIMITED`, and a flood still is. No test here reads a clock: outcomes are counts
//! of requests and bytes against budgets that either fit the workload whole (no refill needed)
//! or refill too slowly to matter.

use crate::common::*;
use serde_json::{Value, json};

/// The answers of one workload: how many were `RATE_LIMITED`, how many requests were sent.
#[derive(Default, Debug)]
struct Tally {
    sent: u64,
    limited: u64,
}

impl Tally {
    /// Sends one request, counts it, and returns its response.
    async fn call(&mut self, b: &mcp_fsbroker::Broker, method: &str, params: Value) -> Value {
        let r = call(b, "s", method, params).await;
        self.sent += 1;
        if r["error"]["data"]["code"] == "RATE_LIMITED" {
            self.limited += 1;
        }
        r
    }
}

/// A repository-like tree: `dirs` directories of 100 small source files each, and one
/// 1.7 MB file.
fn repository(f: &Fixture, dirs: usize) -> Vec<String> {
    let mut files = Vec::new();
    for d in 0..dirs {
        for i in 0..100 {
            let rel = format!("src/m{d:02}/f{i:03}.rs");
            f.file(
                &rel,
                format!("// file {d} {i}\npub fn f() -> u32 {{ {i} }}\n"),
            );
            files.push(rel);
        }
    }
    let big: String = (0..1_700_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    f.file("assets/big.txt", big);
    files
}

/// Lists `project` recursively at the default page size, following `nextCursor`; returns the
/// entries listed.
async fn list_all(b: &mcp_fsbroker::Broker, t: &mut Tally) -> usize {
    let (mut cursor, mut entries) = (None::<String>, 0);
    loop {
        let mut p = json!({"path": "project", "recursive": true});
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let r = t.call(b, "files/list", p).await;
        if r.get("error").is_some() {
            return entries;
        }
        entries += r["result"]["entries"].as_array().map_or(0, Vec::len);
        match r["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return entries,
        }
    }
}

#[tokio::test]
async fn a_developers_workload_at_the_default_policy_is_never_rate_limited() {
    let f = Fixture::new();
    let files = repository(&f, 21);
    assert!(files.len() >= 2_000);
    // The default policy: the fixture adds only the root, automatic consent and no audit.
    let b = f.broker();
    let mut t = Tally::default();
    let r = t
        .call(&b, "files/consent", json!({"requestedPaths": ["project"]}))
        .await;
    assert_eq!(r["result"]["granted"], true, "{r}");
    // An indexer: list the whole tree, then stat and read every file, as fast as it can.
    let listed = list_all(&b, &mut t).await;
    assert!(listed > files.len(), "listed {listed} entries");
    for rel in &files {
        let path = format!("project/{rel}");
        t.call(&b, "files/stat", json!({"path": path})).await;
        t.call(&b, "files/read", json!({"path": path})).await;
    }
    // A client reading a 1.7 MB file in 64 KiB chunks.
    let mut offset = 0u64;
    loop {
        let r = t
            .call(
                &b,
                "files/read",
                json!({"path": "project/assets/big.txt", "offset": offset, "length": 65536}),
            )
            .await;
        if r.get("error").is_some() {
            break;
        }
        offset += r["result"]["length"].as_u64().unwrap();
        if r["result"]["eof"] == true {
            assert_eq!(offset, 1_700_000);
            break;
        }
    }
    eprintln!(
        "developer workload at the default policy: {} requests, {} RATE_LIMITED",
        t.sent, t.limited
    );
    assert_eq!(t.limited, 0, "{t:?}");
    assert!(t.sent > 4_000, "{t:?}");
}

#[tokio::test]
async fn a_flood_at_the_default_policy_is_rate_limited() {
    let f = Fixture::new();
    let b = f.broker();
    let burst = mcp_fsbroker::Policy::from_default_file()
        .unwrap()
        .limits
        .burst
        .get() as u64;
    // Ten times the burst in a tight loop; the loop stops at the first refusal. Every request
    // within the burst passes whatever the machine's speed, so at least `burst` pass.
    let mut passed = 0u64;
    let mut refusal = None;
    for _ in 0..10 * burst {
        let r = call(&b, "s", "ping", json!({})).await;
        if r.get("error").is_some() {
            refusal = Some(r);
            break;
        }
        passed += 1;
    }
    let r = refusal.unwrap_or_else(|| panic!("{passed} pings and none was rate limited"));
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31012, "RATE_LIMITED"), "{r}");
    assert!(r["error"]["data"]["retryAfterMs"].as_u64().unwrap() > 0);
    assert!(passed >= burst, "{passed} passed, burst {burst}");
    eprintln!("flood at the default policy: RATE_LIMITED after {passed} pings");
}

#[tokio::test]
async fn reads_past_the_byte_budget_are_rate_limited_and_other_requests_still_answer() {
    let f = Fixture::new();
    f.file("a.bin", vec![7u8; 1 << 20]);
    // One byte a second refills nothing that matters: the budget is the burst.
    let b = f.broker_with(
        "read",
        "[limits]\nbytes_per_second = 1\nburst_bytes = 1572864\n",
    );
    consent_all(&b, "s").await;
    let read = json!({"path": "project/a.bin", "encoding": "base64"});
    // 1 MiB, then 1 MiB more (admitted: the budget was not yet spent), then the debt shows.
    for i in 0..2 {
        let r = call(&b, "s", "files/read", read.clone()).await;
        assert_eq!(ok(&r)["length"], 1 << 20, "read {i}");
    }
    let r = call(&b, "s", "files/read", read.clone()).await;
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31012, "RATE_LIMITED"), "{r}");
    // The debt is 512 KiB at one byte a second: about six days.
    let retry = r["error"]["data"]["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 86_400_000, "retryAfterMs {retry}");
    // Requests that move no payload are not held back by the byte budget.
    let r = call(&b, "s", "files/stat", json!({"path": "project/a.bin"})).await;
    assert_eq!(ok(&r)["size"], 1 << 20);
    // Nor is another session.
    consent_all(&b, "t").await;
    let r = call(&b, "t", "files/read", read).await;
    assert_eq!(ok(&r)["length"], 1 << 20);
}

#[tokio::test]
async fn writes_count_against_the_byte_budget() {
    let f = Fixture::new();
    let b = f.broker_with(
        "write",
        "[limits]\nbytes_per_second = 1\nburst_bytes = 1000\n",
    );
    consent_all(&b, "s").await;
    let content = "x".repeat(800);
    for i in 0..2 {
        let r = call(
            &b,
            "s",
            "files/write",
            json!({"path": format!("project/w{i}.txt"), "content": content}),
        )
        .await;
        ok(&r);
    }
    let r = call(
        &b,
        "s",
        "files/write",
        json!({"path": "project/w2.txt", "content": content}),
    )
    .await;
    let (code, data_code, _) = err(&r);
    assert_eq!((code, data_code.as_str()), (-31012, "RATE_LIMITED"), "{r}");
    assert!(!f.root.join("w2.txt").exists());
}

#[test]
fn byte_budget_keys_are_validated() {
    for (text, key) in [
        (
            "[limits]\nbytes_per_second = 0\n",
            "limits.bytes_per_second",
        ),
        ("[limits]\nburst_bytes = 0\n", "limits.burst_bytes"),
        (
            "[limits]\nbytes_per_second = 2199023255553\n",
            "limits.bytes_per_second",
        ),
        (
            "[limits]\nburst_bytes = 2199023255553\n",
            "limits.burst_bytes",
        ),
        ("[limits]\nburst_bytes = \"1G\"\n", "limits.burst_bytes"),
    ] {
        let e = mcp_fsbroker::Policy::parse(text, "t.toml").unwrap_err();
        assert_eq!(e.key, key, "{text}: {e}");
        assert_eq!(e.line, Some(2), "{text}: {e}");
    }
}

#[test]
fn an_old_policy_file_keeps_its_request_limits() {
    let p = mcp_fsbroker::Policy::parse(
        "[limits]\nrequests_per_second = 100\nburst = 200\n",
        "old.toml",
    )
    .unwrap();
    assert_eq!(p.limits.requests_per_second.get(), 100);
    assert_eq!(p.limits.burst.get(), 200);
}
